"""bench.py: the benchmark's record and table, and --cuda, the GPU check, as its dry run (the same code on the CPU with
graphs off, tiny shapes, few steps). In this process (test_train.script): the interpreter's start and torch's import
were most of each test's time. Timings are never asserted, only that they were taken."""
import json
import os
import sys

import pytest
import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import hardware  # noqa: E402
from test_train import script  # noqa: E402

pytestmark = pytest.mark.usefixtures('one_thread')  # conftest.py


def test_the_gpu_check_runs_on_the_cpu_and_writes_its_record(tmp_path):
    """One family (the check's code is the same for each): its eager and (here eager again) graphed steps agree, and
    its grouped eval forward with its batches'; the grouped evaluation gives the plain one's loss; its step is timed
    eager and compiled beside its floor."""
    out = tmp_path / 'check.json'
    p = script('bench.py', '--cuda', '--dry-run', '--variants', 'diff', '--json', str(out))
    assert p.returncode == 0, p.stdout + p.stderr
    rec = json.load(open(out))
    assert {'commit', 'dirty', 'date', 'machine', 'torch', 'bandwidth_gbs', 'bf16_tflops'} <= set(rec)
    assert list(rec['families']) == ['diff'] and rec['families']['diff']['ok']
    assert rec['eval']['ok'] and abs(rec['eval']['grouped'] - rec['eval']['plain']) < 1e-5
    s = rec['steps']['diff']
    assert s['floor_ms'] > 0 and s['eager_ms'] > 0 and s['compiled_ms'] > 0 and s['bytes'] > 0 and s['flops'] > 0


def test_the_gpu_check_refuses_a_machine_without_cuda(tmp_path):
    out = tmp_path / 'check.json'
    p = script('bench.py', '--cuda', '--json', str(out))
    assert p.returncode != 0 and not out.exists()
    assert len(p.stderr.strip().splitlines()) == 1 and '--dry-run' in p.stderr, p.stderr  # one line, the way out


def test_bench_runs_and_reports_every_field(tmp_path):
    """Two variants, a process each: the record holds the processor, its bf16 units and the dtype train.py's
    dtype=auto takes there; the table gives each variant's step time over nanogpt's."""
    out = tmp_path / 'bench.json'
    p = script('bench.py', '--variants', 'nanogpt', 'diff', '--n_layer=1', '--n_embd=32', '--n_head=2',
               '--batch_size=2', '--seq', '16', '--steps=1', '--warmup=1', f'--json={out}')
    assert p.returncode == 0, p.stderr
    doc = json.load(open(out))
    res = doc['results']
    assert [r['variant'] for r in res] == ['nanogpt', 'diff']
    assert doc['processor'] == hardware.cpu_info() and doc['torch'] == torch.__version__
    assert doc['cpu_dtype_auto'] == ('bfloat16' if hardware.cpu_has_fast_bf16() else 'float32')
    for r in res:
        assert r['ms_per_step'] > 0 and r['tokens_per_sec'] > 0 and r['n_params'] > 0 and 'peak_mem_mb' in r
    rows = [[c.strip() for c in line.split('|')[1:-1]] for line in p.stdout.splitlines() if line.startswith('| ')]
    ratio = rows[0].index('vs nanogpt')
    assert [row[ratio] for row in rows[1:]] == [f"{r['ms_per_step'] / res[0]['ms_per_step']:.2f}x" for r in res]
