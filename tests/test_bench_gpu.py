"""bench_gpu.py, the GPU check, end to end on the CPU with tiny settings (--dry-run): every step's code runs, so a typo
cannot waste a GPU loan; the steps that need CUDA say so instead of failing."""
import json
import os
import subprocess
import sys
import tarfile
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
import bench_gpu  # noqa: E402
import gpu_queue  # noqa: E402
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
    assert runs['compiled']['compiled'] is True and runs['eager']['compiled'] is False  # Inductor ran, on the CPU
    assert runs['graphed']['status'] == runs['graphed_compiled']['status'] == 'refused'  # CUDA only, said so
    assert 'collected' in s['graph_tests']['summary'] and s['graph_tests']['failed'] == []
    assert s['gpt2_diff']['runs']['diff']['n_params'] > s['gpt2_nanogpt']['runs']['nanogpt']['n_params'] * 0.5
    assert [(k, j['runs']) for k, j in s['jobs']['jobs'].items()] == [('1', 2), ('2', 2)]  # one at a time, then two
    assert sorted(os.listdir(tmp_path)) == ['log.txt', 'results.json', 'results.md']  # small files only
    md = (tmp_path / 'results.md').read_text()
    assert '| alone | ok |' in md and 'Floor:' in md


def test_a_step_without_the_time_it_needs_is_skipped_and_said(tmp_path):
    res = check('--budget', '25', '--steps', 'env', 'alone', out=tmp_path)
    assert res['steps']['env']['status'] == 'ok'
    assert res['steps']['alone']['status'] == 'skipped' and 'it needs 60 s' in res['steps']['alone']['why']


def test_the_queue_dry_run_runs_every_job_and_packs_its_runs_into_one_file(tmp_path):
    """bench_gpu.py --next on the CPU: every job of the queue, shrunk to a seed and a variant a launch, runs and comes
    back as one runs.tar.gz (a GPU loan returns at most 8 files, 2 folders down) that collect puts under results/."""
    res = check('--next', '--budget', '1200', out=tmp_path)
    q = res['steps']['queue']['queue']
    assert [j['job'] for j in q] == [j.name for j in gpu_queue.pending()] and all(j['status'] == 'done' for j in q), q
    assert all(j['finished'] and not j['unfinished'] for j in q)
    files = sorted(os.listdir(tmp_path))
    assert files == ['log.txt', 'queue.json', 'results.json', 'results.md', 'runs.tar.gz'], files
    with tarfile.open(tmp_path / 'runs.tar.gz') as tf:
        names = tf.getnames()
    runs = sorted(r for j in q for r in j['finished'] if not r.startswith('gpu_check/'))
    assert sorted(n[len('results/'):-len('/summary.json')] for n in names if n.endswith('/summary.json')) == runs
    assert not any(n.endswith('.pt') for n in names) and 'logs/sink_10_seeds.log' in names
    assert all(f'results/{r}/analysis.json' in names for r in runs if r.startswith('bigram_backcopy_sink_gpu/'))
    # the check jobs (sanity first, gpt2_124M last): each its steps' results.json, results.md and log.txt (the dry
    # run: its env step; test_the_dry_run_exercises_every_step runs the steps)
    checks = [r for j in q for r in j['finished'] if r.startswith('gpu_check/')]
    assert q[0]['job'] == 'sanity' and q[-1]['job'] == 'gpt2_124M' and len(checks) == 3, q  # and jobs_at_once
    for c in checks:
        assert all(f'results/{c}/{f}' in names for f in gpu_queue.CHECK), names
    sanity = json.load(tarfile.open(tmp_path / 'runs.tar.gz').extractfile(f'results/{checks[0]}/results.json'))
    assert list(sanity['steps']) == ['env'] and sanity['mode'] == 'dry-run check'
    assert all(s['status'] == 'ok' for s in sanity['steps'].values()), sanity['steps']
    results = tmp_path / 'results_here'
    copied, same = gpu_queue.collect(str(tmp_path), results=str(results), report=False)
    assert sorted(copied) == sorted(runs + checks) and same == []
    assert not gpu_queue.checked(gpu_queue.QUEUE[0], str(results))  # a dry run's check holds nothing
    assert gpu_queue.collect(str(tmp_path), results=str(results), report=False) == ([], sorted(runs + checks))


def tiny_job(seeds='1 2'):
    """One launch of two 2-step runs, one after the other (JOBS=1), on the CPU."""
    return gpu_queue.Job('tiny', 'a test', 60, (gpu_queue.Launch(
        'shakespeare_tiny', (('PROFILE', 'cpu_long'), ('SEEDS', seeds), ('DEPTHS', '3L'), ('VARIANTS', 'nanogpt'),
                             ('JOBS', '1')), ()),))


def test_a_job_cut_half_way_brings_back_its_finished_runs_and_the_next_call_runs_only_the_rest(tmp_path):
    job = tiny_job()
    out = tmp_path / 'out'
    out.mkdir()
    rec = gpu_queue.run_job(job, str(out), time.monotonic() + 600, extra=bench_gpu.DRY_SCHEDULE, cut_after=1)
    assert rec['status'] == 'cut', rec
    assert rec['finished'] == ['shakespeare_tiny/nanogpt_3L_s1'] and rec['unfinished'] == ['shakespeare_tiny/nanogpt_3L_s2']
    results = tmp_path / 'results'
    assert gpu_queue.missing(job, str(results)) == ['shakespeare_tiny/nanogpt_3L_s1', 'shakespeare_tiny/nanogpt_3L_s2']
    gpu_queue.collect(str(out), results=str(results), report=False)
    assert gpu_queue.missing(job, str(results)) == ['shakespeare_tiny/nanogpt_3L_s2']  # what the next call runs
    summary = json.load(open(results / 'shakespeare_tiny' / 'nanogpt_3L_s1' / 'summary.json'))
    assert summary['finished'] and summary['config']['seed'] == 1 and summary['machine']['cpu']['threads'] >= 1


def test_collect_never_overwrites_a_different_run(tmp_path):
    out, results = tmp_path / 'out', tmp_path / 'results'
    run = out / 'results' / 'sweep' / 'nanogpt_3L_s1'
    run.mkdir(parents=True)
    (run / 'summary.json').write_text('{"final_val_loss": 1.5}')
    held = results / 'sweep' / 'nanogpt_3L_s1'
    held.mkdir(parents=True)
    (held / 'summary.json').write_text('{"final_val_loss": 1.6}')
    with pytest.raises(SystemExit, match='already holds a different run'):
        gpu_queue.collect(str(out), results=str(results), report=False)
    assert json.loads((held / 'summary.json').read_text())['final_val_loss'] == 1.6


def test_a_check_job_is_held_by_a_committed_gpu_check_of_the_same_code(tmp_path):
    """The sanity job is held where a GPU's check of a clean tree, at a commit with this tree's model, trainer and
    check code, passed its steps; one that ran every step and failed one holds it too, as failed, for a person (run
    again, it would cost the next loan as much); a check at an older commit, of a dirty tree, cut by its time, or a
    dry run holds nothing."""
    sanity = gpu_queue.QUEUE[0]
    git = lambda *a: subprocess.run(['git', *a], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    head = git('rev-parse', 'HEAD')
    older = git('rev-parse', git('log', '-1', '--format=%H', '--', *gpu_queue.CODE) + '~1')  # before the last change
    clean = subprocess.run(['git', 'diff', '--quiet', 'HEAD', '--', *gpu_queue.CODE], cwd=ROOT).returncode == 0

    def write(name, commit, graph='ok', mode='queue', device='cuda', dirty=False):
        d = tmp_path / 'gpu_check' / name
        d.mkdir(parents=True)
        steps = dict(env=dict(commit=commit[:7], device=device, dirty=dirty, status='ok'),
                     graph_tests=dict(status=graph), eval=dict(status='ok'))
        (d / 'results.json').write_text(json.dumps(dict(mode=mode, steps=steps)))
    write('a', older)
    write('c', head, mode='dry-run check', device='cpu')
    write('e', head, dirty=True)
    write('t', head, graph='timed out')
    assert gpu_queue.checked(sanity, str(tmp_path)) is None and gpu_queue.missing(sanity, str(tmp_path))
    write('b', head, graph='failed')
    assert gpu_queue.checked(sanity, str(tmp_path)) == ('failed: gpu_check/b' if clean else None)
    write('d', head)
    assert gpu_queue.checked(sanity, str(tmp_path)) == ('ok' if clean else None)  # an uncommitted change: not held
    assert gpu_queue.missing(sanity, str(tmp_path)) == ([] if clean else ['gpu_check: env graph_tests eval'])


def test_the_queue_skips_the_runs_results_holds():
    """The committed results decide what is pending: the third seed at 3L is in results/shakespeare_full."""
    names = [j.name for j in gpu_queue.pending()]
    assert 'seed3_full_3L' not in names and 'seed3_full_6L' in names
    assert gpu_queue.missing(gpu_queue.QUEUE[1])  # the leak cells: none committed yet
