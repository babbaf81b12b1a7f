"""bench_gpu.py, the GPU check, end to end on the CPU with tiny settings (--dry-run): every step's code runs, so a typo
cannot waste a GPU loan; the steps that need CUDA say so instead of failing."""
import json
import os
import subprocess
import sys
import tarfile

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
import bench_gpu  # noqa: E402
import dataset  # noqa: E402

pytestmark = pytest.mark.usefixtures('one_thread')  # conftest.py: torch on one thread, here and in subprocesses


@pytest.fixture(scope='module', autouse=True)
def shakespeare_char():
    dataset.ensure_data('shakespeare_char')


def check(*args, out):
    p = subprocess.run([sys.executable, 'bench_gpu.py', '--dry-run', '--out', str(out), *args], cwd=ROOT,
                       capture_output=True, text=True, timeout=1200)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    return json.load(open(out / 'results.json'))


def test_the_dry_run_exercises_every_step(tmp_path):
    res = check(out=tmp_path)
    assert list(res['steps']) == [name for name, _, _ in bench_gpu.STEPS]
    assert all(s['status'] == 'ok' for s in res['steps'].values()), res['steps']
    s = res['steps']
    assert s['env']['bandwidth_gbs'] > 0 and s['floor']['train_bytes'] > s['floor']['eval_bytes'] > 0
    assert s['floor']['train_floor_ms'] > 0 and s['floor']['train_bound'] in ('bytes', 'FLOPs')
    runs = s['alone']['runs']
    assert runs['eager']['ms_per_iter'] > 0 and runs['eager']['final_val_loss'] < 4.3
    assert runs['graphed']['status'] == runs['graphed_compiled']['status'] == 'refused'  # CUDA only, said so
    assert 'collected' in s['graph_tests']['summary'] and s['graph_tests']['failed'] == []
    assert s['gpt2']['runs']['diff']['n_params'] > 0 and s['jobs']['jobs']['2']['runs'] == 2
    assert sorted(os.listdir(tmp_path)) == ['log.txt', 'results.json', 'results.md']  # small files only
    md = (tmp_path / 'results.md').read_text()
    assert '| alone | ok |' in md and 'Floor:' in md


def test_a_step_without_the_time_it_needs_is_skipped_and_said(tmp_path):
    res = check('--budget', '25', '--steps', 'env', 'alone', out=tmp_path)
    assert res['steps']['env']['status'] == 'ok'
    assert res['steps']['alone']['status'] == 'skipped' and 'it needs 60 s' in res['steps']['alone']['why']


@pytest.mark.parametrize('job', sorted(bench_gpu.EVIDENCE))
def test_each_evidence_job_runs_its_sweep_and_packs_its_small_files(tmp_path, job):
    res = check('--evidence', job, out=tmp_path)
    e = res['steps']['evidence']
    depths = bench_gpu.EVIDENCE[job]['env']['DEPTHS'].split()  # the dry run: one seed and variant, every depth
    assert e['status'] == 'ok' and e['finished_runs'] == len(depths) and len(e['packed']) == 1, e
    with tarfile.open(tmp_path / e['packed'][0]) as tf:
        names = tf.getnames()
    assert any(n.endswith('/summary.json') for n in names) and not any(n.endswith('.pt') for n in names), names
