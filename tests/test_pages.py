"""The findings pages evidence/pages.py renders (pages.PAGES) are what it renders from the committed runs and records,
byte for byte: a hand edit of a rendered number fails here, and a changed run file changes the page. So is each GPU
check's results.md (pages.records()): what evidence/bench_gpu.py's render writes from its results.json. The lint of
the templates' prose is tests/test_findings_pages.py's. Reads JSON files only: no torch, no training."""
import json
import os
import re
import shutil
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, 'evidence'))
import claims  # noqa: E402
import pages  # noqa: E402


@pytest.mark.parametrize('page', list(pages.PAGES))
def test_page_is_its_render(page):
    """Each page is its template rendered against the committed runs (python evidence/pages.py writes it)."""
    with open(os.path.join(ROOT, page), encoding='utf-8') as f:
        assert f.read() == pages.render(page), f'{page} is not what evidence/pages.py renders: run it'


def digit_changed(text, value):
    """text with the first digit of value's first occurrence changed (9 -> 8, else +1)."""
    i = text.index(value)
    j = i + re.search(r'\d', value).start()
    return text[:j] + ('8' if text[j] == '9' else str(int(text[j]) + 1)) + text[j + 1:]


def numbered_pages():
    """The pages whose template has a field that renders a digit (the others render no number to edit)."""
    return [p for p in pages.PAGES if any(re.search(r'\d', value) for _, value in pages.fields(p))]


@pytest.mark.parametrize('page', numbered_pages())
def test_a_hand_edited_number_fails_the_check(page, tmp_path, monkeypatch, capsys):
    """--check passes the pages as committed, and exits 1 naming the page where one digit of a rendered number (the
    template's first field with a digit: the page's own text, not a run's) was edited by hand."""
    os.makedirs(tmp_path / os.path.dirname(page))
    shutil.copy(os.path.join(ROOT, page), tmp_path / page)
    monkeypatch.setattr(pages, 'ROOT', str(tmp_path))
    pages.main(['--check', page])  # the copy as committed: up to date
    text = (tmp_path / page).read_text(encoding='utf-8')
    start = 0  # the rendered fields follow each other in the page: find the first with a digit after the ones before
    for _, value in pages.fields(page):
        at = text.index(value, start)
        if re.search(r'\d', value):
            (tmp_path / page).write_text(text[:at] + digit_changed(value, value) + text[at + len(value):],
                                         encoding='utf-8')
            break
        start = at + len(value)
    with pytest.raises(SystemExit) as e:
        pages.main(['--check', page])
    assert e.value.code == 1 and page in capsys.readouterr().err


def test_a_changed_run_file_changes_the_render(tmp_path, monkeypatch):
    """The pages read the run files: lowering one baseline seed's layer-1 sink below Gu's threshold changes the
    page's count of seeds with one, its per-seed table and its range."""
    for folder in claims.BB + ('results/shakespeare_cpu_long_bos',):
        shutil.copytree(os.path.join(ROOT, folder), tmp_path / folder)
    before = pages.render('results/sink_cpu.md')
    path = tmp_path / claims.BB[0] / 'bb_nanogpt_2L_s2' / 'analysis.json'
    a = json.loads(path.read_text())
    a['layers'][0]['first_token_attention'] = 0.1
    path.write_text(json.dumps(a))
    monkeypatch.setattr(claims, 'HERE', str(tmp_path))
    try:
        after = pages.render('results/sink_cpu.md')
    finally:
        claims._RUNS.clear()  # the copies' runs are not left for another test to read
    l2 = a['layers'][1]['first_token_attention']
    assert f'| 0.10 / {l2:.2f} (' in after and f'| 0.10 / {l2:.2f} (' not in before


def test_a_changed_needle_eval_changes_the_render(tmp_path, monkeypatch):
    """needle_cpu.md reads needle_eval.json: one seed's accuracy at one needle count changed changes that seed's cell
    of the accuracy table (the mean over needle counts) and nothing is left as it was typed."""
    for folder in (claims.ND,) + pages.NEEDLE:
        shutil.copytree(os.path.join(ROOT, folder), tmp_path / folder)
    nd = pages.Needle(claims.ND, 'nd_')
    old = nd.ev('nanogpt', 'accuracy')[1]
    path = tmp_path / claims.ND / 'nd_nanogpt_2L_s1' / 'needle_eval.json'
    e = json.loads(path.read_text())
    e['by_needles']['1']['accuracy'] -= 0.6  # the mean over the counts falls by 0.6 / their number
    path.write_text(json.dumps(e))
    monkeypatch.setattr(claims, 'HERE', str(tmp_path))
    try:
        after = pages.render('results/needle_cpu.md')
    finally:
        claims._RUNS.clear()
    new = old - 0.6 / len(e['by_needles'])
    assert f'| nanogpt | {new:.3f} |' in after and f'| nanogpt | {old:.3f} |' not in after


def test_template_error_names_its_line():
    """An expression that fails names its line in the template and the expression, not a bare traceback."""
    with pytest.raises(SystemExit, match=r'line 2 of the template, \{\{ nope \}\}'):
        pages.render_text('a\nb {{ nope }}\n', {})


def test_counts_and_ranges():
    """The helpers the tables state ranges and seeds with."""
    assert pages.span([0.376, 0.489, 0.4]) == '0.38-0.49' and pages.span([0.301, 0.299]) == '0.30'
    assert pages.num(-0.5, '{:+.1f}') == '−0.5'
    assert pages.seeds_text([1, 2, 3, 4, 5]) == '1-5' and pages.seeds_text([6, 7]) == '6, 7'
    assert pages.seeds_text([1, 3, 4]) == '1, 3, 4'


def test_seed_table_shows_each_group_on_its_own_row(tmp_path, monkeypatch):
    """seed_table_explained.md's table of the notes' schedule gives each homogeneous group its own row: the H100
    seeds and the H200 seed of shakespeare_full's 3L are two rows, and the H200 row follows its run file."""
    shutil.copytree(os.path.join(ROOT, pages.GPU_FULL), tmp_path / pages.GPU_FULL)
    shutil.copytree(os.path.join(ROOT, pages.GPU_NONCAUSAL), tmp_path / pages.GPU_NONCAUSAL)
    path = tmp_path / pages.GPU_FULL / 'diff_sym_3L_s3' / 'summary.json'
    s = json.loads(path.read_text())
    s['final_val_loss'] = 1.2345
    path.write_text(json.dumps(s))
    monkeypatch.setattr(claims, 'HERE', str(tmp_path))
    try:
        claims._RUNS.clear()
        groups = pages.Full(pages.GPU_FULL, '3L').groups()
        text = pages.full_table()
    finally:
        claims._RUNS.clear()
    assert len(groups) == 2 and [sorted({x for c in g.cells.values() for x in c}) for g in groups] == [[1, 2], [3]]
    (row,) = [r for r in text.split('\n') if r.startswith(f'| 3L, causal, {groups[1].label} |')]
    assert '/ 1.234 (1) |' in row.split(' | ')[4] + ' |'


def test_seed_table_cites_the_seed_not_the_runs():
    """The seed's own numbers on seed_table_explained.md are citations printed from pages.SEED_*: its loss table is
    docs/seed_notes.md's, row for row, and its λ values are that note's λ table's (layers 1-6 of λ_full, layers 1-3 of
    λ1 and λ2)."""
    notes = open(os.path.join(ROOT, 'docs', 'seed_notes.md'), encoding='utf-8').read()
    ours = pages.seed_table().split('\n')[2:]
    assert all(f"{row.split(' | ', 1)[1].replace('  ', ' ')}" in notes for row in ours), ours
    lam = {int(m[0]): m[1:] for m in re.findall(r'^> \| (\d) \| ' + r' \| '.join([r'([\d.]+)'] * 8) + r' \|$', notes, re.M)}
    assert sorted(lam) == [1, 2, 3, 4, 5, 6]
    for col, v in ((3, 'diff'), (7, 'diff_sym')):
        assert [float(lam[layer][col]) for layer in range(1, 7)] == pages.SEED_LAMBDA[v]
        assert [tuple(float(lam[layer][c]) for c in (col - 3, col - 2)) for layer in (1, 2, 3)] == pages.SEED_L12[v]


@pytest.mark.parametrize('page', list(pages.records()))
def test_a_checks_results_md_is_its_render(page):
    """Each committed GPU check's results.md (and results/eval_group_cpu's) is what evidence/bench_gpu.py's render
    writes from the results.json beside it, byte for byte (python evidence/pages.py writes it again where that render
    changed since the check ran)."""
    with open(os.path.join(ROOT, page), encoding='utf-8') as f:
        text = f.read()
    with open(os.path.join(ROOT, pages.records()[page]), encoding='utf-8') as f:
        assert text == pages.bench_gpu.render(json.load(f)), f'{page} is not what bench_gpu.py renders: run pages.py'


@pytest.mark.parametrize('page', list(pages.records()))
def test_a_changed_digit_of_a_checks_results_md_fails_the_check(page, tmp_path, monkeypatch, capsys):
    """--check passes a check's results.md as committed, and exits 1 naming it where one digit of its text (the
    first after the title: the machine's line) was changed."""
    os.makedirs(tmp_path / os.path.dirname(page))
    shutil.copy(os.path.join(ROOT, page), tmp_path / page)
    monkeypatch.setattr(pages, 'ROOT', str(tmp_path))
    pages.main(['--check', page])
    text = (tmp_path / page).read_text(encoding='utf-8')
    j = re.search(r'\d', text[text.index('\n'):]).start() + text.index('\n')
    (tmp_path / page).write_text(text[:j] + ('8' if text[j] == '9' else str(int(text[j]) + 1)) + text[j + 1:],
                                 encoding='utf-8')
    with pytest.raises(SystemExit) as e:
        pages.main(['--check', page])
    assert e.value.code == 1 and page in capsys.readouterr().err


def test_a_changed_bench_record_changes_the_cpu_page(tmp_path, monkeypatch):
    """bench_cpu.md reads results/bench_cpu.json: one variant's step time changed changes its row of its table (ms,
    and the ratio to softmax) and nothing of that row is left as it was."""
    os.makedirs(tmp_path / 'results')
    doc = json.load(open(os.path.join(ROOT, pages.BENCH_CPU), encoding='utf-8'))
    r = next(r for r in doc['results'] if r['variant'] == 'diff' and 'error' not in r)
    base = next(x for x in doc['results'] if x['variant'] == 'softmax' and 'error' not in x and
                all(x[k] == r[k] for k in ('seq', 'dtype', 'dropout', 'compile')))
    before = pages.render('results/bench_cpu.md')
    old = f"| diff | {r['n_params'] / 1e6:.2f}M | {r['ms_per_step']:.1f} |"
    r['ms_per_step'] *= 1.5
    (tmp_path / pages.BENCH_CPU).write_text(json.dumps(doc), encoding='utf-8')
    shutil.copy(os.path.join(ROOT, pages.BENCH_REPEAT), tmp_path / pages.BENCH_REPEAT)
    monkeypatch.setattr(claims, 'HERE', str(tmp_path))
    after = pages.render('results/bench_cpu.md')
    assert old in before and old not in after
    ratio = r['ms_per_step'] / base['ms_per_step']
    assert f"| {r['ms_per_step']:.1f} | {r['tokens_per_sec']:,.0f} | {ratio:.2f}x |" in after


def test_the_cpu_page_gives_the_second_runs_spread():
    """bench_cpu.md's "Run to run": per dtype and dropout, the range of the repeat's step time over the first's and the
    largest move of a ratio to softmax, recomputed here from the two records."""
    a, b = (json.load(open(os.path.join(ROOT, p), encoding='utf-8'))['results']
            for p in (pages.BENCH_CPU, pages.BENCH_REPEAT))
    key = lambda r: (r['variant'], r['dtype'], r['dropout'])  # noqa: E731
    ms_a, ms_b = ({key(r): r['ms_per_step'] for r in x if 'error' not in r} for x in (a, b))
    text = open(os.path.join(ROOT, 'results/bench_cpu.md'), encoding='utf-8').read()
    for d, p in sorted({k[1:] for k in ms_a}):
        ks = [k for k in ms_a if k[1:] == (d, p)]
        over = [ms_b[k] / ms_a[k] for k in ks]
        moved = max(abs(ms_b[k] / ms_b[('softmax', d, p)] - ms_a[k] / ms_a[('softmax', d, p)]) for k in ks)
        assert f"| {d}, dropout {p:g} | {min(over):.2f}-{max(over):.2f} | {moved:.2f} (" in text


def test_a_changed_gpu_check_changes_the_gpu_page(tmp_path, monkeypatch):
    """bench_gpu.md reads the checks' results.json: the graphed and compiled step of the check at 779ab8c made slower
    changes its row of the table, and each bound over the step, computed at that check's own ceilings."""
    shutil.copytree(os.path.join(ROOT, pages.GPU_CHECK), tmp_path / pages.GPU_CHECK)
    before = pages.render('results/bench_gpu.md')
    path = tmp_path / pages.GPU_CHECK / pages.ALONE / 'results.json'
    res = json.loads(path.read_text())
    res['steps']['alone']['runs']['graphed_compiled']['ms_per_iter'] = 1.5
    path.write_text(json.dumps(res))
    monkeypatch.setattr(claims, 'HERE', str(tmp_path))
    after = pages.render('results/bench_gpu.md')
    b = pages.bounds(pages.ALONE)
    row = f"| 1.50 | {res['steps']['alone']['runs']['graphed_compiled']['tokens_per_sec'] / 1e6:.2f}M | " \
          f"{b['train_bytes'] / 1.5:.2f} | {b['train_flops'] / 1.5:.2f} |"
    assert row in after and row not in before


def test_the_gpu_pages_bounds_are_each_checks_own():
    """Each check's bounds are its FLOPs and bytes at its own ceilings, as its floor step computed them where it did
    (the check at 09c4cb4); the page divides a check's bounds by that check's step, never another's."""
    res = pages.check(pages.GATHER)
    f, b = res['steps']['floor'], pages.bounds(pages.GATHER)
    assert round(max(b['train_bytes'], b['train_flops']), 4) == f['train_floor_ms']
    assert round(max(b['eval_bytes'], b['eval_flops']), 4) == f['eval_floor_ms']
    page = open(os.path.join(ROOT, 'results', 'bench_gpu.md'), encoding='utf-8').read()
    ms, ab = pages.alone()['graphed_compiled']['ms_per_iter'], pages.bounds(pages.ALONE)
    assert f"| {ms:.2f} | " in page and f" | {ab['train_bytes'] / ms:.2f} | {ab['train_flops'] / ms:.2f} | " in page


def test_the_readmes_quick_start_block_is_its_render(tmp_path, monkeypatch, capsys):
    """README.md's quick-start lines (the time and the val loss of `python train.py configs/diff_sym_6L.py` without a
    GPU) are pages.py's render of the committed run: as committed they pass --check, and a digit edited in them fails
    it, naming README.md."""
    shutil.copy(os.path.join(ROOT, 'README.md'), tmp_path / 'README.md')
    monkeypatch.setattr(pages, 'ROOT', str(tmp_path))
    pages.main(['--check', 'README.md'])
    text = (tmp_path / 'README.md').read_text(encoding='utf-8')
    start, end = pages.README_BLOCK
    a, b = text.index(start), text.index(end)
    block = text[a:b]
    if not re.search(r'\d', block.replace(start, '')):
        block = block.replace('not measured', 'measured 1 time')  # no run committed yet: edit the words instead
    else:
        block = digit_changed(block, re.search(r'\d+(?:\.\d+)?', block.replace(start, ' ' * len(start)))[0])
    (tmp_path / 'README.md').write_text(text[:a] + block + text[b:], encoding='utf-8')
    with pytest.raises(SystemExit) as e:
        pages.main(['--check', 'README.md'])
    assert e.value.code == 1 and 'README.md' in capsys.readouterr().err


def test_the_quick_start_block_reads_its_run(tmp_path, monkeypatch):
    """The block's numbers are the run's: its command's time, its first and last evaluations' val loss, and the layer
    whose λ_full moved furthest from its λ_init."""
    run = tmp_path / pages.QUICKSTART / 'diff_sym_6L'
    run.mkdir(parents=True)
    cpu = dict(name='Intel(R) Xeon(R) Processor', vendor='GenuineIntel', family='6', model='207', threads=2)
    (tmp_path / pages.QUICKSTART / 'command.json').write_text(json.dumps(dict(
        command='python train.py configs/diff_sym_6L.py', elapsed_s=254.0, exit_status=0, commit='abcdef0123',
        dirty=False, date='2026-12-02', cpu=cpu)))
    lam = [dict(layer=1, lambda_1=1.0, lambda_2=1.0, lambda_init=0.36, lambda_full=0.40),
           dict(layer=2, lambda_1=1.0, lambda_2=1.0, lambda_init=0.47, lambda_full=0.21)]
    (run / 'summary.json').write_text(json.dumps(dict(final_val_loss=2.1937, iter=500, lambda_table=lam)))
    (run / 'log.jsonl').write_text(''.join(json.dumps(r) + '\n' for r in (
        dict(iter=0, kind='eval', val_loss=4.1842), dict(iter=10, kind='train', loss=3.0),
        dict(iter=500, kind='eval', val_loss=2.1937))))
    monkeypatch.setattr(claims, 'HERE', str(tmp_path))
    text = ' '.join(pages.quickstart_block().split())
    assert 'took 4m 14s' in text and 'from 4.18 at step 0 to 2.19 at step 500' in text, text
    assert "layer 2's λ_full from its λ_init 0.47 to 0.21" in text and 'abcdef0' in text and '2-core' in text, text


def test_the_gpu_page_says_which_checks_ran_on_a_tree_with_changes(tmp_path, monkeypatch):
    """bench_gpu.md's table of the checks reads each record's env step: a check whose tree had uncommitted changes
    says so on its row, and one whose record says the tree was clean says clean (the check at 09c4cb4 ran dirty)."""
    shutil.copytree(os.path.join(ROOT, pages.GPU_CHECK), tmp_path / pages.GPU_CHECK)
    monkeypatch.setattr(claims, 'HERE', str(tmp_path))

    def row(name):
        return next(r for r in pages.steps_table([pages.ALONE, pages.GATHER, pages.QUEUE1]).split('\n')
                    if r.startswith(f'| `{pages.commit_of(name)}` |'))
    for name in (pages.ALONE, pages.GATHER, pages.QUEUE1):
        path = tmp_path / pages.GPU_CHECK / name / 'results.json'
        res = json.loads(path.read_text())
        for dirty, tree in ((True, 'with uncommitted changes'), (False, 'clean')):
            res['steps']['env']['dirty'] = dirty
            path.write_text(json.dumps(res))
            assert f'| {tree} |' in row(name), (name, dirty)
