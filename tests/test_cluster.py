"""Beyond one machine: two torchrun agents as two "nodes" on 127.0.0.1, and ablate.sh's sweeps on a real one-node
Slurm cluster (tests/slurm_local.sh; skipped where Slurm's packages cannot be installed)."""
import json
import os
import shutil
import socket
import subprocess
import sys
import time

import pytest
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
import dataset  # noqa: E402
from checkpoint import load_checkpoint  # noqa: E402
from test_ablate import python_for_ablate  # noqa: E402
from test_train import TINY, read_log  # noqa: E402


@pytest.fixture(scope='module', autouse=True)
def shakespeare_char():
    dataset.ensure_data('shakespeare_char')


def free_port():
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def test_two_nodes_equal_one_process_with_double_accumulation(tmp_path):
    """torchrun --nnodes=2 with the static rendezvous a cluster uses (--node_rank, --master_addr): each "node" is
    one process on 127.0.0.1, talking over gloo, and each reads its own batches. The model after 3 steps, the
    logged losses and the val loss equal one process that does both nodes' micro-batches."""
    common = ['--max_iters=3', '--lr_decay_iters=3', '--eval_interval=3', '--attn=diff', '--dropout=0.1',
              '--gradient_accumulation_steps=2', '--eval_iters=3']
    one, two = tmp_path / 'one', tmp_path / 'two'
    env = dict(os.environ, OMP_NUM_THREADS='1')
    p = subprocess.run([sys.executable, 'train.py', *TINY, f'--out_dir={one}', *common], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr
    port = free_port()
    agents = [subprocess.Popen([sys.executable, '-m', 'torch.distributed.run', '--nnodes=2', '--nproc_per_node=1',
                                f'--node_rank={r}', '--master_addr=127.0.0.1', f'--master_port={port}',
                                'train.py', *TINY, f'--out_dir={two}', *common],
                               cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
              for r in (0, 1)]
    outputs = [a.communicate(timeout=600)[0] for a in agents]
    assert [a.returncode for a in agents] == [0, 0], outputs
    assert '(2 processes)' in outputs[0] and 'step 3' not in outputs[1]  # only global rank 0 prints and logs
    ma, _ = load_checkpoint(str(one / 'ckpt.pt'))
    mb, _ = load_checkpoint(str(two / 'ckpt.pt'))
    for (n, a), b in zip(ma.state_dict().items(), mb.state_dict().values()):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6, msg=n)
    la, lb = ([r['loss'] for r in read_log(d) if r['kind'] == 'train'] for d in (one, two))
    assert la == pytest.approx(lb, abs=1e-5) and len(la) == 3
    sa, sb = (json.load(open(d / 'summary.json')) for d in (one, two))
    assert sb['world_size'] == 2 and sa['final_val_loss'] == pytest.approx(sb['final_val_loss'], abs=1e-5)


# --- Slurm

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
        time.sleep(1)
    raise AssertionError(f"Slurm jobs still queued after {timeout}s:\n{q}")


SMALL = ['--n_layer=1', '--n_embd=32', '--n_head=2', '--block_size=16', '--batch_size=4', '--dtype=float32',
         '--eval_iters=1']


def ablate(env, runs_dir, *args, extra=()):
    """SLURM=1 ./ablate.sh, whose PYTHON (also its tasks' and the report job's) skips sweep.py's config check: a torch
    import in each task, tested in test_ablate.py."""
    e = dict(env, RUNS_DIR=str(runs_dir), PROFILE='demo', VARIANTS='nanogpt diff', SEEDS='1 2', SLURM='1',
             SWEEP='shakespeare_demo')  # the extra arguments would make a sweep of their own
    e.update(extra)
    if 'PYTHON' not in extra:
        e['PYTHON'] = python_for_ablate(runs_dir)
    return subprocess.run(['./ablate.sh', *SMALL, *args], cwd=ROOT, env=e, capture_output=True, text=True,
                          timeout=120)


# train.py's stand-in where the test is about the job array: a line 'step 0:' in train.log and a finished
# summary.json with the run's seed and the schedule's last step, which report.py renders
FAKE_TRAIN = """import json, os, sys
a = dict(x[2:].split('=', 1) for x in sys.argv[2:] if x.startswith('--'))
print('step 0: train.py stand-in,', sys.argv[1])
cfg = dict(dataset='shakespeare_char', seed=int(a['seed']), max_iters=int(a['max_iters']))
json.dump(dict(config=cfg, finished=True, iter=cfg['max_iters'], final_train_loss=2.0, final_val_loss=2.1,
               n_params=1e5, tokens_per_sec=1e3, wall_time_s=1.0, device='cpu', dtype='float32'),
          open(os.path.join(a['out_dir'], 'summary.json'), 'w'))
"""


def test_slurm_array_runs_each_run_once_and_reports(slurm, tmp_path):
    (tmp_path / 'fake_train.py').write_text(FAKE_TRAIN)
    python = python_for_ablate(tmp_path, f'[ "$1" = train.py ] && shift && exec {sys.executable} '
                                         f'{tmp_path}/fake_train.py "$@"\nexec {sys.executable} "$@"')
    p = ablate(slurm, tmp_path, '--max_iters=3', '--lr_decay_iters=3', '--eval_interval=3', extra=dict(PYTHON=python))
    assert p.returncode == 0 and 'submitted 4 run(s) of 4 as Slurm array job' in p.stdout, p.stdout + p.stderr
    wait_for_queue(slurm)
    sweep = tmp_path / 'shakespeare_demo'
    runs = sorted(d.name for d in sweep.iterdir() if d.is_dir())
    assert runs == ['diff_3L_s1', 'diff_3L_s2', 'nanogpt_3L_s1', 'nanogpt_3L_s2']
    for r in runs:  # the same run folders as a local sweep, each trained once with its own seed
        s = json.load(open(sweep / r / 'summary.json'))
        assert s['finished'] and s['iter'] == 3 and s['config']['seed'] == int(r[-1])
        assert (sweep / r / 'train.log').read_text().count('step 0:') == 1
    assert '| 3L |' in (sweep / 'results.md').read_text()  # the report job ran after the array
    p = ablate(slurm, tmp_path, '--max_iters=3', '--lr_decay_iters=3', '--eval_interval=3', extra=dict(PYTHON=python))
    assert p.returncode == 0 and 'every run of' in p.stdout and 'submitted' not in p.stdout, p.stdout + p.stderr


def test_slurm_cancelled_task_resumes_on_resubmission(slurm, tmp_path):
    """A task stopped by Slurm (a time limit or a preemption sends SIGTERM) saves its checkpoint; the same command
    again submits only the unfinished runs, which resume from it."""
    args = ('--max_iters=400', '--lr_decay_iters=400', '--eval_interval=400', '--log_interval=1')
    p = ablate(slurm, tmp_path, *args, extra=dict(VARIANTS='nanogpt', SEEDS='1'))
    assert p.returncode == 0, p.stdout + p.stderr
    job = p.stdout.split('array job ')[1].split()[0]
    log = tmp_path / 'shakespeare_demo' / 'nanogpt_3L_s1' / 'log.jsonl'
    t0 = time.time()
    while not (log.exists() and log.read_text().count('"train"') >= 5):
        assert time.time() - t0 < 120, 'the task did not start training'
        time.sleep(0.5)
    subprocess.run(['scancel', '--full', '--signal=TERM', job], env=slurm, check=True)
    wait_for_queue(slurm)
    run = tmp_path / 'shakespeare_demo' / 'nanogpt_3L_s1'
    assert (run / 'ckpt.pt').exists() and not (run / 'summary.json').exists() and not (run / 'FAILED').exists()
    stopped_at = json.loads(log.read_text().splitlines()[-1])['iter']
    assert 'stopped' in next((tmp_path / 'shakespeare_demo').glob(f'slurm-{job}_0.out')).read_text()
    p = ablate(slurm, tmp_path, *args, extra=dict(VARIANTS='nanogpt', SEEDS='1'))
    assert 'submitted 1 run(s) of 1' in p.stdout, p.stdout + p.stderr
    wait_for_queue(slurm)
    assert json.load(open(run / 'summary.json'))['iter'] == 400
    assert '--init_from=resume' in (run / 'train.log').read_text()
    iters = [r['iter'] for r in read_log(run) if r['kind'] == 'train']
    assert iters == sorted(set(iters)) and stopped_at < 400  # resumed where it stopped, no step twice
