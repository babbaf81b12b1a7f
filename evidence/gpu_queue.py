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
A run whose graphed attempt fails is retried once eagerly, and queue.json names it. Each launch deals its runs to
JOBS worker processes (ablate.sh's WORKER=1: worker.py runs its share back to back in one process), so a run pays its
own set-up, not a process start; queue.json's in_worker_s says what a run cost a worker beyond its own clock (the
estimates' IN_WORKER, an assumption until a loan measures it). Each job's estimate is the formula under "the
estimates" below, with its inputs named, and fits one call (FITS).
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
    basis: str = ''    # the estimate's inputs for this job (the formula under "the estimates")


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


def seed3(depth, variants=SEED5):
    """A third seed of the seed notes' table at their schedule (PROFILE=full: 5000 steps, dropout 0.2), one depth.
    Its sweep folder is the one the H100 runs of c68a3df are in (results/shakespeare_full, seeds 1-2)."""
    return (Launch('shakespeare_full', (('PROFILE', 'full'), ('SEEDS', '3'), ('DEPTHS', depth), ('VARIANTS', variants),
                                        ('JOBS', str(len(variants.split())))), GRAPHED),)


def zero_future_full(seed):
    """The seed's schedule under zero_future (future scores 0 instead of -inf), the seed's five at 3 layers, one seed:
    the masking bug that gives the seed's ordering, at the seed's own schedule (a CPU run of it: seed 1 only,
    results/shakespeare_full_leak_zero_future_cpu)."""
    env = (('PROFILE', 'full'), ('LEAK', 'zero_future'), ('SEEDS', str(seed)), ('DEPTHS', '3L'), ('VARIANTS', SEED5),
           ('JOBS', '5'))
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


def pycode_outliers(variants):
    """Claim 5's outlier half where a baseline can have outliers: configs/pc_<variant>_12L.py (12 layers, d 256, a BOS,
    lr 2e-3, no weight decay, on data/pycode; only the attention or the optimizer differs), one seed, each analysed
    (ANALYZE=1: first-token attention, kurtosis, max/median, int8/int4 and W8A8 penalties), each logging its outlier
    curves (outlier_interval). PROFILE=gpt2 is the profile whose runs take the configs' own schedule (3000 steps of
    16,384 tokens). The GPU machine reaches no network: the call must carry data/pycode/downloads (the six pinned
    wheels, 21 MB), from which data/pycode/prepare.py rebuilds the token files and checks the corpus hash against the
    committed manifest.json. OrthoAdam's step is not captured: its variants run eagerly."""
    eager = 'orthoadam' in variants
    return (Launch('pycode_outliers_gpu', (('PROFILE', 'gpt2'), ('SEEDS', '1'), ('DEPTHS', '12L'), ('ANALYZE', '1'),
                                           ('VARIANTS', variants), ('JOBS', str(len(variants.split())))),
                   EAGER if eager else GRAPHED),)


# claim 5's five pc_ variants in parts of one call each: the graphed pair, the gate, each OrthoAdam variant alone
PYCODE_PARTS = (('a', 'pc_nanogpt pc_softmax1'), ('b', 'pc_gated'), ('c', 'pc_orthoadam'),
                ('d', 'pc_softmax1_orthoadam'))


# ----------------------------------------------------------------------------- the estimates
# A job's estimate, in wall seconds on one H100 (an H200 is faster): its launches start together, each dealing its
# runs to JOBS workers (ablate.sh's WORKER path), and a worker runs its share back to back:
#
#     estimate = (START + PROCESS + n x (IN_WORKER + ANALYSIS_S) + G) / H100
#
# n is the most runs one worker runs (a launch's runs over its JOBS, rounded up), and G the GPU seconds of all the
# job's runs: one GPU time-slices the processes that share it, so runs at once add their work (G) while their starts
# overlap. G of a run: STEP_S a step and EVAL_S an eval batch at 3 layers, times its depth's bytes (DEPTH) or its
# model's FLOPs a token. A job measured a process a run gives its own G: wall = START + n x PROCESS + G (+ analyses),
# the lower end where a run's start overlapped the others' GPU work (at the upper end, G = wall - START, the leak cells
# come to 409 s, the sink to 321 and a zero_future seed to 341: each still fits a call).
H100 = 0.7  # an H100's memory bandwidth over an H200's (3.35 against 4.8 TB/s): these small steps are bytes-bound
START = 7  # measured, H200: ablate.sh's check, plan and report.py around the runs, seed3_full_3L's 143.0 s less its
#            slowest run's 136 s (results/gpu_check/2026-11-27_h200_6cb9fa0/seed3_full_3L.log)
PROCESS = 10.5  # measured, H200: a run's own process before its clock (imports, CUDA context, data, model, capture):
#                 "done in" less summary.json's wall_time_s of seed3_full_3L's five, 10-11 s; a worker pays it once
IN_WORKER = 3  # ASSUMED, unmeasured on a GPU: a run's cost inside a worker beyond its clock (data, model, capture, the
#                final checkpoint and summary). Every job measures it: queue.json's in_worker_s (worker.py's lines)
RUN_S = 125.8 / 5  # measured, H200: the GPU seconds of one full-schedule 3-layer run (5000 steps, 8,400 eval batches)
#                    when five share the GPU: seed3_full_3L's five ended within 125.8 s (norm_sym_3L_s3's wall_time_s)
STEP_SHARE = 0.607  # the steps' share of such a run, from its floor: 5000 x 0.6947 ms of steps against 8,400 x 0.2677
#                     ms of evaluation (results/gpu_check/2026-11-26_h200_09c4cb4, the floor step)
STEP_S = STEP_SHARE * RUN_S / 5000  # a 3-layer training step: 3.05 ms
EVAL_S = (1 - STEP_SHARE) * RUN_S / 8400  # a 3-layer eval batch: 1.18 ms
# a step's bytes over 3L's: the floor of every cell as a hand-typed bench_gpu.md gave it (`git show
# 25bc2ad:results/bench_gpu.md`, "The queue"); no committed record holds 6L's or 8L's floor, so a loan's runs re-price it
DEPTH = {'3L': 1.0, '6L': 1.9, '8L': 2.6}
# the leak cells, measured a process a run (H200, 6cb9fa0): 260.6 s for 81 runs of 500 steps and 240 eval batches,
# 18 at once (n = 5): G = 260.6 - START - 5 x PROCESS, 1.37 x what STEP_S and EVAL_S give those steps (the masking
# bugs' naive attention in 4 of the 6 sweeps, dropout 0.2, 18 processes at once): LEAK_RATE, for zero_future's runs
LEAK_G = 260.6 - START - 5 * PROCESS
LEAK_RATE = LEAK_G / (81 * (500 * STEP_S + 240 * EVAL_S))
# the sink, measured the same way: 192.6 s for 60 two-layer runs of 1000 steps, 10 at once (n = 7), each analysed
SINK_G = 192.6 - START - 7 * PROCESS  # its runs' G and their analyses (each analyze.py still a process)
# claim 5's pc_ runs, unmeasured on a GPU: 66.5 MFLOP a token against the seed's 3-layer model's 16.6
# (model.flops_per_token), 49.2M tokens a run against a full-schedule run's 40.96M (5000 x 32 x 256): RUN_S scaled by
# both. ASSUMED: an eager (OrthoAdam) 12-layer step at 2x a graphed one (the 3-layer eager step is 4.3x, 8.44 against
# 1.96 ms, but a 12-layer step of 16,384 tokens spends less of itself launching kernels); 30 s an analysis (its
# process and its measures on the 12-layer model); 30 s for data/pycode/prepare.py to rebuild the tokens
PC_RUN_S = RUN_S * (66.5 / 16.6) * (49.2 / 40.96)
PC_EAGER, PC_ANALYSIS_S, PC_PREPARE_S = 2.0, 30, 30
# what a call leaves a job (bench_gpu.py --next --budget 540): its env step's 10 s (measured 4.7-7.7 s), bench_gpu.py's
# 5 s for its last write, the queue step's 30 s to stop, pack and write, and 5 s for that step's own start
CALL = 540
FITS = CALL - 10 - 5 - 30 - 5


def runs_a_worker(launches):
    """n: the most runs one worker of the job runs back to back (each launch deals its runs to its JOBS workers)."""
    return max(-(-len(runs_of(lc, RESULTS)) // int(dict(lc.env).get('JOBS', '1'))) for lc in launches)


def estimate(launches, gpu_s, analysis_s=0.0, extra_s=0.0):
    """(START + PROCESS + n x (IN_WORKER + analysis_s) + gpu_s + extra_s) / H100, in whole seconds (rounded up)."""
    n = runs_a_worker(launches)
    return -int(-(START + PROCESS + n * (IN_WORKER + analysis_s) + gpu_s + extra_s) // H100)


def run_s(launches, steps, evals, scale=1.0):
    """G of every run of launches: steps x STEP_S + evals x EVAL_S a run, times scale (its depth's bytes)."""
    return sum(len(runs_of(lc, RESULTS)) for lc in launches) * (steps * STEP_S + evals * EVAL_S) * scale


def job(name, why, launches, gpu_s, analysis_s=0.0, extra_s=0.0):
    """A job of launches whose runs are gpu_s of G, its estimate by the formula and its inputs said in basis."""
    basis = (f"n {runs_a_worker(launches)}, G {gpu_s:.0f} s" + (f", {analysis_s:g} s an analysis" if analysis_s else '')
             + (f", {extra_s:g} s more" if extra_s else ''))
    return Job(name, why, estimate(launches, gpu_s, analysis_s, extra_s), launches, basis=basis)


FORMULA = (f"estimate = (START {START} + PROCESS {PROCESS} + n x (IN_WORKER {IN_WORKER} [assumed] + analysis) + G) / "
           f"H100 {H100}; a call of {CALL} s leaves a job {FITS} s")


def queue():
    full = lambda depth, launches, rate=1.0: run_s(launches, 5000, 8400, DEPTH[depth] * rate)
    leak, sink = leak_cells(), sink_seeds()
    jobs = [
        # the current code's sanity, first, in about a minute: one capture-and-replay smoke a family of attention
        # (bench_gpu.SMOKE: softmax, diff, diffv2, cosine, and the masking bugs' naive path) on a tiny model, and the
        # grouped evaluation's equal loss on 20 batches a split of the seed's model. A failed sanity stops the queue
        # (runs on a broken path are worthless). Basis: env 5-8 s (H200, 2026-11-26/27); the smokes, about a second
        # each in one pytest process after its start and CUDA's, unmeasured; the evaluation's start, unmeasured. It
        # may take 1.25x its estimate (94 s), each step within its cap (bench_gpu.STEPS)
        Job('sanity', "the code every job runs: a capture and replay a family of attention, and the grouped "
            "evaluation's equal loss", 75, (), ('env', 'smoke', 'eval_smoke')),
        job('leak_cells_dropout0.2', "rows 2-4 under the masking bugs at the seed's dropout, one rule and format, 3 "
            "seeds", leak, LEAK_G),
        job('sink_10_seeds', "rows 5-6's per-seed statements (does softmax-1 / the gate empty the sink in k of n "
            "seeds)", sink, SINK_G),
        *(job(f'pycode_outliers_12L_{part}', f"claim 5's outlier rows on Python code, 49M tokens a run, analysed "
              f"(W8A8): {variants}", pycode_outliers(variants),
              len(variants.split()) * PC_RUN_S * (PC_EAGER if 'orthoadam' in variants else 1.0),
              analysis_s=PC_ANALYSIS_S, extra_s=PC_PREPARE_S)
          for part, variants in PYCODE_PARTS),
        job('seed3_full_3L', "rows 1-4 at the seed's schedule: a third seed, 3 layers", seed3('3L'),
            full('3L', seed3('3L'))),
        job('seed3_full_6L', "rows 1-4 at the seed's schedule: a third seed, 6 layers", seed3('6L'),
            full('6L', seed3('6L'))),
        # five 8-layer runs are 327 s of G, beyond a call with the margin: three, then two
        *(job(f'seed3_full_8L{part}', f"rows 1-4 at the seed's schedule: a third seed, 8 layers: {variants}",
              seed3('8L', variants), full('8L', seed3('8L', variants)))
          for part, variants in (('a', 'nanogpt diff sym'), ('b', 'diff_sym norm_sym'))),
        job('seed2_full_8L', "rows 1-4 at the seed's schedule: a second seed at 8 layers for the four that lack it",
            seed2_8L(), full('8L', seed2_8L())),
        # the full capture suite, after the jobs the sanity gates: every model a sweep runs captured and replayed
        # against its eager steps (tests/test_cuda.py's graph tests) and the evaluation at the seed's 200 batches a
        # split. Basis: the graph tests took 118 s (H200, 09c4cb4) before the 44 capture tests (about a second each,
        # unmeasured); it may take 1.25x its estimate, 375 s: env, the graph tests' 300 s at most, and eval
        Job('capture_suite', "every model a sweep runs captured and replayed, and the full grouped evaluation", 300,
            (), ('env', 'graph_tests', 'eval')),
        # zero_future's runs at the leak cells' rate (LEAK_RATE): 15 runs are 518 s of G, so a seed a call
        *(job(f'zero_future_full_3L_s{seed}', f"rows 2-4 under zero_future at the seed's schedule, 3 layers, seed "
              f"{seed}", zero_future_full(seed), full('3L', zero_future_full(seed), LEAK_RATE))
          for seed in (1, 2, 3)),
        # the seed author's loop in parts of one call each: 35,000 graphed 3-layer steps and 6,000 eval batches a run
        *(job(f'seed_pipeline_s{seed}{part}', f"the seed's losses as losses on trained-on text (the author's loop), "
              f"seed {seed}: {variants}", seed_pipeline(seed, variants),
              run_s(seed_pipeline(seed, variants), 35000, 6000))
          for seed in (1, 2) for part, variants in PIPELINE_PARTS),
        # the seed's five runs one at a time against five at once, graphed, at the seed's evaluation density: which
        # way its 45-run table runs faster (five compiled 600-step runs at once, not one at a time, were measured
        # before)
        Job('jobs_at_once', "the 45-run table's wall time: JOBS=1 against JOBS=5 for the seed's five 3-layer runs",
            240, (), ('env', 'jobs')),
        # last: GPT-2 124M, nanogpt then the paper's Diff layout, each its own step (a Diff failure costs only
        # itself): tokens/s, MFU, memory. Basis: 30 steps of 124M compiled took 95-140 s a step with its compile
        # (H200, 779ab8c)
        Job('gpt2_124M', "Diff at 124M: its step against nanogpt's (tokens/s, MFU, memory)", 330, (),
            ('env', 'gpt2_nanogpt', 'gpt2_diff')),
    ]
    return tuple(jobs)


# ----------------------------------------------------------------------------- which runs a job holds

def runs_of(launch, runs_dir):
    """The run folders of one launch, as ablate.sh names them (sweep.py, which needs no torch)."""
    from sweep import sweep_from_env
    env = dict(launch.env, SWEEP=launch.sweep, RUNS_DIR=runs_dir)
    return [d for _, d, _ in sweep_from_env(env, list(launch.args)).runs()]


QUEUE = queue()


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
    """Start one ablate.sh a launch, all at once, each in its own process group and its runs in its JOBS workers;
    returns the processes."""
    procs = []
    for launch in launches:
        # WORKER=1: the launch's runs through JOBS worker processes (ablate.sh's worker path, which a GPU takes by
        # itself), so that the dry run on a CPU drives the same path
        env = dict(os.environ, **dict(launch.env), SWEEP=launch.sweep, RUNS_DIR=runs_dir, PYTHON=python, WORKER='1')
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
    nested check under setsid): nothing of them is left."""
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
    log_path = os.path.join(stage, 'logs', f'{job.name}.log')
    with open(log_path, 'a') as log, Packer(runs_dir, out, analyzed, stage) as packer:
        logged_from = log.tell()
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
                  status='done' if not unfinished else 'cut' if stopped else 'failed',
                  in_worker_s=in_worker(log_path, logged_from))
    return record


def in_worker(log_path, start=0):
    """The measure of IN_WORKER in a job's log (from byte start): each finished run's seconds in its worker beyond
    its own clock, as ablate.sh's `done` line gives worker.py's, as {n, min, median, max}; None where no run said."""
    with open(log_path) as f:
        f.seek(start)
        found = sorted(float(m[1]) for m in re.finditer(r'^done   .* \(([0-9.]+)s outside its clock\)$', f.read(),
                                                         re.M))
    if not found:
        return None
    return dict(n=len(found), min=found[0], median=found[len(found) // 2], max=found[-1])


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
            print(f"{job.name:24s} {held}, about {job.estimate_s:4d} s{f' ({job.basis})' if job.basis else ''}: "
                  f"{job.why}")
        print(FORMULA)
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
