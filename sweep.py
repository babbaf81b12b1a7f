"""
ablate.sh's sweep: variants x depths x seeds, one run folder each; a finished run is skipped, a stopped one resumed;
then report.py. ablate.sh's header documents the settings (environment variables), docs/details.md the details.

  python sweep.py check [--key=value ...]   # the settings and every config with them, as train.py checks them
  python sweep.py run [--key=value ...]     # the sweep (ablate.sh execs this), or SLURM=1's array job

No torch here outside `check` (and the progress line, for a run whose config holds its length): report.py imports
this file for the variants, and a Slurm login node that submits a sweep may have no torch.
"""
import fcntl
import glob
import json
import os
import queue
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from contextlib import redirect_stdout
from dataclasses import dataclass

from output import duration
from provenance import FREE_ON_RESUME
from variants import LABELS, PREFIXES, VARIANTS as VARIANT_TABLE

HERE = os.path.dirname(os.path.abspath(__file__))

# ----------------------------------------------------------------------------- the variants and the profiles

# variants.py's table as the (name, label, seed's) rows report.py reads. A new variant's comparisons go in PAIRS.
VARIANTS = [(name, v['label'], v['seed']) for name, v in VARIANT_TABLE.items()]
# (reference A, variant B): the gaps B - A that the claims are about, in the order results.md lists them, by measure
PAIRS = dict(
    loss=[('nanogpt', 'diff'), ('sym', 'diff_sym'), ('sym', 'norm_sym'), ('nanogpt', 'sym'), ('nanogpt', 'gated'),
          ('nanogpt', 'softmax1'), ('sym', 'sym_noself'), ('nanogpt', 'gated_headwise'), ('nanogpt', 'orthoadam'),
          ('nanogpt', 'softmax1_orthoadam')],  # final val loss
    lambda_full=[('diff', 'diff_sym')],  # the seed's lambda claim: the distance of lambda_full from 1
    sink=[('nanogpt', 'softmax1'), ('nanogpt', 'gated'), ('nanogpt', 'gated_headwise'), ('nanogpt', 'orthoadam'),
          ('nanogpt', 'softmax1_orthoadam')],  # the sink claims, in analyze.py's measures
    # the retrieval claim, in needle_eval.py's measures (diffv2: configs/needle_diffv2.py, no variant configs)
    needle=[('nanogpt', 'diff'), ('nanogpt', 'sym'), ('nanogpt', 'diff_sym'), ('nanogpt', 'gated'),
            ('nanogpt', 'softmax1'), ('nanogpt', 'diffv2'), ('sym', 'diff_sym')],
)


def with_prefixes(items):
    """items (variant names, or tuples of them) and then their copies under each prefix."""
    def add(p, v):
        return tuple(p + x for x in v) if isinstance(v, tuple) else p + v
    return list(items) + [add(p, v) for p in PREFIXES for v in items]


@dataclass(frozen=True)
class Profile:
    schedule: str  # the train.py arguments of every run ('': the configs hold the schedule)
    depths: str    # DEPTHS' default
    variants: str = ''  # VARIANTS' default where not DEFAULT_VARIANTS
    data: str = 'shakespeare'  # the sweep's name: <data>_<profile>...
    prefix: str = ''           # its configs: configs/<prefix><variant>_<depth>.py (with ARCH=nanogpt)
    records: bool = False      # trains on fixed-length records, so no WINDOWS=sequential
    analyzer: str = 'analyze.py'   # what ANALYZE=1 runs on each finished run,
    analysis: str = 'analysis.json'  # and the file it writes there


DEFAULT_VARIANTS = 'nanogpt diff sym diff_sym norm_sym gated softmax1 diff_gated'  # the seed's five, then ours
# The Shakespeare profiles name the seed notes' batch, context and learning rate (configs/base_shakespeare_char.py's)
# where their schedule does not set them: that config switches to a laptop schedule without CUDA, and a sweep's runs
# never depend on that switch
SEED = '--batch_size=32 --block_size=256 --learning_rate=3e-4 --min_lr=3e-5 '
PROFILES = dict(
    # the seed notes' schedule: a GPU job, graphed where it can be (train.py's cuda_graph auto), without
    # torch.compile: 1.96 ms a 3-layer step against 1.35 compiled too (H200, results/bench_gpu.md), 3 s of a run
    # against 40-60 s of compiling a process
    full=Profile(SEED + '--max_iters=5000 --lr_decay_iters=5000 --warmup_iters=100 --dropout=0.2 --eval_interval=250 '
                 '--eval_iters=200 --log_interval=10 --compile=False', '3L 6L 8L'),
    cpu=Profile(SEED + '--max_iters=150 --lr_decay_iters=150 --warmup_iters=15 --dropout=0.0 --eval_interval=50 '
                '--eval_iters=10 --log_interval=10 --device=cpu', '3L 6L'),
    # nanoGPT's shakespeare_char learning rate (1e-3, min 1e-4) on 500 steps: about 8 minutes a 3-layer run on 2 CPU
    # cores in bf16 (c2b503b), far enough past the bigram plateau (2.5) for variants to differ
    cpu_long=Profile('--batch_size=32 --block_size=256 --max_iters=500 --lr_decay_iters=500 --warmup_iters=50 '
                     '--learning_rate=1e-3 --min_lr=1e-4 '
                     '--dropout=0.0 --eval_interval=100 --eval_iters=20 --log_interval=10 --device=cpu', '3L'),
    # a first look at the workflow on a laptop: the seed's five at 3L, 100 steps at batch 16, too short for the
    # variants to separate; an evaluation every 10 steps, so that each val curve has 11 points
    demo=Profile('--block_size=256 --max_iters=100 --lr_decay_iters=100 --warmup_iters=10 --learning_rate=1e-3 '
                 '--min_lr=1e-4 '
                 '--batch_size=16 --dropout=0.0 --eval_interval=10 --eval_iters=5 --log_interval=10', '3L',
                 'nanogpt diff sym diff_sym norm_sym'),
    # GPT-2 small on web text: the configs hold the schedule (a 2.5B-token budget, configs/base_gpt2.py)
    gpt2=Profile('', '124M', 'nanogpt diff diff_sym sym gated softmax1 sym_noself', data='fineweb'),
    # the sink claims where the baseline has a sink: Bigram-Backcopy, 2 layers, the configs' schedule
    sink=Profile('', '2L', 'nanogpt softmax1 gated gated_headwise orthoadam softmax1_orthoadam',
                 data='bigram_backcopy', prefix='bb_', records=True),
    # the retrieval claim where the baseline misses: needles with distractors, 2 layers, the configs' schedule
    retrieval=Profile('', '2L', 'nanogpt diff sym diff_sym gated softmax1', data='needle_distractors', prefix='nd_',
                      records=True, analyzer='needle_eval.py', analysis='needle_eval.json'),
    # the seed author's loop as far as it is published (results/seed_table_explained.md): one epoch's windows at
    # batch 32 (35,000 steps), lr 3e-4, dropout 0.1; assumed where unpublished: a constant lr and plain Adam
    seed_pipeline=Profile('--batch_size=32 --block_size=256 --min_lr=3e-5 --max_iters=35000 --decay_lr=False '
                          '--learning_rate=3e-4 --weight_decay=0.0 --beta2=0.999 '
                          '--grad_clip=0.0 --dropout=0.1 --eval_interval=2500 --eval_iters=200 --log_interval=10 '
                          '--compile=False', '3L 6L 8L'),
)
LEAKS = ('zero_future', 'off_by_one', 'after_norm', 'time_norm')  # model.py's GPTConfig.leak, but 'none'


# ----------------------------------------------------------------------------- a sweep


class Refused(ValueError):
    """A setting ablate.sh refuses before it starts anything: the message says why and what to write."""


def choice(env, key, default, choices):
    value = env.get(key) or default
    if value not in choices:
        raise Refused(f"{key}={value} is not one of: {' '.join(choices)}")
    return value


def whole_number(env, key, what):
    value = env.get(key) or '1'
    if not re.fullmatch('[0-9]+', value) or int(value) < 1:
        raise Refused(f"{key}={value} must be a whole number of {what}, 1 or more")
    return int(value)


def config_names(pattern):
    """The variants (pattern's group) or depths of the files in configs/."""
    return ' '.join(sorted({m[1] for f in os.listdir(os.path.join(HERE, 'configs')) if (m := re.match(pattern, f))}))


@dataclass
class Sweep:
    name: str          # the folder under RUNS_DIR
    root: str          # RUNS_DIR/name
    profile: str
    schedule: list     # the profile's train.py arguments, and those of LEAK, CAUSAL and WINDOWS
    variants: list     # config name stems, with the profile's or ARCH's prefix
    depths: list
    seeds: list
    nproc: int
    jobs: int
    analyze: bool
    analyzer: str
    analysis: str
    own: dict = None  # the extra --key=value that gave the sweep a folder of its own (changed_by), where SWEEP did not

    def configs(self):
        """configs/<variant>_<depth>.py of every pair that has one (there is no diff_gated_3L, say), depth by depth."""
        return [f'configs/{v}_{d}.py' for d in self.depths for v in self.variants if os.path.isfile(config_path(v, d))]

    def runs(self):
        """(config, run folder, seed) of each run, seed by seed: a sweep stopped half-way leaves whole tables for its
        first seeds."""
        return [(cfg, f"{self.root}/{os.path.basename(cfg)[:-3]}_s{seed}", seed)
                for seed in self.seeds for cfg in self.configs()]

    def settings(self, args):
        """What its runs share, as sweep_settings keeps it: the schedule and the extra --key=value (the last of a key
        wins, as in train.py), less the keys that say only where and how a run is computed (FREE_ON_RESUME), sorted."""
        kept = {key_value(a)[0]: a for a in self.schedule + list(args)}
        return sorted(a for key, a in kept.items() if key not in FREE_ON_RESUME)


def sweep_from_env(env, args):
    """The sweep that ablate.sh's environment variables and extra arguments name, checked: a Refused says what is
    wrong, before anything is made."""
    for a in args:  # what ablate.sh passes on to train.py: --key=value alone (a stray --help used to be a setting)
        if not re.fullmatch(r'--[A-Za-z_]\w*=.*', a):
            raise Refused(f"'{a}' is not a --key=value for train.py, the only arguments ablate.sh takes (its "
                          f"settings are environment variables: ./ablate.sh --help)")
    nproc = whole_number(env, 'NPROC', 'processes a run')
    jobs = whole_number(env, 'JOBS', 'runs at once')
    if choice(env, 'WORKER', 'auto', ('auto', '0', '1')) == '1' and nproc > 1:
        raise Refused(f"WORKER=1 runs each run inside a worker process, and NPROC={nproc} runs each on torchrun's "
                      f"processes: say one of them (WORKER=0, or NPROC=1)")
    analyze = choice(env, 'ANALYZE', '0', ('0', '1')) == '1'
    seeds = (env.get('SEEDS') or '1337').split()
    if not all(re.fullmatch('[0-9]+', s) for s in seeds):  # a comma list (1,2) would name one folder s1,2
        raise Refused(f'SEEDS="{env["SEEDS"]}" must be whole numbers separated by spaces, e.g. SEEDS="1 2 3"')
    arch = choice(env, 'ARCH', 'nanogpt', ('nanogpt', 'llama'))
    name = choice(env, 'PROFILE', 'full', tuple(PROFILES))
    profile = PROFILES[name]
    leak = choice(env, 'LEAK', 'none', ('none',) + LEAKS)
    # the profile's own default, else (time_norm is a bug in Diff's subln) Diff's two for LEAK=time_norm
    default = profile.variants or ('diff diff_sym' if leak == 'time_norm' else DEFAULT_VARIANTS)
    prefix = 'llama_' if arch == 'llama' else profile.prefix
    variants = [prefix + v for v in (env.get('VARIANTS') or default).split()]
    # the sweep's name says every setting that changes what its runs are: <data>_<profile>[_leak_<LEAK> or
    # _noncausal][_sequential], so that no two kinds of run share a folder (a re-launch would skip or resume the other)
    schedule, suffix = profile.schedule.split(), ''
    if leak != 'none':  # the causality check refuses a leak in a causal run
        schedule += ['--causal=False', f'--leak={leak}']
        suffix += f'_leak_{leak}'
    if choice(env, 'CAUSAL', '1', ('1', '0')) == '0' and leak == 'none':  # a leak is non-causal already
        schedule.append('--causal=False')
        suffix += '_noncausal'
    if choice(env, 'WINDOWS', 'random', ('random', 'sequential')) == 'sequential':
        if profile.records:
            raise Refused(f"WINDOWS=sequential walks a token stream; PROFILE={name} trains on fixed-length records")
        schedule.append('--window_order=sequential')
        suffix += '_sequential'
    depths = (env.get('DEPTHS') or profile.depths).split()
    # a name that no config file has is a typo, not a pair to leave out (as diff_gated_3L is)
    for v in variants:
        if not glob.glob(os.path.join(HERE, 'configs', glob.escape(v) + '_*.py')):
            raise Refused(f"VARIANTS has '{v}', but there is no configs/{v}_<depth>.py; the variants: "
                          + config_names(r'(.*)_[0-9]*[LM]\.py$'))
        if v not in LABELS:  # report.py would have no label, column or comparison for its runs
            raise Refused(f"VARIANTS has '{v}', which has configs but no row in sweep.py's VARIANTS table: add its "
                          f"row (docs/adding_a_variant.md)")
    for d in depths:
        if not glob.glob(os.path.join(HERE, 'configs', '*_' + glob.escape(d) + '.py')):
            raise Refused(f"DEPTHS has '{d}', but there is no configs/<variant>_{d}.py; the depths: "
                          + config_names(r'.*_([0-9]*[LM])\.py$'))
    # a variant without a config at any of the sweep's depths would run nothing: refused where VARIANTS names it (or
    # where the sweep would have no run at all), before anything is made; a default one (diff_gated at 3L) is left out
    absent = [v for v in variants if not any(os.path.isfile(config_path(v, d)) for d in depths)]
    if absent and (env.get('VARIANTS') or len(absent) == len(variants)):
        raise Refused('\n'.join(
            [f"no config for {' '.join(absent)} at DEPTHS={' '.join(depths)}: "
             f"{'the sweep' if len(absent) == len(variants) else 'it' if len(absent) == 1 else 'they'} would run "
             f"nothing, so nothing was started or made:"]
            + [f"  {v}: no {', '.join(f'configs/{v}_{d}.py' for d in depths)}; it has "
               + (config_names(rf'{re.escape(v)}_([0-9]*[LM])\.py$') or 'none') for v in absent]
            + ["  Say DEPTHS= one of those, leave the variant out of VARIANTS, or write the config "
               "(docs/adding_a_variant.md)."]))
    for a in args:  # what the sweep sets per run
        if a.startswith(('--seed=', '--out_dir=', '--init_from=')):
            raise Refused(f"{a.split('=')[0]} is the sweep's to set (each run's seed comes from SEEDS, its folder and "
                          f"resume from the sweep): drop it from the extra arguments")
    # extra arguments that change what the runs compute make a sweep of their own (--max_iters=10: <...>_max_iters10),
    # so that they never join the profile's own folder, whose sweep_settings would then refuse the plain launch
    own = changed_by(schedule, args)
    sweep = env.get('SWEEP') or f'{profile.data}_{name}{suffix}{args_suffix(own)}'
    return Sweep(sweep, f"{env.get('RUNS_DIR') or 'runs'}/{sweep}", name, schedule, variants, depths, seeds, nproc,
                 jobs, analyze, profile.analyzer, profile.analysis, {} if env.get('SWEEP') else own)


def config_path(variant, depth):
    return os.path.join(HERE, 'configs', f'{variant}_{depth}.py')


def key_value(arg):
    """(key, value) of --key=value (value None without '=')."""
    key, _, value = arg.partition('=')
    return (key[2:] if key.startswith('--') else key), (value if '=' in arg else None)


def changed_by(schedule, args):
    """{key: value} of the extra --key=value that change what a sweep's runs compute, in the order given, the last of
    a key winning: not the keys that say only where and how a run is computed (FREE_ON_RESUME), nor a value the
    schedule already gives (sweep_settings compares the same text)."""
    given = dict(key_value(a) for a in schedule)
    out = {}
    for key, value in map(key_value, args):
        out.pop(key, None)
        if key not in FREE_ON_RESUME and given.get(key) != value:
            out[key] = value or ''
    return out


def args_suffix(changed):
    """The end of a sweep's default name that changed_by's {key: value} make: _<key><value> each, in order
    (--max_iters=10: _max_iters10; a value's other characters than letters, digits and .+- become -)."""
    return ''.join('_' + key + re.sub(r'[^A-Za-z0-9.+-]+', '-', value) for key, value in changed.items())


def keep_settings(root, settings, write=True):
    """root/sweep_settings: made whole from settings where there is none (write; a new sweep, or one from before the
    file), else compared with them. A launch with other settings is Refused: report.py averages a cell's runs as
    seeds of one setting, and a re-launch would skip a finished run made with others."""
    path = os.path.join(root, 'sweep_settings')
    text = '\n'.join(settings)
    if not os.path.exists(path):
        if not write:
            return
        os.makedirs(root, exist_ok=True)
        # a hard link makes the file whole and only where it is absent, so of two launches at once the first wins
        # and the second is compared with it below (a check-then-write let both pass with different settings)
        fd, tmp = tempfile.mkstemp(prefix='.sweep_settings.', dir=root)
        try:
            with os.fdopen(fd, 'w') as f:
                f.write(text + '\n')
            os.link(tmp, path)
        except FileExistsError:
            pass
        except OSError:  # no hard links on this file system
            if not os.path.exists(path):
                os.replace(tmp, path)
        finally:
            if os.path.exists(tmp):
                os.remove(tmp)
    with open(path) as f:
        kept = f.read().rstrip('\n').split('\n')
    if kept != text.split('\n'):
        raise Refused('\n'.join([f"{root} holds runs made with other settings than this command's:"]
                                + [f'  the sweep:    {a}' for a in kept if a not in settings]
                                + [f'  this command: {a}' for a in settings if a not in kept]
                                + [f"  To start afresh: name a new sweep (SWEEP=<name>), or remove {root}. To continue "
                                   f"it: re-launch with the sweep's settings."]))


def slurm_task(env):
    """(task id, its run) for a task of the array that SLURM=1 submitted, which runs line SLURM_ARRAY_TASK_ID of
    the list of runs written then (ABLATE_RUNS), and only that run; else (None, None)."""
    task, listed = env.get('SLURM_ARRAY_TASK_ID'), env.get('ABLATE_RUNS')
    if not task or not listed:
        return None, None
    try:  # "config folder seed", the folder perhaps with spaces
        with open(listed) as f:
            cfg, rest = f.read().splitlines()[int(task)].split(' ', 1)
        return task, (cfg, *rest.rsplit(' ', 1))
    except (OSError, ValueError, IndexError):
        raise Refused(f"Slurm task {task} has no line in {listed}") from None


# ----------------------------------------------------------------------------- the commands

def launches(env, args):
    """(env, args) of each sweep this command runs: one, or with LRS="1e-3 3e-3 ..." one a learning rate, each as the
    launch SWEEP=<the sweep>_lr<rate> (the rate as written) with --learning_rate=<rate> would be."""
    rates = (env.get('LRS') or '').split()
    if not rates:
        return [(env, list(args))]
    for r in rates:
        if not re.fullmatch(r'[0-9.]+(e-?[0-9]+)?', r):
            raise Refused(f"LRS has '{r}', which is not a learning rate: write numbers, e.g. LRS=\"1e-3 3e-3\"")
    if any(key_value(a)[0] == 'learning_rate' for a in args):
        raise Refused("LRS gives each sweep its --learning_rate: drop --learning_rate= from the extra arguments")
    base = sweep_from_env(env, args).name
    return [(dict(env, SWEEP=f'{base}_lr{r}'), [*args, f'--learning_rate={r}']) for r in rates]


def check(env, args):
    """The environment, then every config of the sweep with the profile's schedule and the extra arguments, checked
    as train.py checks them (keys, types, ranges, the model), before the sweep keeps anything: a typo (--dropuot=0.1)
    stops here, not in each run after sweep_settings has recorded it. Returns a note where nothing could be checked."""
    if not env.get('PROFILE'):
        try:
            import torch
            gpu = torch.cuda.is_available()
        except ImportError:
            gpu = False
        if not gpu:
            raise Refused("torch sees no GPU here, and the default PROFILE=full is the seed's 5000-step schedule, "
                          "hours a run on a CPU. Pick PROFILE=demo (minutes), PROFILE=cpu_long or PROFILE=cpu, or say "
                          "PROFILE=full to run it anyway")
    sweep = sweep_from_env(env, args)
    try:
        from config import parse_config
    except ImportError as e:  # e.g. a Slurm login node without the environment: the runs check them
        return f"the arguments are not checked here ({e}); each run checks them"
    for cfg in sweep.configs():
        try:
            parse_config([cfg, *sweep.schedule, *args])
        except (ValueError, OSError) as e:
            raise Refused(f"{cfg} with the extra arguments and the profile's schedule: {e}") from None
    return None


def announce(sweep):
    """The sweep's first line on the console: its folder, and why it is that one where the extra arguments chose it,
    and the variants left out for want of a config at a depth."""
    own = ' '.join(f'--{k}={v}' for k, v in (sweep.own or {}).items())
    line = f"sweep {sweep.root}" + (f" (a sweep of its own for {own}; SWEEP=<name> names it otherwise)" if own else '')
    left = [f'{v}_{d}' for d in sweep.depths for v in sweep.variants if not os.path.isfile(config_path(v, d))]
    return line + (f"; no config, so left out: {' '.join(left)}" if left else '')


def sbatch(*options):
    """sbatch --parsable: the job's id, or None where sbatch refused (its message on stderr)."""
    p = subprocess.run(['sbatch', '--parsable', *options], stdout=subprocess.PIPE, text=True)
    return p.stdout.strip().split(';')[0] if p.returncode == 0 else None


def submit(env, args):
    """SLURM=1: the sweep's unfinished runs as a Slurm job array, one run a task (each ablate.sh again, with the same
    environment and arguments, on line k of a list of runs), and a report.py job after it. Where every run has
    finished, report.py now instead. Returns the exit status."""
    sweep = sweep_from_env(env, args)
    python = env.get('PYTHON') or 'python'
    if not shutil.which('sbatch'):
        raise Refused("SLURM=1, but there is no sbatch here")
    runs = sweep.runs()
    todo = [r for r in runs if not os.path.exists(os.path.join(r[1], 'summary.json'))]
    if not todo:
        print(f"ablate.sh: every run of {sweep.root} has finished", flush=True)
        os.execvp(python, [python, 'report.py', sweep.root])
    keep_settings(sweep.root, sweep.settings(args))  # each task compares its settings with these
    listed = f"{sweep.root}/.slurm_runs.{time.strftime('%Y%m%d-%H%M%S')}.{os.getpid()}"
    with open(listed, 'w') as f:
        f.writelines(' '.join(r) + '\n' for r in todo)
    n, here = len(todo), os.getcwd()
    job = sbatch(f"--array=0-{n - 1}" + (f"%{env['SLURM_MAX']}" if env.get('SLURM_MAX') else ''),
                 f'--job-name=ablate_{sweep.name}', f'--chdir={here}', f'--output={sweep.root}/slurm-%A_%a.out',
                 f'--export=ALL,ABLATE_RUNS={listed},ABLATE_DIR={here},PROFILE={sweep.profile}',
                 *(env.get('SBATCH_ARGS') or '').split(), 'ablate.sh', *args)
    if job is None:
        os.remove(listed)
        return 1
    report = sbatch(f'--dependency=afterany:{job}', f'--job-name=report_{sweep.name}', f'--chdir={here}',
                    f'--output={sweep.root}/slurm-report-%j.out',
                    *(env.get('SBATCH_REPORT_ARGS') or env.get('SBATCH_ARGS') or '').split(),
                    f'--wrap={shlex.quote(python)} report.py {shlex.quote(sweep.root)}')
    if report is None:
        return 1
    print(f"ablate.sh: submitted {n} run(s) of {len(runs)} as Slurm array job {job} (tasks 0-{n - 1}, {listed}), and "
          f"report.py as job {report} after it. Logs: {sweep.root}/slurm-{job}_<task>.out; the same command again "
          f"resubmits whatever has not finished (stopped runs resume from their checkpoint).")
    return 0


def analyzed(analysis, run):
    """Whether run/analysis exists and is of the run's last checkpoint (its iteration that of summary.json), not of
    best.pt, say."""
    try:
        with open(os.path.join(run, analysis)) as f:
            done = json.load(f)
        with open(os.path.join(run, 'summary.json')) as f:
            last = json.load(f)['iter']
    except (OSError, ValueError, KeyError):
        return False
    return done.get('iter', last) == last


# ----------------------------------------------------------------------------- progress

def last_record(path):
    """The last whole record of a log.jsonl and when it was written (the file's mtime: train.py flushes each line);
    (None, None) where there is none. Reads the tail only: a long run's log is thousands of lines."""
    try:
        with open(path, 'rb') as f:
            f.seek(max(0, os.fstat(f.fileno()).st_size - 65536))
            tail, mtime = f.read(), os.fstat(f.fileno()).st_mtime
    except OSError:
        return None, None
    for line in reversed(tail.split(b'\n')[:-1]):  # [:-1]: a line being written has no newline yet
        try:
            return json.loads(line), mtime
        except ValueError:
            continue
    return None, None


def max_iters(sweep, args, cfg):
    """A run's last iteration: the last --max_iters of the schedule and the extra arguments, else the config's
    (the profiles whose configs hold the schedule; train.py's parse, so torch, once a config); None if unknown."""
    try:
        given = [a.split('=', 1)[1] for a in sweep.schedule + list(args) if a.startswith('--max_iters=')]
        if given:
            return int(float(given[-1]))
        from config import parse_config
        with redirect_stdout(None):  # a config's notes (base_shakespeare_char.py's "no CUDA")
            return parse_config([cfg, *sweep.schedule, *args])['max_iters']
    except Exception:  # no torch here, a value train.py refuses: the run itself says so; its ETA is unknown
        return None


class Progress:
    """A sweep's state from its run folders, for one line: runs finished, running and left, each running run's
    iteration of its total and its ETA, and the sweep's ETA. A run is running from the moment ablate.sh touches its
    train.log (after START, when this launch began) until its summary.json or FAILED. A run's pace is the time per
    iteration between its first record of this launch and its last, evaluations included; before a second record,
    the ms_per_iter of its log line."""

    def __init__(self, sweep, args, start):
        self.sweep, self.args, self.start = sweep, args, start
        self.runs = [(cfg, d) for cfg, d, _ in sweep.runs()]
        self.totals = {}  # config -> max_iters
        self.first = {}   # run folder -> (time, iter) of its first record of this launch

    def total(self, cfg):
        if cfg not in self.totals:
            self.totals[cfg] = max_iters(self.sweep, self.args, cfg)
        return self.totals[cfg]

    def since_start(self, path):
        try:
            return os.path.getmtime(path) >= self.start
        except OSError:
            return False

    def state(self, d):
        if os.path.exists(os.path.join(d, 'summary.json')):
            return 'finished'
        if self.since_start(os.path.join(d, 'FAILED')):
            return 'failed'
        return 'running' if self.since_start(os.path.join(d, 'train.log')) else 'left'

    def run(self, cfg, d, now):
        """(its words, its pace in seconds an iteration or None, its seconds left or None)."""
        rec, t = last_record(os.path.join(d, 'log.jsonl'))
        total, name = self.total(cfg), os.path.basename(d)
        if rec is None or t < self.start or 'iter' not in rec:  # a resumed run's log of an earlier launch
            return f'{name} starting', None, None
        t0, it0 = self.first.setdefault(d, (t, rec['iter']))
        pace = (t - t0) / (rec['iter'] - it0) if rec['iter'] > it0 else (rec.get('ms_per_iter') or 0) / 1000 or None
        if total is None:
            return f"{name} {rec['iter']}", pace, None
        left = max(0.0, (total - rec['iter']) * pace - (now - t)) if pace else None
        return f"{name} {rec['iter']}/{total}" + (f' ETA {duration(left)}' if left is not None else ''), pace, left

    def line(self, now):
        """The line, or None while no run of this launch is running."""
        states = [self.state(d) for _, d in self.runs]
        running = [self.run(cfg, d, now) for (cfg, d), s in zip(self.runs, states) if s == 'running']
        if not running:
            return None
        waiting = [cfg for (cfg, _), s in zip(self.runs, states) if s == 'left']
        paces = [p for _, p, _ in running if p]
        counts = (f"{states.count('finished')} finished, {len(running)} running, {len(waiting)} left"
                  + (f", {states.count('failed')} failed" if 'failed' in states else ''))
        # the runs left at the mean pace so far, spread over the JOBS slots with the time the running ones need
        todo = [left for _, _, left in running] + [self.total(c) * sum(paces) / len(paces) if paces and self.total(c)
                                                   else None for c in waiting]
        eta = f', ETA {duration(sum(todo) / min(self.sweep.jobs, len(todo)))}' if None not in todo else ''
        return f"sweep {self.sweep.root}: {counts}{eta} | " + ', '.join(words for words, _, _ in running)


# ----------------------------------------------------------------------------- the runs

def gpu_list(env):
    """GPUS, else CUDA_VISIBLE_DEVICES where it is set (empty: no GPU), else every GPU nvidia-smi lists, else none."""
    if env.get('GPUS') or 'CUDA_VISIBLE_DEVICES' in env:
        return (env.get('GPUS') or env['CUDA_VISIBLE_DEVICES']).replace(',', ' ').split()
    try:
        p = subprocess.run(['nvidia-smi', '--query-gpu=index', '--format=csv,noheader'], capture_output=True, text=True)
    except OSError:
        return []
    return [g for g in p.stdout.split('\n') if re.fullmatch('[0-9]+', g)] if p.returncode == 0 else []


def lane_gpus(gpus, jobs, nproc):
    """Each of the JOBS lanes' CUDA_VISIBLE_DEVICES: its own group of NPROC GPUs, round robin where there are fewer."""
    return [','.join(gpus[(k * nproc + i) % len(gpus)] for i in range(nproc)) for k in range(jobs)] if gpus else []


def locked(d):
    """Whether another process trains run folder d (train.py holds a lock on d/.lock while it runs)."""
    try:
        with open(os.path.join(d, '.lock')) as f:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except FileNotFoundError:
        return False
    except OSError:
        return True
    return False


def tail(path, n):
    try:
        return ''.join(f'\n         {t}' for t in open(path, errors='replace').read().splitlines()[-n:])
    except OSError:
        return ''


class Runner:
    """One sweep's runs in JOBS lanes at once, each lane on its own GPUs: a process a run (train.py, or torchrun
    with NPROC > 1), or with WORKER=1 a lane's runs back to back in one worker.py. Each run's process is started
    apart from the terminal's process group (setsid): a Ctrl-C or SIGTERM to the sweep gives each run in progress
    one TERM (train.py saves its checkpoint and exits 130); STOP_GRACE seconds later whatever is left of them is
    killed."""

    def __init__(self, sweep, args, env, task, run):
        self.sweep, self.args, self.env, self.task = sweep, args, env, task
        self.runs, self.jobs = ([run], 1) if task else (sweep.runs(), sweep.jobs)
        self.python = env.get('PYTHON') or 'python'
        self.lock, self.ended = threading.RLock(), threading.Event()
        self.procs, self.groups, self.busy = set(), [], []  # processes running now, every group started, runs left
        self.stopping = self.kept = self.refused = False
        self.done = self.failed = self.failed_analysis = self.started = self.analyzed = 0
        self.tty = sys.stdout.isatty()
        gpus = gpu_list(env)
        if gpus and sweep.nproc > len(gpus):
            raise Refused(f"NPROC={sweep.nproc} processes a run, but only {len(gpus)} GPU(s): {' '.join(gpus)}")
        self.gpus = lane_gpus(gpus, self.jobs, sweep.nproc)
        device = ([''] + [a.split('=', 1)[1] for a in sweep.schedule + args if a.startswith('--device=')])[-1]
        worker = choice(env, 'WORKER', 'auto', ('auto', '0', '1'))
        self.worker = worker == '1' or (worker == 'auto' and bool(gpus) and sweep.nproc == 1 and not task
                                        and not device.startswith(('cpu', 'mps')))

    def say(self, text, out=sys.stdout):
        with self.lock:
            out.write(('\r\033[K' if self.tty else '') + text + '\n')
            out.flush()

    def spawn(self, k, cmd, log, mode='ab', pipe=False):
        """cmd under setsid (a process group of its own) on lane k's GPUs, its output to log (or a pipe); None once
        the sweep stops."""
        env = dict(os.environ, **({'CUDA_VISIBLE_DEVICES': self.gpus[k]} if self.gpus else {}))
        with self.lock, open(log, mode) as f:
            if self.stopping:
                return None
            p = subprocess.Popen(cmd, stdout=subprocess.PIPE if pipe else f, stderr=subprocess.STDOUT, text=pipe,
                                 stdin=subprocess.DEVNULL, env=env, start_new_session=True)
            self.procs.add(p)
            self.groups.append(p.pid)
            return p

    def wait(self, p):
        rc = p.wait()
        with self.lock:
            self.procs.discard(p)
        return rc

    def before(self, d):
        """Whether run folder d starts now: not once the sweep stops, nor where another process trains it (left to
        it). The sweep's settings are kept at its first run, so that a launch that trains nothing keeps none."""
        with self.lock:
            if self.stopping:
                return False
            if locked(d):
                self.busy.append(d)
                return self.say(f"busy   {d}: another process is training it; left to it")
            try:  # a launch at once with other settings may have kept its own since this one looked
                if not self.kept:
                    keep_settings(self.sweep.root, self.sweep.settings(self.args))
                    self.kept = True
            except Refused as e:
                self.refused = self.stopping = True
                return self.say(f"ablate.sh: {e}", sys.stderr)
            os.makedirs(d, exist_ok=True)
            return self.unfail(d)

    def unfail(self, d, rc=None):
        """d/FAILED removed (an earlier attempt's), or written with exit status rc."""
        path = os.path.join(d, 'FAILED')
        if rc is not None:
            with open(path, 'w') as f:
                f.write(f'{rc}\n')
        elif os.path.exists(path):
            os.remove(path)
        return True

    def argv(self, cfg, d, seed):
        resume = ['--init_from=resume', '--resume_strict=True'] if os.path.exists(os.path.join(d, 'ckpt.pt')) else []
        return [cfg, *self.sweep.schedule, f'--seed={seed}', f'--out_dir={d}', *resume, *self.args], ' '.join(resume)

    def end(self, d, rc, seconds):
        """A run's end in one line: stopped (train.py's 130, or any exit while the sweep stops: torchrun exits 1
        after one), busy elsewhere (train.py's 75), FAILED (with its exit status in d/FAILED) or done."""
        log = os.path.join(d, 'train.log')
        if rc != 0 and (rc == 130 or self.stopping):
            at = re.findall(r'stopped at iteration [0-9]+', open(log, errors='replace').read()) or ['']
            self.say(f"stopped {d}: {at[-1]}")
        elif rc == 75:
            self.busy.append(d)
            self.say(f"busy   {d}: another process is training it; left to it")
        elif rc != 0:
            self.failed += self.unfail(d, rc)
            self.say(f"FAILED {d} (exit {rc}): tail of {log}:{tail(log, 5)}")
        else:
            self.done += 1
            self.say(f"done   {d} in {seconds:.0f}s")

    def train(self, k, cfg, d, seed):
        if self.before(d):
            self.started += 1
            argv, resume = self.argv(cfg, d, seed)
            self.say(f"run    {d} {resume}")
            nproc = self.sweep.nproc
            launch = ['-m', 'torch.distributed.run', '--standalone', f'--nproc_per_node={nproc}'] if nproc > 1 else []
            t0, p = time.time(), self.spawn(k, [self.python, *launch, 'train.py', *argv], os.path.join(d, 'train.log'))
            if p:
                self.end(d, self.wait(p), time.time() - t0)

    def analyze(self, k, d):
        """ANALYZE=1: the analyzer on a finished run's ckpt.pt, where its analysis is not of that checkpoint."""
        if self.stopping or analyzed(self.sweep.analysis, d) or not os.path.exists(os.path.join(d, 'summary.json')):
            return
        if not os.path.exists(os.path.join(d, 'ckpt.pt')):  # e.g. a committed run copied back without it
            return self.say(f"         {d}: no ckpt.pt, so no analysis")
        log, what = os.path.join(d, 'analyze.log'), self.sweep.analyzer
        p = self.unfail(d) and self.spawn(k, [self.python, what, f'--out_dir={d}'], log, 'wb')
        rc = self.wait(p) if p else None
        if rc and self.stopping:
            self.say(f"stopped {d}: {what}; a re-launch with ANALYZE=1 runs it again")
        elif rc:
            self.failed_analysis += self.unfail(d, rc)
            self.say(f"FAILED {d}: {what} (exit {rc}): tail of {log}:{tail(log, 3)}")
        elif rc == 0:
            self.analyzed += os.path.getmtime(os.path.join(d, 'summary.json')) < self.start  # a run skipped now
            self.say(f"analyzed {d}")

    def lane(self, k, todo):
        """WORKER=0: the next run of the shared list, a process each, until none is left or the sweep stops."""
        while not self.stopping:
            try:
                cfg, d, seed = todo.get_nowait()
            except queue.Empty:
                return
            if cfg:
                self.train(k, cfg, d, seed)
            if self.sweep.analyze:
                self.analyze(k, d)

    def worker_lane(self, k, share):
        """WORKER=1: lane k's runs (dealt in turn) in one worker.py, its lines said as this sweep's; then ANALYZE's."""
        runs = [r for r in share if r[0] and self.before(r[1])]
        listed, ended = os.path.join(self.sweep.root, f'.worker.{os.getpid()}.{k}'), set()
        if runs:
            with open(listed, 'w') as f:
                f.writelines(shlex.join(self.argv(*r)[0]) + '\n' for r in runs)
            p = self.spawn(k, [self.python, 'worker.py', listed], os.devnull, pipe=True)
            for line in p.stdout if p else ():
                if line.startswith('worker: run '):
                    d = line[12:].rstrip('\n')
                    self.started += 1
                    self.say(f"run    {d} {self.argv('', d, 0)[1]}")
                elif line.startswith('worker: end '):
                    d, rc, seconds = line[12:].rsplit(' ', 2)
                    self.end(d, int(rc), float(seconds))
                    ended.add(d)
                else:
                    self.say(f"         {line.rstrip()}")  # the worker's own words (an error before or between runs)
            rc = self.wait(p) if p else None
            os.remove(listed)
            for _, d, _ in runs:  # a run the worker never ended (it crashed, or was killed): FAILED with its status
                if d not in ended and not self.stopping and rc is not None:
                    self.failed += self.unfail(d, rc)
                    self.say(f"FAILED {d}: its worker ended (exit {rc}) before this run did; see {d}/train.log")
        for _, d, _ in share if self.sweep.analyze else ():
            self.analyze(k, d)

    def on_stop(self, signum, frame):
        with self.lock:
            if not self.stopping:
                self.stopping = True
                self.ended.set()  # the progress line ends
                if self.procs:
                    self.say(f"ablate.sh: stopping: {len(self.procs)} run(s) in progress save a checkpoint at the "
                             f"end of their step")
                for p in self.procs:
                    p.send_signal(signal.SIGTERM)

    def progress(self):
        """On a terminal one line redrawn each second (say() clears it first); elsewhere a line every PROGRESS_EVERY
        seconds while a run is running (an hour's sweep adds some 120 lines to its log)."""
        every = float(self.env.get('PROGRESS_EVERY') or 30)
        line, due = Progress(self.sweep, self.args, self.start), time.time() + every
        while not self.ended.wait(1.0 if self.tty else min(1.0, every)):
            if self.tty or time.time() >= due:
                due = time.time() + every
                try:  # a folder half-written (a run starting) waits for the next look
                    text = line.line(time.time())
                except (OSError, ValueError, KeyError, TypeError):
                    text = None
                with self.lock:
                    if self.tty and not self.ended.is_set():
                        sys.stdout.write('\r' + (text or '')[:shutil.get_terminal_size().columns - 1] + '\033[K')
                    elif text and not self.ended.is_set():
                        sys.stdout.write(f'progress: {text}\n')
                    sys.stdout.flush()

    def main(self):
        self.start, root = time.time(), self.sweep.root
        print(f"ablate.sh: {announce(self.sweep)}", flush=True)
        if self.gpus:
            print(f"GPUs {' '.join(gpu_list(self.env))}: {self.jobs} lane(s) of {self.sweep.nproc} process(es) each")
        if self.worker:
            print(f"ablate.sh: the runs go to {self.jobs} worker process(es) (worker.py), each running its share back "
                  f"to back (WORKER=0: a process a run)", flush=True)
        if self.jobs > 1 and not os.environ.get('TORCHINDUCTOR_COMPILE_THREADS'):  # torch.compile's workers share
            os.environ['TORCHINDUCTOR_COMPILE_THREADS'] = str(max(1, (os.cpu_count() or 1) // self.jobs))  # the cores
        todo = []
        for cfg, d, seed in self.runs:  # a finished run: an analysis only, where ANALYZE=1 wants one
            done = os.path.exists(os.path.join(d, 'summary.json'))
            if done:
                self.say(f"skip   {d} (finished)")
            todo.append((None if done else cfg, d, seed))
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, self.on_stop)
        if self.worker:
            lanes = [threading.Thread(target=self.worker_lane, args=(k, todo[k::self.jobs])) for k in range(self.jobs)]
        else:
            shared = queue.Queue()
            for item in todo:
                shared.put(item)
            lanes = [threading.Thread(target=self.lane, args=(k, shared)) for k in range(self.jobs)]
        for t in lanes:
            t.start()
        if not self.task and self.env.get('PROGRESS_EVERY', '30') != '0':
            threading.Thread(target=self.progress, daemon=True).start()
        grace, deadline = float(self.env.get('STOP_GRACE') or 20), None
        while any(t.is_alive() for t in lanes):
            time.sleep(0.1)
            deadline = deadline or (self.stopping and time.time() + grace)
            if deadline and time.time() > deadline and self.procs:
                self.say(f"ablate.sh: {len(self.procs)} run(s) still running {grace:.0f}s after the stop: killed "
                         f"(SIGKILL; STOP_GRACE=<seconds> waits longer); a re-launch resumes them from their last "
                         f"checkpoint")
                deadline = float('inf')
                self.kill()
        with self.lock:
            self.ended.set()
            if self.tty:
                sys.stdout.write('\r\033[K')
        skipped = sum(cfg is None for cfg, _, _ in todo)
        if self.refused:
            return 2
        if self.stopping:
            self.kill()  # what a run left behind it, in its process group
            left = len(todo) - skipped - self.started - len(self.busy)
            self.say(f"ablate.sh: interrupted ({left} run(s) not started); re-launch the same command to continue")
            return 130
        skipped = f"{skipped} skipped" + (f" ({self.analyzed} of them analyzed now)" if self.sweep.analyze else '')
        self.say(f"sweep {root}: {self.done} run, {skipped}, {self.failed} failed, {len(self.busy)} busy elsewhere, "
                 f"{time.time() - self.start:.0f}s")
        rc = 0 if self.task else subprocess.call([self.python, 'report.py', root])  # a Slurm task: the report job's
        if self.failed:
            self.say(f"ablate.sh: {self.failed} run(s) failed (see FAILED above and their train.log); re-launch to "
                     f"retry them", sys.stderr)
        if self.failed_analysis:
            self.say(f"ablate.sh: {self.sweep.analyzer} failed on {self.failed_analysis} finished run(s) (see "
                     f"analyze.log); re-launch with ANALYZE=1", sys.stderr)
        return 1 if self.failed or self.failed_analysis else rc

    def kill(self):
        for pgid in self.groups:
            try:
                os.killpg(pgid, signal.SIGKILL)
            except OSError:
                pass


def run(env, args):
    """The sweeps of this command (one, or one a learning rate), all their settings checked first; the exit status."""
    todo = launches(env, args)
    for e, a in todo:
        sweep = sweep_from_env(e, a)
        keep_settings(sweep.root, sweep.settings(a), write=False)  # refused before anything is made
    rc = 0
    for e, a in todo:
        task, one = slurm_task(e)
        if e.get('SLURM') == '1' and task is None:
            status = submit(e, a)
        else:
            status = Runner(sweep_from_env(e, a), a, e, task, one).main()
        if status == 130:
            return 130
        rc = 1 if 1 in (rc, status) else status or rc
    return rc


def main(argv):
    command, args, env = argv[0] if argv else '', argv[1:], os.environ
    try:
        if command == 'check':
            notes = {check(e, a) for e, a in launches(env, args)} - {None}
            for note in notes:
                print(f'ablate.sh: {note}', file=sys.stderr)
        elif command == 'run':
            return run(env, args)
        else:
            print(__doc__.split('\n\n')[1], file=sys.stderr)
            return 2
    except Refused as e:
        print(f'ablate.sh: {e}', file=sys.stderr)
        return 2
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
