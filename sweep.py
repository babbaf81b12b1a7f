"""
ablate.sh's sweep: variants x depths x seeds, one run folder each, then report.py (the settings: ablate.sh's header;
the profiles and folder names: profiles.py; the details: docs/details.md). No torch here outside `check`, `worker`
and the progress line's config parse: a Slurm login node that submits a sweep may have none.

  python sweep.py check [--key=value ...]   # the settings and every config with them, as train.py checks them
  python sweep.py run [--key=value ...]     # the sweep (ablate.sh execs this), or SLURM=1's array job
  python sweep.py worker RUNS               # WORKER=1: the runs of RUNS (a line each) in this process
"""
import fcntl
import gc
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from contextlib import redirect_stdout, suppress

from output import duration, lock_at, write_text
from profiles import DEFAULT_VARIANTS, LEAKS, PROFILES, changed_by, key_value, sweep_name
from provenance import FREE_ON_RESUME
from variants import LABELS

HERE = os.path.dirname(os.path.abspath(__file__))

# ----------------------------------------------------------------------------- a sweep
class Refused(ValueError):
    """A setting refused before anything starts: the message says why and what to write."""

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
    """The variants or depths (pattern's group) of the files in configs/, sorted, in one string."""
    return ' '.join(sorted({m[1] for f in os.listdir(os.path.join(HERE, 'configs')) if (m := re.match(pattern, f))}))

class Sweep:
    """The sweep of ablate.sh's environment variables (env) and extra arguments (args), checked before anything is
    made; root, its folder RUNS_DIR/name; own, the extra --key=value that gave it a folder of its own."""

    def __init__(self, env, args):
        for a in args:  # what ablate.sh passes on to train.py: --key=value alone (a stray --help used to be a setting)
            if not re.fullmatch(r'--[A-Za-z_]\w*=.*', a):
                raise Refused(f"'{a}' is not a --key=value for train.py, the only arguments ablate.sh takes (its "
                              f"settings are environment variables: ./ablate.sh --help)")
            if a.startswith(('--seed=', '--out_dir=', '--init_from=')):
                raise Refused(f"{a.split('=')[0]} is the sweep's to set (each run's seed comes from SEEDS, its folder "
                              f"and resume from the sweep): drop it from the extra arguments")
        self.env, self.args = env, list(args)
        self.nproc, self.jobs = whole_number(env, 'NPROC', 'processes a run'), whole_number(env, 'JOBS', 'runs at once')
        if choice(env, 'WORKER', 'auto', ('auto', '0', '1')) == '1' and self.nproc > 1:
            raise Refused(f"WORKER=1 runs each run inside a worker process, and NPROC={self.nproc} runs each on "
                          f"torchrun's processes: say one of them (WORKER=0, or NPROC=1)")
        self.analyze = choice(env, 'ANALYZE', '0', ('0', '1')) == '1'
        self.seeds = (env.get('SEEDS') or '1337').split()
        if not all(re.fullmatch('[0-9]+', s) for s in self.seeds):  # a comma list (1,2) would name one folder s1,2
            raise Refused(f'SEEDS="{env["SEEDS"]}" must be whole numbers separated by spaces, e.g. SEEDS="1 2 3"')
        arch = choice(env, 'ARCH', 'nanogpt', ('nanogpt', 'llama'))
        self.profile = name = choice(env, 'PROFILE', 'full', tuple(PROFILES))
        profile, leak = PROFILES[name], choice(env, 'LEAK', 'none', ('none',) + LEAKS)
        self.analyzer, self.analysis = profile.analyzer, profile.analysis
        causal = choice(env, 'CAUSAL', '1', ('1', '0')) == '1'
        sequential = choice(env, 'WINDOWS', 'random', ('random', 'sequential')) == 'sequential'
        self.schedule = profile.schedule.split()
        if leak != 'none':  # the causality check refuses a leak in a causal run
            self.schedule += ['--causal=False', f'--leak={leak}']
        elif not causal:
            self.schedule += ['--causal=False']
        if sequential and profile.records:
            raise Refused(f"WINDOWS=sequential walks a token stream; PROFILE={name} trains on fixed-length records")
        self.schedule += ['--window_order=sequential'] if sequential else []
        # the profile's own default, else (time_norm is a bug in Diff's subln) Diff's two for LEAK=time_norm
        default = profile.variants or ('diff diff_sym' if leak == 'time_norm' else DEFAULT_VARIANTS)
        prefix = 'llama_' if arch == 'llama' else profile.prefix
        self.variants = [prefix + v for v in (env.get('VARIANTS') or default).split()]
        self.depths = (env.get('DEPTHS') or profile.depths).split()
        self.check_names()
        # extra arguments that change what the runs compute make a sweep of their own (--max_iters=10: _max_iters10),
        # so that they never join the profile's own folder, whose sweep_settings would then refuse the plain launch
        self.own = {} if env.get('SWEEP') else changed_by(self.schedule, args)
        self.name = env.get('SWEEP') or sweep_name(name, leak, causal, sequential, self.own)
        self.root = f"{env.get('RUNS_DIR') or 'runs'}/{self.name}"

    def check_names(self):
        """A variant without a config at DEPTHS (a typo, or diff_gated at 3L) is refused where VARIANTS named it or
        where no run would be left, else left out."""
        depths = config_names(r'.*_([0-9]*[LM])\.py$')
        for d in self.depths:
            if d not in depths.split():
                raise Refused(f"DEPTHS has '{d}', but there is no configs/<variant>_{d}.py; the depths: {depths}")
        has = {v: config_names(rf'{re.escape(v)}_([0-9]*[LM])\.py$') for v in self.variants}
        absent = [v for v in self.variants if not set(self.depths) & set(has[v].split())]
        for v in absent if self.env.get('VARIANTS') or absent == self.variants else ():
            fix = (f"it has {has[v]}: say DEPTHS= one of those, leave it out of VARIANTS, or write the config "
                   "(docs/adding_a_variant.md)" if has[v] else "the variants: " + config_names(r'(.*)_[0-9]*[LM]\.py$'))
            raise Refused(f"VARIANTS has '{v}', but no configs/{v}_<depth>.py at DEPTHS={' '.join(self.depths)}, so "
                          f"nothing was started or made; {fix}")
        for v in self.variants:
            if v not in LABELS:  # report.py would have no label, column or comparison for its runs
                raise Refused(f"VARIANTS has '{v}', which has configs but no row in variants.py's VARIANTS table: add "
                              f"its row (docs/adding_a_variant.md)")

    def configs(self):
        """configs/<variant>_<depth>.py of every pair that has one (there is no diff_gated_3L, say), depth by depth."""
        return [f'configs/{v}_{d}.py' for d in self.depths for v in self.variants
                if os.path.isfile(os.path.join(HERE, 'configs', f'{v}_{d}.py'))]

    def runs(self):
        """(config, run folder, seed) of each run, seed by seed: a sweep stopped half-way leaves whole tables."""
        return [(cfg, f"{self.root}/{os.path.basename(cfg)[:-3]}_s{seed}", seed)
                for seed in self.seeds for cfg in self.configs()]

    def settings(self):
        """What its runs share, sorted, the last of a key winning (as in train.py), less FREE_ON_RESUME's keys."""
        kept = {key_value(a)[0]: a for a in self.schedule + self.args}
        return sorted(a for key, a in kept.items() if key not in FREE_ON_RESUME)

    def keep_settings(self, write=True):
        """root/sweep_settings, written where there is none (write), else compared: report.py averages a cell's runs
        as seeds of one setting, and a re-launch would skip a finished run made with other settings. Of two launches
        at once the first to lock keeps its settings, and the second is compared with them."""
        path, mine = os.path.join(self.root, 'sweep_settings'), self.settings()
        if write:
            os.makedirs(self.root, exist_ok=True)
            with lock_at(path + '.lock') as lock:
                if not os.path.exists(path):
                    write_text(path, '\n'.join(mine) + '\n')
                os.unlink(lock.name)  # as rundir.py's: a launch waiting on this file locks a new one
        kept = [a for a in open(path).read().split('\n') if a] if os.path.exists(path) else mine
        if kept != mine:
            raise Refused('\n'.join([f"{self.root} holds runs made with other settings than this command's:"]
                                    + [f'  the sweep:    {a}' for a in kept if a not in mine]
                                    + [f'  this command: {a}' for a in mine if a not in kept]
                                    + [f"  To start afresh: name a new sweep (SWEEP=<name>), or remove {self.root}. To "
                                       f"continue it: re-launch with the sweep's settings."]))

    def announce(self):
        """The first line: the folder, why it is that one where the extra arguments chose it, the pairs left out."""
        own, configs = ' '.join(f'--{k}={v}' for k, v in self.own.items()), self.configs()
        left = [f'{v}_{d}' for d in self.depths for v in self.variants if f'configs/{v}_{d}.py' not in configs]
        why = f" (a sweep of its own for {own}; SWEEP=<name> names it otherwise)" if own else ''
        return f"sweep {self.root}{why}" + (f"; no config, so left out: {' '.join(left)}" if left else '')

# ----------------------------------------------------------------------------- the commands
def launches(env, args):
    """One sweep, or with LRS one a rate, as SWEEP=<the sweep>_lr<rate> with --learning_rate=<rate> would be."""
    rates = (env.get('LRS') or '').split()
    for r in rates:
        if not re.fullmatch(r'[0-9.]+(e-?[0-9]+)?', r):
            raise Refused(f"LRS has '{r}', which is not a learning rate: write numbers, e.g. LRS=\"1e-3 3e-3\"")
    if rates and any(key_value(a)[0] == 'learning_rate' for a in args):
        raise Refused("LRS gives each sweep its --learning_rate: drop --learning_rate= from the extra arguments")
    base = Sweep(env, args)
    return [Sweep(dict(env, SWEEP=f'{base.name}_lr{r}'), [*args, f'--learning_rate={r}']) for r in rates] or [base]

def check(sweep):
    """Every config with the schedule and the extra arguments, as train.py checks them, before anything is kept: a
    typo (--dropuot=0.1) stops here, not in each run after sweep_settings has it. A note where none could be."""
    try:
        import torch
        from config import parse_config
    except ImportError as e:  # e.g. a Slurm login node without the environment: the runs check them
        return f"the arguments are not checked here ({e}); each run checks them"
    if not sweep.env.get('PROFILE') and not torch.cuda.is_available():
        raise Refused("torch sees no GPU here, and the default PROFILE=full is the seed's 5000-step schedule, hours "
                      "a run on a CPU. Pick PROFILE=demo (minutes), PROFILE=cpu_long or PROFILE=cpu, or say "
                      "PROFILE=full to run it anyway")
    for cfg in sweep.configs():
        try:
            parse_config([cfg, *sweep.schedule, *sweep.args])
        except (ValueError, OSError) as e:
            raise Refused(f"{cfg} with the extra arguments and the profile's schedule: {e}") from None

def slurm_task(env):
    """(task id, its run: line SLURM_ARRAY_TASK_ID of ABLATE_RUNS, "config folder seed"), or (None, None)."""
    task, listed = env.get('SLURM_ARRAY_TASK_ID'), env.get('ABLATE_RUNS')
    if not task or not listed:
        return None, None
    try:
        with open(listed) as f:
            cfg, rest = f.read().splitlines()[int(task)].split(' ', 1)
        return task, (cfg, *rest.rsplit(' ', 1))
    except (OSError, ValueError, IndexError):
        raise Refused(f"Slurm task {task} has no line in {listed}") from None

def sbatch(*options):
    """sbatch --parsable: the job's id, or None where sbatch refused (its message on stderr)."""
    p = subprocess.run(['sbatch', '--parsable', *options], stdout=subprocess.PIPE, text=True)
    return p.stdout.strip().split(';')[0] if p.returncode == 0 else None

def submit(sweep):
    """SLURM=1: the unfinished runs as a job array, a task each (ablate.sh again, on line k of a list of runs), and
    report.py's job after it (report.py now where every run has finished). The exit status."""
    env, python, here, root = sweep.env, sweep.env.get('PYTHON') or 'python', os.getcwd(), sweep.root
    if not shutil.which('sbatch'):
        raise Refused("SLURM=1, but there is no sbatch here")
    runs = sweep.runs()
    todo = [r for r in runs if not os.path.exists(os.path.join(r[1], 'summary.json'))]
    if not todo:
        print(f"ablate.sh: every run of {root} has finished", flush=True)
        os.execvp(python, [python, 'report.py', root])
    sweep.keep_settings()  # each task compares its settings with these
    listed, n = f"{root}/.slurm_runs.{time.strftime('%Y%m%d-%H%M%S')}.{os.getpid()}", len(todo)
    with open(listed, 'w') as f:
        f.writelines(' '.join(r) + '\n' for r in todo)
    job = sbatch(f"--array=0-{n - 1}" + (f"%{env['SLURM_MAX']}" if env.get('SLURM_MAX') else ''),
                 f'--job-name=ablate_{sweep.name}', f'--chdir={here}', f'--output={root}/slurm-%A_%a.out',
                 f'--export=ALL,ABLATE_RUNS={listed},ABLATE_DIR={here},PROFILE={sweep.profile}',
                 *(env.get('SBATCH_ARGS') or '').split(), 'ablate.sh', *sweep.args)
    report = job and sbatch(f'--dependency=afterany:{job}', f'--job-name=report_{sweep.name}', f'--chdir={here}',
                            f'--output={root}/slurm-report-%j.out',
                            *(env.get('SBATCH_REPORT_ARGS') or env.get('SBATCH_ARGS') or '').split(),
                            f'--wrap={shlex.quote(python)} report.py {shlex.quote(root)}')
    if job is None:
        os.remove(listed)
    if not report:
        return 1
    print(f"ablate.sh: submitted {n} run(s) of {len(runs)} as Slurm array job {job} (tasks 0-{n - 1}, {listed}), and "
          f"report.py as job {report} after it. Logs: {root}/slurm-{job}_<task>.out; the same command again "
          f"resubmits whatever has not finished (stopped runs resume from their checkpoint).")
    return 0

STOP = []  # the worker's signals between two runs (outside train.py's own handler): no other run starts

def work(path):
    """`sweep.py worker RUNS`: RUNS' runs (a line each, train.py's arguments) one after another through train.py's
    cli(), each's output (the file descriptors) in its train.log, said as `worker: run DIR` and `worker: end DIR STATUS
    SECONDS`. The imports and the CUDA context are paid once (an H200's run process spent 10-11 s before its clock,
    results/gpu_check/2026-11-27_h200_6cb9fa0); train.py seeds and builds each run anew, and torch.compile's caches
    are reset (tests/test_worker.py). A stop saves the run in progress, and no other starts."""
    with open(path) as f:
        runs = [shlex.split(line) for line in f if line.strip() and not line.lstrip().startswith('#')]
    dirs = [([a[10:] for a in argv if a.startswith('--out_dir=')] or [None])[-1] for argv in runs]
    if None in dirs:
        raise Refused(f"{path}: the run `{shlex.join(runs[dirs.index(None)])}` has no --out_dir=: each run needs one")
    import torch
    import train
    status = 0
    for argv, d in zip(runs, dirs):
        if STOP:
            return 130
        print(f"worker: run {d}", flush=True)
        os.makedirs(d, exist_ok=True)
        t0, saved = time.monotonic(), {fd: os.dup(fd) for fd in (1, 2)}
        with open(f'{d}/train.log', 'ab') as log:
            for fd in saved:
                os.dup2(log.fileno(), fd)
        try:
            rc = train.cli(argv)
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            for fd, old in saved.items():
                os.dup2(old, fd)
                os.close(old)
        torch._dynamo.reset()  # a compiled model of this run is no guard for the next one's (a new module)
        gc.collect()  # the run's model, optimizer and graphs, where a reference cycle holds them
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
        print(f"worker: end {d} {rc} {time.monotonic() - t0:.1f}", flush=True)
        if rc == 130:
            return 130
        status = 1 if rc not in (0, 75) else status
    return status

# ----------------------------------------------------------------------------- progress
class Progress:
    """The progress line: each run's state in this launch (the Runner's: skipped, running, done, failed, stopped or
    busy; none yet: left), and a running run's pace, an iteration's time between its first and last record of this
    launch in its log.jsonl."""

    def __init__(self, sweep, start):
        self.sweep, self.start, self.totals, self.first = sweep, start, {}, {}

    def total(self, cfg):
        """A run's last iteration: the last --max_iters given, else the config's (torch's import, once), else None."""
        if cfg not in self.totals:
            args, self.totals[cfg] = self.sweep.schedule + self.sweep.args, None
            with suppress(Exception), redirect_stdout(None):  # a config's notes (base_shakespeare_char.py's "no CUDA")
                given = [a.split('=', 1)[1] for a in args if a.startswith('--max_iters=')]
                if not given:
                    from config import parse_config
                    given = [parse_config([cfg, *args])['max_iters']]
                self.totals[cfg] = int(float(given[-1]))
        return self.totals[cfg]

    def run(self, cfg, d, now):
        """(words, seconds an iteration, seconds left) from the last whole record of its log.jsonl's tail."""
        name, total, lines, t = os.path.basename(d), self.total(cfg), [], 0
        if os.path.exists(f'{d}/log.jsonl'):
            with open(f'{d}/log.jsonl', 'rb') as f:
                f.seek(max(0, os.fstat(f.fileno()).st_size - 65536))
                lines, t = f.read().split(b'\n')[:-1], os.fstat(f.fileno()).st_mtime  # [:-1]: a line being written
        rec = next((json.loads(x) for x in reversed(lines) if x.startswith(b'{') and x.endswith(b'}')), None)
        if rec is None or t < self.start or 'iter' not in rec:  # a resumed run's log of an earlier launch
            return f'{name} starting', None, None
        t0, it0 = self.first.setdefault(d, (t, rec['iter']))
        pace = (t - t0) / (rec['iter'] - it0) if rec['iter'] > it0 else (rec.get('ms_per_iter') or 0) / 1000 or None
        left = max(0.0, (total - rec['iter']) * pace - (now - t)) if pace and total else None
        eta = f' ETA {duration(left)}' if left is not None else ''
        return f"{name} {rec['iter']}" + (f'/{total}{eta}' if total else ''), pace, left

    def line(self, now, state):
        """The line, or None while no run of this launch is running (state: a run folder's, as above)."""
        runs = [(cfg, d, state.get(d, 'left')) for cfg, d, _ in self.sweep.runs()]
        n = Counter(s for _, _, s in runs)
        running = [self.run(cfg, d, now) for cfg, d, s in runs if s == 'running']
        if not running:
            return None
        counts = (f"{n['skipped'] + n['done']} finished, {len(running)} running, {n['left']} left"
                  + ''.join(f", {n[s]} {s}" for s in ('failed', 'busy') if n[s]))
        # the runs left at the mean pace so far, spread over the JOBS slots with the time the running ones need
        paces = [p for _, p, _ in running if p]
        todo = [left for _, _, left in running] + [self.total(c) * sum(paces) / len(paces) if paces and self.total(c)
                                                   else None for c, _, s in runs if s == 'left']
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
    except OSError as e:
        return not isinstance(e, FileNotFoundError)
    return False

def analyzed(analysis, d):
    """Whether d/analysis exists and is of the run's last checkpoint (the iteration of summary.json), not best.pt's."""
    try:
        with open(os.path.join(d, analysis)) as f, open(os.path.join(d, 'summary.json')) as g:
            done, last = json.load(f), json.load(g)['iter']
    except (OSError, ValueError, KeyError):
        return False
    return done.get('iter', last) == last

def mark_failed(d, rc=None):
    """d/FAILED with exit status rc, or (rc None) an earlier attempt's removed; True."""
    path = os.path.join(d, 'FAILED')
    if rc is not None:
        write_text(path, f'{rc}\n')
    elif os.path.exists(path):
        os.remove(path)
    return True

def read(path):
    try:
        with open(path, errors='replace') as f:
            return f.read()
    except OSError:  # a worker killed before it made the run's train.log
        return ''

def tail(path, n):
    return ''.join(f'\n         {t}' for t in read(path).splitlines()[-n:])

class Runner:
    """A sweep's runs in JOBS lanes, each on its own GPUs, each process under setsid (apart from the terminal's
    group): a Ctrl-C or SIGTERM gives each one TERM (train.py saves and exits 130), STOP_GRACE seconds later a KILL.
    state: what this launch did with each run folder (skipped, running, done, failed, stopped or busy)."""

    def __init__(self, sweep, task=None, run=None):
        self.sweep, self.env, self.task = sweep, sweep.env, task
        self.runs, self.jobs = ([run], 1) if task else (sweep.runs(), sweep.jobs)
        self.python, self.tty, self.lock = self.env.get('PYTHON') or 'python', sys.stdout.isatty(), threading.RLock()
        self.procs, self.groups, self.state = set(), [], {}  # processes running now, every group, each run's state
        self.stopping = self.refused = False
        self.failed_analysis = self.analyzed = 0
        gpus = gpu_list(self.env)
        if gpus and sweep.nproc > len(gpus):
            raise Refused(f"NPROC={sweep.nproc} processes a run, but only {len(gpus)} GPU(s): {' '.join(gpus)}")
        self.gpus = lane_gpus(gpus, self.jobs, sweep.nproc)
        device = ([''] + [a.split('=', 1)[1] for a in sweep.schedule + sweep.args if a.startswith('--device=')])[-1]
        worker = choice(self.env, 'WORKER', 'auto', ('auto', '0', '1'))
        self.worker = worker == '1' or (worker == 'auto' and bool(gpus) and sweep.nproc == 1 and not task
                                        and not device.startswith(('cpu', 'mps')))

    def say(self, text, out=sys.stdout):
        with self.lock:
            out.write(('\r\033[K' if self.tty else '') + text + '\n')
            out.flush()

    def call(self, k, cmd, log, mode='ab', each_line=None):
        """cmd on lane k's GPUs, its output to log (or each_line): its exit status, None where the sweep stopped."""
        env = dict(os.environ, **({'CUDA_VISIBLE_DEVICES': self.gpus[k]} if self.gpus else {}))
        with self.lock, open(log, mode) as f:
            if self.stopping:
                return None
            p = subprocess.Popen(cmd, stdout=subprocess.PIPE if each_line else f, stderr=subprocess.STDOUT, text=True,
                                 stdin=subprocess.DEVNULL, env=env, start_new_session=True)
            self.procs.add(p)
            self.groups.append(p.pid)
        for line in p.stdout if each_line else ():
            each_line(line.rstrip('\n'))
        rc = p.wait()
        with self.lock:
            self.procs.discard(p)
        return rc

    def before(self, d):
        """Whether d starts now (not where another process trains it); settings kept at the first, not before."""
        with self.lock:
            if self.stopping or locked(d) and self.end(d, 75):
                return False
            try:  # kept at each start: a launch at once with other settings may have kept its own since
                self.sweep.keep_settings()
            except Refused as e:
                self.refused = self.stopping = True
                return self.say(f"ablate.sh: {e}", sys.stderr)
            os.makedirs(d, exist_ok=True)
            return mark_failed(d)

    def argv(self, cfg, d, seed):
        """Its train.py arguments, and the resume where d has a checkpoint (strict: the sweep's settings only)."""
        resume = ['--init_from=resume', '--resume_strict=True'] if os.path.exists(os.path.join(d, 'ckpt.pt')) else []
        return [cfg, *self.sweep.schedule, f'--seed={seed}', f'--out_dir={d}', *resume, *self.sweep.args], resume

    def started(self, d, resume):
        self.state[d] = 'running'
        self.say(f"run    {d} {' '.join(resume)}")

    def end(self, d, rc, seconds=0):
        """Its state and line: stopped (130, or any exit during a stop: torchrun's 1), busy (75), FAILED or done."""
        log = os.path.join(d, 'train.log')
        with self.lock:
            if rc != 0 and (rc == 130 or self.stopping):
                self.state[d], at = 'stopped', re.findall(r'stopped at iteration [0-9]+', read(log)) or ['']
                self.say(f"stopped {d}: {at[-1]}")
            elif rc == 75:
                self.state[d] = 'busy'
                self.say(f"busy   {d}: another process is training it; left to it")
            elif rc != 0:
                self.state[d] = mark_failed(d, rc) and 'failed'
                self.say(f"FAILED {d} (exit {rc}): tail of {log}:{tail(log, 5)}")
            else:
                self.state[d] = 'done'
                self.say(f"done   {d} in {seconds:.0f}s")
        return True

    def analyze(self, k, d):
        """ANALYZE=1: the analyzer on a finished run's ckpt.pt, where its analysis is not of that checkpoint."""
        if self.stopping or analyzed(self.sweep.analysis, d) or not os.path.exists(os.path.join(d, 'summary.json')):
            return
        if not os.path.exists(os.path.join(d, 'ckpt.pt')):  # e.g. a committed run copied back without it
            return self.say(f"         {d}: no ckpt.pt, so no analysis")
        log, what = os.path.join(d, 'analyze.log'), self.sweep.analyzer
        rc = mark_failed(d) and self.call(k, [self.python, what, f'--out_dir={d}'], log, 'wb')
        with self.lock:
            if rc and self.stopping:
                self.say(f"stopped {d}: {what}; a re-launch with ANALYZE=1 runs it again")
            elif rc:
                self.failed_analysis += mark_failed(d, rc)
                self.say(f"FAILED {d}: {what} (exit {rc}): tail of {log}:{tail(log, 3)}")
            elif rc == 0:
                self.analyzed += self.state.get(d) == 'skipped'  # a run skipped now
                self.say(f"analyzed {d}")

    def lane(self, k, todo):
        """WORKER=0: the next run of the shared list, a process each, and its analysis, until none is left."""
        n = self.sweep.nproc
        launch = ['-m', 'torch.distributed.run', '--standalone', f'--nproc_per_node={n}'] if n > 1 else []
        while True:
            with self.lock:
                if self.stopping or not todo:
                    return
                cfg, d, seed = todo.pop(0)
            if cfg and self.before(d):
                (argv, resume), t0 = self.argv(cfg, d, seed), time.time()
                self.started(d, resume)
                rc = self.call(k, [self.python, *launch, 'train.py', *argv], os.path.join(d, 'train.log'))
                if rc is not None:
                    self.end(d, rc, time.time() - t0)
            if self.sweep.analyze:
                self.analyze(k, d)

    def worker_lane(self, k, share):
        """WORKER=1: lane k's runs (dealt in turn) in one `sweep.py worker`, its lines said as ours; the analyses."""
        runs = [(cfg, d, seed) for cfg, d, seed in share if cfg and self.before(d)]
        listed = os.path.join(self.sweep.root, f'.worker.{os.getpid()}.{k}')

        def said(line):
            what, _, d = line[8:].partition(' ') if line.startswith('worker: ') else ('', '', '')
            if what == 'run':
                self.started(d, self.argv('', d, 0)[1])
            elif what == 'end':
                d, rc, seconds = d.rsplit(' ', 2)
                self.end(d, int(rc), float(seconds))
            else:
                self.say(f"         {line}")  # the worker's own words (an error before or between runs)
        if runs:
            with open(listed, 'w') as f:
                f.writelines(shlex.join(self.argv(*r)[0]) + '\n' for r in runs)
            rc = self.call(k, [self.python, 'sweep.py', 'worker', listed], os.devnull, each_line=said)
            os.remove(listed)
            for d in [d for _, d, _ in runs if self.state.get(d) in (None, 'running')] if not self.stopping else ():
                with self.lock:  # its worker crashed, or was killed
                    self.state[d] = mark_failed(d, rc) and 'failed'
                    self.say(f"FAILED {d}: its worker ended (exit {rc}) before this run did; see {d}/train.log")
        for _, d, _ in share if self.sweep.analyze else ():
            self.analyze(k, d)

    def on_stop(self, signum, frame):
        with self.lock:
            if not self.stopping and self.procs:
                self.say(f"ablate.sh: stopping: {len(self.procs)} run(s) in progress save a checkpoint at the end of "
                         f"their step")
            self.stopping = True
            for p in self.procs:
                p.send_signal(signal.SIGTERM)

    def kill(self):
        for pgid in self.groups:
            with suppress(OSError):  # the group has ended
                os.killpg(pgid, signal.SIGKILL)

    def wait_for(self, lanes):
        """Until the lanes end: the progress line (a terminal's redrawn each second, cleared by say(); elsewhere every
        PROGRESS_EVERY seconds), and STOP_GRACE seconds after a stop a KILL to what still runs."""
        every, grace, deadline = float(self.env.get('PROGRESS_EVERY') or 30), float(self.env.get('STOP_GRACE') or 20), 0
        progress, due = Progress(self.sweep, self.start), time.time() + (1 if self.tty else every)
        while any(t.is_alive() for t in lanes):
            time.sleep(0.1)
            if every and not self.task and time.time() >= due:
                due = time.time() + (1 if self.tty else every)
                try:  # a folder half-written (a run starting) waits for the next look
                    text = progress.line(time.time(), self.state)
                except (OSError, ValueError, KeyError, TypeError):
                    text = None
                with self.lock:
                    if self.tty and not self.stopping:
                        sys.stdout.write('\r' + (text or '')[:shutil.get_terminal_size().columns - 1] + '\033[K')
                    elif text and not self.stopping:
                        sys.stdout.write(f'progress: {text}\n')
                    sys.stdout.flush()
            deadline = deadline or (self.stopping and time.time() + grace)
            if deadline and time.time() > deadline and self.procs:
                self.say(f"ablate.sh: {len(self.procs)} run(s) still running {grace:.0f}s after the stop: killed "
                         f"(SIGKILL; STOP_GRACE=<seconds> waits longer); a re-launch resumes each from its checkpoint")
                deadline = float('inf')
                self.kill()
        if self.tty:
            sys.stdout.write('\r\033[K')  # the progress line cleared

    def main(self):
        """The runs, the sweep's last line and report.py (not in a Slurm task: the report job's); the exit status."""
        self.start, sweep = time.time(), self.sweep
        print(f"ablate.sh: {sweep.announce()}", flush=True)
        if self.gpus:
            print(f"GPUs {' '.join(gpu_list(self.env))}: {self.jobs} lane(s) of {sweep.nproc} process(es) each")
        if self.worker:
            print(f"ablate.sh: the runs go to {self.jobs} worker process(es) (sweep.py worker), each running its share "
                  f"back to back (WORKER=0: a process a run)", flush=True)
        if self.jobs > 1 and not os.environ.get('TORCHINDUCTOR_COMPILE_THREADS'):  # torch.compile's workers share
            os.environ['TORCHINDUCTOR_COMPILE_THREADS'] = str(max(1, (os.cpu_count() or 1) // self.jobs))  # the cores
        for _, d, _ in self.runs:
            if os.path.exists(os.path.join(d, 'summary.json')):
                self.state[d] = 'skipped'
                self.say(f"skip   {d} (finished)")
        todo = [(None if d in self.state else cfg, d, seed) for cfg, d, seed in self.runs]  # None: an analysis only
        shared = list(todo)
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, self.on_stop)
        lanes = [threading.Thread(target=self.worker_lane, args=(k, todo[k::self.jobs])) if self.worker else
                 threading.Thread(target=self.lane, args=(k, shared)) for k in range(self.jobs)]
        for t in lanes:
            t.start()
        self.wait_for(lanes)
        if self.refused:
            return 2
        if self.stopping:
            self.kill()  # what a run left behind it, in its process group
            left = sum(d not in self.state for _, d, _ in self.runs)
            self.say(f"ablate.sh: interrupted ({left} run(s) not started); re-launch the same command to continue")
            return 130
        n, analyzed = Counter(self.state.values()), f" ({self.analyzed} of them analyzed now)" if sweep.analyze else ''
        self.say(f"sweep {sweep.root}: {n['done']} run, {n['skipped']} skipped{analyzed}, {n['failed']} failed, "
                 f"{n['busy']} busy elsewhere, {time.time() - self.start:.0f}s")
        rc = 0 if self.task else subprocess.call([self.python, 'report.py', sweep.root])
        if n['failed']:
            self.say(f"ablate.sh: {n['failed']} run(s) failed (see FAILED above and their train.log); re-launch to "
                     f"retry them", sys.stderr)
        if self.failed_analysis:
            self.say(f"ablate.sh: {sweep.analyzer} failed on {self.failed_analysis} finished run(s) (see analyze.log); "
                     f"re-launch with ANALYZE=1", sys.stderr)
        return 1 if n['failed'] or self.failed_analysis else rc

def run(env, args):
    """The command's sweeps, all their settings checked first; the exit status."""
    sweeps, rc = launches(env, args), 0
    for sweep in sweeps:
        sweep.keep_settings(write=False)  # refused before anything is made
    for sweep in sweeps:
        task, one = slurm_task(sweep.env)
        status = submit(sweep) if sweep.env.get('SLURM') == '1' and task is None else Runner(sweep, task, one).main()
        if status == 130:
            return 130
        rc = 1 if 1 in (rc, status) else status or rc
    return rc

def main(argv):
    command, args = argv[0] if argv else '', argv[1:]
    try:
        if command == 'check':
            for note in {check(sweep) for sweep in launches(os.environ, args)} - {None}:
                print(f'ablate.sh: {note}', file=sys.stderr)
        elif command == 'run':
            return run(os.environ, args)
        elif command == 'worker' and len(args) == 1:
            for sig in (signal.SIGINT, signal.SIGTERM):  # before torch's import (seconds)
                signal.signal(sig, lambda signum, frame: STOP.append(signum))
            return work(args[0])
        else:
            print(__doc__.split('\n\n')[1], file=sys.stderr)
            return 2
    except Refused as e:
        print(f'ablate.sh: {e}', file=sys.stderr)
        return 2
    return 0

if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
