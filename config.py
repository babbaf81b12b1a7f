"""
train.py's configuration: every training key with its default (DEFAULTS; the model keys come from model.GPTConfig),
the one place keys are validated (parse_config), and the keys a resume may change (FREE_ON_RESUME, kept in
provenance.py, which needs no torch). Each key's meaning is in docs/config.md.

A config file is Python that assigns keys (it may include() another config file); `--key=value` on the command line
overrides it, wherever it stands on the line. Unknown keys, wrong types, out-of-range values and a typo inside a
config file (named with its line) are errors that say what to write instead, before anything is made.
"""
import ast
import difflib
import os
import re
import shutil
import textwrap
import traceback
import typing
from dataclasses import fields

from model import GPTConfig
from provenance import FREE_ON_RESUME  # noqa: F401: the keys a resume may change (checkpoint.py)


# -----------------------------------------------------------------------------------------------------------
# default config values; model keys come from GPTConfig (vocab_size None = take it from the dataset's meta.json)
DEFAULTS = dict(
    # I/O
    out_dir='out', eval_interval=250, log_interval=10, eval_iters=200, eval_only=False,
    always_save_checkpoint=True,  # False: write ckpt.pt at an eval only when val loss improved (nanoGPT);
                                  # best.pt (the best val loss's weights) is written at every improvement either way
    ckpt_interval=0,  # > 0: also write ckpt.pt every ckpt_interval steps between evals, so that a hard kill (the
                      # OOM killer, a lost node) loses at most that many steps; 0: at evals and stops only
    outlier_interval=0,  # > 0: every outlier_interval steps, token-0 / rest kurtosis and max/median |activation| of
                         # each block's output on one fixed val batch into log.jsonl (measures.outlier_record)
    init_from='scratch',          # 'scratch' | 'resume' (from out_dir/ckpt.pt)
    resume_strict=False,          # True: a resume refuses every changed training key, even one given on the
                                  # command line (ablate.sh: a sweep's run continues only as it was started)
    seed=1337,
    # wandb
    wandb_log=False, wandb_project='attn-gpt', wandb_run_name='',
    wandb_mode=None,  # None: wandb's own choice (WANDB_MODE, else online) | 'online' | 'offline' | 'disabled'
    # data
    dataset='shakespeare_char', gradient_accumulation_steps=1, batch_size=32,
    bos=False,       # True: a beginning-of-sequence token (a new id, vocab one larger) at position 0 of every window
    window_order='random',  # 'random' (nanoGPT) | 'sequential': a reproduction of an unshuffled stride-1 loader
    # optimizer
    optimizer='adamw',  # 'adamw' | 'orthoadam' (Adam in a fixed random rotated basis, orthoadam.py)
    orthoadam_max_dim=1024,  # OrthoAdam leaves tensor axes longer than this unrotated (e.g. a BPE vocabulary)
    learning_rate=3e-4, max_iters=5000, weight_decay=0.1, beta1=0.9, beta2=0.99, grad_clip=1.0,
    # learning rate schedule: linear warmup, then cosine decay to min_lr at lr_decay_iters
    decay_lr=True, warmup_iters=100, lr_decay_iters=5000, min_lr=3e-5,
    # system
    device='auto',   # 'auto' (cuda if present, else cpu) | 'cpu' | 'cuda' | 'cuda:1' | 'mps'
    dtype='auto',    # 'auto' | 'float32' | 'bfloat16' | 'float16' (a GPU's: refused on a CPU, hardware.pick_dtype)
    compile=None,    # None = auto: torch.compile on CUDA, off on CPU
    compile_mode='default',  # torch.compile's mode: 'reduce-overhead' replays CUDA graphs of forward and backward
    cuda_graph=None,  # None = auto: on where the step can be captured | True: the whole step (forward, backward,
                      # clip, AdamW) and the eval forward as CUDA graphs (refused where they cannot be) | False
    eval_group=0,     # eval batches evaluated in one forward (each batch's mean loss kept apart: the same number);
                      # 0 = auto: 1 on a CPU, on CUDA as many as keep a forward within 2^16 tokens, 2^28 bytes of logits
)


DEFAULTS.update({f.name: f.default for f in fields(GPTConfig)})


DEFAULTS['vocab_size'] = None


MODEL_KEYS = [f.name for f in fields(GPTConfig)]


CHOICES = dict(init_from=('scratch', 'resume'), wandb_mode=(None, 'online', 'offline', 'disabled'),
               window_order=('random', 'sequential'),
               optimizer=('adamw', 'orthoadam'), dtype=('auto', 'float32', 'bfloat16', 'float16'),
               compile_mode=('default', 'reduce-overhead', 'max-autotune', 'max-autotune-no-cudagraphs'))


def _expected_types(key):
    """The types a key accepts: its default's type; for Optional model fields, that type or None."""
    hints = typing.get_type_hints(GPTConfig)
    if key in hints and typing.get_origin(hints[key]) is typing.Union:
        return tuple(t for t in typing.get_args(hints[key]))
    if key == 'vocab_size':
        return (int, type(None))
    if key in ('compile', 'cuda_graph'):
        return (bool, type(None))
    if key == 'wandb_mode':
        return (str, type(None))
    return (type(DEFAULTS[key]),)


def typed(value):
    """A value as it is written on the command line: --dtype=bfloat16, --compile=None, --learning_rate=0.0003."""
    return value if isinstance(value, str) and value else repr(value)


def refusal(where, key, value, why, usual=None):
    """The one form of every refused value: where it came from, the key, the value, why, and what to write instead:
    its choices, or the value this run would have used without it (usual: its config files' value, for a value given
    on the command line), else the key's default, which is always accepted."""
    if key in CHOICES:
        instead = ', '.join(f"--{key}={typed(c)}" for c in CHOICES[key])
    elif usual is not None and usual != DEFAULTS[key] and usual != value:
        instead = f"--{key}={typed(usual)} (the config's)"
    elif DEFAULTS[key] == '':
        instead = f"a value, or leave --{key} out (its default is '')"
    else:
        instead = f"--{key}={typed(DEFAULTS[key])} (its default)"
    return f"{where}: {key}={value!r} {why}; write {instead}"


def _check(key, value, where, usual=None):
    if key not in DEFAULTS:
        close = difflib.get_close_matches(key, DEFAULTS, n=3, cutoff=0.6)
        hint = f"; did you mean {', '.join(close)}?" if close else "; docs/config.md lists every key"
        raise ValueError(f"{where}: unknown config key '{key}'{hint}")
    types = _expected_types(key)
    if float in types and type(value) is int:
        value = float(value)  # an int where a float is expected is fine
    if type(value) not in types:  # exact types: bool is not accepted where an int is expected
        names = ' or '.join('None' if t is type(None) else t.__name__ for t in types)
        raise ValueError(refusal(where, key, value, f"has type {type(value).__name__}, expected {names}", usual))
    if key in CHOICES and value not in CHOICES[key]:
        raise ValueError(refusal(where, key, value, f"must be one of {CHOICES[key]}"))
    return value


def assigned_at(path, key):
    """`path, line N` where config file path assigns key (else path alone): an error names the line to fix."""
    try:
        with open(path) as f:
            tree = ast.parse(f.read())
    except (OSError, SyntaxError):
        return path
    lines = [n.lineno for n in ast.walk(tree) if isinstance(n, (ast.Assign, ast.AnnAssign, ast.AugAssign))
             for t in (n.targets if isinstance(n, ast.Assign) else [n.target])
             if isinstance(t, ast.Name) and t.id == key]
    return f"config file {path}, line {min(lines)}" if lines else f"config file {path}"


def include_hint(path, name):
    """What a missing include() probably meant: a file of that folder with a close name (a typo), or the repository's
    configs/ file of that name (a config copied to another folder)."""
    folder = os.path.dirname(path) or '.'
    close = difflib.get_close_matches(name, sorted(os.listdir(folder)), n=1, cutoff=0.8)
    if close:
        return f"; did you mean include({close[0]!r})?"
    ours = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'configs', name)
    if os.path.isfile(ours):
        return f": write include({os.path.relpath(ours, folder)!r}), or copy {name} beside {path}"
    return ''


class IncludeError(ValueError):
    """A config file's include() of a file that is not there."""


def read_config_file(path):
    """The keys a config file assigns (with those of the files it include()s), as written: a typo in it is one line
    that names the file and line, not a traceback."""
    if not os.path.isfile(path):
        what = 'is a folder, not a config file' if os.path.isdir(path) else 'not found'
        key = path.split('=', 1)[0]
        raise ValueError(f"config file {path} {what} (configs live in configs/, e.g. configs/diff_sym_6L.py)"
                         + (f"; a key is given with two dashes: write --{path}" if '=' in path and key in DEFAULTS
                            else ''))

    def run_file(p, ns):
        ns['include'] = lambda name: include(p, name, ns)
        ns['variant'] = lambda name: variant(name, ns)
        with open(p) as f:
            exec(compile(f.read(), p, 'exec'), ns)

    def include(p, name, ns):
        """include(name) inside config file p: name is relative to that file's folder, wherever train.py runs."""
        full = os.path.join(os.path.dirname(p), name)
        if not os.path.isfile(full):
            line = next((f.lineno for f in reversed(traceback.extract_stack()) if f.filename == p), None)
            where = f"config file {p}" + (f", line {line}" if line else '')
            raise IncludeError(f"{where}: include({name!r}) finds no {full}; an include's path is relative to the "
                               f"including file's folder ({os.path.dirname(p) or '.'}), not to where train.py runs"
                               f"{include_hint(p, name)}")
        run_file(full, ns)

    def variant(name, ns):
        """variant(name) inside a config file: the flags of variants.py's row `name`, written there once."""
        from variants import VARIANTS
        if name not in VARIANTS:
            raise ValueError(f"variant({name!r}): variants.py's VARIANTS has no such row (it has {', '.join(VARIANTS)})")
        ns.update(VARIANTS[name]['flags'])

    ns = {}
    try:
        run_file(path, ns)
    except IncludeError:  # a missing include(): its own message names the including file and line
        raise
    except Exception as e:  # a typo in the file: one line that names it, not a traceback
        line = getattr(e, 'lineno', None) if isinstance(e, SyntaxError) else next(
            (f.lineno for f in reversed(traceback.extract_tb(e.__traceback__)) if f.filename == path), None)
        raise ValueError(f"config file {path}{f', line {line}' if line else ''}: {type(e).__name__}: {e}") from None
    return {k: v for k, v in ns.items()
            if not k.startswith('_') and k != 'include' and not callable(v) and type(v).__name__ != 'module'}


def parse_config(argv):
    """Config files (positional, in order) then --key=value overrides -> a validated config dict."""
    cfg = dict(DEFAULTS)
    if any(arg in ('-h', '--help') for arg in argv):
        print(usage())
        raise SystemExit(0)
    # '--max_iters 2' (a space for the '='): said here, or '2' would be read below as a config file that is missing
    for i, arg in enumerate(argv):
        if arg.startswith('--') and '=' not in arg:
            nxt = argv[i + 1] if i + 1 < len(argv) and not argv[i + 1].startswith('--') else None
            raise ValueError(f"command line: '{arg}' should be --key=value"
                             + (f" (write {arg}={nxt})" if nxt is not None and not os.path.isfile(nxt) else ''))
    # every config file first, then every override, wherever each stands on the line: an override before its
    # config file still wins. base: the config files' values, which a refused override's fix quotes
    base = cfg
    for arg in sorted(argv, key=lambda a: a.startswith('--')):
        if not arg.startswith('--'):
            for k, v in read_config_file(arg).items():
                cfg[k] = _check(k, v, assigned_at(arg, k))
        else:
            if base is cfg:
                base = dict(cfg)
            key, val = arg[2:].split('=', 1)  # values may contain '='
            if val == '':  # '--out_dir=' (an unset shell variable): no key has an empty value
                _check(key, DEFAULTS.get(key), 'command line')  # an unknown key says so first
                raise ValueError(refusal('command line', key, val, "is empty (an unset shell variable?)", base[key]))
            try:
                v = ast.literal_eval(val)
            except (ValueError, SyntaxError):
                v = val  # a bare string
            if key in DEFAULTS and str in _expected_types(key) and not isinstance(v, str):
                v = val  # e.g. --wandb_run_name=123 is a name, not a number
            cfg[key] = _check(key, v, 'command line', base.get(key))
    for k in CHOICES:
        _check(k, cfg[k], 'config')
    check_ranges(cfg, base)
    return cfg


def file_keys(argv):
    """The keys the command's config files assign."""
    return {k for path in config_files(argv) for k in read_config_file(path)}


# the lowest value of each numeric training key (the model keys are checked by GPTConfig)
RANGES = [(('batch_size', 'eval_interval', 'log_interval', 'eval_iters', 'gradient_accumulation_steps',
            'orthoadam_max_dim'), 1),
          (('seed', 'ckpt_interval', 'outlier_interval', 'eval_group', 'max_iters', 'warmup_iters', 'lr_decay_iters',
            'learning_rate', 'min_lr', 'weight_decay', 'grad_clip', 'beta1', 'beta2'), 0)]


def check_ranges(cfg, base=None):
    """Values of the right type but outside their range (a negative max_iters trains forever, batch_size=0 fails
    deep in the model), and the model keys through GPTConfig, so that nothing fails after the run folder is made.
    base: the config files' values; a value given on the command line is refused with the config's as its fix."""
    base = base or cfg
    for keys, low in RANGES:
        for k in keys:
            if cfg[k] < low:
                raise ValueError(refusal('config', k, cfg[k], f"must be >= {low}", base[k]))
    for k in ('beta1', 'beta2'):
        if cfg[k] >= 1:
            raise ValueError(refusal('config', k, cfg[k], "must be below 1", base[k]))
    if cfg['eval_only'] and cfg['init_from'] != 'resume':
        raise ValueError("config: eval_only=True evaluates a run's checkpoint: add --init_from=resume (with that run's "
                         "--out_dir); from scratch it would score untrained weights")
    try:
        GPTConfig(**{k: cfg[k] for k in MODEL_KEYS if k != 'vocab_size' or cfg[k] is not None})
    except ValueError as e:  # GPTConfig names the key and the value; one key's refusal also says what to write
        one = re.match(r"GPTConfig: (\w+)=\S+ (must|is not)", str(e))
        key = one[1] if one and one[1] in DEFAULTS else None
        changed = [k for k in MODEL_KEYS if cfg[k] != base[k]]  # by the command line
        instead = ''  # none where another key given on the command line made this one's value wrong
        if key in changed:  # the value the config files gave it
            instead = f"; write --{key}={typed(base[key])} " + (
                "(the config's)" if base[key] != DEFAULTS[key] else "(its default)")
        elif key and not changed:  # the config file's own value
            instead = f"; write --{key}={typed(DEFAULTS[key])} (its default)"
        raise ValueError(f"config: {e}{instead}") from None
    # model.py builds a leak in a causal model (for the causality check's tests to catch); a run may not
    if cfg['leak'] != 'none' and cfg['causal']:
        raise ValueError(f"config: leak={cfg['leak']!r} reproduces a causal-mask bug, so the model sees later tokens: "
                         f"add --causal=False to run it (ablate.sh's LEAK= does), or leave leak='none'")


def explicit_keys(argv):
    """The keys given as --key=value on the command line: on resume, only these may differ from the run's."""
    return {a[2:].split('=', 1)[0] for a in argv if a.startswith('--') and '=' in a}


def config_files(argv):
    return [a for a in argv if not a.startswith('--')]


def refuse_default_shape(cfg, argv):
    """A run from scratch with neither a config file nor a shape on the command line would train GPT-2 small."""
    if cfg['init_from'] == 'scratch' and not config_files(argv) and \
            not {'n_layer', 'n_embd', 'block_size'} & explicit_keys(argv):
        raise ValueError("no config file: without one, train.py's defaults are GPT-2 small's shape (12 layers, n_embd "
                         "768, block 1024: 85M parameters), hours a step on a CPU. Give a config, e.g. python train.py "
                         "configs/diff_sym_6L.py (configs/ holds each variant and depth), or the shape on the command "
                         "line (--n_layer=... --n_embd=... --block_size=...)")


def config_warnings(cfg, end_lr):
    """Settings that are legal but probably not meant: a schedule that ends before the learning rate decays (end_lr:
    the schedule's rate at max_iters)."""
    out = []
    if cfg['decay_lr'] and cfg['lr_decay_iters'] > cfg['max_iters']:
        out.append(f"lr_decay_iters={cfg['lr_decay_iters']} is past max_iters={cfg['max_iters']}: the learning rate "
                   f"ends at {end_lr:.3g}, not min_lr={cfg['min_lr']:g} (set --lr_decay_iters={cfg['max_iters']} to "
                   f"decay fully)")
    if cfg['decay_lr'] and cfg['warmup_iters'] > cfg['max_iters']:
        out.append(f"warmup_iters={cfg['warmup_iters']} is past max_iters={cfg['max_iters']}: the run ends in warm-up")
    return out


def pinned_model_keys(argv):
    """The model keys a command sets, which a resume must find equal to its checkpoint's model: every one when it
    gives a config file (a config file describes a whole model, and a key it leaves out asks for the default: a
    nanoGPT config on a Diff run would otherwise resume the Diff model under the nanoGPT name), else only those on
    the command line. vocab_size only from the command line: left unset (None) it is the dataset's."""
    given = explicit_keys(argv) & set(MODEL_KEYS)
    return given | (set(MODEL_KEYS) - {'vocab_size'} if config_files(argv) else set())


def usage():
    """python train.py --help: the keys and their defaults, in one screen; their meanings are in docs/config.md."""
    def block(keys):
        items = [f"{k}={DEFAULTS[k]!r}" for k in keys]
        return textwrap.fill('  '.join(items), width=shutil.get_terminal_size((110, 20)).columns - 2,
                             initial_indent='  ', subsequent_indent='  ', break_on_hyphens=False)
    train_keys = [k for k in DEFAULTS if k not in MODEL_KEYS]
    return (f"usage: python train.py [CONFIG.py ...] [--key=value ...]\n"
            f"  e.g. python train.py configs/diff_sym_6L.py --batch_size=16\n"
            f"Config files (Python that assigns keys) apply in order, then the --key=value overrides, wherever\n"
            f"they stand on the line.\n"
            f"Each key's meaning is in docs/config.md.\n\ntraining keys (default):\n{block(train_keys)}\n\n"
            f"model keys (model.GPTConfig; vocab_size=None takes the dataset's):\n{block(MODEL_KEYS)}\n")


