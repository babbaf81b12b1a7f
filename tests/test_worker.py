"""worker.py: many runs in one process. Each sweep variant's run inside a worker logs what the same run logs alone
(in a process of its own), after other variants' runs in the same process, so nothing leaks from one run to the
next: dropout masks (every run here has dropout), the RNG, the optimizer's state (AdamW and OrthoAdam) and λ."""
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
SHAPE = ['--n_layer=2', '--n_head=4', '--n_embd=64', '--block_size=32', '--batch_size=8', '--device=cpu',
         '--compile=False', '--dtype=float32', '--eval_iters=2', '--log_interval=1', '--warmup_iters=2',
         '--max_iters=4', '--lr_decay_iters=4', '--eval_interval=2', '--dropout=0.1']
# every variant a Shakespeare sweep runs (its 3-layer config), and the optimizer and gate a sweep sets otherwise
RUNS = [[f'configs/{v}_3L.py'] for v in ('nanogpt', 'diff', 'sym', 'diff_sym', 'norm_sym', 'sym_noself', 'gated',
                                         'softmax1')] + \
       [['configs/gated_3L.py', '--gate=headwise'], ['configs/nanogpt_3L.py', '--optimizer=orthoadam'],
        ['configs/softmax1_3L.py', '--optimizer=orthoadam']]


def numbers(out):
    """Every number a run's log.jsonl holds that it computed (losses, λ per layer), by line; not its timings."""
    timing = ('time', 'tokens_per_sec', 'ms_per_iter', 'mfu', 'wall', 'eval_s', 'elapsed')
    with open(os.path.join(out, 'log.jsonl')) as f:
        lines = [json.loads(line) for line in f if line.strip()]
    return [{k: v for k, v in r.items() if isinstance(v, float) and not any(t in k for t in timing)} for r in lines]


def worker(runs_file, **kw):
    return subprocess.Popen([sys.executable, 'worker.py', str(runs_file)], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, **kw)


def test_each_variant_in_a_worker_logs_what_it_logs_alone(tmp_path):
    lines, alone = [], []
    for i, run in enumerate(RUNS):
        argv = [*run, *SHAPE, f'--seed={i + 1}']
        lines.append(shlex.join([*argv, f'--out_dir={tmp_path / "w" / str(i)}']))
        alone.append(subprocess.Popen([sys.executable, 'train.py', *argv, f'--out_dir={tmp_path / "a" / str(i)}'],
                                      cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True))
        if len(alone) % 2 == 0:  # two at a time: two cores
            for p in alone[-2:]:
                assert p.wait(timeout=300) == 0, p.stderr.read()
    for p in alone:
        assert p.wait(timeout=300) == 0, p.stderr.read()
    # the first run again at the end, after every other variant: its own numbers once more
    lines.append(lines[0].replace(f'{tmp_path / "w" / "0"}', f'{tmp_path / "w" / "again"}'))
    (tmp_path / 'runs.txt').write_text('# the sweep\n' + '\n'.join(lines) + '\n')
    p = worker(tmp_path / 'runs.txt')
    out = p.communicate(timeout=600)[0]
    assert p.returncode == 0 and len(re.findall(r'^worker: end .* 0 [0-9.]+$', out, re.M)) == len(lines), out
    for i in range(len(RUNS)):
        a, w = numbers(tmp_path / 'a' / str(i)), numbers(tmp_path / 'w' / str(i))
        assert len(a) == len(w) and any('lambda/L1/full' in r for r in a) == ('diff' in RUNS[i][0]), RUNS[i]
        for ra, rw in zip(a, w):
            assert ra == pytest.approx(rw, rel=1e-6, abs=1e-7), (RUNS[i], ra, rw)
        assert 'step 4: train loss' in (tmp_path / 'w' / str(i) / 'train.log').read_text()
    assert numbers(tmp_path / 'w' / 'again') == numbers(tmp_path / 'w' / '0')


def test_a_failed_run_is_recorded_and_the_next_one_runs(tmp_path):
    good = shlex.join(['configs/nanogpt_3L.py', *SHAPE, f'--out_dir={tmp_path / "good"}'])
    bad = shlex.join(['configs/nanogpt_3L.py', *SHAPE, '--batch_size=0', f'--out_dir={tmp_path / "bad"}'])
    (tmp_path / 'runs.txt').write_text(f'{bad}\n{good}\n')
    p = worker(tmp_path / 'runs.txt')
    out = p.communicate(timeout=300)[0]
    # the lines ablate.sh reads: each run's start, and its end with train.py's exit status and its seconds
    assert p.returncode == 1 and re.search(rf"^worker: end {re.escape(str(tmp_path / 'bad'))} 1 [0-9.]+$", out, re.M)
    assert re.search(rf"^worker: end {re.escape(str(tmp_path / 'good'))} 0 [0-9.]+$", out, re.M), out
    assert 'batch_size=0 must be >= 1' in (tmp_path / 'bad' / 'train.log').read_text()
    assert json.load(open(tmp_path / 'good' / 'summary.json'))['iter'] == 4
    (tmp_path / 'runs.txt').write_text(f'{good}\n')
    os.remove(tmp_path / 'good' / 'summary.json')  # as if it had stopped: a run given again is resumed by its line
    (tmp_path / 'nodir.txt').write_text('configs/nanogpt_3L.py --max_iters=2\n')
    p = worker(tmp_path / 'nodir.txt')
    assert p.communicate(timeout=300)[0] and p.returncode == 1  # refused: no --out_dir


def test_a_stop_saves_the_run_in_progress_and_starts_no_other(tmp_path):
    long = [*SHAPE, '--max_iters=100000', '--lr_decay_iters=100000', '--eval_interval=100000']
    lines = [shlex.join(['configs/nanogpt_3L.py', *long, f'--out_dir={tmp_path / str(i)}']) for i in range(2)]
    (tmp_path / 'runs.txt').write_text('\n'.join(lines) + '\n')
    p = worker(tmp_path / 'runs.txt')
    log, deadline = tmp_path / '0' / 'log.jsonl', time.time() + 300
    while time.time() < deadline and not (log.exists() and '"kind": "train"' in log.read_text()):
        time.sleep(0.2)  # until the first run has trained a step: a stop before it saves nothing, by design
    p.send_signal(signal.SIGTERM)
    out = p.communicate(timeout=120)[0]
    assert p.returncode == 130 and f"worker: end {tmp_path / '0'} 130 " in out and str(tmp_path / '1') not in out, out
    assert (tmp_path / '0' / 'ckpt.pt').exists() and not (tmp_path / '1').exists()
    assert 'stopped at iteration' in (tmp_path / '0' / 'train.log').read_text()


def test_a_run_another_process_trains_is_left_to_it(tmp_path):
    """A run whose out_dir another process holds (its lock: train.py exits 75) is left to that process: no FAILED
    in its folder, the worker says busy, and the next run goes on; the worker exits 0."""
    busy, good = tmp_path / 'busy', tmp_path / 'good'
    busy.mkdir()
    lines = [shlex.join(['configs/nanogpt_3L.py', *SHAPE, f'--out_dir={d}']) for d in (busy, good)]
    (tmp_path / 'runs.txt').write_text('\n'.join(lines) + '\n')
    with open(busy / '.lock', 'a+') as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        p = worker(tmp_path / 'runs.txt')
        out = p.communicate(timeout=300)[0]
    assert p.returncode == 0 and f'worker: end {busy} 75 ' in out and f'worker: end {good} 0 ' in out, out
    assert not (busy / 'FAILED').exists() and not (busy / 'ckpt.pt').exists()
    assert json.load(open(good / 'summary.json'))['iter'] == 4
