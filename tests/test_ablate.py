"""ablate.sh end to end on a tiny profile, sweep.py's parts of it, and report.py on hand-written summaries."""
import fcntl
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
import report  # noqa: E402
import sweep as sweep_py  # noqa: E402

TINY = ['--n_embd=32', '--n_head=2', '--block_size=16', '--batch_size=2', '--max_iters=2', '--lr_decay_iters=2',
        '--eval_interval=2', '--eval_iters=1', '--log_interval=1']


def python_for_ablate(where, script=None, before=''):
    """A PYTHON for ablate.sh, written in the folder `where`: the sh code `before` first; then sweep.py (ablate.sh's
    own logic) with this python, all but its config check (a torch import: seconds a launch, in tests about something
    else; the check's own tests run it); then every other command line ("$@": train.py's, report.py's, an
    analyzer's) through the sh code `script`, which exits 0 where it falls through. script None: this python runs
    them."""
    if script is None:
        script = f'exec {sys.executable} "$@"'
    os.makedirs(where, exist_ok=True)
    wrapper = where / 'python'
    wrapper.write_text(f'#!/bin/sh\n{before}\n[ "$1 $2" = "sweep.py check" ] && exit 0\n'
                       f'[ "$1" = sweep.py ] && exec {sys.executable} "$@"\n{script}\nexit 0\n')
    wrapper.chmod(0o755)
    return str(wrapper)


def stand_ins(log, fail=':'):
    """sh code for python_for_ablate: each command line to the file log; train.py's stand-in finishes its run ($d) at
    iteration 2 (summary.json, ckpt.pt), after the sh code fail; analyze.py's and needle_eval.py's write their file
    of that iteration."""
    return (f'echo "$*" >> {log}\n'
            'case "$1" in\n'
            '  train.py) for a in "$@"; do case "$a" in --out_dir=*) d=${a#--out_dir=} ;; esac; done\n'
            f'            {fail}\n'
            '            echo \'{"iter": 2}\' > "$d/summary.json"; touch "$d/ckpt.pt" ;;\n'
            '  analyze.py) echo \'{"iter": 2}\' > "${2#--out_dir=}/analysis.json" ;;\n'
            '  needle_eval.py) echo \'{"iter": 2}\' > "${2#--out_dir=}/needle_eval.json" ;;\n'
            'esac')


def sweep(runs_dir, *extra, rc=0, report=True, **env_vars):
    """ablate.sh with the tiny settings (TINY: each run a few seconds, mostly torch's import); its output. report=False,
    for a test that reads no results.md: report.py's stand-in exits 0 instead of rendering (seconds)."""
    env = dict(os.environ, PROFILE='cpu', VARIANTS='nanogpt diff_sym diff_gated', DEPTHS='3L 6L', SWEEP='t',
               RUNS_DIR=str(runs_dir), OMP_NUM_THREADS='1')
    env.update(env_vars)
    if 'PYTHON' not in env_vars:
        env['PYTHON'] = python_for_ablate(runs_dir, None if report else
                                          f'[ "$1" = report.py ] && exit 0\nexec {sys.executable} "$@"')
    env = {k: v for k, v in env.items() if v is not None}  # None: unset it
    p = subprocess.run(['bash', os.path.join(ROOT, 'ablate.sh'), *TINY, *extra], env=env, capture_output=True,
                       text=True, timeout=900)
    assert p.returncode == rc, p.stdout + p.stderr
    return p.stdout + p.stderr


def test_ablate_sweep_skip_resume_and_report(tmp_path):
    out = sweep(tmp_path)
    root = tmp_path / 't'
    # diff_gated has only a 6L config: the sweep runs what exists and skips the rest
    expected = ['diff_gated_6L_s1337', 'diff_sym_3L_s1337', 'diff_sym_6L_s1337', 'nanogpt_3L_s1337', 'nanogpt_6L_s1337']
    assert sorted(d.name for d in root.iterdir() if d.is_dir()) == expected
    for name in expected:
        s = json.load(open(root / name / 'summary.json'))
        assert s['finished'] and s['config']['n_layer'] == int(name.split('_')[-2][:-1])
        assert (root / name / 'train.log').stat().st_size > 0
    assert out.count('done   ') == 5
    # the report: loss table with rows 3L, 6L and the seed's columns present; lambda tables for diff_sym
    text = (root / 'results.md').read_text()
    assert '| | nanogpt | gpt+Diff+Sym |' in text
    table = text.split('## Final loss')[1].split('##')[0]
    rows = [l for l in table.splitlines() if l.startswith('| 3L') or l.startswith('| 6L')]
    assert len(rows) == 2 and all(l.count('/') == 2 for l in rows)
    assert 'Per-layer lambda, 3L' in text and 'Per-layer lambda, 6L' in text
    lam6 = text.split('Per-layer lambda, 6L')[1].split('##')[0]
    assert [l.split('|')[1].strip() for l in lam6.splitlines() if l.startswith('| ') and l[2].isdigit()] == \
        [str(i) for i in range(1, 7)]
    other = text.split('## Other variants')[1]
    assert '| | Diff+Gated |' in other and '| 6L |' in other and '| 3L | — |' in other  # no diff_gated_3L config
    # a re-launch skips finished runs and resumes an unfinished one from its checkpoint (here one stopped after
    # its last eval, before its summary), writing the summary
    os.remove(root / 'nanogpt_3L_s1337' / 'summary.json')
    before = json.load(open(root / 'nanogpt_6L_s1337' / 'summary.json'))
    out = sweep(tmp_path, report=False)
    assert out.count('skip   ') == 4 and 'run    ' in out and '--init_from=resume' in out
    s = json.load(open(root / 'nanogpt_3L_s1337' / 'summary.json'))
    assert s['iter'] == 2 and s['finished']
    assert json.load(open(root / 'nanogpt_6L_s1337' / 'summary.json')) == before
    # a re-launch with another schedule would skip the finished 2-step runs beside 4-step ones: refused
    out = sweep(tmp_path, '--max_iters=4', '--lr_decay_iters=4', rc=2)
    assert 'this command: --max_iters=4' in out and 'run    ' not in out


def test_ablate_refuses_the_extra_arguments_it_sets_per_run(tmp_path):
    """An extra --seed=5 used to override SEEDS in every run: three identical runs that report.py averaged as
    three seeds, std 0."""
    for arg in ('--seed=5', '--out_dir=x', '--init_from=resume'):
        out = sweep(tmp_path, arg, rc=2, VARIANTS='nanogpt', DEPTHS='3L')
        assert f"{arg.split('=')[0]} is the sweep's to set" in out and 'run    ' not in out, out


def test_ablate_leaves_a_run_that_another_process_trains_alone(tmp_path):
    """A second launch of a sweep (or a Slurm resubmit) while a run trains: that run is left to its process, with
    no FAILED file and nothing appended to its train.log, and the sweep does the rest."""
    root = tmp_path / 't'
    busy = root / 'nanogpt_3L_s1337'
    busy.mkdir(parents=True)
    holder = subprocess.Popen([sys.executable, '-c', "import fcntl, sys, time\nf = open(sys.argv[1], 'a+')\n"
                               "fcntl.flock(f, fcntl.LOCK_EX)\nf.write('pid 1 on elsewhere')\nf.flush()\n"
                               "print('locked', flush=True)\ntime.sleep(600)", str(busy / '.lock')],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == 'locked'
        out = sweep(tmp_path, VARIANTS='nanogpt diff_sym', DEPTHS='3L', report=False)
    finally:
        holder.kill()
        holder.wait()
    assert f'busy   {busy}' in out and '1 run, 0 skipped, 0 failed, 1 busy elsewhere' in out, out
    assert not (busy / 'FAILED').exists() and not (busy / 'ckpt.pt').exists()
    assert (root / 'diff_sym_3L_s1337' / 'summary.json').exists()
    assert not (busy / 'train.log').exists()




def test_ablate_exits_nonzero_when_runs_failed_after_writing_the_report(tmp_path):
    # a dataset that is not there: valid settings (ablate.sh's check passes them), a run that fails
    out = sweep(tmp_path, '--dataset=no_such_dataset', rc=1, VARIANTS='nanogpt diff_sym', DEPTHS='3L',
                PYTHON=sys.executable)  # the real check
    root = tmp_path / 't'
    assert sum(l.startswith('FAILED ') for l in out.splitlines()) == 2 and 'ablate.sh: 2 run(s) failed' in out
    for name in ('nanogpt_3L_s1337', 'diff_sym_3L_s1337'):
        assert (root / name / 'FAILED').read_text().strip() == '1'
    assert 'FAILED' in (root / 'results.md').read_text()  # the report was written, and shows the failures


def test_ablate_jobs_runs_in_parallel_the_same_runs(tmp_path):
    one = sweep(tmp_path / 'one', VARIANTS='nanogpt diff_sym', DEPTHS='3L', SEEDS='1 2', report=False)
    par = sweep(tmp_path / 'par', VARIANTS='nanogpt diff_sym', DEPTHS='3L', SEEDS='1 2', JOBS='3', report=False)
    assert one.count('done   ') == par.count('done   ') == 4 and 'run, 0 skipped, 0 failed' in par
    for name in ('nanogpt_3L_s1', 'nanogpt_3L_s2', 'diff_sym_3L_s1', 'diff_sym_3L_s2'):
        a, b = (json.load(open(tmp_path / d / 't' / name / 'summary.json')) for d in ('one', 'par'))
        a['config'].pop('out_dir'), b['config'].pop('out_dir')
        assert a['config'] == b['config'] and a['final_val_loss'] == b['final_val_loss']  # same batches, same arithmetic
    # runs that fail, two at once: train.py's stand-in fails as on a dataset that is not there (report.py's: exit 0)
    failing = python_for_ablate(tmp_path / 'bad', 'case "$1" in train.py) echo no such dataset; exit 1 ;; esac')
    out = sweep(tmp_path / 'bad', '--dataset=no_such_dataset', rc=1, VARIANTS='nanogpt diff_sym', DEPTHS='3L',
                JOBS='2', PYTHON=failing)
    assert sum(l.startswith('FAILED ') for l in out.splitlines()) == 2 and 'ablate.sh: 2 run(s) failed' in out
    sweep(tmp_path / 'x', rc=2, JOBS='two')


def test_ablate_analyze_runs_analyze_py_on_new_and_earlier_finished_runs(tmp_path):
    root = tmp_path / 't'
    kw = dict(VARIANTS='nanogpt softmax1', DEPTHS='3L', SEEDS='1 2')
    sweep(tmp_path, report=False, **kw)  # without ANALYZE: no analysis
    names = ['nanogpt_3L_s1', 'nanogpt_3L_s2', 'softmax1_3L_s1', 'softmax1_3L_s2']
    assert not any((root / n / 'analysis.json').exists() for n in names)
    # ANALYZE=1 on the finished sweep: every run analysed on its last checkpoint, none retrained
    before = {n: (root / n / 'summary.json').read_text() for n in names}
    out = sweep(tmp_path, ANALYZE='1', JOBS='2', **kw)
    assert sum(l.startswith('analyzed ') for l in out.splitlines()) == 4
    assert '0 run, 4 skipped (4 of them analyzed now), 0 failed' in out
    for n in names:
        a = json.load(open(root / n / 'analysis.json'))
        assert a['iter'] == 2 and a['model_args']['softmax1'] == n.startswith('softmax1')
        assert (root / n / 'summary.json').read_text() == before[n]
    diag = (root / 'results.md').read_text().split('## Diagnostics')[1]
    assert all(f'| {n} | ' in diag for n in names) and 'Softmax-1' in diag  # per run, and the paired comparison
    # a re-launch analyses only what lacks a current analysis.json: a run trained now, and a finished run whose
    # file is of another checkpoint (analyze.py --ckpt=best.pt, say)
    a = json.load(open(root / 'nanogpt_3L_s2' / 'analysis.json'))
    json.dump(dict(a, iter=1), open(root / 'nanogpt_3L_s2' / 'analysis.json', 'w'))
    os.remove(root / 'softmax1_3L_s1' / 'summary.json')
    os.remove(root / 'softmax1_3L_s1' / 'analysis.json')
    out = sweep(tmp_path, ANALYZE='1', report=False, **kw)
    assert sum(l.startswith('analyzed ') for l in out.splitlines()) == 2
    assert 'done   ' in out and '1 run, 3 skipped (1 of them analyzed now)' in out
    assert json.load(open(root / 'softmax1_3L_s1' / 'analysis.json'))['iter'] == 2  # the resumed run's end
    assert json.load(open(root / 'nanogpt_3L_s2' / 'analysis.json'))['iter'] == 2
    # a finished run without its checkpoint (a committed run copied back) is left as it is
    os.remove(root / 'nanogpt_3L_s1' / 'analysis.json')
    os.remove(root / 'nanogpt_3L_s1' / 'ckpt.pt')
    out = sweep(tmp_path, ANALYZE='1', report=False, **kw)
    assert 'no ckpt.pt, so no analysis' in out and '0 run, 4 skipped (0 of them analyzed now), 0 failed' in out
    # an analysis that fails is reported and marked, and the sweep exits 1; the run stays finished
    (root / 'nanogpt_3L_s2' / 'ckpt.pt').write_text('not a checkpoint')
    os.remove(root / 'nanogpt_3L_s2' / 'analysis.json')
    out = sweep(tmp_path, rc=1, ANALYZE='1', report=False, **kw)
    assert 'FAILED ' + str(root / 'nanogpt_3L_s2') + ': analyze.py' in out
    assert 'analyze.py failed on 1 finished run(s)' in out and 'run(s) failed' not in out
    assert (root / 'nanogpt_3L_s2' / 'FAILED').exists() and (root / 'nanogpt_3L_s2' / 'summary.json').exists()
    sweep(tmp_path, rc=2, ANALYZE='yes')


def fake_analyze_python(tmp_path, action):
    """A PYTHON for ablate.sh that runs train.py and report.py but, for analyze.py, runs `action` (python code)."""
    return python_for_ablate(tmp_path, f'[ "$1" = analyze.py ] && exec {sys.executable} -c "{action}"\n'
                                       f'exec {sys.executable} "$@"')


def test_ablate_analyze_failing_after_training_and_stopped_by_sigterm(tmp_path):
    # an analysis that fails right after its run trained: the run is finished, the failure marked and counted
    out = sweep(tmp_path, rc=1, ANALYZE='1', VARIANTS='nanogpt', DEPTHS='3L',
                PYTHON=fake_analyze_python(tmp_path, 'import sys; sys.exit(3)'))
    run = tmp_path / 't' / 'nanogpt_3L_s1337'
    assert 'done   ' in out and 'analyze.py failed on 1 finished run(s)' in out and '1 run, 0 skipped' in out
    assert (run / 'summary.json').exists() and (run / 'FAILED').read_text().strip() == '3'
    # a SIGTERM to the sweep reaches an analysis in progress (the job's subshell ignores TERM; analyze.py must not)
    env = dict(os.environ, PROFILE='cpu', VARIANTS='nanogpt', DEPTHS='3L', SWEEP='t', RUNS_DIR=str(tmp_path),
               ANALYZE='1', PYTHON=fake_analyze_python(tmp_path, 'import time; time.sleep(600)'))
    (run / 'analyze.log').unlink()  # the wait below is for this launch's analysis, not the one before
    p = subprocess.Popen(['bash', os.path.join(ROOT, 'ablate.sh'), *TINY], env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True)
    deadline = time.time() + 60
    while not (run / 'analyze.log').exists() and time.time() < deadline:
        time.sleep(0.2)
    time.sleep(1)
    t0 = time.time()
    p.send_signal(signal.SIGTERM)
    out = p.communicate(timeout=120)[0]
    assert p.returncode == 130 and 'interrupted' in out and time.time() - t0 < 60, out
    assert f'stopped {run}: analyze.py' in out
    assert not (run / 'FAILED').exists() and not (run / 'analysis.json').exists()  # stopped, not failed


@pytest.mark.parametrize('jobs,seeds', [('1', '1'), ('2', '1 2')])
def test_ablate_sigterm_saves_every_run_in_progress(tmp_path, jobs, seeds):
    env = dict(os.environ, PROFILE='cpu', VARIANTS='nanogpt', DEPTHS='3L', SEEDS=seeds, SWEEP='t', JOBS=jobs,
               RUNS_DIR=str(tmp_path), PYTHON=sys.executable)
    args = [a for a in TINY if not a.startswith(('--max_iters', '--lr_decay_iters', '--eval_interval'))]
    p = subprocess.Popen(['bash', os.path.join(ROOT, 'ablate.sh'), *args, '--max_iters=100000',
                          '--lr_decay_iters=100000', '--eval_interval=1000'], env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True)
    logs = [tmp_path / 't' / f'nanogpt_3L_s{s}' / 'log.jsonl' for s in seeds.split()]
    deadline = time.time() + 300
    # every run past its first step (a stop before it saves nothing, by design: the step-0 eval alone is not enough)
    while not all(l.exists() and '"kind": "train"' in l.read_text() for l in logs) and time.time() < deadline:
        time.sleep(0.5)
    t0 = time.time()
    p.send_signal(signal.SIGTERM)  # to the sweep alone, as a scheduler would: it passes the TERM to every run
    out = p.communicate(timeout=300)[0]
    assert p.returncode == 130 and 'interrupted' in out, out
    assert time.time() - t0 < 30 and 'save a checkpoint' in out, out  # said at once, done within seconds
    assert 'FAILED' not in out, out
    for l in logs:
        assert (l.parent / 'ckpt.pt').exists() and not (l.parent / 'summary.json').exists()
        assert not (l.parent / 'FAILED').exists()  # stopped, not failed: a re-launch resumes it
        assert f'stopped {l.parent}: stopped at iteration' in out


def alive_pids(pids):
    """The pids still alive (a zombie, dead and not yet reaped by anyone, counts as gone)."""
    out = []
    for pid in pids:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            continue
        state = subprocess.run(['ps', '-o', 'stat=', '-p', str(pid)], capture_output=True, text=True).stdout.strip()
        if state and not state.startswith('Z'):
            out.append(pid)
    return out


def kill_left(proc, pids):
    """A test's clean-up, whatever its assertions found: proc and the pids it recorded, killed."""
    proc.kill()
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


@pytest.mark.parametrize('worker', ['0', '1'])
def test_an_interrupted_sweep_leaves_no_process_behind(tmp_path, worker):
    """A run that does not stop on the sweep's TERM (here: it ignores TERM, and has a child of its own) is killed
    STOP_GRACE seconds after the stop, with everything it started: no process of the sweep outlives ablate.sh (before,
    the sweep waited for it for ever, and a sweep killed then left its runs behind). WORKER=1: the same of a worker
    (its stand-in hangs as the run would)."""
    pids = tmp_path / 'pids'
    hang = (f'case "$1" in train.py|worker.py) trap "" TERM INT; echo $$ >> {pids}; sleep 600 & echo $! >> {pids}; '
            'while :; do wait; done ;; esac')
    env = dict(os.environ, PROFILE='cpu', VARIANTS='nanogpt', DEPTHS='3L', SEEDS='1 2', JOBS='2', SWEEP='t',
               RUNS_DIR=str(tmp_path), STOP_GRACE='1', PROGRESS_EVERY='0', PYTHON=python_for_ablate(tmp_path, hang),
               WORKER=worker)
    p = subprocess.Popen(['bash', os.path.join(ROOT, 'ablate.sh'), *TINY], env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True)
    started = []
    try:
        deadline = time.time() + 60
        while len(started) < 4 and time.time() < deadline:  # two runs, each with its child
            time.sleep(0.1)
            started = [int(x) for x in pids.read_text().split()] if pids.exists() else []
        assert len(started) == 4, started
        assert alive_pids(started) == started
        t0 = time.time()
        p.send_signal(signal.SIGTERM)
        out = p.communicate(timeout=30)[0]
        assert p.returncode == 130 and 'interrupted' in out and time.time() - t0 < 15, out
        assert '2 run(s) still running 1s after the stop: killed (SIGKILL' in out, out
        time.sleep(0.2)
        assert alive_pids(started) == [], out
        for s in (1, 2):  # stopped, not failed: a re-launch resumes it
            assert not (tmp_path / 't' / f'nanogpt_3L_s{s}' / 'FAILED').exists()
    finally:
        kill_left(p, started)


def summaries(root):
    """{run: its summary.json less out_dir} of every run folder under root."""
    out = {}
    for d in sorted(root.iterdir()):
        if (d / 'summary.json').exists():
            s = json.load(open(d / 'summary.json'))
            s['config'].pop('out_dir')
            out[d.name] = s
    return out


def test_ablate_worker_runs_the_runs_a_process_a_run_makes(tmp_path):
    """WORKER=1 (a GPU's default; forced here on the CPU): the runs dealt to JOBS worker processes, each running its
    share back to back, make the run folders and summaries that a process a run makes, each with its train.log; a
    re-launch skips the finished runs and resumes an unfinished one from its checkpoint; failed runs are marked
    FAILED, the report is written and the sweep exits 1."""
    kw = dict(VARIANTS='nanogpt diff_sym', DEPTHS='3L', SEEDS='1 2', JOBS='2')
    one = sweep(tmp_path / 'one', report=False, **kw)
    out = sweep(tmp_path / 'w', WORKER='1', **kw)
    assert 'the runs go to 2 worker process(es)' in out and 'the runs go to' not in one
    assert out.count('done   ') == one.count('done   ') == 4 and '4 run, 0 skipped, 0 failed, 0 busy' in out, out
    a, b = summaries(tmp_path / 'one' / 't'), summaries(tmp_path / 'w' / 't')
    assert sorted(a) == sorted(b) == ['diff_sym_3L_s1', 'diff_sym_3L_s2', 'nanogpt_3L_s1', 'nanogpt_3L_s2']
    for name in a:  # same batches, same arithmetic
        assert a[name]['config'] == b[name]['config'] and a[name]['final_val_loss'] == b[name]['final_val_loss']
        assert a[name]['final_train_loss'] == b[name]['final_train_loss'] and b[name]['finished']
        assert 'step 2:' in (tmp_path / 'w' / 't' / name / 'train.log').read_text()
    assert '| | nanogpt |' in (tmp_path / 'w' / 't' / 'results.md').read_text()
    assert not list((tmp_path / 'w' / 't').glob('.worker.*'))  # the workers' lists are gone
    # a re-launch: the finished runs skipped, the one without its summary resumed from its checkpoint
    run = tmp_path / 'w' / 't' / 'diff_sym_3L_s2'
    os.remove(run / 'summary.json')
    out = sweep(tmp_path / 'w', WORKER='1', report=False, **kw)
    assert out.count('skip   ') == 3 and f'run    {run} --init_from=resume' in out and 'done   ' in out, out
    assert json.load(open(run / 'summary.json'))['iter'] == 2
    # runs that fail in their workers: FAILED, said with their log's tail, the report written, exit 1
    out = sweep(tmp_path / 'bad', '--dataset=no_such_dataset', rc=1, WORKER='1', VARIANTS='nanogpt diff_sym',
                DEPTHS='3L', JOBS='2')
    root = tmp_path / 'bad' / 't'
    assert sum(l.startswith('FAILED ') for l in out.splitlines()) == 2 and 'ablate.sh: 2 run(s) failed' in out, out
    assert all((root / n / 'FAILED').read_text().strip() == '1' for n in ('nanogpt_3L_s1337', 'diff_sym_3L_s1337'))
    assert 'FAILED' in (root / 'results.md').read_text()
    sweep(tmp_path / 'x', rc=2, WORKER='yes')
    sweep(tmp_path / 'x', rc=2, WORKER='1', NPROC='2')




def worker_pids(where):
    """The pids of the worker.py processes whose list of runs is under the folder where."""
    ps = subprocess.run(['ps', '-A', '-ww', '-o', 'pid=', '-o', 'args='], capture_output=True, text=True).stdout
    return [int(l.split()[0]) for l in ps.splitlines() if 'worker.py' in l and str(where) in l]


def test_ablate_sigterm_stops_every_worker(tmp_path):
    """WORKER=1, JOBS=2, three runs: a SIGTERM to the sweep reaches both workers, whose runs in progress save their
    checkpoints (stopped, not failed), the third run is not started, and no worker outlives the sweep."""
    env = dict(os.environ, PROFILE='cpu', VARIANTS='nanogpt', DEPTHS='3L', SEEDS='1 2 3', SWEEP='t', JOBS='2',
               RUNS_DIR=str(tmp_path), PYTHON=sys.executable, WORKER='1', PROGRESS_EVERY='0')
    args = [a for a in TINY if not a.startswith(('--max_iters', '--lr_decay_iters', '--eval_interval'))]
    p = subprocess.Popen(['bash', os.path.join(ROOT, 'ablate.sh'), *args, '--max_iters=100000',
                          '--lr_decay_iters=100000', '--eval_interval=1000'], env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True)
    logs = [tmp_path / 't' / f'nanogpt_3L_s{s}' / 'log.jsonl' for s in (1, 2)]  # each worker's first run
    started = []
    try:
        deadline = time.time() + 300
        while not all(l.exists() and '"kind": "train"' in l.read_text() for l in logs) and time.time() < deadline:
            time.sleep(0.5)
        started = worker_pids(tmp_path)
        assert len(started) == 2, started
        p.send_signal(signal.SIGTERM)
        out = p.communicate(timeout=300)[0]
        assert p.returncode == 130 and 'interrupted' in out and 'FAILED' not in out, out
        for l in logs:
            assert (l.parent / 'ckpt.pt').exists() and not (l.parent / 'summary.json').exists()
            assert not (l.parent / 'FAILED').exists() and f'stopped {l.parent}: stopped at iteration' in out
        assert not (tmp_path / 't' / 'nanogpt_3L_s3' / 'ckpt.pt').exists() and '1 run(s) not started' in out, out
        assert alive_pids(started) == [] and worker_pids(tmp_path) == []
    finally:
        kill_left(p, started + worker_pids(tmp_path))




def test_ablate_without_a_profile_on_a_cpu_says_which_to_pick(tmp_path):
    env = dict(os.environ, RUNS_DIR=str(tmp_path), PYTHON=sys.executable)
    env.pop('PROFILE', None)
    p = subprocess.run(['bash', os.path.join(ROOT, 'ablate.sh')], env=env, capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 2 and 'PROFILE=demo' in p.stderr and not any(tmp_path.iterdir()), p.stderr


def test_ablate_demo_profile_runs_the_seeds_five(tmp_path):
    out = sweep(tmp_path, PROFILE='demo', VARIANTS='nanogpt', DEPTHS='3L', report=False)
    s = json.load(open(tmp_path / 't' / 'nanogpt_3L_s1337' / 'summary.json'))
    assert s['finished'] and s['config']['batch_size'] == 2  # the extra --key=value win over the profile
    assert 'done   ' in out


def _summary(d, train, val, lambdas=None):
    d.mkdir(parents=True)
    table = [dict(layer=i + 1, lambda_1=1.0, lambda_2=l, lambda_init=0.5, lambda_full=1.5 - l)
             for i, l in enumerate(lambdas or [])]
    json.dump(dict(config=dict(max_iters=10), n_params=1e6, iter=10, final_train_loss=train, final_val_loss=val,
                   lambda_table=table, tokens_per_sec=100.0, wall_time_s=1.0, device='cpu', dtype='float32'),
              open(d / 'summary.json', 'w'))


def test_report_missing_failed_and_several_seeds(tmp_path):
    _summary(tmp_path / 'nanogpt_3L_s1', 1.0, 1.2)
    _summary(tmp_path / 'nanogpt_3L_s2', 1.2, 1.4)
    _summary(tmp_path / 'diff_3L_s1', 0.9, 1.1, lambdas=[0.9, 0.7])
    _summary(tmp_path / 'diff_3L_s2', 0.9, 1.1, lambdas=[0.7, 0.5])
    (tmp_path / 'sym_3L_s1').mkdir()
    (tmp_path / 'sym_3L_s1' / 'FAILED').write_text('1\n')
    _summary(tmp_path / 'nanogpt_6L_s1', 0.5, 0.6)
    (tmp_path / 'diff_6L_s1').mkdir()  # started, never finished
    json.dump(dict(overall=dict(first_token_attention=0.25, first_token_heads=0.5, kurtosis_rest=3.5,
                                max_activation=12.0, logit_top1=7.5),
                   quantization=dict(loss_penalty_int8=0.001, loss_penalty_int4=0.04)),
              open(tmp_path / 'nanogpt_6L_s1' / 'analysis.json', 'w'))
    text = report.render(str(tmp_path))
    diag = text.split('## Diagnostics')[1]
    assert '| nanogpt_6L_s1 | 0.250 | 0.50 | 3.5 | 12.0 | 7.5 | +0.0010 | +0.0400 |' in diag
    assert 'nanogpt_3L_s1 |' not in diag  # no analysis.json there
    table = text.split('## Final loss, train/val')[1].split('##')[0]  # later sections have depth rows too
    rows = {l.split('|')[1].strip(): [c.strip() for c in l.split('|')[2:-1]] for l in table.splitlines()
            if l.startswith('| 3L') or l.startswith('| 6L')}
    # columns: nanogpt, gpt+Diff, gpt+Sym (the seed's order, only those with runs)
    assert rows['3L'][0] == '1.10 ± 0.14/1.30 ± 0.14 (n=2)'
    assert rows['3L'][1] == '**0.90 ± 0.00/1.10 ± 0.00** (n=2)'  # best val of the row in bold
    assert rows['3L'][2] == 'FAILED s1'
    assert rows['6L'] == ['0.50/0.60', 'unfinished s1', 'missing']  # a lone value: no bold; configs/sym_6L.py exists
    lam = text.split('Per-layer lambda, 3L')[1]
    layer1 = next(l for l in lam.splitlines() if l.startswith('| 1 |'))
    assert [c.strip() for c in layer1.split('|')[2:-1]] == ['1.00 ± 0.00', '0.80 ± 0.14', '0.50 ± 0.00',
                                                             '0.70 ± 0.14']
    assert (tmp_path / 'results.md').read_text() == text
    _summary(tmp_path / 'diff_gated_6L_s1', 0.4, 0.5)
    other = report.render(str(tmp_path)).split('## Other variants')[1]
    assert '| 3L | — |' in other and '| 6L | 0.40/0.50 |' in other  # configs/diff_gated_3L.py does not exist


def test_report_takes_each_run_s_seed_from_its_config_not_its_folder_name(tmp_path):
    """A copied folder counted seed 1 twice (n=3 from two runs), and a renamed one turned a paired comparison into an
    unpaired one; the seed a run trained with is in its summary.json."""
    for v, seed, val in (('nanogpt', 1, 1.2), ('nanogpt', 2, 1.4), ('diff', 1, 1.1), ('diff', 2, 1.3)):
        _summary(tmp_path / f'{v}_3L_s{seed}', val - 0.1, val)
        summary = json.load(open(tmp_path / f'{v}_3L_s{seed}' / 'summary.json'))
        summary['config']['seed'] = seed
        json.dump(summary, open(tmp_path / f'{v}_3L_s{seed}' / 'summary.json', 'w'))
    paired = report.render(str(tmp_path)).split('## Comparisons')[1].split('## Runs')[0]
    shutil.copytree(tmp_path / 'nanogpt_3L_s1', tmp_path / 'nanogpt_3L_s3')  # a copy: the same run again
    os.rename(tmp_path / 'diff_3L_s2', tmp_path / 'diff_3L_s5')              # a rename: still seed 2
    text = report.render(str(tmp_path))
    assert '(n=3)' not in text and text.split('## Comparisons')[1].split('## Runs')[0] == paired  # paired as before
    warning = text.split('**Warning: folder names.**')[1].split('##')[0]
    assert '`diff_3L_s5` trained with seed 2' in warning and '`nanogpt_3L_s3`: a second run of its cell' in warning


def test_report_llama_runs_in_the_seed_layout(tmp_path):
    """ARCH=llama names runs llama_<variant>: they fill the seed's columns (in its order), not 'other variants'."""
    _summary(tmp_path / 'llama_sym_6L_s1', 2.0, 2.2)
    _summary(tmp_path / 'llama_nanogpt_6L_s1', 2.1, 2.1)
    _summary(tmp_path / 'llama_diff_6L_s1', 2.3, 2.4, lambdas=[0.9])
    _summary(tmp_path / 'llama_gated_6L_s1', 2.0, 2.0)
    text = report.render(str(tmp_path))
    table = text.split('## Final loss')[1].split('##')[0]
    assert '| | llama nanogpt | llama gpt+Diff | llama gpt+Sym |' in table
    assert '| 6L | **2.10/2.10** | 2.30/2.40 | 2.00/2.20 |' in table
    assert 'llama gpt+Diff λ1' in text.split('## Per-layer lambda')[1]
    other = text.split('## Other variants')[1].split('##')[0]
    assert '| | llama Gated (G1) |' in other and 'llama gpt+Sym' not in other


def test_ablate_counts_a_launcher_that_exits_1_after_a_stop_as_stopped(tmp_path):
    """torchrun passes a SIGTERM to its workers, which save and exit 130, and then exits 1 itself. A run that ends
    while the sweep stops is stopped, not failed, whatever its launcher's status."""
    launcher = tmp_path / 'torchrun_like.py'
    launcher.write_text("import signal, subprocess, sys\n"
                        "p = subprocess.Popen([sys.executable, *sys.argv[1:]])\n"
                        "signal.signal(signal.SIGTERM, lambda s, f: p.send_signal(s))\n"
                        "rc = p.wait()\nsys.exit(1 if rc == 130 else rc)\n")
    wrapper = tmp_path / 'python'
    wrapper.write_text(f"#!/bin/sh\n[ \"$1\" = sweep.py ] && exec {sys.executable} \"$@\"\n"
                       f"exec {sys.executable} {launcher} \"$@\"\n")
    wrapper.chmod(0o755)
    env = dict(os.environ, PROFILE='cpu', VARIANTS='nanogpt', DEPTHS='3L', SWEEP='t', RUNS_DIR=str(tmp_path),
               PYTHON=str(wrapper))
    args = [a for a in TINY if not a.startswith(('--max_iters', '--lr_decay_iters', '--eval_interval'))]
    p = subprocess.Popen(['bash', os.path.join(ROOT, 'ablate.sh'), *args, '--max_iters=100000',
                          '--lr_decay_iters=100000', '--eval_interval=1000'], env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True)
    run = tmp_path / 't' / 'nanogpt_3L_s1337'
    deadline = time.time() + 300
    # past its first step (a stop before it saves nothing, by design: the step-0 eval alone is not enough)
    while not ((run / 'log.jsonl').exists() and '"kind": "train"' in (run / 'log.jsonl').read_text()) and \
            time.time() < deadline:
        time.sleep(0.5)
    p.send_signal(signal.SIGTERM)
    out = p.communicate(timeout=300)[0]
    assert p.returncode == 130 and 'FAILED' not in out and f'stopped {run}' in out, out
    assert (run / 'ckpt.pt').exists() and not (run / 'FAILED').exists()


def _recording_python(tmp_path):
    """A PYTHON for ablate.sh that records each train.py run's CUDA_VISIBLE_DEVICES instead of training: a run of 2
    seconds, so that a sweep's runs overlap as real ones do."""
    return python_for_ablate(tmp_path, f'case "$*" in *train.py*) echo "${{CUDA_VISIBLE_DEVICES-unset}} $*" >> '
                                       f'{tmp_path}/gpus.log; sleep 2 ;; esac')


@pytest.mark.parametrize('gpus,expected', [(None, {'0', '1', '2'}), ('5 7', {'5', '7'})])
def test_ablate_spreads_its_slots_over_every_gpu(tmp_path, gpus, expected):
    bin_dir = tmp_path / 'bin'
    bin_dir.mkdir()
    (bin_dir / 'nvidia-smi').write_text("#!/bin/sh\nprintf '0\\n1\\n2\\n'\n")  # three GPUs
    (bin_dir / 'nvidia-smi').chmod(0o755)
    env = dict(PATH=f"{bin_dir}:{os.environ['PATH']}", JOBS='3', PYTHON=_recording_python(tmp_path),
               CUDA_VISIBLE_DEVICES=None)  # unset, on a GPU machine too: nvidia-smi decides
    if gpus:
        env['GPUS'] = gpus
    out = sweep(tmp_path, VARIANTS='nanogpt diff sym', DEPTHS='3L', **env)
    runs = [l.split(' ', 1) for l in (tmp_path / 'gpus.log').read_text().splitlines()]
    assert len(runs) == 3 and {g for g, _ in runs} == expected, runs
    if not gpus:  # three slots, three GPUs: one run on each
        assert sorted(g for g, _ in runs) == ['0', '1', '2'] and 'GPUs 0 1 2: 3 lane(s)' in out


@pytest.mark.parametrize('smi', ["printf '0\\n1\\n'", "echo 'NVIDIA-SMI has failed'; exit 9"])
def test_ablate_without_gpus_sets_no_device(tmp_path, smi):
    """CUDA_VISIBLE_DEVICES set but empty hides every GPU, and a failing nvidia-smi names none: no assignment."""
    bin_dir = tmp_path / 'bin'
    bin_dir.mkdir()
    (bin_dir / 'nvidia-smi').write_text(f"#!/bin/sh\n{smi}\n")
    (bin_dir / 'nvidia-smi').chmod(0o755)
    hidden = '' if smi.startswith('printf') else None
    out = sweep(tmp_path, VARIANTS='nanogpt', DEPTHS='3L', PATH=f"{bin_dir}:{os.environ['PATH']}",
                CUDA_VISIBLE_DEVICES=hidden, PYTHON=_recording_python(tmp_path))
    assert (tmp_path / 'gpus.log').read_text().split(' ')[0] == ('' if hidden == '' else 'unset')
    assert 'GPUs' not in out


def test_ablate_gpt2_profile_runs_every_124M_config_in_its_own_sweep(tmp_path):
    """PROFILE=gpt2: the seven configs/<variant>_124M.py in order, their own schedule (no profile keys), in
    runs/fineweb_gpt2 (here fineweb_gpt2_max_iters2: the extra argument makes a sweep of its own). A stand-in python
    records each train.py call, and the queue makes no folder ahead of its run."""
    sweep = 'fineweb_gpt2_max_iters2'
    wrapper = python_for_ablate(tmp_path, f"case \"$*\" in *train.py*) echo \"$* | $(ls {tmp_path}/{sweep} | "
                                          f"tr '\\n' ' ')\" >> {tmp_path}/calls.log ;; esac")
    env = dict(os.environ, PROFILE='gpt2', RUNS_DIR=str(tmp_path), PYTHON=wrapper, SEEDS='3')
    p = subprocess.run(['bash', os.path.join(ROOT, 'ablate.sh'), '--max_iters=2'], env=env, capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    calls = [l.split(' | ') for l in (tmp_path / 'calls.log').read_text().splitlines()]
    variants = ['nanogpt', 'diff', 'diff_sym', 'sym', 'gated', 'softmax1', 'sym_noself']
    assert [c.split()[1] for c, _ in calls] == [f'configs/{v}_124M.py' for v in variants]
    for i, ((args, folders), v) in enumerate(zip(calls, variants)):
        assert args.split()[2:] == ['--seed=3', f'--out_dir={tmp_path}/{sweep}/{v}_124M_s3', '--max_iters=2']
        # no folder for the runs still queued; the sweep's settings file from the start
        assert sorted(folders.split()) == sorted([f'{w}_124M_s3' for w in variants[:i + 1]] + ['sweep_settings'])


def test_ablate_sink_profile_runs_the_bigram_backcopy_configs_in_their_own_sweep(tmp_path):
    """PROFILE=sink: the six configs/bb_<variant>_2L.py, in order, with their own schedule (no profile keys), in
    runs/bigram_backcopy_sink; VARIANTS names variants without the bb_ prefix, which the profile adds."""
    wrapper = python_for_ablate(tmp_path, f'case "$*" in *train.py*) echo "$*" >> {tmp_path}/calls.log ;; esac')
    env = dict(os.environ, PROFILE='sink', RUNS_DIR=str(tmp_path), PYTHON=wrapper, SEEDS='1 2')
    p = subprocess.run(['bash', os.path.join(ROOT, 'ablate.sh')], env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    calls = (tmp_path / 'calls.log').read_text().splitlines()
    variants = ['nanogpt', 'softmax1', 'gated', 'gated_headwise', 'orthoadam', 'softmax1_orthoadam']
    want = [(f'configs/bb_{v}_2L.py', f'--seed={s}', f'--out_dir={tmp_path}/bigram_backcopy_sink/bb_{v}_2L_s{s}')
            for s in (1, 2) for v in variants]
    assert [tuple(c.split()[1:]) for c in calls] == want
    for cfg, _, _ in want:
        assert os.path.exists(os.path.join(ROOT, cfg))
    (tmp_path / 'calls.log').unlink()
    env.update(VARIANTS='softmax1', SEEDS='3')
    p = subprocess.run(['bash', os.path.join(ROOT, 'ablate.sh')], env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    assert (tmp_path / 'calls.log').read_text().split()[1] == 'configs/bb_softmax1_2L.py'


def test_ablate_retrieval_profile_runs_the_distractor_configs_and_scores_them_with_needle_eval(tmp_path):
    """PROFILE=retrieval: the six configs/nd_<variant>_2L.py in runs/needle_distractors_retrieval, with their own
    schedule; ANALYZE=1 runs needle_eval.py (not analyze.py) on each finished run, and a later ANALYZE=1 launch
    skips runs whose needle_eval.json exists."""
    # each run ends at iteration 2, and its needle_eval.json is of it: current, to sweep.py (no second scoring)
    wrapper = python_for_ablate(tmp_path, stand_ins(tmp_path / 'calls.log'))
    env = dict(os.environ, PROFILE='retrieval', RUNS_DIR=str(tmp_path), PYTHON=wrapper, SEEDS='1', ANALYZE='1')
    p = subprocess.run(['bash', os.path.join(ROOT, 'ablate.sh')], env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    calls = [c.split() for c in (tmp_path / 'calls.log').read_text().splitlines()]
    variants = ['nanogpt', 'diff', 'sym', 'diff_sym', 'gated', 'softmax1']
    sweep = tmp_path / 'needle_distractors_retrieval'
    want = []
    for v in variants:
        want += [['train.py', f'configs/nd_{v}_2L.py', '--seed=1', f'--out_dir={sweep}/nd_{v}_2L_s1'],
                 ['needle_eval.py', f'--out_dir={sweep}/nd_{v}_2L_s1']]
        assert os.path.exists(os.path.join(ROOT, f'configs/nd_{v}_2L.py'))
    assert calls[:-1] == want and calls[-1][0] == 'report.py'
    (tmp_path / 'calls.log').unlink()
    p = subprocess.run(['bash', os.path.join(ROOT, 'ablate.sh')], env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0 and [c.split()[0] for c in (tmp_path / 'calls.log').read_text().splitlines()] == ['report.py']


def recorded_sweep(tmp_path, unset=(), args=(), **env_vars):
    """ablate.sh (with extra arguments args) with a python that writes each train.py command line to calls.log
    instead of training. Returns the process and every command line recorded so far in tmp_path, split into
    arguments."""
    log = tmp_path / 'calls.log'
    wrapper = python_for_ablate(tmp_path, f'case "$*" in *train.py*) echo "$*" >> {log} ;; esac')
    env = dict(os.environ, RUNS_DIR=str(tmp_path), PYTHON=wrapper, **env_vars)
    for k in unset:
        env.pop(k, None)
    p = subprocess.run(['bash', os.path.join(ROOT, 'ablate.sh'), *args], env=env, capture_output=True, text=True,
                       timeout=120)
    return p, [c.split() for c in log.read_text().splitlines()] if log.exists() else []


def test_ablate_resumes_a_run_only_with_its_own_settings(tmp_path):
    """A run folder with ckpt.pt is resumed with resume_strict=True, so that train.py refuses it where the
    checkpoint's settings are not the sweep's; a new run is started without it."""
    (tmp_path / 's' / 'nanogpt_3L_s1').mkdir(parents=True)
    (tmp_path / 's' / 'nanogpt_3L_s1' / 'ckpt.pt').write_bytes(b'')
    p, calls = recorded_sweep(tmp_path, PROFILE='demo', VARIANTS='nanogpt', SWEEP='s', SEEDS='1 2')
    assert p.returncode == 0, p.stderr
    by_seed = {next(a for a in c if a.startswith('--seed=')): c for c in calls}
    assert '--init_from=resume' in by_seed['--seed=1'] and '--resume_strict=True' in by_seed['--seed=1']
    assert not any(a.startswith(('--init_from', '--resume_strict')) for a in by_seed['--seed=2'])


def test_ablate_refuses_a_misspelled_variant_or_depth_before_any_run(tmp_path):
    """A name no config file has is a typo, named with the choices, not a pair quietly left out."""
    p, calls = recorded_sweep(tmp_path, PROFILE='demo', VARIANTS='nanogpt difff')
    assert p.returncode == 2 and "VARIANTS has 'difff'" in p.stderr and ' diff_sym ' in p.stderr, p.stderr
    p, calls = recorded_sweep(tmp_path, PROFILE='demo', DEPTHS='3l')
    assert p.returncode == 2 and "DEPTHS has '3l'" in p.stderr and ' 6L ' in p.stderr, p.stderr
    assert calls == []  # no run started
    # a default variant without a config at a depth is left out, and the first line says so
    p, calls = recorded_sweep(tmp_path, unset=('VARIANTS',), PROFILE='cpu_long', DEPTHS='3L')
    assert p.returncode == 0 and 'configs/diff_gated_3L.py' not in {c[1] for c in calls}, p.stderr
    assert 'no config, so left out: diff_gated_3L' in p.stdout.splitlines()[0]


@pytest.mark.parametrize('variants, says', [
    ('diff_gated', 'no config for diff_gated at DEPTHS=3L: the sweep would run nothing'),
    ('nanogpt diff_gated', 'no config for diff_gated at DEPTHS=3L: it would run nothing')])
def test_ablate_refuses_a_named_variant_without_a_config_at_its_depths_and_makes_nothing(tmp_path, variants, says):
    """VARIANTS=diff_gated at 3L (no configs/diff_gated_3L.py): refused before anything, naming the missing file, the
    depths the variant has and what to write (before: "0 run, 0 skipped", report.py's "no run folders", exit 1, and
    the sweep's folder left behind)."""
    p, calls = recorded_sweep(tmp_path, PROFILE='demo', VARIANTS=variants, SWEEP='t2')
    assert p.returncode == 2 and says in p.stderr, p.stdout + p.stderr
    assert 'diff_gated: no configs/diff_gated_3L.py; it has 6L' in p.stderr and 'DEPTHS=' in p.stderr
    assert 'write the config (docs/adding_a_variant.md)' in p.stderr and 'Traceback' not in p.stderr
    assert calls == [] and not (tmp_path / 't2').exists() and 'report.py' not in p.stdout + p.stderr


def test_ablate_extra_arguments_make_a_sweep_of_their_own_and_say_which(tmp_path):
    """Extra --key=value that change what the runs compute go to a folder named by them, which the first line names
    (before: --max_iters=10 wrote into runs/shakespeare_demo, and the next plain launch was refused there); keys
    that say only where a run is computed, and the schedule's own values, keep the profile's folder."""
    env = dict(unset=('SWEEP',), PROFILE='demo', VARIANTS='nanogpt diff', SEEDS='1')
    p, calls = recorded_sweep(tmp_path, args=['--max_iters=10'], **env)
    own = tmp_path / 'shakespeare_demo_max_iters10'
    assert p.returncode == 0 and len(calls) == 2, p.stdout + p.stderr
    assert all(any(a.startswith(f'--out_dir={own}/') for a in c) for c in calls), calls
    assert p.stdout.splitlines()[0] == (f'ablate.sh: sweep {own} (a sweep of its own for --max_iters=10; '
                                        'SWEEP=<name> names it otherwise)')
    p, calls = recorded_sweep(tmp_path, **env)  # the plain launch: the profile's folder, not refused
    assert p.returncode == 0 and len(calls) == 4, p.stdout + p.stderr
    assert p.stdout.splitlines()[0] == f'ablate.sh: sweep {tmp_path}/shakespeare_demo'
    p, calls = recorded_sweep(tmp_path, args=['--device=cpu', '--max_iters=100', '--dropout=0.1', '--dropout=0.0'],
                              **env)
    assert p.returncode == 0 and all(f'--out_dir={tmp_path}/shakespeare_demo/' in ' '.join(c) for c in calls[4:])
    assert sorted(d.name for d in tmp_path.iterdir() if d.is_dir()) == ['shakespeare_demo',
                                                                        'shakespeare_demo_max_iters10']
    assert sweep_py.sweep_from_env(dict(PROFILE='cpu'), ['--dropout=0.1', '--dataset=data/x']).name == \
        'shakespeare_cpu_dropout0.1_datasetdata-x'


def test_ablate_checks_its_arguments_before_it_keeps_anything(tmp_path):
    """A typo in the extra arguments, or a flag one of the sweep's configs cannot take, stops the launch before any
    run and before sweep_settings is written, naming the config and the key (a typo kept in sweep_settings refused
    every launch after it, the corrected one too); SEEDS with a comma stops it too (one folder named s1,2)."""
    env = dict(os.environ, RUNS_DIR=str(tmp_path), PYTHON=sys.executable, PROFILE='demo', VARIANTS='nanogpt', SWEEP='s')
    for extra, args, says in [({}, ['--dropuot=0.1'], "configs/nanogpt_3L.py with the extra arguments and the "
                               "profile's schedule: command line: unknown config key 'dropuot'; did you mean dropout?"),
                              (dict(LEAK='time_norm', VARIANTS='diff nanogpt'), [],
                               "configs/nanogpt_3L.py with the extra arguments and the profile's schedule: config: "
                               "GPTConfig: leak='time_norm' with attn='softmax'"),
                              (dict(SEEDS='1,2'), [], 'SEEDS="1,2" must be whole numbers separated by spaces')]:
        p = subprocess.run(['bash', os.path.join(ROOT, 'ablate.sh'), *args], env=dict(env, **extra),
                           capture_output=True, text=True, timeout=300)
        assert p.returncode == 2 and says in p.stderr and 'Traceback' not in p.stderr, p.stdout + p.stderr
        assert not (tmp_path / 's').exists()  # no sweep_settings, no run folder
    p, calls = recorded_sweep(tmp_path, args=['--dropout=0.1'], PROFILE='demo', VARIANTS='nanogpt', SWEEP='s')
    assert p.returncode == 0 and len(calls) == 1, p.stderr  # the corrected command runs


def test_a_sweep_keeps_its_settings_and_refuses_a_launch_that_would_mix_them(tmp_path):
    """The first launch writes the settings its runs share (the schedule and the extra --key=value, the last of a
    key winning); another launch may add seeds or change where runs are computed, but one with another setting
    is refused before any run, naming both, since report.py would average the two as seeds."""
    env = dict(PROFILE='demo', VARIANTS='nanogpt', SWEEP='s')
    p, calls = recorded_sweep(tmp_path, args=['--dropout=0.1'], **env)
    assert p.returncode == 0 and len(calls) == 1, p.stderr
    settings = (tmp_path / 's' / 'sweep_settings').read_text().split()
    assert '--dropout=0.1' in settings and '--dropout=0.0' not in settings and '--max_iters=100' in settings
    p, calls = recorded_sweep(tmp_path, args=['--device=cpu', '--log_interval=5', '--dropout=0.1'], SEEDS='7',
                              **env)
    assert p.returncode == 0 and len(calls) == 2, p.stderr
    p, after = recorded_sweep(tmp_path, args=['--dropout=0.2'], **env)
    assert p.returncode == 2 and after == calls
    assert 'the sweep:    --dropout=0.1' in p.stderr and 'this command: --dropout=0.2' in p.stderr
    assert 'SWEEP=' in p.stderr


def test_launches_at_once_with_other_settings_into_one_new_sweep_leave_one_setting(tmp_path):
    """Six launches started together into a sweep that does not exist yet, each with its own dropout: one writes
    the sweep's settings, whole, and the other five are refused against them, before any of their runs (the old
    check-then-write let several through, each then training under its own settings in one sweep)."""
    # the worst order: each launch's `sweep.py run` runs here, looks for sweep_settings, finds none, and waits at a
    # gate (a lock the test holds) until all six have looked; releasing it wakes them at once, each sure the file is
    # absent, so a check-then-write lets every one through. (A lock, not a fifo: a reader that opened the fifo after
    # its writer had come and gone waited for ever; a late one here passes at once.)
    gate, gated, log = tmp_path / 'gate', tmp_path / 'gated_plan.py', tmp_path / 'calls.log'
    gated.write_text(f"import fcntl, os, sys\nsys.path.insert(0, {ROOT!r})\nimport sweep\nexists = os.path.exists\n\n\n"
                     "def looked(path):\n"
                     "    seen = exists(path)\n"
                     "    if os.path.basename(path) == 'sweep_settings':\n"
                     f"        open(os.path.join({str(tmp_path)!r}, f'arrived.{{os.getpid()}}'), 'w').close()\n"
                     f"        fcntl.flock(open({str(gate)!r}), fcntl.LOCK_SH)\n"
                     "    return seen\n\n\n"
                     "os.path.exists = looked\nsys.exit(sweep.main(sys.argv[2:]))\n")
    wrapper = python_for_ablate(tmp_path, f'case "$*" in *train.py*) echo "$*" >> {log} ;; esac',
                                before=f'[ "$1 $2" = "sweep.py run" ] && exec {sys.executable} {gated} "$@"')
    env = dict(os.environ, RUNS_DIR=str(tmp_path), PYTHON=wrapper, PROFILE='demo', VARIANTS='nanogpt', SWEEP='s')
    held = open(gate, 'w')
    fcntl.flock(held, fcntl.LOCK_EX)
    procs = [subprocess.Popen(['bash', os.path.join(ROOT, 'ablate.sh'), f'--dropout=0.{i}'], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for i in range(1, 7)]
    deadline = time.time() + 60
    while len(list(tmp_path.glob('arrived.*'))) < 6 and time.time() < deadline:
        time.sleep(0.05)
    time.sleep(0.2)  # from touching arrived to waiting on the lock
    held.close()  # releases the lock: every waiting launch goes on at once
    try:
        rcs = [p.wait(timeout=120) for p in procs]
    finally:
        for p in procs:
            p.kill()
    assert sorted(rcs) == [0, 2, 2, 2, 2, 2], [p.stderr.read() for p in procs]
    winner = rcs.index(0) + 1
    assert (tmp_path / 's' / 'sweep_settings').read_text().split().count(f'--dropout=0.{winner}') == 1
    assert [c for c in log.read_text().splitlines() if '--dropout=' in c and f'--dropout=0.{winner}' not in c] == []
    assert not list((tmp_path / 's').glob('.sweep_settings*'))  # no temporary file left


def test_sweep_settings_leave_out_the_keys_a_resume_may_change(tmp_path):
    """sweep_settings keeps what the runs compute, not where or how they compute it (config.py's FREE_ON_RESUME,
    which sweep.py reads from config.py's text, without torch): a launch that changes only those keys joins the
    sweep; every other key is kept, so a launch that changes it is refused."""
    import config
    assert sweep_py.FREE_ON_RESUME == config.FREE_ON_RESUME
    env = dict(PROFILE='demo', VARIANTS='nanogpt', SWEEP='s')
    p, calls = recorded_sweep(tmp_path, **env)
    assert p.returncode == 0 and len(calls) == 1, p.stderr
    free = [f'--{k}=x' for k in config.FREE_ON_RESUME if k not in ('out_dir', 'init_from')]  # those: the sweep's
    p, calls = recorded_sweep(tmp_path, args=free, **env)
    assert p.returncode == 0 and len(calls) == 2, p.stderr
    demo = sweep_py.sweep_from_env(dict(PROFILE='demo'), [])
    assert demo.settings([f'--{k}=x' for k in config.FREE_ON_RESUME]) == demo.settings([])
    for key in set(config.DEFAULTS) - set(config.FREE_ON_RESUME):
        assert f'--{key}=x' in demo.settings([f'--{key}=x']), key


@pytest.mark.parametrize('leak, variants', [('zero_future', ['nanogpt', 'diff']), ('time_norm', None)])
def test_ablate_leak_runs_the_bug_in_a_sweep_of_its_own(tmp_path, leak, variants):
    """LEAK=<bug>: every run gets --causal=False --leak=<bug> (the causality check refuses a leak in a causal run),
    in shakespeare_<profile>_leak_<bug>; time_norm, a bug in Diff's subln, defaults to the two Diff variants.
    An unknown LEAK stops before any run, naming the choices."""
    env = dict(PROFILE='cpu_long', SEEDS='1', LEAK=leak, **(dict(VARIANTS=' '.join(variants)) if variants else {}))
    p, calls = recorded_sweep(tmp_path, unset=() if variants else ('VARIANTS',), **env)
    assert p.returncode == 0, p.stdout + p.stderr
    assert [c[1] for c in calls] == [f'configs/{v}_3L.py' for v in variants or ['diff', 'diff_sym']]
    for c in calls:
        assert '--causal=False' in c and f'--leak={leak}' in c
        assert any(a.startswith(f'--out_dir={tmp_path}/shakespeare_cpu_long_leak_{leak}/') for a in c)
    p, after = recorded_sweep(tmp_path, unset=() if variants else ('VARIANTS',), **dict(env, LEAK='sideways'))
    assert p.returncode == 2 and 'is not one of' in p.stderr and 'time_norm' in p.stderr
    assert after == calls  # no run started


def test_ablate_seed_pipeline_with_sequential_windows(tmp_path):
    """PROFILE=seed_pipeline: the seed author's loop (35,000 steps at a constant lr, Adam without weight decay or
    clipping, dropout 0.1) at 3L 6L 8L; WINDOWS=sequential adds --window_order=sequential and names the sweep
    shakespeare_seed_pipeline_sequential. An unknown WINDOWS stops before any run."""
    env = dict(PROFILE='seed_pipeline', SEEDS='1', VARIANTS='nanogpt sym', WINDOWS='sequential')
    p, calls = recorded_sweep(tmp_path, unset=('DEPTHS',), **env)
    assert p.returncode == 0, p.stdout + p.stderr
    assert sorted(c[1] for c in calls) == sorted(f'configs/{v}_{d}.py' for v in ('nanogpt', 'sym')
                                                 for d in ('3L', '6L', '8L'))
    for c in calls:
        for flag in ('--max_iters=35000', '--decay_lr=False', '--weight_decay=0.0', '--grad_clip=0.0',
                     '--dropout=0.1', '--window_order=sequential'):
            assert flag in c, (flag, c)
        assert any(a.startswith(f'--out_dir={tmp_path}/shakespeare_seed_pipeline_sequential/') for a in c)
    p, after = recorded_sweep(tmp_path, unset=('DEPTHS',), **dict(env, WINDOWS='shuffled'))
    assert p.returncode == 2 and 'WINDOWS=shuffled is not one of: random sequential' in p.stderr, p.stderr
    assert after == calls  # no run started


@pytest.mark.parametrize('extra, sweep', [
    (dict(), 'shakespeare_cpu_long'),
    (dict(CAUSAL='0'), 'shakespeare_cpu_long_noncausal'),
    (dict(WINDOWS='sequential'), 'shakespeare_cpu_long_sequential'),
    (dict(CAUSAL='0', WINDOWS='sequential'), 'shakespeare_cpu_long_noncausal_sequential'),
    (dict(LEAK='zero_future', WINDOWS='sequential'), 'shakespeare_cpu_long_leak_zero_future_sequential'),
    (dict(LEAK='zero_future', CAUSAL='0'), 'shakespeare_cpu_long_leak_zero_future'),
])
def test_ablate_sweep_name_says_every_setting(tmp_path, extra, sweep):
    """Each kind of run gets a folder of its own: a re-launch skips finished runs and resumes stopped ones, so two
    kinds sharing a sweep would mix. --causal=False is passed once, also when a leak implies it."""
    p, calls = recorded_sweep(tmp_path, unset=[k for k in ('SWEEP', 'LEAK', 'CAUSAL', 'WINDOWS') if k not in extra],
                              PROFILE='cpu_long', SEEDS='1', VARIANTS='nanogpt', **extra)
    assert p.returncode == 0, p.stdout + p.stderr
    [call] = calls
    assert f'--out_dir={tmp_path}/{sweep}/nanogpt_3L_s1' in call
    assert call.count('--causal=False') == (1 if 'CAUSAL' in extra or 'LEAK' in extra else 0)
    assert ('--window_order=sequential' in call) == ('WINDOWS' in extra)


def test_ablate_refuses_sequential_windows_on_record_datasets(tmp_path):
    env = dict(os.environ, PROFILE='sink', RUNS_DIR=str(tmp_path), SEEDS='1', WINDOWS='sequential')
    p = subprocess.run(['bash', os.path.join(ROOT, 'ablate.sh')], env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 2 and 'PROFILE=sink trains on fixed-length records' in p.stderr, p.stderr
    assert not any(tmp_path.iterdir())



def test_the_tables_name_variants_that_have_configs():
    """sweep.py's tables agree: each profile's default variants are rows of the variants' table, each (under the
    profile's prefix) and each default depth has a config (sweep_from_env refuses one that has none), and the
    comparisons name the table's variants (diffv2: needle configs of its own, configs/needle_diffv2.py)."""
    names = {name for name, _, _ in sweep_py.VARIANTS}
    for name, profile in sweep_py.PROFILES.items():
        assert set((profile.variants or sweep_py.DEFAULT_VARIANTS).split()) <= names, name
        assert sweep_py.sweep_from_env(dict(PROFILE=name), []).configs(), name
    assert sweep_py.sweep_from_env(dict(PROFILE='full', LEAK='time_norm'), []).variants == ['diff', 'diff_sym']
    for measure, pairs in sweep_py.PAIRS.items():
        assert {v for pair in pairs for v in pair} - names <= {'diffv2'}, measure


def test_a_slurm_task_runs_its_line_of_the_list(tmp_path):
    """A task of SLURM=1's array (ABLATE_RUNS and SLURM_ARRAY_TASK_ID set) runs line SLURM_ARRAY_TASK_ID of the list
    written at submission, "config folder seed", a folder with spaces too; a task without its line is refused."""
    listed = tmp_path / 'runs'
    listed.write_text('configs/nanogpt_3L.py runs/s/nanogpt_3L_s1 1\nconfigs/diff_3L.py my runs/s/diff_3L_s2 2\n')
    env = dict(ABLATE_RUNS=str(listed), SLURM_ARRAY_TASK_ID='1')
    assert sweep_py.slurm_task(env) == ('1', ('configs/diff_3L.py', 'my runs/s/diff_3L_s2', '2'))
    assert sweep_py.slurm_task(dict(env, SLURM_ARRAY_TASK_ID='')) == (None, None)  # not a task: every run
    with pytest.raises(sweep_py.Refused, match='Slurm task 2 has no line in'):
        sweep_py.slurm_task(dict(env, SLURM_ARRAY_TASK_ID='2'))


# bash 4 and later, which macOS's bash 3.2 lacks: (pattern in ablate.sh's code, what to write instead)
BASH4 = [(r'\b(declare|local|typeset)\s+-\w*[An]', 'associative arrays, namerefs (4.0, 4.3): indexed arrays'),
         (r'\bwait\s+-n\b', 'wait -n (4.3): poll jobs -rp, wait PID, sleep'),
         (r'\b(mapfile|readarray)\b', 'mapfile, readarray (4.0): a while read loop'),
         (r'\$\{[#!]?\w+(\[[^]]*\])?(,|\^)', '${x,,}, ${x^^} (4.0): tr'),
         (r'\$\{\w+(\[[^]]*\])?@\w\}', '${x@Q} (4.4): printf %q'),
         (r'\$\{\w+\[-', 'a negative index (4.3): ${#a[@]} - 1'),
         (r'\bcoproc\b', 'coproc (4.0): a fifo'),
         (r'&>>', '&>> (4.0): >>file 2>&1'),
         (r'\|&', '|& (4.0): 2>&1 |'),
         (r';;&|;&', 'a case fall-through (4.0)'),
         (r'\[\[?\s+-v\s', 'test -v (4.2): ${x+set}'),
         (r'\bshopt\s+-s\s+(globstar|lastpipe|autocd|checkjobs|direxpand|inherit_errexit)', 'a bash 4 shopt'),
         (r'\$\{?(BASHPID|EPOCHSECONDS|EPOCHREALTIME)\b', 'a bash 4 or 5 variable'),
         (r'%\([^)]*\)T', "printf's %(...)T (4.2): date"),
         (r'\btaskset\b', 'taskset: Linux only')]


def bash4_constructs(text):
    """The lines of a script's code (comments left out) that need more than bash 3.2, or that need flock (not on
    macOS) rather than use it where `command -v flock` finds one, each with what to write instead."""
    found = []
    for n, line in enumerate(text.splitlines(), 1):
        code = re.sub(r'(^|\s)#.*', '', line)
        found += [(n, line.strip(), instead) for pattern, instead in BASH4 if re.search(pattern, code)]
        if re.search(r'\bflock\b', code) and 'command -v flock' not in code:
            found.append((n, line.strip(), 'flock only where `command -v flock` finds one'))
    return found


def test_ablate_sh_is_bash_3_2():
    """ablate.sh runs under macOS's bash 3.2: none of bash 4's constructs, and no command that macOS lacks. (No bash
    3.2 here to run it in; test_ablate_runs_under_bash_3_2 does where there is one.)"""
    assert bash4_constructs(open(os.path.join(ROOT, 'ablate.sh')).read()) == []
    sample = ('declare -A seen\nwhile [ $n -gt 0 ]; do wait -n; done\nmapfile -t runs < list\necho "${v,,} ${v^^}"\n'
              'cmd &>> log\ncmd |& tee\nflock -n "$d/.lock" true  # a comment: wait -n\ntaskset -c 0 python\n'
              'command -v flock >/dev/null && flock -n x true\n# declare -A in a comment\nlocal -n ref=$1\n')
    assert [n for n, _, _ in bash4_constructs(sample)] == [1, 2, 3, 4, 5, 6, 7, 8, 11]


def bash_3_2():
    """A bash 3.2 to run ablate.sh with: $ABLATE_BASH32, or /bin/bash where it is one (macOS); else None."""
    for bash in (os.environ.get('ABLATE_BASH32'), '/bin/bash'):
        if bash and os.access(bash, os.X_OK):
            p = subprocess.run([bash, '-c', 'echo $BASH_VERSION'], capture_output=True, text=True)
            if p.stdout.startswith('3.2'):
                return bash
    return None


def test_ablate_runs_under_bash_3_2(tmp_path):
    """Under bash 3.2 (set -u takes an empty array for unbound there), with a stand-in python: the sink profile's
    empty schedule and no extra arguments, two runs at once on two GPUs, a resume and a run that fails; then
    ANALYZE=1 retries the failed run and analyses the others."""
    bash = bash_3_2()
    if bash is None:
        pytest.skip('no bash 3.2 here (set ABLATE_BASH32 to one)')
    once = tmp_path / 'failed'  # softmax1_2L_s2 fails the first time
    fail = f'case "$d" in *softmax1_2L_s2) [ -f {once} ] || {{ touch {once}; exit 3; }} ;; esac'
    fake = stand_ins(tmp_path / 'calls.log', fail)
    env = dict(os.environ, PROFILE='sink', VARIANTS='nanogpt softmax1', SEEDS='1 2', JOBS='2', GPUS='0 1',
               RUNS_DIR=str(tmp_path), PYTHON=python_for_ablate(tmp_path, fake))
    root = tmp_path / 'bigram_backcopy_sink'
    (root / 'bb_nanogpt_2L_s2').mkdir(parents=True)
    (root / 'bb_nanogpt_2L_s2' / 'ckpt.pt').write_text('')
    p = subprocess.run([bash, os.path.join(ROOT, 'ablate.sh')], env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 1 and 'ablate.sh: 1 run(s) failed' in p.stderr, p.stdout + p.stderr
    assert 'sweep ' + str(root) + ': 3 run, 0 skipped, 1 failed, 0 busy elsewhere' in p.stdout
    calls = (tmp_path / 'calls.log').read_text().splitlines()
    assert f'train.py configs/bb_nanogpt_2L.py --seed=2 --out_dir={root}/bb_nanogpt_2L_s2 --init_from=resume ' \
           '--resume_strict=True' in calls and calls[-1] == f'report.py {root}'
    p = subprocess.run([bash, os.path.join(ROOT, 'ablate.sh')], env=dict(env, ANALYZE='1'), capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 0 and '1 run, 3 skipped, 0 failed' in p.stdout, p.stdout + p.stderr


def test_many_jobs_share_the_cores_among_their_compile_workers(tmp_path):
    """Each run's torch.compile would start as many Inductor compile workers as the machine has cores; with JOBS runs
    at once ablate.sh gives each cores / JOBS (at least 1), unless TORCHINDUCTOR_COMPILE_THREADS is set."""
    log = tmp_path / 'env.log'
    stub = python_for_ablate(tmp_path, f'[ "$1" = train.py ] && echo "${{TORCHINDUCTOR_COMPILE_THREADS:-unset}}" >> '
                                       f'{log}\n' + stand_ins(tmp_path / 'calls.log'))
    cores = os.cpu_count()
    sweep(tmp_path / 'a', report=False, VARIANTS='nanogpt', DEPTHS='3L', JOBS='2', PYTHON=stub)
    sweep(tmp_path / 'b', report=False, VARIANTS='nanogpt', DEPTHS='3L', JOBS='1', PYTHON=stub)
    sweep(tmp_path / 'c', report=False, VARIANTS='nanogpt', DEPTHS='3L', JOBS='2', PYTHON=stub,
          TORCHINDUCTOR_COMPILE_THREADS='5')
    assert log.read_text().split() == [str(max(1, cores // 2)), 'unset', '5']


# ----------------------------------------------------------------------------- the progress line

def _record(run, it, t, **kw):
    """A log.jsonl line as train.py writes it, the file's mtime set to when it was written (t)."""
    run.mkdir(parents=True, exist_ok=True)
    with open(run / 'log.jsonl', 'a') as f:
        f.write(json.dumps(dict(iter=it, kind='train', **kw)) + '\n')
    os.utime(run / 'log.jsonl', (t, t))


def _touch(path, t):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text('')
    os.utime(path, (t, t))


def test_progress_says_runs_done_running_and_left_with_each_run_s_iteration_and_eta(tmp_path):
    """The line read from the run folders: finished (summary.json), failed (a FAILED of this launch), running (a
    train.log touched since the launch) and left; a running run's iteration of its max_iters (the profile's 150), its
    ETA at its pace over this launch, evaluations included (ms_per_iter before a second record), and the sweep's ETA
    with the runs left at the mean pace over JOBS slots."""
    sw = sweep_py.sweep_from_env(dict(PROFILE='cpu', VARIANTS='nanogpt diff_sym', DEPTHS='3L', SEEDS='1 2 3',
                                      SWEEP='t', RUNS_DIR=str(tmp_path), JOBS='2'), [])
    start = 1_000_000.0
    root = tmp_path / 't'
    _touch(root / 'nanogpt_3L_s1' / 'summary.json', start - 500)  # finished before this launch: skipped
    _touch(root / 'nanogpt_3L_s3' / 'FAILED', start - 500)  # failed before: left until it starts again
    _touch(root / 'diff_sym_3L_s2' / 'train.log', start - 500)  # a resume of an earlier launch's run, not started yet
    run = root / 'diff_sym_3L_s1'
    _touch(run / 'train.log', start + 1)
    _record(run, 90, start - 400)  # the earlier launch's log: not this launch's pace
    progress = sweep_py.Progress(sw, [], start)
    assert progress.line(start + 5) == f'sweep {root}: 1 finished, 1 running, 4 left | diff_sym_3L_s1 starting'
    _record(run, 10, start + 10, ms_per_iter=500.0)  # the first record: 140 left at 0.5 s
    assert progress.line(start + 10).endswith('| diff_sym_3L_s1 10/150 ETA 1m 10s')
    _record(run, 30, start + 30)  # `20 iterations / 20 s`: `150 - 30 = 120 s` left, less the `5 s` since its record
    line = progress.line(start + 35)
    # the four left at `150 s` each and the running one's `115 s`, over two slots: `(4 * 150 + 115) / 2 = 357.5 s`
    assert line == f'sweep {root}: 1 finished, 1 running, 4 left, ETA 5m 58s | diff_sym_3L_s1 30/150 ETA 1m 55s'
    _touch(root / 'nanogpt_3L_s2' / 'train.log', start + 40)
    _touch(root / 'nanogpt_3L_s2' / 'FAILED', start + 41)
    _touch(root / 'nanogpt_3L_s1' / 'train.log', start + 40)  # a finished run is finished, whatever its log
    assert progress.line(start + 45).startswith(f'sweep {root}: 1 finished, 1 running, 3 left, 1 failed, ETA ')
    _touch(run / 'summary.json', start + 50)
    assert progress.line(start + 50) is None  # nothing running: nothing to say


def test_ablate_shows_progress_before_its_last_line(tmp_path):
    """PROGRESS_EVERY=1: the sweep's console says where its runs are (a stand-in train.py writes its records a
    second apart), before the sweep's last line and never after it."""
    train = ('case "$1" in train.py) for a in "$@"; do case "$a" in --out_dir=*) d=${a#--out_dir=} ;; esac; done\n'
             '  for i in 1 2; do sleep 1; echo "{\\"iter\\": $i, \\"kind\\": \\"train\\", \\"ms_per_iter\\": 1000}" '
             '>> "$d/log.jsonl"; done; sleep 1\n'
             '  echo \'{"iter": 2}\' > "$d/summary.json" ;;\nesac')
    env = dict(os.environ, PROFILE='cpu', VARIANTS='nanogpt diff_sym', DEPTHS='3L', SWEEP='t', RUNS_DIR=str(tmp_path),
               PROGRESS_EVERY='1', PYTHON=python_for_ablate(tmp_path, train))
    p = subprocess.Popen(['bash', os.path.join(ROOT, 'ablate.sh'), *TINY], env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True)
    out = p.communicate(timeout=120)[0]
    assert p.returncode == 0, out
    lines = out.splitlines()
    shown = [l for l in lines if l.startswith('progress: ')]
    root = tmp_path / 't'
    assert any(l.startswith(f'progress: sweep {root}: 0 finished, 1 running, 1 left')
               and re.search(r'\| nanogpt_3L_s1337 [12]/2 ETA', l) for l in shown), out
    assert any(l.startswith(f'progress: sweep {root}: 1 finished, 1 running, 0 left')
               and 'diff_sym_3L_s1337' in l for l in shown), out
    summary = next(i for i, l in enumerate(lines) if l.startswith(f'sweep {root}: 2 run'))
    assert all(i < summary for i, l in enumerate(lines) if l.startswith('progress: ')), out


# --- what a new user meets, a GPU window, the learning-rate sweep, the lanes


@pytest.mark.parametrize('arg', ['--help', '-h'])
def test_ablate_help_prints_its_usage_and_makes_nothing(tmp_path, arg):
    out = sweep(tmp_path, arg, VARIANTS='nanogpt', DEPTHS='3L')
    assert 'PROFILE' in out and 'LRS' in out and not (tmp_path / 't').exists()


@pytest.mark.parametrize('arg', ['--dropout', 'dropout=0.1', 'configs/nanogpt_3L.py'])
def test_ablate_refuses_an_argument_that_is_not_key_value_before_anything_is_made(tmp_path, arg):
    out = sweep(tmp_path, arg, rc=2, VARIANTS='nanogpt', DEPTHS='3L')
    assert f"'{arg}'" in out and not (tmp_path / 't').exists(), out


def test_a_refusal_over_a_sweep_s_settings_says_how_to_start_afresh(tmp_path):
    calls, root = tmp_path / 'calls.log', tmp_path / 't'
    env = dict(PYTHON=python_for_ablate(tmp_path, stand_ins(calls)), VARIANTS='nanogpt', DEPTHS='3L')
    sweep(tmp_path, **env)
    out = sweep(tmp_path, '--dropout=0.3', rc=2, **env)
    assert 'SWEEP=<name>' in out and f'remove {root}' in out and 'this command: --dropout=0.3' in out
    assert calls.read_text().count('train.py') == 1  # the refused launch trained nothing


def test_a_launch_that_trains_nothing_keeps_no_settings(tmp_path):
    """A launch whose one run is busy elsewhere trains nothing: it keeps no sweep_settings (which would bind the
    next launch to its settings)."""
    root = tmp_path / 't'
    (root / 'nanogpt_3L_s1337').mkdir(parents=True)
    holder = subprocess.Popen([sys.executable, '-c', "import fcntl, sys, time\nf = open(sys.argv[1], 'a+')\n"
                               "fcntl.flock(f, fcntl.LOCK_EX)\nprint('locked', flush=True)\ntime.sleep(600)",
                               str(root / 'nanogpt_3L_s1337' / '.lock')], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == 'locked'
        out = sweep(tmp_path, VARIANTS='nanogpt', DEPTHS='3L', report=False,
                    PYTHON=python_for_ablate(tmp_path, stand_ins(tmp_path / 'calls.log')))
    finally:
        holder.kill()
        holder.wait()
    assert '1 busy elsewhere' in out and not (root / 'sweep_settings').exists(), out


def test_the_demo_profile_evaluates_often_enough_for_its_curves(tmp_path):
    """The demo's schedule, on a tiny model: its val curve has at least 8 points (it had 3)."""
    demo = sweep_py.PROFILES['demo'].schedule.split()
    tiny = ['--n_embd=16', '--n_head=2', '--block_size=16', '--batch_size=2', '--eval_iters=1', '--device=cpu']
    p = subprocess.run([sys.executable, 'train.py', 'configs/nanogpt_3L.py', *demo, *tiny, f'--out_dir={tmp_path}'],
                       cwd=ROOT, capture_output=True, text=True, timeout=600, env=dict(os.environ, OMP_NUM_THREADS='1'))
    assert p.returncode == 0, p.stderr
    evals = [r for r in map(json.loads, open(tmp_path / 'log.jsonl')) if r['kind'] == 'eval']
    assert len({r['iter'] for r in evals}) >= 8


def test_ablate_stop_says_one_line_a_run_and_nothing_after(tmp_path):
    """A Ctrl-C from a terminal reaches every process of its group: the sweep says it is stopping, then one line a
    run in progress, each saving its checkpoint; no shell's `Terminated`, no `stopping: 0 run(s)` after them."""
    env = dict(os.environ, PROFILE='cpu', VARIANTS='nanogpt diff', DEPTHS='3L', SWEEP='t', JOBS='2',
               RUNS_DIR=str(tmp_path), PYTHON=python_for_ablate(tmp_path), PROGRESS_EVERY='0', OMP_NUM_THREADS='1')
    args = [a for a in TINY if not a.startswith(('--max_iters', '--lr_decay_iters', '--eval_interval'))]
    p = subprocess.Popen(['bash', os.path.join(ROOT, 'ablate.sh'), *args, '--max_iters=100000',
                          '--lr_decay_iters=100000', '--eval_interval=1000'], env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True, start_new_session=True)
    logs = [tmp_path / 't' / f'{v}_3L_s1337' / 'log.jsonl' for v in ('nanogpt', 'diff')]
    try:
        deadline = time.time() + 300
        while not all(l.exists() and '"kind": "train"' in l.read_text() for l in logs) and time.time() < deadline:
            time.sleep(0.5)
        os.killpg(p.pid, signal.SIGINT)  # as a terminal's Ctrl-C: to the whole process group
        out = p.communicate(timeout=300)[0]
    finally:
        kill_left(p, [])
    lines = out.splitlines()
    stopped = [i for i, l in enumerate(lines) if l.startswith('stopped ')]
    assert p.returncode == 130 and len(stopped) == 2 and 'Terminated' not in out, out
    stopping = [i for i, l in enumerate(lines) if 'stopping:' in l]
    assert stopping == [min(stopped) - 1] and 'stopping: 2 run(s)' in lines[stopping[0]], out
    assert all((l.parent / 'ckpt.pt').exists() for l in logs)


def test_a_gpu_window_trains_only_the_missing_runs_and_a_cut_run_resumes(tmp_path):
    """A GPU window: `timeout LIMIT env RUNS_DIR=results ./ablate.sh` into a folder that holds finished runs trains
    only the missing ones; the run in progress when the limit comes saves its checkpoint and leaves no summary.json,
    and the next launch resumes it and finishes it."""
    calls, root = tmp_path / 'calls.log', tmp_path / 't'
    fake = python_for_ablate(tmp_path / 'fake', stand_ins(calls))
    sweep(tmp_path, VARIANTS='nanogpt diff', DEPTHS='3L', SEEDS='1', PYTHON=fake, report=False)
    calls.unlink()
    sweep(tmp_path, VARIANTS='nanogpt diff', DEPTHS='3L', SEEDS='1 2', PYTHON=fake, report=False)
    assert sorted(l.split('--out_dir=')[1].split()[0] for l in calls.read_text().splitlines()
                  if l.startswith('train.py')) == [f'{root}/diff_3L_s2', f'{root}/nanogpt_3L_s2']
    # the limit comes during a real run (timeout's own alarm, sent early): it stops with its checkpoint
    cut = tmp_path / 'long' / 'nanogpt_3L_s3'
    args = [a for a in TINY if not a.startswith(('--max_iters', '--lr_decay_iters', '--eval_interval'))]
    long = ['--max_iters=100000', '--lr_decay_iters=100000', '--eval_interval=1000']
    env = dict(os.environ, PROFILE='cpu', VARIANTS='nanogpt', DEPTHS='3L', SEEDS='3', SWEEP='long',
               RUNS_DIR=str(tmp_path),
               PYTHON=python_for_ablate(tmp_path / 'real'), PROGRESS_EVERY='0', OMP_NUM_THREADS='1')
    p = subprocess.Popen(['timeout', '900', 'bash', os.path.join(ROOT, 'ablate.sh'), *args, *long], env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.time() + 300
    while not ((cut / 'log.jsonl').exists() and '"kind": "train"' in (cut / 'log.jsonl').read_text()) \
            and time.time() < deadline:
        time.sleep(0.5)
    p.send_signal(signal.SIGALRM)  # timeout's alarm: what its limit does, sooner
    out = p.communicate(timeout=300)[0]
    assert p.returncode == 124 and f'stopped {cut}: stopped at iteration' in out, out
    assert (cut / 'ckpt.pt').exists() and not (cut / 'summary.json').exists()
    out = subprocess.run(['bash', os.path.join(ROOT, 'ablate.sh'), *args, *long], env=dict(env, PYTHON=fake),
                         capture_output=True, text=True, timeout=300).stdout
    assert f'run    {cut} --init_from=resume --resume_strict=True' in out and (cut / 'summary.json').exists()


def test_lrs_makes_the_folders_and_settings_of_one_launch_a_rate(tmp_path):
    """LRS="1e-3 3e-2": the sweeps and sweep_settings that SWEEP=shakespeare_cpu_long_lr<rate> with
    --learning_rate=<rate> makes (the gate's claim's runs), so a launch over folders made that way skips their runs."""
    calls = tmp_path / 'calls.log'
    env = dict(os.environ, PROFILE='cpu_long', VARIANTS='nanogpt gated', SEEDS='1', RUNS_DIR=str(tmp_path),
               PYTHON=python_for_ablate(tmp_path, '[ "$1" = report.py ] && exit 0\n' + stand_ins(calls)))

    def launch(*args, rc=0, **more):
        p = subprocess.run(['bash', os.path.join(ROOT, 'ablate.sh'), *args], env=dict(env, **more),
                           capture_output=True, text=True, timeout=300)
        assert p.returncode == rc, p.stdout + p.stderr
        return p.stdout
    launch('--learning_rate=3e-2', SWEEP='shakespeare_cpu_long_lr3e-2')
    settings = (tmp_path / 'shakespeare_cpu_long_lr3e-2' / 'sweep_settings').read_text().splitlines()
    assert settings == ['--batch_size=32', '--block_size=256', '--dropout=0.0', '--eval_interval=100',
                        '--eval_iters=20', '--learning_rate=3e-2', '--lr_decay_iters=500', '--max_iters=500',
                        '--min_lr=1e-4', '--warmup_iters=50']
    # the committed folder of these runs holds the same settings, so that a launch over it skips them
    assert (open(os.path.join(ROOT, 'results', 'shakespeare_cpu_long_lr3e-2', 'sweep_settings')).read().splitlines()
            == settings)
    calls.unlink()
    out = launch(LRS='1e-3 3e-2')
    trained = [l for l in calls.read_text().splitlines() if l.startswith('train.py')]
    assert len(trained) == 2 and all('--learning_rate=1e-3' in l for l in trained), trained
    assert [l.split()[1] for l in out.splitlines() if l.startswith('skip')] == \
        [f'{tmp_path}/shakespeare_cpu_long_lr3e-2/{r}_3L_s1' for r in ('nanogpt', 'gated')]
    assert (tmp_path / 'shakespeare_cpu_long_lr1e-3' / 'sweep_settings').read_text().splitlines() == \
        [a.replace('3e-2', '1e-3') for a in settings]
    launch('--learning_rate=1e-2', rc=2, LRS='1e-3')  # the rate is LRS's to give


def test_the_lanes_get_their_own_gpus_and_the_runs_in_turn():
    assert sweep_py.lane_gpus(['0', '1', '2'], 3, 1) == ['0', '1', '2']
    assert sweep_py.lane_gpus(['0', '1', '2'], 4, 1) == ['0', '1', '2', '0']  # round robin past the last
    assert sweep_py.lane_gpus(['4', '5', '6', '7'], 2, 2) == ['4,5', '6,7']  # NPROC=2: a group each
    assert sweep_py.lane_gpus([], 2, 1) == []


def test_nproc_runs_each_run_under_torchrun(tmp_path):
    """NPROC=2: each run is torchrun's (python -m torch.distributed.run), with no launcher of ours around it."""
    calls = tmp_path / 'calls.log'
    torchrun = stand_ins(calls).replace('case "$1" in', '[ "$1" = -m ] && shift 4\ncase "$1" in', 1)
    sweep(tmp_path, VARIANTS='nanogpt', DEPTHS='3L', NPROC='2', GPUS='', report=False,
          PYTHON=python_for_ablate(tmp_path, torchrun))
    line = calls.read_text().splitlines()[0]
    assert line.startswith('-m torch.distributed.run --standalone --nproc_per_node=2 train.py configs/nanogpt_3L.py')


def test_slurm_submits_the_unfinished_runs_as_an_array_and_a_report_job_after_it(tmp_path):
    """SLURM=1 with sbatch faked on PATH: one array of the unfinished runs (their list written for the tasks, the
    sweep's settings kept), then report.py's job after it; with every run finished, report.py at once instead."""
    bin_dir, sbatch_log, calls = tmp_path / 'bin', tmp_path / 'sbatch.log', tmp_path / 'calls.log'
    bin_dir.mkdir()
    (bin_dir / 'sbatch').write_text(f'#!/bin/sh\necho "$*" >> {sbatch_log}\necho 12$(wc -l < {sbatch_log})\n')
    (bin_dir / 'sbatch').chmod(0o755)
    root = tmp_path / 't'
    (root / 'nanogpt_3L_s1').mkdir(parents=True)
    (root / 'nanogpt_3L_s1' / 'summary.json').write_text('{"iter": 2}')
    kw = dict(VARIANTS='nanogpt diff', DEPTHS='3L', SEEDS='1 2', SLURM='1', PATH=f"{bin_dir}:{os.environ['PATH']}",
              PYTHON=python_for_ablate(tmp_path, stand_ins(calls)))
    out = sweep(tmp_path, **kw)
    array, report_job = sbatch_log.read_text().splitlines()
    assert '--array=0-2' in array and array.endswith('ablate.sh ' + ' '.join(TINY)), array
    assert '--dependency=afterany:121' in report_job and f'report.py {root}' in report_job
    listed = array.split('ABLATE_RUNS=')[1].split(',')[0]
    assert [line.split()[1] for line in open(listed)] == [f'{root}/{r}' for r in ('diff_3L_s1', 'nanogpt_3L_s2',
                                                                                    'diff_3L_s2')]
    assert 'submitted 3 run(s) of 4 as Slurm array job 121' in out and (root / 'sweep_settings').exists()
    assert not calls.exists()  # nothing trained here
    for r in ('diff_3L_s1', 'nanogpt_3L_s2', 'diff_3L_s2'):
        (root / r).mkdir()
        (root / r / 'summary.json').write_text('{"iter": 2}')
    out = sweep(tmp_path, **kw)
    assert 'every run of' in out and calls.read_text().splitlines() == [f'report.py {root}']
    assert len(sbatch_log.read_text().splitlines()) == 2  # nothing submitted again
