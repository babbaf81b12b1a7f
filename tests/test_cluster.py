"""ablate.sh's sweeps on a real one-node Slurm cluster (tests/slurm_local.sh; skipped where Slurm's packages cannot be
installed), with stand-ins for train.py: the array, its tasks and the report job are the sweep's; the training is
tests/test_train.py's (its DDP test: two processes equal one)."""
import json
import os
import shutil
import subprocess
import sys
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
from test_ablate import FAKE_TRAIN, python_for_ablate  # noqa: E402


def slurm_installed():
    need = ('munged', 'slurmctld', 'slurmd', 'sbatch')
    if all(shutil.which(b) for b in need):
        return True
    if os.geteuid() != 0 or not shutil.which('apt-get'):
        return False
    # Debian's packages; `apt-get update` first where the package lists are empty
    cmd = ('(apt-get install -y -qq slurmctld slurmd slurm-client munge || (apt-get update -qq && '
           'apt-get install -y -qq slurmctld slurmd slurm-client munge))')
    subprocess.run(['bash', '-c', cmd], capture_output=True, timeout=600,
                   env=dict(os.environ, DEBIAN_FRONTEND='noninteractive'))
    return all(shutil.which(b) for b in need)


@pytest.fixture(scope='module')
def slurm(tmp_path_factory):
    """A one-node Slurm cluster for this module's tests: the environment in which sbatch reaches it."""
    if not slurm_installed():
        pytest.skip("Slurm cannot be installed here (needs root and Debian's slurmctld, slurmd, slurm-client, munge)")
    d = tmp_path_factory.mktemp('slurm')
    p = subprocess.run(['bash', os.path.join(ROOT, 'tests', 'slurm_local.sh'), 'start', str(d)],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    env = dict(os.environ, SLURM_CONF=str(d / 'slurm.conf'), OMP_NUM_THREADS='1')
    yield env
    subprocess.run(['bash', os.path.join(ROOT, 'tests', 'slurm_local.sh'), 'stop', str(d)], timeout=60)


def wait_for_queue(env, timeout=300):
    t0 = time.time()
    while time.time() - t0 < timeout:
        q = subprocess.run(['squeue', '-h', '-o', '%i %T'], env=env, capture_output=True, text=True).stdout
        if not q.strip():
            return
        time.sleep(0.5)
    raise AssertionError(f"Slurm jobs still queued after {timeout}s:\n{q}")


# train.py's stand-in for a task that Slurm stops: it trains (a log line) until its TERM, then saves ckpt.pt and
# exits 130 as train.py does; resumed (--init_from=resume), it finishes as FAKE_TRAIN does
HELD_TRAIN = """import os, signal, sys, time
a = dict(x[2:].split('=', 1) for x in sys.argv[2:] if x.startswith('--'))
if a.get('init_from') == 'resume':
    exec(open(sys.argv[0].replace('held_train.py', 'fake_train.py')).read())
    sys.exit(0)
def stop(signum, frame):
    open(os.path.join(a['out_dir'], 'ckpt.pt'), 'w').close()
    print('stopped at iteration 1', flush=True)
    sys.exit(130)
signal.signal(signal.SIGTERM, stop)
open(os.path.join(a['out_dir'], 'log.jsonl'), 'a').write('{"iter": 1, "kind": "train"}\\n')
while True:
    time.sleep(0.1)
"""


def ablate(env, runs_dir, train, **extra):
    """SLURM=1 ./ablate.sh, whose PYTHON (also its tasks' and the report job's) runs train.py's stand-in train and
    skips sweep.py's config check (a torch import in each task, tested in test_ablate.py)."""
    (runs_dir / 'fake_train.py').write_text(FAKE_TRAIN)
    (runs_dir / 'held_train.py').write_text(HELD_TRAIN)
    python = python_for_ablate(runs_dir, f'[ "$1" = train.py ] && shift && exec {sys.executable} {runs_dir}/{train} '
                                         f'"$@"\nexec {sys.executable} "$@"')
    e = dict(env, RUNS_DIR=str(runs_dir), PROFILE='demo', VARIANTS='nanogpt', SEEDS='1 2', SLURM='1',
             SWEEP='shakespeare_demo', PYTHON=python, SBATCH_ARGS='--mem=64M')  # not the node's memory: tasks at once
    e.update(extra)
    return subprocess.run(['./ablate.sh', '--max_iters=3'], cwd=ROOT, env=e, capture_output=True, text=True,
                          timeout=120)


def test_slurm_array_runs_each_run_once_and_reports(slurm, tmp_path):
    p = ablate(slurm, tmp_path, 'fake_train.py')
    assert p.returncode == 0 and 'submitted 2 run(s) of 2 as Slurm array job' in p.stdout, p.stdout + p.stderr
    wait_for_queue(slurm)
    sweep = tmp_path / 'shakespeare_demo'
    runs = sorted(d.name for d in sweep.iterdir() if d.is_dir())
    assert runs == ['nanogpt_3L_s1', 'nanogpt_3L_s2']
    for r in runs:  # the same run folders as a local sweep, each trained once with its own seed
        s = json.load(open(sweep / r / 'summary.json'))
        assert s['finished'] and s['iter'] == 3 and s['config']['seed'] == int(r[-1])
        assert (sweep / r / 'train.log').read_text().count('step 0:') == 1
    assert '| 3L |' in (sweep / 'results.md').read_text()  # the report job ran after the array
    p = ablate(slurm, tmp_path, 'fake_train.py')
    assert p.returncode == 0 and 'every run of' in p.stdout and 'submitted' not in p.stdout, p.stdout + p.stderr


def test_slurm_cancelled_task_resumes_on_resubmission(slurm, tmp_path):
    """A task stopped by Slurm (a time limit or a preemption sends SIGTERM) saves its checkpoint, stopped and not
    FAILED; the same command again submits only the unfinished run, which resumes from it."""
    p = ablate(slurm, tmp_path, 'held_train.py', SEEDS='1')
    assert p.returncode == 0, p.stdout + p.stderr
    job = p.stdout.split('array job ')[1].split()[0]
    run = tmp_path / 'shakespeare_demo' / 'nanogpt_3L_s1'
    t0 = time.time()
    while not (run / 'log.jsonl').exists():
        assert time.time() - t0 < 120, 'the task did not start training'
        time.sleep(0.2)
    subprocess.run(['scancel', '--full', '--signal=TERM', job], env=slurm, check=True)
    wait_for_queue(slurm)
    assert (run / 'ckpt.pt').exists() and not (run / 'summary.json').exists() and not (run / 'FAILED').exists()
    assert 'stopped at iteration 1' in next((tmp_path / 'shakespeare_demo').glob(f'slurm-{job}_0.out')).read_text()
    p = ablate(slurm, tmp_path, 'held_train.py', SEEDS='1')
    assert 'submitted 1 run(s) of 1' in p.stdout, p.stdout + p.stderr
    job = p.stdout.split('array job ')[1].split()[0]
    wait_for_queue(slurm)
    assert json.load(open(run / 'summary.json'))['iter'] == 3 and not (run / 'FAILED').exists()
    task = (tmp_path / 'shakespeare_demo' / f'slurm-{job}_0.out').read_text()
    assert f'run    {run} --init_from=resume --resume_strict=True' in task and f'done   {run}' in task, task
