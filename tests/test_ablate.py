"""ablate.sh and sweep.py: the sweep's logic with stand-ins for train.py, the analyzers, the worker and report.py
(sh or torch-free python, so that a launch costs a fraction of a second), and real train.py where the property needs
it: a Ctrl-C that stops real runs with their checkpoints, and real runs through `sweep.py worker`. report.py on
hand-written summaries at the end."""
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
import profiles  # noqa: E402
import report  # noqa: E402
import sweep as sweep_py  # noqa: E402
from sweep import Refused, Sweep  # noqa: E402

TINY = ['--n_embd=32', '--n_head=2', '--block_size=16', '--batch_size=2', '--max_iters=2', '--lr_decay_iters=2',
        '--eval_interval=2', '--eval_iters=1', '--log_interval=1']
# a real run that trains until it is stopped: the tiniest model, no evaluation on its way
LONG = ['--n_layer=1', '--n_embd=16', '--n_head=2', '--block_size=16', '--batch_size=2', '--eval_iters=1',
        '--log_interval=1', '--max_iters=100000', '--lr_decay_iters=100000', '--eval_interval=100000', '--compile=False']


def python_for_ablate(where, script=None, before=''):
    """A PYTHON for ablate.sh, written in the folder `where`: the sh code `before` first; then sweep.py's run (the
    sweep's own logic) with this python, and its config check skipped (a torch import: seconds a launch; the check's
    own tests run it); then every other command line ("$@": train.py's, `sweep.py worker`'s, report.py's, an
    analyzer's) through the sh code `script`, which exits 0 where it falls through. script None: this python runs them."""
    if script is None:
        script = f'exec {sys.executable} "$@"'
    os.makedirs(where, exist_ok=True)
    wrapper = where / 'python'
    wrapper.write_text(f'#!/bin/sh\n{before}\n[ "$1 $2" = "sweep.py check" ] && exit 0\n'
                       f'[ "$1 $2" = "sweep.py run" ] && exec {sys.executable} "$@"\n{script}\nexit 0\n')
    wrapper.chmod(0o755)
    return str(wrapper)


def stand_ins(log, fail=':'):
    """sh code for python_for_ablate: each command line to the file log; train.py's stand-in finishes its run ($d) at
    iteration 2 (summary.json, ckpt.pt), after the sh code fail; with HOLD=<status> in the environment it trains
    until its TERM instead, then saves ckpt.pt, says where it stopped as train.py does and exits with that status.
    analyze.py's and needle_eval.py's write their file of iteration 2."""
    return (f'echo "$*" >> {log}\n'
            'case "$1" in\n'
            '  train.py) for a in "$@"; do case "$a" in --out_dir=*) d=${a#--out_dir=} ;; esac; done\n'
            f'    {fail}\n'
            '    if [ -n "${HOLD:-}" ]; then\n'
            '      trap \'touch "$d/ckpt.pt"; echo "stopped at iteration 1"; exit $HOLD\' TERM\n'
            '      echo \'{"iter": 1, "kind": "train"}\' >> "$d/log.jsonl"\n'
            '      while :; do sleep 0.1; done\n'
            '    fi\n'
            '    echo \'{"iter": 2}\' > "$d/summary.json"; touch "$d/ckpt.pt" ;;\n'
            '  analyze.py) echo \'{"iter": 2}\' > "${2#--out_dir=}/analysis.json" ;;\n'
            '  needle_eval.py) echo \'{"iter": 2}\' > "${2#--out_dir=}/needle_eval.json" ;;\n'
            '  report.py) exit 0 ;;\n'
            'esac')


def sweep(runs_dir, *extra, rc=0, python=None, **env_vars):
    """ablate.sh with TINY's arguments and the stand-ins (calls.log in runs_dir records each command line), or the
    PYTHON python; its output. A value None unsets the variable."""
    env = dict(os.environ, PROFILE='cpu', VARIANTS='nanogpt diff_sym diff_gated', DEPTHS='3L 6L', SWEEP='t',
               RUNS_DIR=str(runs_dir), OMP_NUM_THREADS='1', PROGRESS_EVERY='0')
    env.update(env_vars, PYTHON=python or python_for_ablate(runs_dir, stand_ins(runs_dir / 'calls.log')))
    env = {k: v for k, v in env.items() if v is not None}
    p = subprocess.run(['bash', os.path.join(ROOT, 'ablate.sh'), *TINY, *extra], env=env, capture_output=True,
                       text=True, timeout=300)
    assert p.returncode == rc, p.stdout + p.stderr
    return p.stdout + p.stderr


def calls(runs_dir, what='train.py'):
    """The command lines of `what` that the stand-ins recorded, split."""
    log = runs_dir / 'calls.log'
    return [c.split() for c in log.read_text().splitlines() if c.startswith(what)] if log.exists() else []


def started(env, args=()):
    """ablate.sh started in a process group of its own (as a terminal's job), its output piped."""
    return subprocess.Popen(['bash', os.path.join(ROOT, 'ablate.sh'), *args], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)


def wait_until(ready, timeout=300):
    deadline = time.time() + timeout
    while not ready():
        assert time.time() < deadline, 'timed out'
        time.sleep(0.1)


def training(*runs):
    """Whether every run folder has a training record in its log.jsonl (a stop before the first step saves nothing)."""
    return all((d / 'log.jsonl').exists() and '"kind": "train"' in (d / 'log.jsonl').read_text() for d in runs)


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


def kill_left(proc, pids=()):
    """A test's clean-up, whatever its assertions found: a sweep still running is stopped (its TERM: it stops and
    kills its runs, each in a session of its own), then killed with its group, and the pids the test recorded."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            pass
    for pid in [-proc.pid, *pids]:
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    proc.wait()


# ----------------------------------------------------------------------------- skip, resume, refuse, report

def test_a_sweep_runs_each_pair_with_a_config_skips_finished_runs_resumes_stopped_ones_and_refuses_other_settings(
        tmp_path):
    root = tmp_path / 't'
    out = sweep(tmp_path)
    # diff_gated has only a 6L config: the sweep runs what exists, depth by depth, and says what it left out
    assert [c[1] for c in calls(tmp_path)] == ['configs/nanogpt_3L.py', 'configs/diff_sym_3L.py',
                                               'configs/nanogpt_6L.py', 'configs/diff_sym_6L.py',
                                               'configs/diff_gated_6L.py']
    assert out.splitlines()[0] == f'ablate.sh: sweep {root}; no config, so left out: diff_gated_3L'
    # the profile's schedule, then the run's seed and folder, then the extra arguments (train.py's last value wins)
    cpu = profiles.PROFILES['cpu'].schedule.split()
    assert calls(tmp_path)[0][1:] == ['configs/nanogpt_3L.py', *cpu, '--seed=1337', f'--out_dir={root}/nanogpt_3L_s1337',
                                      *TINY]
    assert out.count('done   ') == 5 and f'sweep {root}: 5 run, 0 skipped, 0 failed, 0 busy elsewhere' in out
    assert (root / 'sweep_settings').read_text().split() == Sweep(dict(PROFILE='cpu'), TINY).settings()
    # a re-launch skips the finished runs and resumes one stopped with its checkpoint (strictly: the checkpoint's
    # settings must be the sweep's); a new seed's runs start without a resume
    (tmp_path / 'calls.log').unlink()
    os.remove(root / 'nanogpt_3L_s1337' / 'summary.json')
    out = sweep(tmp_path, VARIANTS='nanogpt', DEPTHS='3L', SEEDS='1337 7')
    assert out.count('skip   ') == 0 and f'run    {root}/nanogpt_3L_s1337 --init_from=resume --resume_strict=True' in out
    resumed, new = calls(tmp_path)
    assert resumed[-len(TINY) - 2:-len(TINY)] == ['--init_from=resume', '--resume_strict=True']
    assert not any(a.startswith(('--init_from', '--resume_strict')) for a in new) and '--seed=7' in new
    out = sweep(tmp_path)
    assert out.count('skip   ') == 5 and 'run    ' not in out
    # another schedule would skip the finished 2-step runs beside 4-step ones, and report.py average them: refused,
    # saying how to start afresh, before anything is trained
    (tmp_path / 'calls.log').unlink()
    out = sweep(tmp_path, '--max_iters=4', rc=2)
    assert 'the sweep:    --max_iters=2' in out and 'this command: --max_iters=4' in out, out
    assert 'SWEEP=<name>' in out and f'remove {root}' in out and not calls(tmp_path)


# a train.py that finishes its run as train.py does for report.py (its seed, its schedule's last step), or fails
# where its config is configs/diff_sym_*: FAILED, and the report shows it
FAKE_TRAIN = """import json, os, sys
a = dict(x[2:].split('=', 1) for x in sys.argv[2:] if x.startswith('--'))
print('step 0: train.py stand-in,', sys.argv[1])
if 'diff_sym' in sys.argv[1]:
    sys.exit('error: a failing run')
cfg = dict(dataset='shakespeare_char', seed=int(a['seed']), max_iters=int(a['max_iters']))
json.dump(dict(config=cfg, finished=True, iter=cfg['max_iters'], final_train_loss=2.0, final_val_loss=2.1,
               n_params=1e5, tokens_per_sec=1e3, wall_time_s=1.0, device='cpu', dtype='float32'),
          open(os.path.join(a['out_dir'], 'summary.json'), 'w'))
"""


def fake_train(tmp_path):
    """A PYTHON whose train.py is FAKE_TRAIN and whose report.py is the real one."""
    (tmp_path / 'fake_train.py').write_text(FAKE_TRAIN)
    return python_for_ablate(tmp_path, f'[ "$1" = train.py ] && shift && exec {sys.executable} '
                                       f'{tmp_path}/fake_train.py "$@"\nexec {sys.executable} "$@"')


def test_failed_runs_are_marked_and_reported_and_make_the_exit_status_1_after_the_report(tmp_path):
    out = sweep(tmp_path, rc=1, VARIANTS='nanogpt diff_sym', DEPTHS='3L', python=fake_train(tmp_path))
    root = tmp_path / 't'
    assert f'FAILED {root}/diff_sym_3L_s1337 (exit 1): tail of' in out and 'error: a failing run' in out
    assert 'ablate.sh: 1 run(s) failed' in out and (root / 'diff_sym_3L_s1337' / 'FAILED').read_text() == '1\n'
    text = (root / 'results.md').read_text()  # report.py ran after the runs: the table, and the failure in it
    assert '| 3L |' in text and 'FAILED s1337' in text


def test_arguments_that_are_not_key_value_or_that_the_sweep_sets_per_run_are_refused_before_anything_is_made(
        tmp_path):
    """An extra --seed=5 used to override SEEDS in every run (three identical runs averaged as three seeds), and a
    stray --help became a setting; the refusal names the argument."""
    for arg, says in [('--seed=5', "--seed is the sweep's to set"), ('--out_dir=x', "--out_dir is the sweep's"),
                      ('--init_from=resume', "--init_from is the sweep's"), ('--dropout', "'--dropout' is not a"),
                      ('dropout=0.1', "'dropout=0.1' is not a --key=value"), ('configs/nanogpt_3L.py', 'is not a')]:
        with pytest.raises(Refused, match=re.escape(says)):
            Sweep(dict(PROFILE='cpu'), [arg])
    out = sweep(tmp_path, '--dropout', rc=2)
    assert "'--dropout' is not a --key=value for train.py" in out and not (tmp_path / 't').exists()


@pytest.mark.parametrize('arg', ['--help', '-h'])
def test_help_prints_the_settings_and_makes_nothing(tmp_path, arg):
    out = sweep(tmp_path, arg)
    assert 'PROFILE' in out and 'LRS' in out and 'STOP_GRACE' in out and not (tmp_path / 't').exists()


def test_a_run_another_process_trains_is_left_to_it_and_a_launch_that_trains_nothing_keeps_no_settings(tmp_path):
    """A second launch of a sweep (or a Slurm resubmit) while a run trains: the run is left to its process (no FAILED,
    nothing appended to its train.log); a launch that trains nothing keeps no sweep_settings (which would bind the
    next launch to its settings)."""
    root, busy = tmp_path / 't', tmp_path / 't' / 'nanogpt_3L_s1337'
    busy.mkdir(parents=True)
    with open(busy / '.lock', 'a+') as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        out = sweep(tmp_path, VARIANTS='nanogpt', DEPTHS='3L')
        assert '0 run, 0 skipped, 0 failed, 1 busy elsewhere' in out and not (root / 'sweep_settings').exists(), out
        out = sweep(tmp_path, VARIANTS='nanogpt diff_sym', DEPTHS='3L')
    assert f'busy   {busy}: another process is training it' in out and '1 run, 0 skipped, 0 failed, 1 busy' in out
    assert [c[1] for c in calls(tmp_path)] == ['configs/diff_sym_3L.py'] and (root / 'sweep_settings').exists()
    assert sorted(p.name for p in busy.iterdir()) == ['.lock']


def test_jobs_runs_that_many_at_once_with_the_arguments_of_one_at_a_time(tmp_path):
    """JOBS=2: two runs at once (each stand-in waits for the other to start, and fails alone), with the command lines
    JOBS=1 gives; two failing at once are both counted."""
    kw = dict(VARIANTS='nanogpt diff_sym', DEPTHS='3L', SWEEP='t')
    sweep(tmp_path / 'one', **kw)
    both = stand_ins(tmp_path / 'two' / 'calls.log', f'touch "$d.started"; i=0; while [ "$(ls {tmp_path}/two/t/*.started '
                                                    f'| wc -l)" -lt 2 ]; do i=$((i+1)); [ $i -gt 600 ] && exit 3; '
                                                    'sleep 0.1; done')
    out = sweep(tmp_path / 'two', JOBS='2', python=python_for_ablate(tmp_path / 'two', both), **kw)
    assert out.count('done   ') == 2 and '2 run, 0 skipped, 0 failed' in out, out
    strip = [[a.replace(str(tmp_path / d), '') for a in c] for d in ('one', 'two') for c in calls(tmp_path / d)]
    assert sorted(map(tuple, strip[:2])) == sorted(map(tuple, strip[2:]))
    failing = python_for_ablate(tmp_path / 'bad', 'case "$1" in train.py) echo no such dataset; exit 1 ;; esac')
    out = sweep(tmp_path / 'bad', rc=1, JOBS='2', python=failing, **kw)
    assert sum(line.startswith('FAILED ') for line in out.splitlines()) == 2 and 'ablate.sh: 2 run(s) failed' in out
    with pytest.raises(Refused, match='JOBS=two must be a whole number of runs at once'):
        Sweep(dict(PROFILE='cpu', JOBS='two'), [])


def test_many_jobs_share_the_cores_among_their_compile_workers(tmp_path):
    """Each run's torch.compile would start as many Inductor compile workers as the machine has cores; with JOBS runs
    at once each gets cores / JOBS (at least 1), unless TORCHINDUCTOR_COMPILE_THREADS is set."""
    log = tmp_path / 'env.log'
    stub = python_for_ablate(tmp_path, f'[ "$1" = train.py ] && echo "${{TORCHINDUCTOR_COMPILE_THREADS:-unset}}" >> '
                                       f'{log}\n' + stand_ins(tmp_path / 'calls.log'))
    for d, jobs, threads in (('a', '2', None), ('b', '1', None), ('c', '2', '5')):
        sweep(tmp_path / d, VARIANTS='nanogpt', DEPTHS='3L', JOBS=jobs, python=stub,
              TORCHINDUCTOR_COMPILE_THREADS=threads)
    assert log.read_text().split() == [str(max(1, os.cpu_count() // 2)), 'unset', '5']


# ----------------------------------------------------------------------------- ANALYZE=1

def test_analyze_runs_the_analyzer_on_new_and_earlier_finished_runs_whose_analysis_is_not_of_their_checkpoint(
        tmp_path):
    root, kw = tmp_path / 't', dict(VARIANTS='nanogpt softmax1', DEPTHS='3L', SEEDS='1 2')
    names = ['nanogpt_3L_s1', 'softmax1_3L_s1', 'nanogpt_3L_s2', 'softmax1_3L_s2']
    sweep(tmp_path, **kw)
    assert not calls(tmp_path, 'analyze.py')  # without ANALYZE: no analysis
    out = sweep(tmp_path, ANALYZE='1', JOBS='2', **kw)  # on the finished sweep: every run, none retrained
    assert sorted(c[1] for c in calls(tmp_path, 'analyze.py')) == sorted(f'--out_dir={root}/{n}' for n in names)
    assert '0 run, 4 skipped (4 of them analyzed now), 0 failed' in out and len(calls(tmp_path)) == 4
    # a re-launch analyses what lacks a current analysis: a run trained now, and one whose file is of another
    # checkpoint (analyze.py --ckpt=best.pt, say)
    (root / 'nanogpt_3L_s2' / 'analysis.json').write_text('{"iter": 1}')
    os.remove(root / 'softmax1_3L_s1' / 'summary.json')
    os.remove(root / 'softmax1_3L_s1' / 'analysis.json')
    (tmp_path / 'calls.log').unlink()
    out = sweep(tmp_path, ANALYZE='1', **kw)
    assert sorted(c[1] for c in calls(tmp_path, 'analyze.py')) == [f'--out_dir={root}/{n}' for n in
                                                                   ('nanogpt_3L_s2', 'softmax1_3L_s1')]
    assert '1 run, 3 skipped (1 of them analyzed now)' in out
    # a finished run without its checkpoint (a committed run copied back) is left as it is
    os.remove(root / 'nanogpt_3L_s1' / 'analysis.json')
    os.remove(root / 'nanogpt_3L_s1' / 'ckpt.pt')
    out = sweep(tmp_path, ANALYZE='1', **kw)
    assert f'{root}/nanogpt_3L_s1: no ckpt.pt, so no analysis' in out and '(0 of them analyzed now)' in out
    with pytest.raises(Refused, match='ANALYZE=yes is not one of: 0 1'):
        Sweep(dict(PROFILE='cpu', ANALYZE='yes'), [])


def test_an_analysis_that_fails_is_marked_and_one_in_progress_stops_with_the_sweep(tmp_path):
    run = tmp_path / 't' / 'nanogpt_3L_s1337'

    def analyzer(action):
        return python_for_ablate(tmp_path, f'[ "$1" = analyze.py ] && {{ {action}; }}\n' + stand_ins(tmp_path / 'c'))
    # one that fails right after its run trained: the run stays finished, the failure is marked and counted
    out = sweep(tmp_path, rc=1, ANALYZE='1', VARIANTS='nanogpt', DEPTHS='3L', python=analyzer('exit 3'))
    assert 'done   ' in out and 'analyze.py failed on 1 finished run(s)' in out and 'run(s) failed' not in out
    assert (run / 'summary.json').exists() and (run / 'FAILED').read_text() == '3\n'
    # a SIGTERM to the sweep reaches an analysis in progress: stopped, not failed
    env = dict(os.environ, PROFILE='cpu', VARIANTS='nanogpt', DEPTHS='3L', SWEEP='t', RUNS_DIR=str(tmp_path),
               ANALYZE='1', PYTHON=analyzer(f'touch {tmp_path}/analyzing; exec sleep 600'))
    p = started(env, TINY)
    try:
        wait_until(lambda: (tmp_path / 'analyzing').exists())
        p.send_signal(signal.SIGTERM)
        out = p.communicate(timeout=60)[0]
    finally:
        kill_left(p)
    assert p.returncode == 130 and f'stopped {run}: analyze.py; a re-launch with ANALYZE=1 runs it again' in out, out
    assert not (run / 'FAILED').exists() and not (run / 'analysis.json').exists()


# ----------------------------------------------------------------------------- stops

def held_sweep(tmp_path, **env_vars):
    """ablate.sh's environment with the stand-ins, whose runs train until their TERM (HOLD=130: train.py's status)."""
    env = dict(os.environ, PROFILE='cpu', VARIANTS='nanogpt', DEPTHS='3L', SWEEP='t', RUNS_DIR=str(tmp_path),
               PROGRESS_EVERY='0', HOLD='130')
    env.update(env_vars)
    if 'PYTHON' not in env_vars:
        env['PYTHON'] = python_for_ablate(tmp_path, stand_ins(tmp_path / 'calls.log'))
    return env


@pytest.mark.parametrize('hold', ['130', '1'])
def test_a_sigterm_stops_every_run_in_progress_with_its_checkpoint_stopped_not_failed(tmp_path, hold):
    """JOBS=2: the sweep's TERM reaches both runs, which save and stop; said at once, then a line a run. hold=1: a
    launcher that exits 1 after passing the TERM on (torchrun does): a run that ends while the sweep stops is stopped,
    whatever its status. The third run is not started."""
    p = started(held_sweep(tmp_path, SEEDS='1 2 3', JOBS='2', HOLD=hold), TINY)
    runs = [tmp_path / 't' / f'nanogpt_3L_s{s}' for s in (1, 2)]
    try:
        wait_until(lambda: training(*runs))
        p.send_signal(signal.SIGTERM)  # to the sweep alone, as a scheduler would
        out = p.communicate(timeout=60)[0]
    finally:
        kill_left(p)
    assert p.returncode == 130 and 'stopping: 2 run(s) in progress save a checkpoint' in out and 'FAILED' not in out
    for d in runs:
        assert f'stopped {d}: stopped at iteration 1' in out and (d / 'ckpt.pt').exists()
        assert not (d / 'summary.json').exists() and not (d / 'FAILED').exists()  # a re-launch resumes it
    assert 'interrupted (1 run(s) not started)' in out and not (tmp_path / 't' / 'nanogpt_3L_s3').exists(), out


@pytest.mark.parametrize('worker', ['0', '1'])
def test_an_interrupted_sweep_leaves_no_process_behind(tmp_path, worker):
    """A run that does not stop on the sweep's TERM (it ignores TERM, and has a child of its own) is killed
    STOP_GRACE seconds after the stop, with everything it started: no process of the sweep outlives ablate.sh.
    WORKER=1: the same of a worker (its stand-in hangs as the run would)."""
    pids = tmp_path / 'pids'
    hang = (f'case "$1 $2" in train.py*|"sweep.py worker") trap "" TERM INT; echo $$ >> {pids}; sleep 600 & '
            f'echo $! >> {pids}; while :; do wait; done ;; esac')
    env = held_sweep(tmp_path, SEEDS='1 2', JOBS='2', STOP_GRACE='1', WORKER=worker,
                     PYTHON=python_for_ablate(tmp_path, hang))
    p, pid_list = started(env, TINY), []
    try:
        wait_until(lambda: pids.exists() and len(pids.read_text().split()) == 4, 60)  # two runs, each with its child
        pid_list = [int(x) for x in pids.read_text().split()]
        assert alive_pids(pid_list) == pid_list
        p.send_signal(signal.SIGTERM)
        out = p.communicate(timeout=30)[0]
        assert p.returncode == 130 and '2 run(s) still running 1s after the stop: killed (SIGKILL' in out, out
        time.sleep(0.2)
        assert alive_pids(pid_list) == [], out
        assert not any((tmp_path / 't' / f'nanogpt_3L_s{s}' / 'FAILED').exists() for s in (1, 2))
    finally:
        kill_left(p, pid_list)


def test_a_gpu_window_trains_only_the_missing_runs_and_a_run_cut_by_its_limit_resumes(tmp_path):
    """`timeout LIMIT ./ablate.sh` into a folder of finished runs trains only the missing ones; the run in progress
    when the limit comes saves its checkpoint and leaves no summary.json, and the next launch resumes it."""
    sweep(tmp_path, VARIANTS='nanogpt diff', DEPTHS='3L', SEEDS='1')
    (tmp_path / 'calls.log').unlink()
    env = held_sweep(tmp_path, VARIANTS='nanogpt diff', SEEDS='1 2')
    p = subprocess.Popen(['timeout', '600', 'bash', os.path.join(ROOT, 'ablate.sh'), *TINY], env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    cut = tmp_path / 't' / 'nanogpt_3L_s2'
    try:
        wait_until(lambda: training(cut))
        p.send_signal(signal.SIGALRM)  # timeout's alarm: what its limit does, sooner
        out = p.communicate(timeout=60)[0]
    finally:
        kill_left(p)
    assert p.returncode == 124 and f'stopped {cut}: stopped at iteration 1' in out, out
    assert [a for c in calls(tmp_path) for a in c if a.startswith('--out_dir=')] == [f'--out_dir={cut}']
    assert not (cut / 'summary.json').exists()
    out = sweep(tmp_path, VARIANTS='nanogpt diff', DEPTHS='3L', SEEDS='1 2')
    assert f'run    {cut} --init_from=resume --resume_strict=True' in out and (cut / 'summary.json').exists()
    assert out.count('skip   ') == 2 and '2 run, 2 skipped' in out


def test_ctrl_c_stops_real_runs_with_their_checkpoints_in_one_line_each_and_nothing_after(tmp_path):
    """What a user does: a Ctrl-C from the terminal, to the whole process group, with the default progress line and
    JOBS. The sweep says once that it stops, then one line for the run, which saved its checkpoint, then that it was
    interrupted: no shell's `Terminated` (ablate.sh's progress process, killed, said it), no second `stopping:`."""
    env = dict(os.environ, PROFILE='cpu', VARIANTS='nanogpt', DEPTHS='3L', SWEEP='t', RUNS_DIR=str(tmp_path),
               OMP_NUM_THREADS='1', PYTHON=python_for_ablate(tmp_path))
    for key in ('JOBS', 'PROGRESS_EVERY', 'WORKER'):
        env.pop(key, None)
    run = tmp_path / 't' / 'nanogpt_3L_s1337'
    p = started(env, LONG)
    try:
        wait_until(lambda: training(run))
        os.killpg(p.pid, signal.SIGINT)  # as a terminal's Ctrl-C: to the whole process group
        out = p.communicate(timeout=120)[0]
    finally:
        kill_left(p)
    lines = out.splitlines()
    assert p.returncode == 130 and 'Terminated' not in out, out
    at = next(i for i, line in enumerate(lines) if 'stopping:' in line)
    assert lines[at].endswith('stopping: 1 run(s) in progress save a checkpoint at the end of their step'), out
    assert re.fullmatch(rf'stopped {run}: stopped at iteration [0-9]+', lines[at + 1]), out
    assert lines[at + 2:] == ['ablate.sh: interrupted (0 run(s) not started); re-launch the same command to continue']
    assert (run / 'ckpt.pt').exists() and not (run / 'FAILED').exists()


# ----------------------------------------------------------------------------- WORKER=1

# `sweep.py worker LIST`'s stand-in: its lines for each run of the list, which it finishes (summary.json, ckpt.pt) or,
# with HOLD set, trains until its TERM (then `end ... 130`); CRASH: it dies (exit 9) after starting its first run
FAKE_WORKER = """import os, shlex, signal, sys, time
runs = [shlex.split(line) for line in open(sys.argv[3])]
def stop(signum, frame):  # as train.py's stop: a checkpoint, the line in the run's train.log
    open(os.path.join(d, 'ckpt.pt'), 'w').close()
    open(os.path.join(d, 'train.log'), 'a').write('stopped at iteration 1\\n')
    print(f'worker: end {d} 130 0.1', flush=True)
    sys.exit(130)
signal.signal(signal.SIGTERM, stop)
print('a note of the worker', flush=True)
for argv in runs:
    d = [a for a in argv if a.startswith('--out_dir=')][-1][10:]
    print(f'worker: run {d}', flush=True)
    os.makedirs(d, exist_ok=True)
    open(os.path.join(d, 'log.jsonl'), 'a').write('{"iter": 1, "kind": "train"}\\n')
    if os.environ.get('CRASH'):
        sys.exit(9)
    while os.environ.get('HOLD'):
        time.sleep(0.1)
    open(os.path.join(d, 'summary.json'), 'w').write('{"iter": 2}')
    print(f'worker: end {d} 0 0.1', flush=True)
"""


def worker_python(tmp_path):
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / 'fake_worker.py').write_text(FAKE_WORKER)
    return python_for_ablate(tmp_path, f'echo "$*" >> {tmp_path}/calls.log\n[ "$1 $2" = "sweep.py worker" ] && exec '
                                       f'{sys.executable} {tmp_path}/fake_worker.py "$@"')


def test_worker_lanes_deal_the_runs_to_workers_whose_lines_are_the_sweep_s_and_a_sigterm_stops_them(tmp_path):
    """WORKER=1 JOBS=2: the runs dealt in turn to two `sweep.py worker` processes (their lists gone after), their lines
    said as the sweep's own; a worker that dies leaves its run FAILED with its status; a SIGTERM stops both workers'
    runs in progress (stopped, not failed), starts no third, and no worker outlives the sweep."""
    root, kw = tmp_path / 't', dict(VARIANTS='nanogpt', DEPTHS='3L', SEEDS='1 2 3', JOBS='2', WORKER='1')
    out = sweep(tmp_path, python=worker_python(tmp_path), **kw)
    assert 'the runs go to 2 worker process(es) (sweep.py worker)' in out and '3 run, 0 skipped, 0 failed' in out, out
    lists = [c[2] for c in calls(tmp_path, 'sweep.py worker')]
    assert len(lists) == 2 and not list(root.glob('.worker.*')) and '         a note of the worker' in out
    assert f'run    {root}/nanogpt_3L_s1 ' in out and f'done   {root}/nanogpt_3L_s3 in 0s' in out
    out = sweep(tmp_path / 'crash', rc=1, python=worker_python(tmp_path / 'crash'), CRASH='1', **kw)
    assert f"FAILED {tmp_path}/crash/t/nanogpt_3L_s1: its worker ended (exit 9) before this run did" in out, out
    assert (tmp_path / 'crash' / 't' / 'nanogpt_3L_s3' / 'FAILED').read_text() == '9\n'  # never started: FAILED too
    env = held_sweep(tmp_path / 'held', PYTHON=worker_python(tmp_path / 'held'), **kw)
    p = started(env, TINY)
    runs = [tmp_path / 'held' / 't' / f'nanogpt_3L_s{s}' for s in (1, 2)]  # each worker's first run
    try:
        wait_until(lambda: training(*runs))
        p.send_signal(signal.SIGTERM)
        out = p.communicate(timeout=60)[0]
        assert p.returncode == 130 and 'FAILED' not in out and '1 run(s) not started' in out, out
        assert all(f'stopped {d}: stopped at iteration 1' in out and not (d / 'FAILED').exists() for d in runs), out
        assert 'fake_worker' not in subprocess.run(['ps', '-A', '-o', 'args='], capture_output=True, text=True).stdout
    finally:
        kill_left(p)


def test_real_runs_in_a_worker_train_and_fail_as_a_process_a_run_does(tmp_path):
    """WORKER=1 with the real `sweep.py worker` and train.py: a run trains, with its train.log and summary; one whose
    checkpoint is no checkpoint is resumed (strictly), fails, and is marked FAILED with its exit status; exit 1."""
    root = tmp_path / 't'
    (root / 'nanogpt_3L_s2').mkdir(parents=True)
    (root / 'nanogpt_3L_s2' / 'ckpt.pt').write_text('not a checkpoint')
    out = sweep(tmp_path, '--n_layer=1', '--compile=False', rc=1, VARIANTS='nanogpt', DEPTHS='3L', SEEDS='1 2',
                WORKER='1', python=python_for_ablate(tmp_path, f'[ "$1" = report.py ] && exit 0\nexec {sys.executable} "$@"'))
    assert f'done   {root}/nanogpt_3L_s1' in out and f'run    {root}/nanogpt_3L_s2 --init_from=resume' in out, out
    s = json.load(open(root / 'nanogpt_3L_s1' / 'summary.json'))
    assert s['finished'] and s['iter'] == 2 and s['config']['seed'] == 1
    assert 'step 2:' in (root / 'nanogpt_3L_s1' / 'train.log').read_text()
    assert f'FAILED {root}/nanogpt_3L_s2 (exit 1)' in out and (root / 'nanogpt_3L_s2' / 'FAILED').read_text() == '1\n'
    assert 'ablate.sh: 1 run(s) failed' in out and not list(root.glob('.worker.*'))
    with pytest.raises(Refused, match='WORKER=1 runs each run inside a worker process, and NPROC=2'):
        Sweep(dict(PROFILE='cpu', WORKER='1', NPROC='2'), [])


# ----------------------------------------------------------------------------- the settings, checked

def test_the_check_refuses_a_typo_a_bad_config_and_no_profile_on_a_cpu_before_anything_is_kept(tmp_path, monkeypatch):
    """A typo in the extra arguments, or a flag one of the sweep's configs cannot take, stops the launch before any
    run and before sweep_settings is written, naming the config and the key (a typo kept in sweep_settings refused
    every launch after it, the corrected one too); without a GPU, no PROFILE asks for one."""
    for env, args, says in [(dict(), ['--dropuot=0.1'], "configs/nanogpt_3L.py with the extra arguments and the "
                             "profile's schedule: command line: unknown config key 'dropuot'; did you mean dropout?"),
                            (dict(LEAK='time_norm', VARIANTS='diff nanogpt'), [], "configs/nanogpt_3L.py with the extra "
                             "arguments and the profile's schedule: config: GPTConfig: leak='time_norm' with "
                             "attn='softmax'")]:
        with pytest.raises(Refused, match=re.escape(says)):
            sweep_py.check(Sweep(dict(dict(PROFILE='demo', VARIANTS='nanogpt'), **env), args))
    assert sweep_py.check(Sweep(dict(PROFILE='demo'), ['--dropout=0.1'])) is None
    import torch
    monkeypatch.setattr(torch.cuda, 'is_available', lambda: False)
    with pytest.raises(Refused, match='torch sees no GPU here.*Pick PROFILE=demo'):
        sweep_py.check(Sweep(dict(), []))
    # ablate.sh runs the check first, and a refusal there makes nothing: the real one, once
    env = dict(os.environ, RUNS_DIR=str(tmp_path), PYTHON=sys.executable, PROFILE='demo', VARIANTS='nanogpt', SWEEP='s')
    p = subprocess.run(['bash', os.path.join(ROOT, 'ablate.sh'), '--dropuot=0.1'], env=env, capture_output=True,
                       text=True, timeout=300)
    assert p.returncode == 2 and "did you mean dropout?" in p.stderr and 'Traceback' not in p.stderr, p.stderr
    assert not any(tmp_path.iterdir())


def test_a_misspelled_variant_or_depth_and_a_named_variant_without_a_config_at_its_depths_are_refused():
    """A name no config file has is a typo, refused with the choices, not a pair quietly left out; a named variant
    with no config at DEPTHS (diff_gated at 3L) is refused naming the depths it has (before: "0 run, 0 skipped",
    report.py's "no run folders", exit 1, and the sweep's folder left behind)."""
    cases = [(dict(VARIANTS='nanogpt difff'), "VARIANTS has 'difff', but no configs/difff_<depth>.py at DEPTHS=3L"),
             (dict(VARIANTS='nanogpt difff'), ' diff_sym '), (dict(DEPTHS='3l'), "DEPTHS has '3l', but there is no"),
             (dict(DEPTHS='3l'), ' 6L '), (dict(VARIANTS='diff_gated'), "VARIANTS has 'diff_gated', but no "
                                           "configs/diff_gated_<depth>.py at DEPTHS=3L, so nothing was started or made; "
                                           "it has 6L: say DEPTHS= one of those, leave it out of VARIANTS, or write "
                                           "the config (docs/adding_a_variant.md)"),
             (dict(VARIANTS='nanogpt diff_gated'), "VARIANTS has 'diff_gated'")]
    for env, says in cases:
        with pytest.raises(Refused, match=re.escape(says)):
            Sweep(dict(PROFILE='demo', **env), [])
    for seeds in ('1,2', '1 two'):
        with pytest.raises(Refused, match='must be whole numbers separated by spaces'):
            Sweep(dict(PROFILE='demo', SEEDS=seeds), [])
    # a default variant without a config at a depth is left out, and the first line says so
    cpu_long = Sweep(dict(PROFILE='cpu_long', DEPTHS='3L'), [])
    assert 'configs/diff_gated_3L.py' not in cpu_long.configs() and len(cpu_long.configs()) == 7
    assert cpu_long.announce().endswith('; no config, so left out: diff_gated_3L')


def test_extra_arguments_that_change_the_runs_make_a_sweep_of_their_own_and_the_first_line_says_which(tmp_path):
    """--max_iters=10 used to write into runs/shakespeare_demo, and the next plain launch was refused there; keys
    that say only where a run is computed, and the schedule's own values, keep the profile's folder."""
    out = sweep(tmp_path, PROFILE='demo', VARIANTS='nanogpt', DEPTHS=None, SWEEP=None)  # TINY's changes: a sweep of its own
    own = Sweep(dict(PROFILE='demo'), TINY)
    assert out.splitlines()[0] == (f'ablate.sh: sweep {tmp_path}/{own.name} (a sweep of its own for '
                                   f"{' '.join(f'--{k}={v}' for k, v in own.own.items())}; SWEEP=<name> names it "
                                   'otherwise)')
    assert own.name == 'shakespeare_demo_n_embd32_n_head2_block_size16_batch_size2_max_iters2_lr_decay_iters2_' \
                       'eval_interval2_eval_iters1'  # log_interval says how a run is watched, not what it computes
    assert Sweep(dict(PROFILE='demo'), ['--device=cpu', '--max_iters=100', '--dropout=0.1', '--dropout=0.0']).name == \
        'shakespeare_demo'
    assert Sweep(dict(PROFILE='cpu'), ['--dropout=0.1', '--dataset=data/x']).name == \
        'shakespeare_cpu_dropout0.1_datasetdata-x'
    assert Sweep(dict(PROFILE='cpu', SWEEP='mine'), ['--dropout=0.1']).own == {}


def test_a_sweep_keeps_its_settings_and_refuses_a_launch_that_would_mix_them(tmp_path):
    """The first launch keeps the settings its runs share (the schedule and the extra --key=value, the last of a key
    winning); another launch may add seeds or change where runs are computed, but one with another setting is
    refused before any run, naming both."""
    kw = dict(PROFILE='demo', VARIANTS='nanogpt', DEPTHS='3L')
    sweep(tmp_path, '--dropout=0.1', **kw)
    settings = (tmp_path / 't' / 'sweep_settings').read_text().split()
    assert '--dropout=0.1' in settings and '--dropout=0.0' not in settings and '--max_iters=2' in settings
    sweep(tmp_path, '--device=cpu', '--log_interval=5', '--dropout=0.1', SEEDS='7', **kw)
    assert len(calls(tmp_path)) == 2
    out = sweep(tmp_path, '--dropout=0.2', rc=2, **kw)
    assert 'the sweep:    --dropout=0.1' in out and 'this command: --dropout=0.2' in out and len(calls(tmp_path)) == 2


def test_sweep_settings_leave_out_the_keys_a_resume_may_change():
    """sweep_settings keeps what the runs compute, not where or how (provenance.py's FREE_ON_RESUME, config.py's):
    a launch that changes only those keys joins the sweep; any other key is kept, so a launch that changes it is
    refused."""
    import config
    assert sweep_py.FREE_ON_RESUME == config.FREE_ON_RESUME
    demo = Sweep(dict(PROFILE='demo'), [])
    assert Sweep(dict(PROFILE='demo'), [f'--{k}=x' for k in config.FREE_ON_RESUME if k not in (
        'out_dir', 'init_from')]).settings() == demo.settings()
    for key in set(config.DEFAULTS) - set(config.FREE_ON_RESUME) - {'seed'}:
        assert f'--{key}=x' in Sweep(dict(PROFILE='demo'), [f'--{key}=x']).settings(), key


@pytest.mark.parametrize('extra, name, schedule', [
    (dict(), 'shakespeare_cpu_long', []),
    (dict(CAUSAL='0'), 'shakespeare_cpu_long_noncausal', ['--causal=False']),
    (dict(WINDOWS='sequential'), 'shakespeare_cpu_long_sequential', ['--window_order=sequential']),
    (dict(CAUSAL='0', WINDOWS='sequential'), 'shakespeare_cpu_long_noncausal_sequential',
     ['--causal=False', '--window_order=sequential']),
    (dict(LEAK='zero_future', WINDOWS='sequential'), 'shakespeare_cpu_long_leak_zero_future_sequential',
     ['--causal=False', '--leak=zero_future', '--window_order=sequential']),
    (dict(LEAK='zero_future', CAUSAL='0'), 'shakespeare_cpu_long_leak_zero_future',
     ['--causal=False', '--leak=zero_future']),
])
def test_the_sweep_s_name_says_every_setting_that_changes_its_runs(extra, name, schedule):
    """Each kind of run gets a folder of its own (a re-launch skips finished runs and resumes stopped ones, so two
    kinds sharing a sweep would mix); --causal=False is passed once, also where a leak implies it (the causality check
    refuses a leak in a causal run)."""
    s = Sweep(dict(PROFILE='cpu_long', **extra), [])
    assert s.name == name and s.schedule == profiles.PROFILES['cpu_long'].schedule.split() + schedule


def test_leak_windows_and_the_profiles_name_their_runs_and_refuse_what_they_cannot_run():
    """LEAK=time_norm (a bug in Diff's subln) defaults to Diff's two; seed_pipeline is the seed author's loop at
    3L 6L 8L; an unknown LEAK or WINDOWS, and WINDOWS=sequential on a profile of fixed-length records, are refused."""
    assert Sweep(dict(PROFILE='cpu_long', LEAK='time_norm'), []).variants == ['diff', 'diff_sym']
    pipeline = Sweep(dict(PROFILE='seed_pipeline', VARIANTS='nanogpt sym'), [])
    assert pipeline.configs() == [f'configs/{v}_{d}.py' for d in ('3L', '6L', '8L') for v in ('nanogpt', 'sym')]
    for flag in ('--max_iters=35000', '--decay_lr=False', '--weight_decay=0.0', '--grad_clip=0.0', '--dropout=0.1'):
        assert flag in pipeline.schedule
    for env, says in [(dict(LEAK='sideways'), 'LEAK=sideways is not one of: none zero_future'),
                      (dict(WINDOWS='shuffled'), 'WINDOWS=shuffled is not one of: random sequential'),
                      (dict(PROFILE='sink', WINDOWS='sequential'), 'PROFILE=sink trains on fixed-length records')]:
        with pytest.raises(Refused, match=re.escape(says)):
            Sweep(dict(dict(PROFILE='cpu_long'), **env), [])


def test_the_tables_name_variants_that_have_configs():
    """Each profile's default variants are rows of variants.py's table with a config at each default depth (under
    the profile's prefix), and report.py's comparisons name the table's variants (diffv2: configs/needle_diffv2.py)."""
    import variants
    for name, profile in profiles.PROFILES.items():
        assert set((profile.variants or profiles.DEFAULT_VARIANTS).split()) <= set(variants.VARIANTS), name
        assert Sweep(dict(PROFILE=name), []).configs(), name
    for measure, pairs in report.PAIRS.items():
        assert {v for pair in pairs for v in pair} - set(variants.VARIANTS) <= {'diffv2'}, measure


def test_the_demo_profile_evaluates_often_enough_for_its_curves():
    """The demo's schedule evaluates at 11 iterations of its 100 (it had 3): each val curve of the demo's report has
    that many points."""
    from config import parse_config
    c = parse_config(['configs/nanogpt_3L.py', *profiles.PROFILES['demo'].schedule.split()])
    assert len(range(0, c['max_iters'] + 1, c['eval_interval'])) == 11


def test_a_slurm_task_runs_its_line_of_the_list(tmp_path):
    """A task of SLURM=1's array (ABLATE_RUNS and SLURM_ARRAY_TASK_ID set) runs line SLURM_ARRAY_TASK_ID of the list
    written at submission, "config folder seed", a folder with spaces too; a task without its line is refused."""
    listed = tmp_path / 'runs'
    listed.write_text('configs/nanogpt_3L.py runs/s/nanogpt_3L_s1 1\nconfigs/diff_3L.py my runs/s/diff_3L_s2 2\n')
    env = dict(ABLATE_RUNS=str(listed), SLURM_ARRAY_TASK_ID='1')
    assert sweep_py.slurm_task(env) == ('1', ('configs/diff_3L.py', 'my runs/s/diff_3L_s2', '2'))
    assert sweep_py.slurm_task(dict(env, SLURM_ARRAY_TASK_ID='')) == (None, None)  # not a task: every run
    with pytest.raises(Refused, match='Slurm task 2 has no line in'):
        sweep_py.slurm_task(dict(env, SLURM_ARRAY_TASK_ID='2'))


def test_the_lanes_get_their_own_gpus_and_the_runs_in_turn():
    assert sweep_py.lane_gpus(['0', '1', '2'], 3, 1) == ['0', '1', '2']
    assert sweep_py.lane_gpus(['0', '1', '2'], 4, 1) == ['0', '1', '2', '0']  # round robin past the last
    assert sweep_py.lane_gpus(['4', '5', '6', '7'], 2, 2) == ['4,5', '6,7']  # NPROC=2: a group each
    assert sweep_py.lane_gpus([], 2, 1) == []


def test_nproc_runs_each_run_under_torchrun(tmp_path):
    """NPROC=2: each run is torchrun's (python -m torch.distributed.run), with no launcher of ours around it."""
    torchrun = stand_ins(tmp_path / 'calls.log').replace('case "$1" in', '[ "$1" = -m ] && shift 4\ncase "$1" in', 1)
    sweep(tmp_path, VARIANTS='nanogpt', DEPTHS='3L', NPROC='2', GPUS='', python=python_for_ablate(tmp_path, torchrun))
    line = (tmp_path / 'calls.log').read_text().splitlines()[0]
    assert line.startswith('-m torch.distributed.run --standalone --nproc_per_node=2 train.py configs/nanogpt_3L.py')


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
    env = dict(PATH=f"{bin_dir}:{os.environ['PATH']}", JOBS='3', python=_recording_python(tmp_path),
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
                CUDA_VISIBLE_DEVICES=hidden, python=_recording_python(tmp_path))
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
              python=python_for_ablate(tmp_path, stand_ins(calls)))
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
    """ablate.sh runs under macOS's bash 3.2: none of bash 4's constructs, and no command that macOS lacks (CI has no
    bash 3.2 to run it in)."""
    assert bash4_constructs(open(os.path.join(ROOT, 'ablate.sh')).read()) == []
    sample = ('declare -A seen\nwhile [ $n -gt 0 ]; do wait -n; done\nmapfile -t runs < list\necho "${v,,} ${v^^}"\n'
              'cmd &>> log\ncmd |& tee\nflock -n "$d/.lock" true  # a comment: wait -n\ntaskset -c 0 python\n'
              'command -v flock >/dev/null && flock -n x true\n# declare -A in a comment\nlocal -n ref=$1\n')
    assert [n for n, _, _ in bash4_constructs(sample)] == [1, 2, 3, 4, 5, 6, 7, 8, 11]


def test_the_sweep_a_user_reads_stays_short():
    """ablate.sh and sweep.py, the sweep's whole loop, at most 700 lines together, and ablate.sh's header (what
    --help prints) at most 40: the details live in docs/details.md, the profiles in profiles.py."""
    script = open(os.path.join(ROOT, 'ablate.sh')).read().splitlines()
    loop = len(script) + len(open(os.path.join(ROOT, 'sweep.py')).read().splitlines())
    assert loop <= 700 and script.index('set -u') - 1 <= 40, (loop, script.index('set -u') - 1)


# ----------------------------------------------------------------------------- the progress line

def _record(run, it, t, **kw):
    """A log.jsonl line as train.py writes it, the file's mtime set to when it was written (t)."""
    run.mkdir(parents=True, exist_ok=True)
    with open(run / 'log.jsonl', 'a') as f:
        f.write(json.dumps(dict(iter=it, kind='train', **kw)) + '\n')
    os.utime(run / 'log.jsonl', (t, t))


def test_progress_says_runs_done_running_and_left_with_each_run_s_iteration_and_eta(tmp_path):
    """The line from the runner's state of each run (finished: skipped or done; running; failed; left: none yet) and
    the run folders' log.jsonl: a running run's iteration of its max_iters (the profile's 150), its ETA at its pace
    over this launch, evaluations included (ms_per_iter before a second record), and the sweep's ETA with the runs
    left at the mean pace over JOBS slots."""
    sw = Sweep(dict(PROFILE='cpu', VARIANTS='nanogpt diff_sym', DEPTHS='3L', SEEDS='1 2 3',
                    SWEEP='t', RUNS_DIR=str(tmp_path), JOBS='2'), [])
    start = 1_000_000.0
    root = tmp_path / 't'
    run = root / 'diff_sym_3L_s1'
    state = {str(root / 'nanogpt_3L_s1'): 'skipped', str(run): 'running'}
    _record(run, 90, start - 400)  # a resumed run's log of an earlier launch: not this launch's pace
    progress = sweep_py.Progress(sw, start)
    assert progress.line(start + 5, state) == f'sweep {root}: 1 finished, 1 running, 4 left | diff_sym_3L_s1 starting'
    _record(run, 10, start + 10, ms_per_iter=500.0)  # the first record: 140 left at 0.5 s
    assert progress.line(start + 10, state).endswith('| diff_sym_3L_s1 10/150 ETA 1m 10s')
    _record(run, 30, start + 30)  # `20 iterations / 20 s`: `150 - 30 = 120 s` left, less the `5 s` since its record
    line = progress.line(start + 35, state)
    # the four left at `150 s` each and the running one's `115 s`, over two slots: `(4 * 150 + 115) / 2 = 357.5 s`
    assert line == f'sweep {root}: 1 finished, 1 running, 4 left, ETA 5m 58s | diff_sym_3L_s1 30/150 ETA 1m 55s'
    state.update({str(root / 'nanogpt_3L_s2'): 'failed', str(root / 'nanogpt_3L_s3'): 'busy'})
    line = progress.line(start + 45, state)
    assert line.startswith(f'sweep {root}: 1 finished, 1 running, 2 left, 1 failed, 1 busy, ETA '), line
    state[str(run)] = 'done'
    assert progress.line(start + 50, state) is None  # nothing running: nothing to say


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


# ----------------------------------------------------------------------------- report.py on hand-written summaries

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
