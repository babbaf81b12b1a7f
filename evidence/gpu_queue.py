"""
The GPU queue: the runs that results/ waits on, as jobs sized to one call of a short GPU loan, in the order they move
a verdict. Whenever a GPU is lent, the first command on it is (after `bash evidence/loan.sh pack` on the checkout:
the commit, carried in .loan/)

    bash evidence/loan.sh run --budget 540 --out DIR   # a clean checkout of that commit: bench_gpu.py --next there

which runs every job below, in order, whose runs results/ does not yet hold, while the job's estimate fits the
budget left. Each run's small files are packed into DIR/runs.tar.gz the moment it finishes (one file: a loan brings
back at most 8 files from at most 2 folders down), so a job cut at the budget still brings back every finished run,
and DIR/queue.json lists what did not finish. Back on a checkout of the same commit:

    python evidence/gpu_queue.py collect DIR   # DIR/runs.tar.gz into results/ (never over a different run, never a
                                               # run without a commit, from a dirty tree, off CUDA, of another
                                               # corpus or of other sweep settings)
    python evidence/gpu_queue.py list          # the queue: each job, its estimate, how many of its runs it holds

A job is a list of ablate.sh launches started together (each its own sweep folder, SWEEP=<name>); a run counts as
held once results/<sweep>/<run>/summary.json is committed, so a collected job is skipped by the next call. A check
job instead runs steps of bench_gpu.py's check (its CUDA tests, an evaluation, the 124M step); it is held once a
committed results/gpu_check/*/results.json has each of its steps ok at a commit whose GPU code (CODE) is this tree's,
so it runs again after the model or the trainer changed. The runs
use CUDA graphs (--cuda_graph=True) without torch.compile: for these 3-layer and smaller models a graphed step is
1.96 ms against 7.17 compiled and 8.44 eager (H200, results/bench_gpu.md), and compile's 40-60 s a process is more
than a 500-step run's whole training. OrthoAdam's step is not captured (cuda_graph.py), so its variants run eagerly.
A run whose graphed attempt fails is retried once eagerly, and queue.json names it.
"""
import glob
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tarfile
import threading
import time
from dataclasses import dataclass

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the repository's root
sys.path.insert(0, HERE)  # sweep.py
RESULTS = os.path.join(HERE, 'results')

SEED5 = 'nanogpt diff sym diff_sym norm_sym'
GRAPHED = ('--device=cuda', '--cuda_graph=True', '--compile=False')
EAGER = ('--device=cuda', '--cuda_graph=False', '--compile=False')
# the small files a run brings back: what report.py, analyze.py and needle_eval.py leave (never checkpoints)
SMALL = ('summary.json', 'log.jsonl', 'analysis.json', 'needle_eval.json')
CHECK = ('results.json', 'results.md', 'log.txt')  # what a check job brings back, into results/gpu_check/<name>/
# the code a check job checks: a committed check at a commit where these equal the tree's holds for the tree
CODE = ('model.py', 'train.py', 'cuda_graph.py', 'dataset.py', 'processes.py', 'config.py', 'hardware.py',
        'rundir.py', 'checkpoint.py', 'orthoadam.py', 'output.py', 'tests/test_cuda.py', 'evidence/bench_gpu.py',
        'ablate.sh', 'sweep.py')


@dataclass(frozen=True)
class Launch:
    sweep: str   # the folder under results/ (ablate.sh's SWEEP)
    env: tuple   # ablate.sh's variables, as (name, value) pairs
    args: tuple  # train.py arguments after the profile's schedule


@dataclass(frozen=True)
class Job:
    name: str
    why: str           # the verdict it moves
    estimate_s: int    # wall seconds on one H100 or H200, from the basis in the comment above it
    launches: tuple
    steps: tuple = ()  # a check job: bench_gpu.py's steps, instead of launches


def leak_cells():
    """The 500-step schedule (PROFILE=cpu_long) at the seed's dropout 0.2, causal, non-causal and under each masking
    bug, three seeds, every run on one GPU in one number format (bf16) under Diff's one dropout rule (8b66842)."""
    common = (('PROFILE', 'cpu_long'), ('SEEDS', '1 2 3'), ('DEPTHS', '3L'), ('JOBS', '3'))
    cells = [('shakespeare_cpu_long_dropout0.2_gpu', (), SEED5),
             ('shakespeare_cpu_long_noncausal_dropout0.2_gpu', (('CAUSAL', '0'),), SEED5)]
    cells += [(f'shakespeare_cpu_long_leak_{leak}_dropout0.2_gpu', (('LEAK', leak),),
               'diff diff_sym' if leak == 'time_norm' else SEED5)  # time_norm is a bug in Diff's subln alone
              for leak in ('zero_future', 'off_by_one', 'after_norm', 'time_norm')]
    return tuple(Launch(sweep, common + extra + (('VARIANTS', v),), ('--dropout=0.2',) + GRAPHED)
                 for sweep, extra, v in cells)


def sink_seeds():
    """Bigram-Backcopy (PROFILE=sink, 2 layers, 1000 steps), ten seeds of the six sink variants with their
    diagnostics (ANALYZE=1), all on one GPU: rows 5-6's per-seed statements rest on five CPU seeds."""
    common = (('PROFILE', 'sink'), ('SEEDS', ' '.join(str(s) for s in range(1, 11))), ('ANALYZE', '1'))
    return (Launch('bigram_backcopy_sink_gpu', common + (('VARIANTS', 'nanogpt softmax1 gated gated_headwise'),
                                                         ('JOBS', '6')), GRAPHED),
            Launch('bigram_backcopy_sink_gpu', common + (('VARIANTS', 'orthoadam softmax1_orthoadam'), ('JOBS', '4')),
                   EAGER))


def seed3(depth):
    """A third seed of the seed notes' table at their schedule (PROFILE=full: 5000 steps, dropout 0.2), one depth.
    Its sweep folder is the one the H100 runs of c68a3df are in (results/shakespeare_full, seeds 1-2)."""
    return (Launch('shakespeare_full', (('PROFILE', 'full'), ('SEEDS', '3'), ('DEPTHS', depth), ('VARIANTS', SEED5),
                                        ('JOBS', '5')), GRAPHED),)


def zero_future_full():
    """The seed's schedule under zero_future (future scores 0 instead of -inf), the seed's five at 3 layers, three
    seeds: the masking bug that gives the seed's ordering, at the seed's own schedule (a CPU run of it: seed 1 only,
    results/shakespeare_full_leak_zero_future_cpu)."""
    env = (('PROFILE', 'full'), ('LEAK', 'zero_future'), ('SEEDS', '1 2 3'), ('DEPTHS', '3L'), ('VARIANTS', SEED5),
           ('JOBS', '8'))
    return (Launch('shakespeare_full_leak_zero_future', env, GRAPHED),)


def seed_pipeline(seed, variants):
    """The seed author's loop as far as it is published (PROFILE=seed_pipeline: 35,000 steps, constant lr 3e-4,
    dropout 0.1, plain Adam), some of the seed's five at 3 layers (all at once), one seed."""
    return (Launch('shakespeare_seed_pipeline', (('PROFILE', 'seed_pipeline'), ('SEEDS', str(seed)), ('DEPTHS', '3L'),
                                                 ('VARIANTS', variants), ('JOBS', str(len(variants.split())))),
                   GRAPHED),)


# seed_pipeline's parts, each one call: the seed's five in pairs and one alone
PIPELINE_PARTS = (('a', 'nanogpt diff'), ('b', 'sym diff_sym'), ('c', 'norm_sym'))


def seed2_8L():
    """The second seed of the seed's table at 8 layers (PROFILE=full), for the four that lack it: results/
    shakespeare_full holds nanogpt_8L_s2 (H100, c68a3df), so seed 2 then stands at every depth for all five."""
    return (Launch('shakespeare_full', (('PROFILE', 'full'), ('SEEDS', '2'), ('DEPTHS', '8L'),
                                        ('VARIANTS', 'diff sym diff_sym norm_sym'), ('JOBS', '4')), GRAPHED),)


def pycode_outliers():
    """Claim 5's outlier half where a baseline can have outliers: the five configs/pc_<variant>_12L.py (12 layers,
    d 256, a BOS, lr 2e-3, no weight decay, on data/pycode; only the attention or the optimizer differs) at once, one
    seed, each analysed (ANALYZE=1: first-token attention, kurtosis, max/median, int8/int4 and W8A8 penalties), each
    logging its outlier curves (outlier_interval). PROFILE=gpt2 is the profile whose runs take the configs' own
    schedule (3000 steps of 16,384 tokens). The GPU machine reaches no network: the call must carry
    data/pycode/downloads (the six pinned wheels, 21 MB), from which data/pycode/prepare.py rebuilds the token files
    and checks the corpus hash against the committed manifest.json."""
    common = (('PROFILE', 'gpt2'), ('SEEDS', '1'), ('DEPTHS', '12L'), ('ANALYZE', '1'))
    return (Launch('pycode_outliers_gpu', common + (('VARIANTS', 'pc_nanogpt pc_softmax1 pc_gated'), ('JOBS', '3')),
                   GRAPHED),
            Launch('pycode_outliers_gpu', common + (('VARIANTS', 'pc_orthoadam pc_softmax1_orthoadam'), ('JOBS', '2')),
                   EAGER))


# Estimates, wall seconds of the whole job. Measured on one H200 at 6cb9fa0 (results/gpu_check/2026-11-27_h200_6cb9fa0):
# the leak cells 261 s (81 runs of 500 steps, 18 at a time), the sink 193 s (60 runs of 1000 2-layer steps, 10 at a
# time, each analysed), seed 3 at 3L 143 s (5 runs of 5000 steps at once: 71-126 s each). The rest scaled from
# those: 6L moves about 1.9x the bytes of 3L and 8L 2.6x (results/bench_gpu.md), and seed_pipeline is 7x the
# steps of the full schedule with 6,000 eval batches to its 8,400 (15 evaluations of 400 batches against 21). An
# H100's memory is 0.7x as fast: the margins.
QUEUE = (
    # the current code's sanity, first, in about a minute: one capture-and-replay smoke a family of attention
    # (bench_gpu.SMOKE: softmax, diff, diffv2, cosine, and the masking bugs' naive path) on a tiny model, and the
    # grouped evaluation's equal loss on 20 batches a split of the seed's model. A failed sanity stops the queue (runs
    # on a broken path are worthless). Basis: env 5-8 s (H200, 2026-11-26/27); the smokes, about a second each in
    # one pytest process after its start and CUDA's, unmeasured; the evaluation's start, unmeasured. It may take
    # 1.25x its estimate (94 s), each step within its cap (bench_gpu.STEPS)
    Job('sanity', "the code every job runs: a capture and replay a family of attention, and the grouped evaluation's "
        "equal loss", 75, (), ('env', 'smoke', 'eval_smoke')),
    Job('leak_cells_dropout0.2', "rows 2-4 under the masking bugs at the seed's dropout, one rule and format, 3 seeds",
        300, leak_cells()),
    Job('sink_10_seeds', "rows 5-6's per-seed statements (does softmax-1 / the gate empty the sink in k of n seeds)",
        240, sink_seeds()),
    # Claim 5's outliers. Unmeasured on a GPU: the rate is derived. Five graphed 3-layer runs at once delivered 3.41M
    # tokens/s together (H200, results/shakespeare_full/*_3L_s3), 56.7 TFLOP/s at the 16.6 MFLOP a token of
    # model.flops_per_token; the pc_ 12-layer model costs 66.5 MFLOP a token (4.0x), so about 0.85M tokens/s for the
    # five, and 5 x 49.2M tokens take 290 s, with about 60 s for the start (the corpus rebuilt from the wheels,
    # imports, capture), the evaluations and the five analyses: 350 s. Measured here only on a CPU: the 12-layer step
    # at 1,258 tokens/s on one thread of a Xeon Emerald Rapids in bf16 (batch 8), whose 17% MFU says nothing of a GPU's
    Job('pycode_outliers_12L', "claim 5's outlier rows: the five pc_ 12-layer variants on Python code, 49M tokens "
        "each, analysed (W8A8)", 380, pycode_outliers()),
    Job('seed3_full_3L', "rows 1-4 at the seed's schedule: a third seed, 3 layers", 200, seed3('3L')),
    Job('seed3_full_6L', "rows 1-4 at the seed's schedule: a third seed, 6 layers", 300, seed3('6L')),
    Job('seed3_full_8L', "rows 1-4 at the seed's schedule: a third seed, 8 layers", 400, seed3('8L')),
    # four 8-layer runs at once: seed3_full_8L's five in 400 s, less one
    Job('seed2_full_8L', "rows 1-4 at the seed's schedule: a second seed at 8 layers for the four that lack it", 330,
        seed2_8L()),
    # the full capture suite, after the jobs the sanity gates: every model a sweep runs captured and replayed against
    # its eager steps (tests/test_cuda.py's graph tests) and the evaluation at the seed's 200 batches a split. Basis:
    # the graph tests took 118 s (H200, 09c4cb4) before the 44 capture tests (about a second each, unmeasured); it
    # may take 1.25x its estimate, 375 s: env, the graph tests' 300 s at most, and eval
    Job('capture_suite', "every model a sweep runs captured and replayed, and the full grouped evaluation", 300, (),
        ('env', 'graph_tests', 'eval')),
    Job('zero_future_full_3L', "rows 2-4 under zero_future at the seed's schedule, 3 layers, 3 seeds", 450,
        zero_future_full()),
    # the seed author's loop in parts of one call each: 35,000 graphed 3-layer steps a run. Basis: seed3_full_3L's
    # five runs at once took 143 s (H200), about 110 s of it the steps and evaluations (30 s the start), so 22 s a
    # run of 5000 steps and 8,400 eval batches, 61% of it steps (the floor's split): a 35,000-step run with 6,000
    # eval batches is 7 x 13.4 + 6 = 100 s of the GPU at that rate. Two at once 200 s, one 100 s; at an H100's 0.7x
    # and with the start, 316 and 173 s. Every part fits the ~490 s a call leaves
    *(Job(f'seed_pipeline_s{seed}{part}', f"the seed's losses as losses on trained-on text (the author's loop), seed "
          f"{seed}: {variants}", 330 if ' ' in variants else 190, seed_pipeline(seed, variants))
      for seed in (1, 2) for part, variants in PIPELINE_PARTS),
    # the seed's five runs one at a time against five at once, graphed, at the seed's evaluation density: which way
    # its 45-run table runs faster (five compiled 600-step runs at once, not one at a time, were measured before)
    Job('jobs_at_once', "the 45-run table's wall time: JOBS=1 against JOBS=5 for the seed's five 3-layer runs", 240,
        (), ('env', 'jobs')),
    # last: GPT-2 124M, nanogpt then the paper's Diff layout, each its own step (a Diff failure costs only itself):
    # tokens/s, MFU, memory. Basis: 30 steps of 124M compiled took 95-140 s a step with its compile (H200, 779ab8c)
    Job('gpt2_124M', "Diff at 124M: its step against nanogpt's (tokens/s, MFU, memory)", 330, (),
        ('env', 'gpt2_nanogpt', 'gpt2_diff')),
)


# ----------------------------------------------------------------------------- which runs a job holds

def runs_of(launch, runs_dir):
    """The run folders of one launch, as ablate.sh names them (sweep.py, which needs no torch)."""
    from sweep import sweep_from_env
    env = dict(launch.env, SWEEP=launch.sweep, RUNS_DIR=runs_dir)
    return [d for _, d, _ in sweep_from_env(env, list(launch.args)).runs()]


def missing(job, results=RESULTS):
    """The runs of job that results/ does not hold (no committed summary.json), as sweep/run names; for a check job,
    its steps where no committed check holds them for this code."""
    if job.steps:
        return [] if checked(job, results) else [f"gpu_check: {' '.join(job.steps)}"]  # a failed check: a person's
    out = []
    for launch in job.launches:
        for d in runs_of(launch, results):
            if not os.path.exists(os.path.join(d, 'summary.json')):
                out.append(os.path.relpath(d, results))
    return out


def checked(job, results=RESULTS):
    """'ok' where a committed results/gpu_check/*/results.json (a GPU's, not a dry run's, from a clean tree) has every
    step of job ok, run at a commit whose CODE is this tree's (git diff against the working tree; without git, never);
    'failed: <folder>' where one at such a commit ran every step to its end and one failed (run again, it would fail
    again and cost a loan the same time: a person looks first); else None, and the job is pending."""
    failed = None
    for path in sorted(glob.glob(os.path.join(results, 'gpu_check', '*', 'results.json'))):
        with open(path) as f:
            res = json.load(f)
        steps = res.get('steps', {})
        env = steps.get('env', {})
        if (not env.get('commit') or env.get('dirty') or env.get('status', 'ok') != 'ok' or env.get('device') != 'cuda'
                or res.get('mode', '').startswith('dry-run') or not same_code(env['commit'])):
            continue
        status = [steps.get(s, {}).get('status') for s in job.steps if s != 'env']
        if all(s == 'ok' for s in status):
            return 'ok'
        if all(s in ('ok', 'failed', 'error') for s in status):  # ran to the end: not cut by time
            failed = f"failed: {os.path.relpath(os.path.dirname(path), results)}"
    return failed


def same_code(commit):
    """Whether CODE at commit is the working tree's."""
    try:
        return subprocess.run(['git', 'diff', '--quiet', commit, '--', *CODE], cwd=HERE,
                              capture_output=True).returncode == 0
    except OSError:
        return False


def pending(results=RESULTS):
    """The jobs with a run that results/ lacks, in the queue's order."""
    return [job for job in QUEUE if missing(job, results)]


# ----------------------------------------------------------------------------- running a job

class Packer:
    """Each finished run's small files, packed the moment the run is finished (summary.json written, and its analysis
    where ANALYZE=1 asks for one): copied into a staging folder and the whole of it written again as one tarball,
    out/runs.tar.gz (atomically, so a cut leaves the last whole one). One file, because a GPU loan brings back at
    most 8 files from at most 2 folders down. A thread scans every `every` seconds, and once more at the end."""
    TAR = 'runs.tar.gz'

    def __init__(self, runs_dir, out, analyzed, stage, every=2.0):
        self.runs_dir, self.out, self.analyzed, self.stage, self.every = runs_dir, out, analyzed, stage, every
        self.packed, self._stop = [], threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self.scan(force=True)

    def _loop(self):
        while not self._stop.wait(self.every):
            self.scan()

    def scan(self, force=False):
        new = [run for run in self.finished() if run not in self.packed]
        for name in new:
            src, dst = os.path.join(self.runs_dir, name), os.path.join(self.stage, 'results', name)
            os.makedirs(dst, exist_ok=True)
            for f in SMALL:
                if os.path.exists(os.path.join(src, f)):
                    shutil.copyfile(os.path.join(src, f), os.path.join(dst, f))
            settings = os.path.join(os.path.dirname(src), 'sweep_settings')
            if os.path.exists(settings):
                shutil.copyfile(settings, os.path.join(os.path.dirname(dst), 'sweep_settings'))
        self.packed += new
        if new or force:
            self.write()

    def finished(self):
        """sweep/run of every run in runs_dir that is finished, with its analysis where one is asked for."""
        out = []
        for sweep in sorted(os.listdir(self.runs_dir)) if os.path.isdir(self.runs_dir) else []:
            for run in sorted(os.listdir(os.path.join(self.runs_dir, sweep))):
                src = os.path.join(self.runs_dir, sweep, run)
                analysis = self.analyzed.get(sweep)
                if os.path.exists(os.path.join(src, 'summary.json')) and (
                        not analysis or os.path.exists(os.path.join(src, analysis)) or
                        os.path.exists(os.path.join(src, 'FAILED'))):  # its analysis failed: the run still counts
                    out.append(f'{sweep}/{run}')
        return out

    def write(self):
        pack(self.stage, self.out)


def pack(stage, out):
    """Everything in stage as out/runs.tar.gz, written whole and then renamed over the last one."""
    os.makedirs(stage, exist_ok=True)
    tmp = os.path.join(out, f'.{Packer.TAR}.tmp')
    with tarfile.open(tmp, 'w:gz') as tf:
        for entry in sorted(os.listdir(stage)):
            tf.add(os.path.join(stage, entry), arcname=entry)
    os.replace(tmp, os.path.join(out, Packer.TAR))


def launch_all(launches, runs_dir, python, extra, log):
    """Start one ablate.sh a launch, all at once, each in its own process group; returns the processes."""
    procs = []
    for launch in launches:
        env = dict(os.environ, **dict(launch.env), SWEEP=launch.sweep, RUNS_DIR=runs_dir, PYTHON=python)
        env.setdefault('OMP_NUM_THREADS', '2')  # a GPU run's host work; 16 host cores shared by every run at once
        cmd = ['bash', 'ablate.sh', *launch.args, *extra]
        log.write(f"\n$ {' '.join(f'{k}={v!r}' for k, v in launch.env)} SWEEP={launch.sweep} {' '.join(cmd)}\n")
        log.flush()
        procs.append(subprocess.Popen(cmd, cwd=HERE, env=env, stdout=log, stderr=subprocess.STDOUT,
                                      start_new_session=True))
    return procs


# seconds a stopped launch has to save its runs and end (ablate.sh's STOP_GRACE, 20, and a margin) before it and
# everything it started are killed
GRACE = 25


def descendants(pids):
    """Every process under pids now (ps -A: Linux and macOS), pids left out."""
    table = subprocess.run(['ps', '-A', '-o', 'pid=', '-o', 'ppid='], capture_output=True, text=True).stdout.split()
    children = {}
    for child, ppid in zip(map(int, table[0::2]), map(int, table[1::2])):
        children.setdefault(ppid, []).append(child)
    out, todo = set(), list(pids)
    while todo:
        for c in children.get(todo.pop(), []):
            if c not in out:
                out.add(c)
                todo.append(c)
    return out - set(pids)


def kill_all(procs, more=()):
    """SIGKILL to each process's group and to the processes in more (a process that left its group, a step of a
    nested check in a session of its own): nothing of them is left."""
    for p in procs:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    for pid in more:
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def wait_all(procs, deadline, cut=lambda: False, grace=GRACE):
    """Wait for every process (each the leader of its own group); at the deadline, when cut() says so, or on a
    SIGTERM or SIGINT to this process, SIGTERM each one's group, whose runs save a checkpoint and stop, and `grace`
    seconds later SIGKILL whatever is left of them and of everything they started, so that no process outlives the
    call. True if they were stopped. A signal ends the call with SystemExit(128 + its number) once they are gone."""
    stopped, signalled, kill_at, tree = False, [], None, set()
    handlers = {}
    if threading.current_thread() is threading.main_thread():
        for s in (signal.SIGTERM, signal.SIGINT):
            handlers[s] = signal.signal(s, lambda n, _: signalled.append(n))
    try:
        while any(p.poll() is None for p in procs):
            if not stopped and (time.monotonic() > deadline or cut() or signalled):
                tree = descendants([p.pid for p in procs])  # while every parent lives
                for p in procs:
                    if p.poll() is None:
                        os.killpg(p.pid, signal.SIGTERM)
                stopped, kill_at = True, time.monotonic() + grace
            if kill_at and time.monotonic() > kill_at:
                kill_all(procs, tree | descendants([p.pid for p in procs]))
            time.sleep(0.2)
        kill_all(procs, tree)  # what a launch left behind when it ended (its group), or a run orphaned by the stop
    finally:
        for s, h in handlers.items():
            signal.signal(s, h)
    if signalled:
        raise SystemExit(128 + signalled[0])
    return stopped


def run_job(job, out, deadline, python=sys.executable, extra=(), scratch=None, cut_after=None, shrink=None,
            check_args=(), check_steps=None):
    """Run job's launches into scratch until they finish or the deadline; every finished run is packed into out as
    it finishes. A run that failed with CUDA graphs is retried eagerly once, if there is time. Returns the job's
    record for queue.json. shrink(launch) -> launch: the dry run's tiny version of a launch. cut_after: stop once
    that many runs came back (a rehearsal of a job cut by its budget). A check job: run_check (check_args: the dry
    run's --dry-run; check_steps: its steps instead of the job's)."""
    scratch = scratch or os.path.join(out, 'scratch')
    if job.steps:
        return run_check(job, out, deadline, python, scratch, check_args, check_steps or job.steps)
    runs_dir = os.path.join(scratch, job.name)
    launches = [shrink(lc) for lc in job.launches] if shrink else list(job.launches)
    analyzed = {lc.sweep: 'analysis.json' for lc in launches if ('ANALYZE', '1') in lc.env}
    expected = [os.path.relpath(d, runs_dir) for lc in launches for d in runs_of(lc, runs_dir)]
    record = dict(job=job.name, estimate_s=job.estimate_s, runs=len(expected), retried_eagerly=[])
    t0 = time.monotonic()
    stage = os.path.join(scratch, 'packed')  # every job of the call in one tarball, its ablate.sh output beside
    os.makedirs(os.path.join(stage, 'logs'), exist_ok=True)
    with open(os.path.join(stage, 'logs', f'{job.name}.log'), 'a') as log, \
            Packer(runs_dir, out, analyzed, stage) as packer:
        cut = (lambda: len(packer.packed) >= cut_after) if cut_after else (lambda: False)
        stopped = wait_all(launch_all(launches, runs_dir, python, extra, log), deadline, cut)
        failed = [lc for lc in launches if '--cuda_graph=True' in lc.args and not stopped and
                  any(not os.path.exists(os.path.join(d, 'summary.json')) for d in runs_of(lc, runs_dir))]
        if failed and time.monotonic() < deadline - 30:
            packer.scan()
            before = set(packer.packed)
            retry = [Launch(lc.sweep, lc.env, tuple(a for a in lc.args if a not in GRAPHED) + EAGER) for lc in failed]
            stopped = wait_all(launch_all(retry, runs_dir, python, extra, log), deadline, cut)
            packer.scan()
            record['retried_eagerly'] = sorted(set(packer.packed) - before)
    unfinished = [r for r in expected if r not in packer.packed]
    record.update(wall_s=round(time.monotonic() - t0, 1), finished=sorted(packer.packed), unfinished=unfinished,
                  status='done' if not unfinished else 'cut' if stopped else 'failed')
    return record


def run_check(job, out, deadline, python, scratch, check_args=(), steps=()):
    """A check job: `bench_gpu.py --steps ...` within its estimate and a quarter (each step is time-boxed too) or the
    time to the deadline, its results.json, results.md and log.txt packed into out/runs.tar.gz as
    results/gpu_check/<date>_<gpu>_<commit>_<job>/."""
    t0, steps_run = time.monotonic(), steps or job.steps
    check = os.path.join(scratch, f'check_{job.name}')
    stage = os.path.join(scratch, 'packed')
    os.makedirs(os.path.join(stage, 'logs'), exist_ok=True)
    budget = max(1, int(min(deadline - time.monotonic(), 1.25 * job.estimate_s)))
    with open(os.path.join(stage, 'logs', f'{job.name}.log'), 'a') as log:
        cmd = [python, 'evidence/bench_gpu.py', '--steps', *steps_run, '--budget', str(budget), '--out', check,
               '--scratch', os.path.join(check, 'scratch'), *check_args]
        p = subprocess.Popen(cmd, cwd=HERE, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        wait_all([p], time.monotonic() + budget + 30)  # its own budget, and then SIGTERM to it and its steps
    shutil.rmtree(os.path.join(check, 'scratch'), ignore_errors=True)
    record = dict(job=job.name, estimate_s=job.estimate_s, runs=1, retried_eagerly=[], finished=[], unfinished=[])
    try:
        with open(os.path.join(check, 'results.json')) as f:
            ran = json.load(f)['steps']
    except (OSError, ValueError, KeyError):
        ran = {}
    env = ran.get('env', {})
    gpu = re.search(r'[A-Z]\d{2,4}', env.get('gpu') or '')
    name = '_'.join([time.strftime('%Y-%m-%d_%H%M%S'), gpu[0].lower() if gpu else env.get('device', 'unknown'),
                     env.get('commit') or 'nocommit', job.name])  # two loans of a day at one commit: two folders
    if os.path.exists(os.path.join(check, 'results.json')):
        dst = os.path.join(stage, 'results', 'gpu_check', name)
        os.makedirs(dst, exist_ok=True)
        for f in CHECK:
            if os.path.exists(os.path.join(check, f)):
                shutil.copyfile(os.path.join(check, f), os.path.join(dst, f))
        record['finished'] = [f'gpu_check/{name}']
    else:
        record['unfinished'] = [f'gpu_check/{name}']
    pack(stage, out)  # also without results: its log says why
    ok = p.returncode == 0 and all(ran.get(s, {}).get('status') == 'ok' for s in steps_run)
    record.update(wall_s=round(time.monotonic() - t0, 1), status='done' if ok else 'failed',
                  steps={s: ran.get(s, {}).get('status', 'not run') for s in steps_run})
    return record


# ----------------------------------------------------------------------------- back on a checkout

def refusal(src, sweep, results, waive=()):
    """Why a run (or a check's folder) brought back must not join results/, or None: no commit recorded, a tree with
    uncommitted changes, a device other than CUDA, or a sweep whose settings differ from those of the folder it
    would join. waive: kinds of reason a rehearsal on a CPU lets pass ('commit', 'dirty', 'device')."""
    try:
        if sweep == 'gpu_check':
            with open(os.path.join(src, 'results.json')) as f:
                env = json.load(f).get('steps', {}).get('env', {})
            code, device = dict(commit=env.get('commit'), dirty=env.get('dirty')), env.get('device')
        else:
            with open(os.path.join(src, 'summary.json')) as f:
                summary = json.load(f)
            code, device = summary.get('code') or {}, summary.get('device')
    except (OSError, ValueError) as e:
        return f"its record is unreadable ({e})"
    commit = code.get('commit')
    reasons = dict(
        commit=None if commit else ("no commit recorded (the tree ran without its .git: start a loan with "
                                    "evidence/loan.sh, which carries it)"),
        dirty=None if not commit or code.get('dirty') is False else
        f"ran from a tree with uncommitted changes at {commit[:7]} (loan.sh refuses one)",
        device=None if str(device).startswith('cuda') else f"ran on {device}, not a CUDA device (a dry run or a CPU "
                                                           f"fallback)")
    if sweep != 'gpu_check':  # a pinned corpus (data/<dataset>/manifest.json): the run's tokens were those bytes
        reasons['corpus'] = corpus_refusal(summary)
    ours, theirs = (os.path.join(os.path.dirname(src), 'sweep_settings'),
                    os.path.join(results, sweep, 'sweep_settings'))
    if sweep != 'gpu_check' and os.path.exists(ours) and os.path.exists(theirs):
        a, b = (open(f).read().split('\n') for f in (ours, theirs))
        if sorted(filter(None, a)) != sorted(filter(None, b)):
            reasons['settings'] = (f"its sweep's settings differ from {theirs}'s (this run: "
                                   f"{' '.join(sorted(set(a) - set(b) - {''})) or 'none'}; the folder: "
                                   f"{' '.join(sorted(set(b) - set(a) - {''})) or 'none'}): collect it into a sweep of "
                                   f"its own (rename its folder under the download)")
    return '; '.join(r for k, r in reasons.items() if r and k not in waive) or None


def corpus_refusal(summary):
    """Why a run on a pinned corpus (data/pycode: a manifest with its corpus_sha256) cannot join results/, or None:
    the corpus the run recorded is not the manifest's, so the GPU's tokens were not the CPU runs' (another package
    version, a prepare of other code). A dataset without a manifest pins nothing here."""
    dataset = (summary.get('config') or {}).get('dataset')
    try:
        with open(os.path.join(HERE, 'data', str(dataset), 'manifest.json')) as f:
            pinned = json.load(f).get('corpus_sha256')
    except (OSError, ValueError):
        return None
    ran = summary.get('corpus_sha256')
    if pinned and ran != pinned:
        return (f"its corpus is {str(ran)[:12]}..., not data/{dataset}/manifest.json's {pinned[:12]}... (the device "
                f"prepared other text: rebuild it there from the pinned wheels, python data/{dataset}/prepare.py)")
    return None


def collect(out, results=RESULTS, report=True, waive=()):
    """The runs of out/runs.tar.gz (or of out/results/<sweep>/<run>/) into results/: a run results/ lacks is copied;
    one it holds with the same files is left; one it holds with other files is refused (a run is never overwritten);
    one that refusal() finds wrong (no commit, a dirty tree, not CUDA, another corpus, other sweep settings) is
    refused, named with its reason. Then report.py on each sweep. Returns (copied, same, refused: [(run, reason)])."""
    tar = os.path.join(out, Packer.TAR)
    if os.path.exists(tar):  # what a GPU call brought back: unpacked beside it, once
        unpacked = os.path.join(out, 'unpacked')
        if not os.path.isdir(unpacked):
            with tarfile.open(tar) as tf:
                tf.extractall(unpacked + '.tmp', filter='data')
            os.replace(unpacked + '.tmp', unpacked)
        out = unpacked
    src_root = os.path.join(out, 'results')
    sweeps = sorted(os.listdir(src_root)) if os.path.isdir(src_root) else []
    copied, same, refused = [], [], []
    for sweep in sweeps:
        for run in sorted(os.listdir(os.path.join(src_root, sweep))):
            src, dst = os.path.join(src_root, sweep, run), os.path.join(results, sweep, run)
            if not os.path.isdir(src):
                continue
            why = refusal(src, sweep, results, waive)
            if why:
                refused.append((f'{sweep}/{run}', why))
                continue
            files = sorted(f for f in os.listdir(src) if f in SMALL + CHECK)
            held = 'results.json' if sweep == 'gpu_check' else 'summary.json'
            if os.path.exists(os.path.join(dst, held)):
                if all(open(os.path.join(src, f), 'rb').read() == open(os.path.join(dst, f), 'rb').read()
                       for f in files if os.path.exists(os.path.join(dst, f))):
                    same.append(f'{sweep}/{run}')
                    continue
                raise SystemExit(f"collect: {dst} already holds a different run; a run is never overwritten. Move "
                                 f"one of them aside (or name the new sweep otherwise) and collect again.")
            os.makedirs(dst, exist_ok=True)
            for f in files:
                shutil.copyfile(os.path.join(src, f), os.path.join(dst, f))
            copied.append(f'{sweep}/{run}')
        settings = os.path.join(src_root, sweep, 'sweep_settings')
        if os.path.exists(settings) and os.path.isdir(os.path.join(results, sweep)) and \
                not os.path.exists(os.path.join(results, sweep, 'sweep_settings')):
            shutil.copyfile(settings, os.path.join(results, sweep, 'sweep_settings'))
    if report:
        for sweep in sorted({r.split('/')[0] for r in copied}):
            if sweep != 'gpu_check':  # a check's results.md is its own report
                subprocess.run([sys.executable, 'report.py', os.path.join(results, sweep)], cwd=HERE, check=True)
    return copied, same, refused


def main(argv):
    if argv[:1] == ['list']:
        for job in QUEUE:
            n = sum(len(runs_of(lc, RESULTS)) for lc in job.launches)
            held = (f"{checked(job) or 'to check':>12s}" if job.steps else
                    f"{n - len(missing(job)):3d}/{n:<3d} runs held")
            print(f"{job.name:24s} {held}, about {job.estimate_s:4d} s: {job.why}")
        return 0
    if argv[:1] == ['collect'] and len(argv) == 2:
        copied, same, refused = collect(argv[1])
        print(f"collected {len(copied)} run(s) into results/ ({len(same)} already there, unchanged)")
        for r in copied:
            print(f"  {r}")
        for r, why in refused:
            print(f"refused {r}: {why}", file=sys.stderr)
        return 1 if refused else 0
    print(__doc__.strip(), file=sys.stderr)
    return 2


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
