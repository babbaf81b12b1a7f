"""bench_gpu.py, the GPU check, end to end on the CPU with tiny settings (--dry-run): every step's code runs, so a typo
cannot waste a GPU loan; the steps that need CUDA say so instead of failing."""
import json
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, 'evidence'))  # bench_gpu.py, gpu_queue.py
import bench_gpu  # noqa: E402
import gpu_queue  # noqa: E402
import dataset  # noqa: E402
from test_ablate import alive_pids, kill_left  # noqa: E402

pytestmark = pytest.mark.usefixtures('one_thread')  # conftest.py: torch on one thread, here and in subprocesses


@pytest.fixture(scope='module', autouse=True)
def shakespeare_char():
    dataset.ensure_data('shakespeare_char')


def check(*args, out):
    p = subprocess.run([sys.executable, 'evidence/bench_gpu.py', '--dry-run', '--out', str(out), *args], cwd=ROOT,
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
    everything = res['steps']['queue']['queue']
    assert [j['job'] for j in everything] == [j.name for j in gpu_queue.pending()], everything
    # the first job of each shape of launches trains (shrunk); a later one of the same shape (another part of a split
    # job) is checked as ablate.sh checks its launches, naming the job that trained that shape
    q = [j for j in everything if j['status'] != 'checked']
    trained = {j['job'] for j in q}
    assert all(j['status'] == 'done' for j in q), q
    checked = [j for j in everything if j['status'] == 'checked']
    assert checked and all(j['like'] in trained for j in checked), checked
    shapes = {bench_gpu.dry_shape(j) for j in gpu_queue.pending() if j.launches}
    assert shapes == {bench_gpu.dry_shape(j) for j in gpu_queue.pending() if j.launches and j.name in trained}
    assert all(j['finished'] and not j['unfinished'] for j in q)
    # every run came back from a worker (worker.py's line for each finished run, which in_worker_s counts)
    assert all(j['in_worker_s']['n'] == len(j['finished']) for j in q if not j.get('steps')), q
    # the stand-in for a failed capture: the queue's first graphed launch is refused its graph on the CPU, and its
    # runs come back from the eager retry
    assert q[1]['job'] == 'leak_cells_dropout0.2' and q[1]['retried_eagerly'], q[1]
    assert not any(j['retried_eagerly'] for j in q[2:]), q
    assert bench_gpu.ONLY_A_GPU in (tmp_path / 'results.md').read_text()  # and it says what only a GPU can show
    files = sorted(os.listdir(tmp_path))
    assert files == ['log.txt', 'queue.json', 'results.json', 'results.md', 'runs.tar.gz'], files
    with tarfile.open(tmp_path / 'runs.tar.gz') as tf:
        names = tf.getnames()
    runs = sorted(r for j in q for r in j['finished'] if not r.startswith('gpu_check/'))
    assert sorted(n[len('results/'):-len('/summary.json')] for n in names if n.endswith('/summary.json')) == runs
    assert not any(n.endswith('.pt') for n in names) and 'logs/sink_10_seeds.log' in names
    assert all(f'results/{r}/analysis.json' in names for r in runs if r.startswith('bigram_backcopy_sink_gpu/'))
    # the outlier job's runs come back analysed, W8A8 beside the weight-only penalties (their outlier curves: every
    # 100 steps, none in the dry run's 2)
    pc = [r for r in runs if r.startswith('pycode_outliers_gpu/')]
    assert pc and all(f'results/{r}/analysis.json' in names for r in pc), runs
    with tarfile.open(tmp_path / 'runs.tar.gz') as tf:
        assert 'loss_penalty_w8a8' in json.load(tf.extractfile(f'results/{pc[0]}/analysis.json'))['w8a8']
    # the check jobs (sanity first, gpt2_124M last): each its steps' results.json, results.md and log.txt (the dry
    # run: its env step; test_the_dry_run_exercises_every_step runs the steps)
    checks = [r for j in q for r in j['finished'] if r.startswith('gpu_check/')]
    assert q[0]['job'] == 'sanity' and q[-1]['job'] == 'gpt2_124M' and len(checks) == 4, q  # capture_suite, jobs
    for c in checks:
        assert all(f'results/{c}/{f}' in names for f in gpu_queue.CHECK), names
    sanity = json.load(tarfile.open(tmp_path / 'runs.tar.gz').extractfile(f'results/{checks[0]}/results.json'))
    assert list(sanity['steps']) == ['env'] and sanity['mode'] == 'dry-run check'
    assert all(s['status'] == 'ok' for s in sanity['steps'].values()), sanity['steps']
    results = tmp_path / 'results_here'
    # collect refuses every run of a CPU (and a check's folder), naming the reason, and copies nothing
    copied, same, refused = gpu_queue.collect(str(tmp_path), results=str(results), report=False)
    assert copied == same == [] and sorted(r for r, _ in refused) == sorted(runs + checks)
    assert all('ran on cpu, not a CUDA device' in why for _, why in refused), refused
    assert not results.exists()
    # a rehearsal that waives the device (and this tree's commit) collects them all, once
    waive = ('commit', 'dirty', 'device')
    copied, same, refused = gpu_queue.collect(str(tmp_path), results=str(results), report=False, waive=waive)
    assert sorted(copied) == sorted(runs + checks) and same == refused == []
    assert not gpu_queue.checked(gpu_queue.QUEUE[0], str(results))  # a dry run's check holds nothing
    assert gpu_queue.collect(str(tmp_path), results=str(results), report=False, waive=waive) == (
        [], sorted(runs + checks), [])


def tiny_job():
    """Two launches on the CPU, each one run in its worker: a 2-step run, and one that trains until it is stopped
    (in a sweep of its own: its schedule differs). A cut after the first run to come back lands in the second."""
    env = (('PROFILE', 'cpu_long'), ('DEPTHS', '3L'), ('VARIANTS', 'nanogpt'), ('JOBS', '1'))
    long = ('--max_iters=100000', '--lr_decay_iters=100000', '--eval_interval=100000')
    return gpu_queue.Job('tiny', 'a test', 60, (
        gpu_queue.Launch('shakespeare_tiny', env + (('SEEDS', '1'),), bench_gpu.DRY_SCHEDULE),
        gpu_queue.Launch('shakespeare_tiny_long', env + (('SEEDS', '2'),), bench_gpu.DRY_SCHEDULE + long)))


def test_a_job_cut_half_way_brings_back_its_finished_runs_and_the_next_call_runs_only_the_rest(tmp_path):
    job = tiny_job()
    out = tmp_path / 'out'
    out.mkdir()
    rec = gpu_queue.run_job(job, str(out), time.monotonic() + 600, cut_after=1)
    assert rec['status'] == 'cut', rec
    assert rec['finished'] == ['shakespeare_tiny/nanogpt_3L_s1'], rec
    assert rec['unfinished'] == ['shakespeare_tiny_long/nanogpt_3L_s2'], rec
    assert rec['in_worker_s']['n'] == 1  # the finished run's line from its worker
    results = tmp_path / 'results'
    assert gpu_queue.missing(job, str(results)) == ['shakespeare_tiny/nanogpt_3L_s1',
                                                    'shakespeare_tiny_long/nanogpt_3L_s2']
    gpu_queue.collect(str(out), results=str(results), report=False, waive=('commit', 'dirty', 'device'))
    assert gpu_queue.missing(job, str(results)) == ['shakespeare_tiny_long/nanogpt_3L_s2']  # what the next call runs
    summary = json.load(open(results / 'shakespeare_tiny' / 'nanogpt_3L_s1' / 'summary.json'))
    assert summary['finished'] and summary['config']['seed'] == 1 and summary['machine']['cpu']['threads'] >= 1


def test_every_job_fits_one_call_and_seed_2_stands_at_8_layers_for_the_seeds_five():
    """Each job's estimate (gpu_queue's formula, an H100's margin included) fits what a call of `--budget 540` leaves
    a job, seed_pipeline's parts included; and the queue with results/ has the second seed at 8 layers for all five."""
    too_long = [(j.name, j.estimate_s) for j in gpu_queue.QUEUE if j.estimate_s > gpu_queue.FITS]
    assert gpu_queue.FITS <= 540 - 45 and too_long == [], too_long
    assert any(j.name.startswith('seed_pipeline') for j in gpu_queue.QUEUE)
    queued = {os.path.basename(d) for j in gpu_queue.QUEUE for lc in j.launches if lc.sweep == 'shakespeare_full'
              for d in gpu_queue.runs_of(lc, gpu_queue.RESULTS)}
    held = {n for n in os.listdir(os.path.join(gpu_queue.RESULTS, 'shakespeare_full'))
            if os.path.exists(os.path.join(gpu_queue.RESULTS, 'shakespeare_full', n, 'summary.json'))}
    assert {f'{v}_8L_s2' for v in gpu_queue.SEED5.split()} <= queued | held
    # every run job says its estimate's inputs, and `list` the formula
    assert all(j.basis.startswith('n ') for j in gpu_queue.QUEUE if j.launches)
    p = subprocess.run([sys.executable, 'evidence/gpu_queue.py', 'list'], cwd=ROOT, capture_output=True, text=True)
    assert p.returncode == 0 and gpu_queue.FORMULA in p.stdout and 'IN_WORKER' in p.stdout and '[assumed]' in p.stdout


def brought_back(root, sweep, run, settings='--max_iters=500', **record):
    """A run as a loan brings it back (or as results/ holds it): summary.json of a clean tree at a commit, on CUDA,
    changed by record; the sweep's settings."""
    d = root / sweep / run
    d.mkdir(parents=True)
    s = dict(final_val_loss=1.5, code=dict(commit='a' * 40, dirty=False), device='cuda')
    s.update(record)
    (d / 'summary.json').write_text(json.dumps(s))
    (root / sweep / 'sweep_settings').write_text(settings + '\n')
    return d


def test_collect_never_overwrites_a_different_run(tmp_path):
    out, results = tmp_path / 'out', tmp_path / 'results'
    brought_back(out / 'results', 'sweep', 'nanogpt_3L_s1')
    held = brought_back(results, 'sweep', 'nanogpt_3L_s1', final_val_loss=1.6)
    with pytest.raises(SystemExit, match='already holds a different run'):
        gpu_queue.collect(str(out), results=str(results), report=False)
    assert json.loads((held / 'summary.json').read_text())['final_val_loss'] == 1.6


def test_collect_refuses_a_run_without_a_commit_from_a_dirty_tree_off_cuda_or_of_other_settings(tmp_path, monkeypatch,
                                                                                               capsys):
    """A run that cannot be placed never joins results/: collect names each refused run and its reason (before: a
    commit-less, dirty or CPU run was collected, and report.py drew only a "mixed settings" line), and collects the
    rest; `gpu_queue.py collect` exits 1."""
    out, results = tmp_path / 'out', tmp_path / 'results'
    brought = out / 'results'
    brought_back(brought, 'a', 'nanogpt_3L_s1')
    brought_back(brought, 'a', 'diff_3L_s1', code=dict(commit=None, dirty=None))
    brought_back(brought, 'a', 'sym_3L_s1', code=dict(commit='b' * 40, dirty=True))
    brought_back(brought, 'a', 'norm_sym_3L_s1', device='cpu')
    brought_back(brought, 'b', 'nanogpt_3L_s1', settings='--max_iters=500\n--dropout=0.2')
    brought_back(results, 'b', 'diff_3L_s1', settings='--max_iters=500')
    copied, same, refused = gpu_queue.collect(str(out), results=str(results), report=False)
    assert copied == ['a/nanogpt_3L_s1'] and same == [] and (results / 'a' / 'sweep_settings').exists()
    why = dict(refused)
    assert sorted(why) == ['a/diff_3L_s1', 'a/norm_sym_3L_s1', 'a/sym_3L_s1', 'b/nanogpt_3L_s1']
    assert why['a/diff_3L_s1'].startswith('no commit recorded') and 'loan.sh' in why['a/diff_3L_s1']
    assert why['a/sym_3L_s1'].startswith('ran from a tree with uncommitted changes at bbbbbbb')
    assert why['a/norm_sym_3L_s1'].startswith('ran on cpu, not a CUDA device')
    assert "its sweep's settings differ" in why['b/nanogpt_3L_s1'] and '--dropout=0.2' in why['b/nanogpt_3L_s1']
    assert not (results / 'b' / 'nanogpt_3L_s1').exists() and not (results / 'a' / 'diff_3L_s1').exists()
    collect = gpu_queue.collect  # the command line's, into another results folder than the repository's
    monkeypatch.setattr(gpu_queue, 'collect', lambda o: collect(o, results=str(tmp_path / 'r2'), report=False))
    assert gpu_queue.main(['collect', str(out)]) == 1
    assert 'refused a/norm_sym_3L_s1: ran on cpu, not a CUDA device' in capsys.readouterr().err


def test_collect_refuses_a_run_on_a_pinned_corpus_that_is_not_the_manifests(tmp_path):
    """data/pycode is pinned by its manifest's corpus hash, and every run records the hash of the text it trained on:
    a GPU run whose corpus differs (the device prepared other text) is refused; the manifest's own is collected."""
    pinned = json.load(open(os.path.join(ROOT, 'data', 'pycode', 'manifest.json')))['corpus_sha256']
    out, results = tmp_path / 'out', tmp_path / 'results'
    for run, corpus in (('pc_nanogpt_12L_s1', pinned), ('pc_softmax1_12L_s1', 'f' * 64)):
        brought_back(out / 'results', 'pc', run, config=dict(dataset='pycode'), corpus_sha256=corpus)
    brought_back(out / 'results', 'pc', 'nanogpt_3L_s1', config=dict(dataset='shakespeare_char'))  # no manifest
    copied, same, refused = gpu_queue.collect(str(out), results=str(results), report=False)
    assert sorted(copied) == ['pc/nanogpt_3L_s1', 'pc/pc_nanogpt_12L_s1']
    assert [r for r, _ in refused] == ['pc/pc_softmax1_12L_s1'] and 'its corpus is ffffffffffff' in refused[0][1]
    assert 'data/pycode/manifest.json' in refused[0][1]


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
        first, *rest = sanity.steps[1:]  # the sanity's steps after env (graph: the first one's status)
        steps = {'env': dict(commit=commit[:7], device=device, dirty=dirty, status='ok'), first: dict(status=graph),
                 **{s: dict(status='ok') for s in rest}}
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
    assert gpu_queue.missing(sanity, str(tmp_path)) == ([] if clean else [f"gpu_check: {' '.join(sanity.steps)}"])


def test_the_queue_skips_the_runs_results_holds():
    """The committed results decide what is pending: the third seed at 3L is in results/shakespeare_full."""
    names = [j.name for j in gpu_queue.pending()]
    assert 'seed3_full_3L' not in names and 'seed3_full_6L' in names
    assert gpu_queue.missing(gpu_queue.QUEUE[1])  # the leak cells: none committed yet


# what a launch starts, as a test's stand-in: a shell that ignores TERM (a run that does not stop), its child, and a
# grandchild under setsid (outside the launch's process group: only the process tree finds it)
STUBBORN = ("trap '' TERM INT; sleep 600 & echo $! >> {pids}; setsid sleep 600 & echo $! >> {pids}; echo $$ >> {pids}; "
            "while :; do wait; done")
WAITER = """import os, subprocess, sys, time
sys.path.insert(0, {root!r})
sys.path.insert(0, {root!r} + '/evidence')
import gpu_queue
p = subprocess.Popen(['sh', '-c', {cmd!r}], start_new_session=True)
while not os.path.exists({pids!r}) or len(open({pids!r}).read().split()) < 3:
    time.sleep(0.05)
print('started', flush=True)
print(gpu_queue.wait_all([p], time.monotonic() + {after}, grace=1), flush=True)
"""


@pytest.mark.parametrize('how', ['deadline', 'sigterm'])
def test_a_stopped_launch_leaves_no_process_behind(tmp_path, how):
    """gpu_queue.wait_all at its deadline, or when the process that waits (a queue step) gets a SIGTERM: a TERM to each
    launch's group, and `grace` seconds later a KILL to whatever is left of it and of everything it started, a process
    under setsid included (before: a TERM only, and a waiter killed by its own TERM left its launches running, each
    under setsid)."""
    pids = tmp_path / 'pids'
    code = WAITER.format(root=ROOT, cmd=STUBBORN.format(pids=pids), pids=str(pids),
                         after=0 if how == 'deadline' else 600)
    p = subprocess.Popen([sys.executable, '-c', code], stdout=subprocess.PIPE, text=True)
    started = []
    try:
        assert p.stdout.readline().strip() == 'started'
        started = [int(x) for x in pids.read_text().split()]
        assert len(alive_pids(started)) == 3
        if how == 'sigterm':
            p.send_signal(signal.SIGTERM)
        out = p.communicate(timeout=30)[0]
        assert (p.returncode, out.strip()) == ((0, 'True') if how == 'deadline' else (128 + signal.SIGTERM, '')), out
        time.sleep(0.2)
        assert alive_pids(started) == []
    finally:
        kill_left(p, started)


def git(repo, *args):
    return subprocess.run(['git', '-c', 'user.name=t', '-c', 'user.email=t@t', *args], cwd=repo, capture_output=True,
                          text=True, check=True).stdout.strip()


def loan_repo(tmp_path):
    """A small checkout with loan.sh, gpu_queue.py and the repository's .gitignore, committed, and a data file git
    ignores (as data/*/input.txt)."""
    repo = tmp_path / 'repo'
    repo.mkdir()
    (repo / 'evidence').mkdir()
    for f in ('evidence/loan.sh', 'evidence/gpu_queue.py', '.gitignore'):
        (repo / f).write_text(open(os.path.join(ROOT, f)).read())
    (repo / 'data' / 'toy').mkdir(parents=True)
    (repo / 'data' / 'toy' / 'input.txt').write_text('to be or not to be\n')
    git(repo, 'init', '-q')
    git(repo, 'add', '.')
    git(repo, 'commit', '-q', '-m', 'one')
    return repo


def loan(repo, *args, **env):
    e = dict(os.environ, LOAN_WORK=str(repo.parent / 'work'), PYTHON=sys.executable, **env)
    return subprocess.run(['bash', str(repo / 'evidence' / 'loan.sh'), *args], cwd=repo, env=e, capture_output=True, text=True,
                          timeout=60)


# the stand-in for bench_gpu.py --next: what it ran from, into $LOAN_OUT
RECORD = ('git rev-parse HEAD > "$LOAN_OUT/commit"; git status --porcelain > "$LOAN_OUT/status"; '
          'pwd > "$LOAN_OUT/where"; cat data/toy/input.txt > "$LOAN_OUT/data"; '
          'echo "$BENCH_GPU_COMMIT" > "$LOAN_OUT/claimed"')


def test_a_loan_runs_one_commit_from_a_clean_checkout_and_writes_outside_the_tree(tmp_path):
    """loan.sh pack refuses a tree with changes or without a commit; run refuses a tree that differs from the packed
    commit, or an output inside the tree, before anything runs; otherwise the command runs in a clean clone of that
    commit outside the tree, with the data git ignores, and writes outside the tree (before: the tree travelled
    without .git, every run recorded commit None, and bench_gpu.md's own set-up made every run dirty)."""
    empty = tmp_path / 'empty'
    empty.mkdir()
    (empty / 'evidence').mkdir()
    (empty / 'evidence' / 'loan.sh').write_text(open(os.path.join(ROOT, 'evidence', 'loan.sh')).read())
    git(empty, 'init', '-q')
    p = loan(empty, 'pack')
    assert p.returncode == 2 and 'has no commit' in p.stderr, p.stderr
    repo = loan_repo(tmp_path)
    (repo / 'evidence' / 'gpu_queue.py').write_text('# changed\n')
    p = loan(repo, 'pack')
    assert p.returncode == 2 and 'uncommitted changes' in p.stderr and 'gpu_queue.py' in p.stderr, p.stderr
    git(repo, 'checkout', '--', 'evidence/gpu_queue.py')
    p = loan(repo, 'pack')
    assert p.returncode == 0 and (repo / '.loan' / 'repo.bundle').exists(), p.stderr
    assert git(repo, 'status', '--porcelain') == ''  # .loan is ignored
    out = tmp_path / 'out'
    p = loan(repo, 'run', '--out', str(repo / 'q'), LOAN_COMMAND=RECORD)
    assert p.returncode == 2 and 'is inside the tree' in p.stderr and not (repo / 'q').exists(), p.stderr
    p = loan(repo, 'run', '--out', str(out), LOAN_COMMAND=RECORD)
    assert p.returncode == 0, p.stdout + p.stderr
    head = git(repo, 'rev-parse', 'HEAD')
    assert (out / 'commit').read_text().strip() == (out / 'claimed').read_text().strip() == head
    assert (out / 'status').read_text() == '' and (out / 'data').read_text() == 'to be or not to be\n'
    assert not (out / 'where').read_text().startswith(str(repo)) and not (tmp_path / 'work').exists()
    (repo / 'evidence' / 'gpu_queue.py').write_text('# changed after packing\n')
    shutil.rmtree(out)
    p = loan(repo, 'run', '--out', str(out), LOAN_COMMAND=RECORD)
    assert p.returncode == 2 and 'differs from the packed commit' in p.stderr and 'gpu_queue.py' in p.stderr
    assert not (out / 'commit').exists() and not (tmp_path / 'work').exists()


def test_a_stopped_loan_leaves_no_process_behind(tmp_path):
    """A SIGTERM to loan.sh run: its command gets the TERM, and LOAN_GRACE seconds later everything the loan started
    and is left (here a command that ignores TERM, its child, and a grandchild under setsid) is killed."""
    repo = loan_repo(tmp_path)
    assert loan(repo, 'pack').returncode == 0
    pids = tmp_path / 'pids'
    e = dict(os.environ, LOAN_WORK=str(tmp_path / 'work'), PYTHON=sys.executable, LOAN_GRACE='1',
             LOAN_COMMAND=STUBBORN.format(pids=pids))
    p = subprocess.Popen(['bash', str(repo / 'evidence' / 'loan.sh'), 'run', '--out', str(tmp_path / 'out')], cwd=repo, env=e,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    started = []
    try:
        deadline = time.time() + 30
        while len(started) < 3 and time.time() < deadline:
            time.sleep(0.05)
            started = [int(x) for x in pids.read_text().split()] if pids.exists() else []
        assert len(alive_pids(started)) == 3
        p.send_signal(signal.SIGTERM)
        out = p.communicate(timeout=30)[0]
        assert p.returncode == 143 and 'killed with everything it started' in out, out
        time.sleep(0.2)
        assert alive_pids(started) == [] and not (tmp_path / 'work').exists()
    finally:
        kill_left(p, started)


def test_the_sanity_smokes_one_model_of_each_family_of_attention():
    """The sanity's smoke (bench_gpu.SMOKE) names models of tests/test_cuda.py's capture test, one of each family a
    sweep runs (each attention, and the masking bugs' naive path of each attention they apply to); the sanity job is
    env, smoke and eval_smoke, in about a minute, and the full capture suite is a later job of the queue."""
    import importlib.util
    spec = importlib.util.spec_from_file_location('cuda_tests', os.path.join(ROOT, 'tests', 'test_cuda.py'))
    cuda_tests = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(cuda_tests)
    family = {name: (keys['attn'], keys['leak'] != 'none') for name, keys, _ in cuda_tests.SWEEP_MODELS}
    assert set(bench_gpu.SMOKE) <= set(family)
    assert sorted(family[n] for n in bench_gpu.SMOKE) == sorted(set(family.values()))  # each family once
    assert hasattr(cuda_tests, bench_gpu.CAPTURE_TEST.split('::')[1])
    sanity = gpu_queue.QUEUE[0]
    assert (sanity.name, sanity.steps) == ('sanity', ('env', 'smoke', 'eval_smoke')) and sanity.estimate_s <= 90
    caps = dict((s, cap) for s, _, cap in bench_gpu.STEPS)
    assert sum(caps[s] for s in sanity.steps) <= 150  # each step time-boxed: the sanity ends within minutes
    later = [j.name for j in gpu_queue.QUEUE if j.steps == ('env', 'graph_tests', 'eval')]
    assert later == ['capture_suite']


def test_a_failed_sanity_stops_the_queue(tmp_path, monkeypatch):
    """bench_gpu.py --next: a sanity that fails in the call, or one committed as failed at this code, skips every job
    after it, saying why (before: the jobs after a failed sanity ran on the broken path)."""
    ran = []

    def run_job(job, out, deadline, **kw):
        ran.append(job.name)
        return dict(job=job.name, status='failed' if job.name == 'sanity' else 'done', steps={'smoke': 'failed'})
    monkeypatch.setattr(gpu_queue, 'run_job', run_job)
    monkeypatch.setattr(gpu_queue, 'checked', lambda job, results=None: None)
    monkeypatch.setenv('BENCH_GPU_UNTIL', str(time.time() + 1e6))
    (tmp_path / 'scratch').mkdir()
    args = bench_gpu.argparse.Namespace(out=str(tmp_path), scratch=str(tmp_path / 'scratch'), step='queue',
                                        dry_run=True, job=['sanity', 'leak_cells_dropout0.2', 'sink_10_seeds'],
                                        cut_after=None)
    ctx = bench_gpu.Step(args)
    bench_gpu.step_queue(ctx)
    q = json.load(open(tmp_path / 'queue.json'))['jobs']
    assert ran == ['sanity'] and [j['status'] for j in q] == ['failed', 'skipped', 'skipped']
    assert all(j['why'].startswith("sanity failed in this call") for j in q[1:]), q
    ran.clear()
    monkeypatch.setattr(gpu_queue, 'checked', lambda job, results=None: 'failed: gpu_check/x' if job.name == 'sanity'
                        else None)
    args.job = ['leak_cells_dropout0.2']
    bench_gpu.step_queue(bench_gpu.Step(args))
    q = json.load(open(tmp_path / 'queue.json'))['jobs']
    assert ran == [] and q[0]['status'] == 'skipped' and 'sanity failed at this code (gpu_check/x)' in q[0]['why']


def test_bench_gpu_md_shows_the_queue_as_the_code_has_it():
    """results/bench_gpu.md's table of the queue is rendered from gpu_queue.QUEUE (`python evidence/bench_gpu.py
    --queue-table`): each job's estimate is the code's (it said 240 s for a sanity whose estimate was 300)."""
    page = open(os.path.join(ROOT, 'results', 'bench_gpu.md')).read()
    assert bench_gpu.queue_table() in page, 'paste `python evidence/bench_gpu.py --queue-table` into results/bench_gpu.md'
    assert 'a fifteenth' not in open(os.path.join(ROOT, 'evidence', 'gpu_queue.py')).read()


def test_a_part_the_dry_run_checks_instead_of_training_fails_on_a_broken_launch():
    """The dry run checks, not trains, a later part of a split job (bench_gpu.dry_checked): a part whose launch names
    a variant without a config fails there, naming sweep.py's refusal, as ablate.sh would refuse it on a GPU."""
    job = tiny_job()
    ok = bench_gpu.dry_checked(job, 'tiny')
    assert ok['status'] == 'checked' and ok['like'] == 'tiny', ok
    bad = gpu_queue.Job('tiny_b', 'a test', 60, tuple(
        gpu_queue.Launch(lc.sweep, tuple(kv if kv[0] != 'VARIANTS' else ('VARIANTS', 'no_such_variant')
                                         for kv in lc.env), lc.args) for lc in job.launches))
    assert bench_gpu.dry_shape(bad) == bench_gpu.dry_shape(job)  # the same shape: the dry run would only check it
    out = bench_gpu.dry_checked(bad, 'tiny')
    assert out['status'] == 'failed' and "sweep.py check: VARIANTS has 'no_such_variant'" in out['why'], out
