"""`sweep.py worker`: many runs in one process. Each sweep variant's run in a worker logs what it logs after the other
variants' runs in another worker (the reverse order) and, for one of them, what the same run logs alone (train.py in a
process of its own), so nothing leaks from one run to the next: dropout masks (every run here has dropout), the RNG,
the optimizer's state (AdamW and OrthoAdam) and λ."""
import fcntl
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHAPE = ['--n_layer=1', '--n_head=2', '--n_embd=32', '--block_size=16', '--batch_size=4', '--device=cpu',
         '--compile=False', '--dtype=float32', '--eval_iters=1', '--log_interval=1', '--warmup_iters=1',
         '--max_iters=3', '--lr_decay_iters=3', '--eval_interval=3', '--dropout=0.1']
# each kind of state a sweep's variants hold (their 3-layer configs): λ (diff), the symmetric, cosine and no-self
# attention, the gate, softmax-1, and OrthoAdam's optimizer state; their combinations (diff_sym, ...) hold no other
RUNS = [[f'configs/{v}_3L.py'] for v in ('nanogpt', 'diff', 'sym', 'norm_sym', 'sym_noself', 'gated', 'softmax1')] + \
       [['configs/nanogpt_3L.py', '--optimizer=orthoadam']]


def numbers(out):
    """Every number a run's log.jsonl holds that it computed (losses, λ per layer), by line; not its timings."""
    timing = ('time', 'tokens_per_sec', 'ms_per_iter', 'mfu', 'wall', 'eval_s', 'elapsed')
    with open(os.path.join(out, 'log.jsonl')) as f:
        lines = [json.loads(line) for line in f if line.strip()]
    return [{k: v for k, v in r.items() if isinstance(v, float) and not any(t in k for t in timing)} for r in lines]


def worker(runs_file):
    return subprocess.Popen([sys.executable, 'sweep.py', 'worker', str(runs_file)], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env=dict(os.environ, OMP_NUM_THREADS='1'))


def test_each_variant_in_a_worker_logs_what_it_logs_after_the_others_and_alone(tmp_path):
    """Two workers run every variant, one in the sweep's order and one in reverse, so that each run follows other
    runs in one and not the other (the first of each follows none); the middle one, which both run after others, is
    also run alone. A leak from one run to the next changes a run's numbers with what ran before it."""
    argv = [[*run, *SHAPE, f'--seed={i + 1}'] for i, run in enumerate(RUNS)]
    for name, order in (('fwd', argv), ('rev', argv[::-1])):
        (tmp_path / f'{name}.txt').write_text('# the sweep\n' + ''.join(
            shlex.join([*a, f"--out_dir={tmp_path / name / a[-1][7:]}"]) + '\n' for a in order))
    middle = argv[len(argv) // 2]
    procs = [worker(tmp_path / 'fwd.txt'), worker(tmp_path / 'rev.txt'),
             subprocess.Popen([sys.executable, 'train.py', *middle, f'--out_dir={tmp_path / "alone"}'], cwd=ROOT,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              env=dict(os.environ, OMP_NUM_THREADS='1'))]
    outs = [p.communicate(timeout=600)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0], outs
    assert len(re.findall(r'^worker: end .* 0 [0-9.]+$', outs[0], re.M)) == len(RUNS), outs[0]
    for a in argv:
        fwd, rev = numbers(tmp_path / 'fwd' / a[-1][7:]), numbers(tmp_path / 'rev' / a[-1][7:])
        assert len(fwd) == len(rev) > 3 and any('lambda/L1/full' in r for r in fwd) == ('diff' in a[0]), a
        for rf, rr in zip(fwd, rev):
            assert rf == pytest.approx(rr, rel=1e-6, abs=1e-7), (a, rf, rr)
        assert 'step 3: train loss' in (tmp_path / 'fwd' / a[-1][7:] / 'train.log').read_text()
    assert numbers(tmp_path / 'alone') == pytest.approx(numbers(tmp_path / 'fwd' / middle[-1][7:]), rel=1e-6, abs=1e-7)


def test_a_worker_goes_on_after_a_failed_or_busy_run_and_a_stop_saves_the_run_in_progress_and_starts_no_other(
        tmp_path):
    """One worker, five runs: one that fails (its status and message), one whose out_dir another process holds (its
    lock: train.py's 75, left to that process), one that finishes, one that trains until the worker's TERM (it saves
    its checkpoint and says where it stopped) and one that never starts. A list with a run without --out_dir is
    refused before torch's import."""
    bad, busy, good, long, never = (tmp_path / n for n in ('bad', 'busy', 'good', 'long', 'never'))
    busy.mkdir()
    until_stopped = ['--max_iters=100000', '--lr_decay_iters=100000', '--eval_interval=100000']
    lines = [['configs/nanogpt_3L.py', *SHAPE, *extra, f'--out_dir={d}'] for d, extra in
             ((bad, ['--batch_size=0']), (busy, []), (good, []), (long, until_stopped), (never, []))]
    (tmp_path / 'runs.txt').write_text(''.join(shlex.join(line) + '\n' for line in lines))
    with open(busy / '.lock', 'a+') as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        p = worker(tmp_path / 'runs.txt')
        try:
            deadline = time.time() + 300
            while not ((long / 'log.jsonl').exists() and '"kind": "train"' in (long / 'log.jsonl').read_text()):
                assert time.time() < deadline and p.poll() is None, p.stdout.read()
                time.sleep(0.2)  # until it has trained a step: a stop before it saves nothing, by design
            p.send_signal(signal.SIGTERM)
            out = p.communicate(timeout=120)[0]
        finally:
            p.kill()
    # the lines the sweep reads: each run's start, and its end with train.py's exit status and its seconds
    for d, rc in ((bad, 1), (busy, 75), (good, 0), (long, 130)):
        assert re.search(rf"^worker: run {re.escape(str(d))}\nworker: end {re.escape(str(d))} {rc} [0-9.]+$", out,
                         re.M), out
    assert p.returncode == 130 and str(never) not in out and not never.exists(), out
    assert 'batch_size=0 must be >= 1' in (bad / 'train.log').read_text()
    assert json.load(open(good / 'summary.json'))['iter'] == 3 and not (busy / 'ckpt.pt').exists()
    assert (long / 'ckpt.pt').exists() and 'stopped at iteration' in (long / 'train.log').read_text()
    (tmp_path / 'nodir.txt').write_text('configs/nanogpt_3L.py --max_iters=2\n')
    p = subprocess.run([sys.executable, '-X', 'importtime', 'sweep.py', 'worker', str(tmp_path / 'nodir.txt')],
                       cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and 'has no --out_dir=' in p.stderr and 'torch' not in p.stderr.split('ablate.sh:')[0]
