"""
A run's checkpoints: ckpt.pt (everything a resume needs) and best.pt (the best weights), written atomically, and the
rules of a resume: it continues the run as it was, with the run's own settings from ckpt.pt, changing only the keys
the command line names; its model is the checkpoint's, so a command that names another model is refused. And the guard
before a save or a log line: nothing non-finite is written (check_finite).
"""
import difflib
import math
import os
from dataclasses import asdict, fields

import torch
import torch.distributed as dist

from config import DEFAULTS, FREE_ON_RESUME, MODEL_KEYS, config_files, explicit_keys, file_keys, pinned_model_keys
from dataset import load_meta
from model import GPT, GPTConfig
from output import atomic_write
from rundir import RunError, run_path


# keys that say what this command does, never taken from the run it resumes
THIS_COMMAND = ('out_dir', 'init_from', 'eval_only', 'resume_strict')


def saved_settings(path):
    """ckpt.pt's config and model args, read without loading its tensors (mmap); (None, None) where the file is
    missing or unreadable, which load_resumed then says plainly."""
    try:
        ckpt = torch.load(path, map_location='cpu', weights_only=True, mmap=True)
    except Exception:  # noqa: BLE001: missing, damaged, or foreign: load_resumed's messages say which
        return None, None
    if not isinstance(ckpt, dict) or ckpt.get('format') != CHECKPOINT_FORMAT:
        return None, None
    args = {f.name: f.default for f in fields(GPTConfig)}  # a field newer than the checkpoint: its default
    args.update(ckpt.get('model_args', {}))
    return ckpt.get('config', {}), args


def resume_settings(cfg, argv, master=True):
    """--init_from=resume continues the run as it was, before anything is made: every training key takes the run's
    own value from ckpt.pt, except the keys the command line names (--max_iters=8000, to train it further). A config
    file given on resume names a model: its model keys must equal the checkpoint's (a wrong variant is refused),
    and its training keys that differ from the run's are named in one line and the run's are kept.
    resume_strict=True (ablate.sh) refuses any change of what the run computes, even one on the command line."""
    path = run_path(cfg)
    saved, args = saved_settings(path)
    if saved is None:
        return cfg
    explicit = explicit_keys(argv)
    keys = [k for k in DEFAULTS if k not in MODEL_KEYS and k not in THIS_COMMAND and k in saved]
    differ = [k for k in keys if saved[k] != cfg[k]]
    strict = [k for k in differ if k not in FREE_ON_RESUME]
    if strict and cfg['resume_strict']:
        raise ValueError(f"{path} was trained with " + ', '.join(f"{k}={saved[k]!r}" for k in strict) +
                         "; this command gives " + ', '.join(f"{k}={cfg[k]!r}" for k in strict) +
                         ". resume_strict=True (ablate.sh sets it) continues a run only with its own settings: "
                         "re-launch with those, or start the run anew in another folder (another SWEEP=)")
    kept = [k for k in differ if k not in explicit]  # the run's own, where the command line does not name the key
    noted = [k for k in kept if k in file_keys(argv)]
    given = {k: cfg[k] for k in noted}
    cfg.update({k: saved[k] for k in kept})  # so the checks below see the run's dataset and bos, not the defaults
    # bos cannot change, not even on purpose nor for a look (eval_only): its token is an id of the model's vocabulary
    if 'bos' in saved and saved['bos'] != cfg['bos']:
        raise ValueError(f"{path} was trained with bos={saved['bos']!r}, and bos cannot change on resume (its token "
                         f"is an id the model's embedding has or lacks): resume with --bos={saved['bos']!r}, or start "
                         f"a new run in another --out_dir")
    vocab = load_meta(cfg['dataset']).get('vocab_size')  # where the dataset is prepared already
    if isinstance(vocab, int):  # before the model keys: a dataset whose ids the embedding lacks cannot be fixed by
        check_vocab(cfg, args, saved, vocab + cfg['bos'], path)  # dropping another key
    check_model_keys(cfg, args, explicit, pinned_model_keys(argv), path, master)
    if master and noted:
        print(f"resume: {', '.join(config_files(argv))} gives " + ', '.join(f"{k}={given[k]!r}" for k in noted) +
              "; the run's own " + ', '.join(f"{k}={saved[k]!r}" for k in noted) + " kept (a key given on the "
              "command line changes the run)")
    if master and not cfg['eval_only']:
        for k in differ:
            if k in explicit:
                print(f"resume: {k} changes from {saved[k]!r} to {cfg[k]!r}, as the command line asks")
    cfg.update({k: args[k] for k in MODEL_KEYS})  # the checkpoint's model, which the checks above found unchanged
    return cfg


def check_vocab(cfg, args, saved, n_tokens, path):
    """A resume on another dataset, whose ids the embedding lacks: refused, naming both."""
    if args['vocab_size'] < n_tokens:
        raise ValueError(f"{path}'s model has vocab_size={args['vocab_size']}, and dataset '{cfg['dataset']}' holds "
                         f"{n_tokens} token ids{' (with bos)' if cfg['bos'] else ''}: a resume continues on data its "
                         f"embedding can read. Resume with the run's own config (its dataset was "
                         f"{saved.get('dataset')!r}), or start a new run in another --out_dir")


def check_model_keys(cfg, args, explicit, pinned, path, master):
    """The model is the checkpoint's: a model key this command sets to something else, on the command line or in a
    config file (another variant's, by a key it sets or one it leaves at its default), is refused, since the run
    would go on without it. vocab_size is the dataset's unless given, and train.py checks it against the data.
    eval_only only looks: the keys are noted."""
    asked = [k for k in MODEL_KEYS if k in pinned and cfg[k] != args[k]]
    if asked and not cfg['eval_only']:
        given = [f"--{k}" for k in asked if k in explicit]
        keep = [f"--{k}={args[k]!r}" for k in asked if k not in explicit]
        raise ValueError(f"{path}'s model has " + ', '.join(f"{k}={args[k]!r}" for k in asked) +
                         "; this command gives " + ', '.join(f"{k}={cfg[k]!r}" for k in asked) + ". A resume "
                         "continues the checkpoint's model, whose keys cannot change: " +
                         (f"drop {' '.join(given)}, " if given else '') + "resume with the run's own config file (or "
                         "none: the checkpoint's model)" + (f", or give the checkpoint's {' '.join(keep)}" if keep
                                                            else '') + ", or start a new run in another --out_dir")
    for k in asked:
        if master:
            print(f"warning: {k}={cfg[k]!r} ignored: the checkpoint's model has {k}={args[k]!r}")


def load_resumed(cfg, path, n_tokens):
    """ckpt.pt's model and contents; the architecture comes from the checkpoint, so cfg's model keys are set (a model
    field newer than the checkpoint takes its default, which is the model the checkpoint was trained as; the
    command's own model keys were checked by resume_settings). n_tokens: the token ids of this command's data, which
    the checkpoint's embedding must have rows for."""
    if not os.path.isfile(path):
        raise FileNotFoundError(no_checkpoint(cfg['out_dir'], path))
    try:
        model, ckpt = load_checkpoint(path, 'cpu')
    except UnreadableCheckpoint as e:
        raise ValueError(unreadable_advice(e, path)) from None
    args = asdict(model.config)
    saved = ckpt.get('config', {})
    check_vocab(cfg, args, saved, n_tokens, path)
    cfg.update({k: args[k] for k in MODEL_KEYS})
    if ckpt['iter_num'] > cfg['max_iters'] and not cfg['eval_only']:
        raise ValueError(f"{path} is at iteration {ckpt['iter_num']}, past max_iters={cfg['max_iters']}: "
                         f"set --max_iters to {ckpt['iter_num']} or more to continue it")
    return model, ckpt


def no_checkpoint(out_dir, path):
    """A resume of a folder without ckpt.pt: a did-you-mean over the folders beside it that hold one (a name in
    another case first, then close ones), else the run folders beside it and inside it; never the folder given."""
    def runs_in(folder):
        try:
            names = sorted(os.listdir(folder or '.'))
        except OSError:
            return []
        return [os.path.join(folder, d) for d in names if os.path.isfile(os.path.join(folder, d, 'ckpt.pt'))
                and os.path.realpath(os.path.join(folder, d)) != os.path.realpath(out_dir)]
    parent, name = os.path.split(os.path.normpath(out_dir))
    beside = runs_in(parent)
    names = [os.path.basename(r) for r in beside]
    close = [d for d in names if d.lower() == name.lower()] or difflib.get_close_matches(name, names, n=3, cutoff=0.6)
    runs = beside + runs_in(out_dir)
    if close:
        hint = 'did you mean ' + ' or '.join(f"--out_dir={os.path.join(parent, d)}" for d in close) + '?'
    elif runs:
        hint = "run folders with a checkpoint: " + ', '.join(runs[:8]) + (' ...' if len(runs) > 8 else '')
    else:
        hint = "a run writes out_dir/ckpt.pt from its first evaluation or stop on; start one with --init_from=scratch"
    return f"no checkpoint at {path} to resume; {hint}"


def unreadable_advice(e, path):
    """A damaged ckpt.pt (a disk error, a copy cut short; train.py's own writes are atomic): what the run can do."""
    best = os.path.join(os.path.dirname(path), 'best.pt')
    kept = (f"{best} holds the weights of the run's best eval, for sample.py and analyze.py (not a resume: it has no "
            f"optimizer state); " if os.path.exists(best) else '')
    return (f"{e.what}, so the run cannot continue from it. Put back an earlier copy of it if you keep one; {kept}or "
            f"start the run anew: --init_from=scratch with another --out_dir")


def restore_optimizer(optimizer, scaler, ckpt, cuda_graph, device):
    """The optimizer's and GradScaler's state from ckpt.pt, with this run's learning rate and flags: cuda_graph=True
    wants AdamW's learning rate and step counts as device tensors (capturable), whatever the checkpoint's were."""
    optimizer.load_state_dict(ckpt['optimizer'])
    for group in optimizer.param_groups:  # the saved groups' lr and flags are another run's: this run's wins
        lr = float(group['lr'])
        group['lr'] = torch.tensor(lr, device=device) if cuda_graph else lr
        if 'capturable' in group:
            group['capturable'] = cuda_graph
        if cuda_graph:  # a checkpoint of a foreach AdamW kept its step counts on the CPU
            group['fused'] = True
            for p in group['params']:
                if 'step' in optimizer.state.get(p, {}):
                    optimizer.state[p]['step'] = optimizer.state[p]['step'].to(p.device, torch.float32)
    if 'scaler' in ckpt and scaler.is_enabled():
        scaler.load_state_dict(ckpt['scaler'])


def mend_best(run):
    """Rank 0, on resume: ckpt.pt is written before best.pt, so a crash between the two at an eval that improved
    leaves best.pt behind. Then ckpt.pt's weights are that best state, and best.pt is written from them."""
    ev, cfg = run.last_eval, run.cfg
    if ev.get('iter') != run.iter_num or ev.get('val_loss') != run.best_val_loss or run.iter_num == 0:
        return
    path = run_path(cfg, 'best.pt')
    try:  # a damaged best.pt (unreadable) is mended too: ckpt.pt holds the same best state
        if torch.load(path, map_location='cpu', weights_only=True).get('iter_num') == ev['iter']:
            return
    except Exception:  # noqa: BLE001: missing, or whatever torch raises for a damaged file
        pass
    print(f"{path} is behind {run_path(cfg)} (a stop between the two writes at iteration {ev['iter']}): mending it")
    save_checkpoint(run, 'best.pt')


def check_finite(run, values=None, weights=False):
    """Stop before anything non-finite is logged or saved: a training loss on any rank (the first bad step, the
    minimum over ranks), the values about to be logged (eval losses, lambdas), and before a save the weights
    (equal on every rank, so every rank reaches the same verdict). Every rank calls it at the same points: it is
    collective under DDP (run: train.py's Run). The step from iteration i to i + 1 is 'iteration i + 1', as the log
    names it."""
    bad = run.first_bad
    if run.env.ddp:
        bad = torch.where(bad < 0, torch.iinfo(torch.int64).max, bad.long()).reshape(1)
        dist.all_reduce(bad, op=dist.ReduceOp.MIN)
        bad = torch.where(bad == torch.iinfo(torch.int64).max, -1, bad)
    bad, what = int(bad.item()), None
    if bad >= 0:
        what = f"non-finite training loss at iteration {bad + 1}"
    elif values is not None and not all(math.isfinite(v) for v in values.values()):
        what = f"non-finite values at iteration {run.iter_num}: " + ', '.join(
            f"{k}={v}" for k, v in values.items() if not math.isfinite(v))
    elif weights and not torch.stack([torch.isfinite(p).all() for p in run.raw_model.parameters()]).all():
        what = f"non-finite weights at iteration {run.iter_num}"
    if what:
        kept = run_path(run.cfg)
        held = f"{kept} still holds the last good state" if os.path.exists(kept) else "nothing was saved"
        raise FloatingPointError(f"{what}; stopping. {held} (try a lower learning_rate, or grad_clip)")


def save_checkpoint(run, name='ckpt.pt'):
    """ckpt.pt: everything a resume needs. best.pt, for sampling and evaluation: the weights only (a third of
    ckpt.pt with AdamW). No RNG state: batches and dropout masks are pure functions of (seed, iteration,
    micro-batch). Both carry the tokenizer, so that sample.py decodes without the dataset. The write is atomic: a
    full disk leaves the previous file as it was, and an error that says so. run: train.py's Run (its cfg, model,
    optimizer, iteration, and log once it has one)."""
    cfg, log, raw = run.cfg, run.log, run.raw_model
    ckpt = dict(format=CHECKPOINT_FORMAT, model=raw.state_dict(), model_args=asdict(raw.config),
                iter_num=run.iter_num, best_val_loss=run.best_val_loss, last_eval=run.last_eval, config=cfg,
                tokenizer=run.tokenizer, code=run.code)
    if name == 'ckpt.pt':
        ckpt['optimizer'] = run.optimizer.state_dict()
        if run.scaler.is_enabled():
            ckpt['scaler'] = run.scaler.state_dict()
        wandb_id = log.wandb_id if log is not None else run.wandb_id
        if wandb_id is not None:
            ckpt['wandb_run_id'] = wandb_id  # a resumed run continues the same wandb curves
        if run.clock is not None:
            ckpt['timing'] = run.clock.totals()
    path = run_path(cfg, name)
    try:
        atomic_write(path, lambda f: torch.save(ckpt, f))
    except OSError as e:
        where = f"the previous {path} is unchanged" if os.path.exists(path) else f"no {name} yet"
        raise RunError(f"could not write {path} at iteration {run.iter_num} ({e.strerror or e}); {where}. Free "
                       f"space or fix the folder's permissions, then continue with --init_from=resume") from None
    if name == 'ckpt.pt' and log is not None:
        log.retire_summary()  # ckpt.pt is past a finished run's summary now (a failed write left the run finished)


# -----------------------------------------------------------------------------------------------------------
# The checkpoint format and its loader, for every tool that reads a run's weights (sample.py, analyze.py,
# needle_eval.py) and for a resume

CHECKPOINT_FORMAT = 'attn-gpt-ckpt-1'  # written by train.py into every checkpoint


class UnreadableCheckpoint(ValueError):
    """A checkpoint file torch.load cannot read (truncated, damaged, not a torch file): `what` says so, the message
    adds what to do (train.py's resume says it its own way)."""

    def __init__(self, path, error):
        self.what = (f"{path} is not a readable checkpoint (truncated, damaged or not a torch file: torch.load raised "
                     f"{type(error).__name__})")
        other = ("the run's ckpt.pt (its last state)" if os.path.basename(path) == 'best.pt' else
                 "the run's best.pt (the weights of its best eval)")
        super().__init__(f"{self.what}; use another copy of it, or {other}")


def load_checkpoint(path, device='cpu'):
    """-> (GPT with the checkpoint's weights, the checkpoint dict). Loads with weights_only=True (no pickled code
    runs) and says plainly what is wrong with a missing, truncated or foreign file."""
    if not os.path.isfile(path):
        raise FileNotFoundError(f"no checkpoint at {path} (train.py writes out_dir/ckpt.pt)")
    try:
        ckpt = torch.load(path, map_location=device, weights_only=True)
    except Exception as e:  # torch's own text would advise weights_only=False, which runs a file's code, and
        # cannot mend a damaged file
        raise UnreadableCheckpoint(path, e) from None
    if not isinstance(ckpt, dict) or ckpt.get('format') != CHECKPOINT_FORMAT:
        raise ValueError(f"{path} is not a checkpoint written by this repository's train.py "
                         f"(no format={CHECKPOINT_FORMAT!r} entry)")
    # a field this model.py lacks (a checkpoint of newer code) is named; one the checkpoint lacks (older code) takes
    # its default, which is the model that code built
    unknown = sorted(set(ckpt['model_args']) - {f.name for f in fields(GPTConfig)})
    if unknown:
        raise ValueError(f"{path}'s model has {', '.join(unknown)}, which this model.py's GPTConfig lacks (a checkpoint "
                         f"of newer code): load it with the code that wrote it")
    model = GPT(GPTConfig(**ckpt['model_args']))
    missing, unexpected = model.load_state_dict(ckpt['model'], strict=False)
    if missing or unexpected:
        raise ValueError(f"{path}'s weights do not fit this model.py's GPT of the same config: "
                         + '; '.join(f"{what} {', '.join(names[:4])}{' ...' if len(names) > 4 else ''}"
                                     for what, names in (('unknown', unexpected), ('missing', missing)) if names)
                         + " (a checkpoint of other code: load it with the code that wrote it)")
    return model.to(device), ckpt
