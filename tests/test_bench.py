"""bench.py --cuda, the GPU check, as its dry run: the same code on the CPU with graphs off, tiny shapes, few steps."""
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_the_gpu_check_runs_on_the_cpu_and_writes_its_record(tmp_path):
    out = tmp_path / 'check.json'
    p = subprocess.run([sys.executable, 'bench.py', '--cuda', '--dry-run', '--variants', 'nanogpt', 'diff', 'norm_sym',
                        '--json', str(out)], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr
    rec = json.load(open(out))
    assert {'commit', 'dirty', 'date', 'machine', 'torch', 'bandwidth_gbs', 'bf16_tflops'} <= set(rec)
    # each family's eager and (here eager again) graphed steps agree, and its grouped eval forward with its batches'
    assert list(rec['families']) == ['nanogpt', 'diff', 'norm_sym'] and all(r['ok'] for r in rec['families'].values())
    assert rec['eval']['ok'] and abs(rec['eval']['grouped'] - rec['eval']['plain']) < 1e-5
    for s in rec['steps'].values():  # each variant's step beside its floor (graphed: a GPU's only)
        assert s['floor_ms'] > 0 and s['eager_ms'] > 0 and s['compiled_ms'] > 0 and s['bytes'] > 0 and s['flops'] > 0


def test_the_gpu_check_refuses_a_machine_without_cuda(tmp_path):
    out = tmp_path / 'check.json'
    p = subprocess.run([sys.executable, 'bench.py', '--cuda', '--json', str(out)], cwd=ROOT, capture_output=True,
                       text=True, timeout=300)
    assert p.returncode != 0 and not out.exists()
