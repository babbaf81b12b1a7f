"""evidence/claims.py's verdict rules on constructed runs: each rule of the findings audit at a570e70, the runs a
verdict never reads, the rows not measured yet, and the learning-rate measures of claim 10."""
import json
import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, 'evidence'))
import claims  # noqa: E402
import provenance  # noqa: E402
import report  # noqa: E402

GENOA = dict(cpu=dict(name='AMD EPYC', vendor='AuthenticAMD', family='25', model='17', threads=2))
H100, H200 = dict(gpu='NVIDIA H100'), dict(gpu='NVIDIA H200')


def run(root, variant, seed, val=2.0, depth='3L', sink=None, machine=GENOA, log=(), code='abc1234', **config):
    """A finished run as train.py leaves it: summary.json with its machine and commit recorded, analysis.json where
    sink gives first-token attention by layer, log.jsonl from log's records."""
    d = root / f'{variant}_{depth}_s{seed}'
    d.mkdir(parents=True)
    cfg = {**dict(seed=seed, max_iters=10, dropout=0.0, dataset='shakespeare_char', learning_rate=1e-3), **config}
    summary = dict(config=cfg, iter=10, final_val_loss=val, final_train_loss=val,
                   device='cuda' if machine.get('gpu') else 'cpu', machine=machine,
                   dtype='bfloat16', compile=False, cuda_graph=False)
    if code:
        summary['code'] = dict(commit=code, dirty=False)
    (d / 'summary.json').write_text(json.dumps(summary))
    if sink is not None:
        layers = [dict(first_token_attention=x, kurtosis_first=3.0) for x in sink]
        (d / 'analysis.json').write_text(json.dumps(dict(
            layers=layers, overall=dict(first_token_attention=sum(sink) / len(sink), massive_ratio=10,
                                        kurtosis_rest=3.0), checkpoint=str(d / 'ckpt.pt'))))
    (d / 'log.jsonl').write_text(''.join(json.dumps(r) + '\n' for r in log))
    return d


@pytest.fixture(autouse=True)
def fresh():
    claims._RUNS.clear()
    yield
    claims._RUNS.clear()


def rows(monkeypatch, tests, families=None):
    """measure_all over these rows alone, numbered in their order, each claim's rows one family unless given."""
    monkeypatch.setattr(claims, 'TESTS', tests)
    ids = {}
    for t in tests:
        ids[t] = f'{t.claim}.{sum(u.claim == t.claim for u in ids) + 1}'
    monkeypatch.setattr(claims, 'ID', ids)
    fam = families if families is not None else {str(c): tuple(i for t, i in ids.items() if t.claim == c)
                                                 for c in {t.claim for t in tests}}
    monkeypatch.setattr(claims, 'FAMILIES', fam)
    monkeypatch.setattr(claims, 'FAMILY_OF', {i: n for n, xs in fam.items() for i in xs})
    return claims.measure_all()


def test_removes_is_the_threshold_in_every_seed_not_a_decrease(tmp_path, monkeypatch):
    """A claim of "removes": B's run has no layer above the sink's 0.3 in every kept seed ("removed"); a clear
    decrease that leaves one seed above it is "reduced, not removed", never "supported"."""
    for s in (1, 2, 3, 4):
        run(tmp_path / 'gone', 'bb_nanogpt', s, depth='2L', sink=[0.1, 0.6 + 0.01 * s])
        run(tmp_path / 'gone', 'bb_softmax1', s, depth='2L', sink=[0.1, 0.05 + 0.01 * s])
        run(tmp_path / 'left', 'bb_nanogpt', s, depth='2L', sink=[0.1, 0.6 + 0.01 * s])
        run(tmp_path / 'left', 'bb_softmax1', s, depth='2L', sink=[0.1, 0.35 if s == 1 else 0.05 + 0.01 * s])
    tests = [claims.Test(5, str(tmp_path / f), '2L', 'bb_nanogpt', 'bb_softmax1', 'first_token_L2', '<0', 'sink_L2',
                         removes='sink_L2') for f in ('gone', 'left')]
    gone, _, left, _ = rows(monkeypatch, tests)  # each followed by its unselected twin
    assert claims.verdict(gone) == 'removed' and 'B without a sink in layer 2: 4/4' in gone['counts']
    assert left['stat']['hi'] < 0 and claims.verdict(left) == 'reduced, not removed'
    assert 'B without a sink in layer 2: 3/4' in left['counts']


def test_a_row_without_its_precondition_and_its_twin_are_not_shown(tmp_path, monkeypatch):
    """A baseline without a sink: the row is "not shown" whatever B's numbers, and so is its unselected twin (the
    audit's row 5.11, "supported" where the baseline had no sink); neither enters its Holm family."""
    for s in (1, 2, 3):
        run(tmp_path, 'bb_nanogpt', s, depth='2L', sink=[0.2, 0.25])
        run(tmp_path, 'bb_softmax1', s, depth='2L', sink=[0.01, 0.02 + 0.001 * s])
    t = claims.Test(5, str(tmp_path), '2L', 'bb_nanogpt', 'bb_softmax1', 'first_token_L2', '<0', 'sink_L2',
                    removes='sink_L2')
    row, tw = rows(monkeypatch, [t])
    assert tw['twin_of'] is row and tw['stat']['hi'] < 0  # the twin's interval is clear of 0 ...
    assert claims.verdict(row) == claims.verdict(tw) == 'not shown (precondition absent)'  # ... and not shown
    assert 'adj' not in row and 'adj' not in tw


def test_a_holm_family_is_the_list_named_before_the_runs(tmp_path, monkeypatch):
    """Holm's family is FAMILIES' list, its size fixed: a row added to TESTS but named in no family moves no other
    row's adjusted p (the audit's extra row at p = 0.5) and is not called; a family row without a p counts as 1."""
    for f, d in (('a', -0.10), ('b', -0.08), ('c', 0.01)):
        for s, noise in ((1, 0.0), (2, 0.011), (3, -0.007), (4, 0.004)):
            run(tmp_path / f, 'sym', s, 2.0)
            run(tmp_path / f, 'diff_sym', s, 2.0 + d + noise * (3 if f == 'c' else 1))
    one, two, extra = (claims.Test(2, str(tmp_path / f), '3L', 'sym', 'diff_sym', 'val', '<0') for f in 'abc')
    absent = claims.Test(2, str(tmp_path / 'none'), '3L', 'sym', 'diff_sym', 'val', '<0')
    family = {'2': ('2.1', '2.2', '2.4')}  # 2.3 (extra) in no family; 2.4 (absent) has no p
    before = rows(monkeypatch, [one, two, absent], {'2': ('2.1', '2.2', '2.3')})
    after = rows(monkeypatch, [one, two, extra, absent], family)
    assert [r['adj']['p'] for r in before[:2]] == [r['adj']['p'] for r in after[:2]]
    p1, p2 = before[0]['stat']['p'], before[1]['stat']['p']
    assert before[0]['adj']['m'] == 3 and before[0]['adj']['p'] == pytest.approx(claims.holm([p1, p2, 1.0])[0])
    assert claims.verdict(after[2]) == 'not called (in no Holm family)'


def test_a_verdict_needs_three_seeds_in_one_homogeneous_group(tmp_path, monkeypatch):
    """Two H100 seeds and one H200 seed pool to three, but no homogeneous group holds three: "too few seeds (mixed)",
    each group shown; three seeds on one GPU are called."""
    for s, m in ((1, H100), (2, H100), (3, H200)):
        run(tmp_path / 'mixed', 'sym', s, 2.0, machine=m)
        run(tmp_path / 'mixed', 'diff_sym', s, 1.8 + 0.001 * s, machine=m)
        run(tmp_path / 'one', 'sym', s, 2.0, machine=H200)
        run(tmp_path / 'one', 'diff_sym', s, 1.8 + 0.001 * s, machine=H200)
    mixed, one = rows(monkeypatch, [claims.Test(2, str(tmp_path / f), '3L', 'sym', 'diff_sym', 'val', '<0')
                                    for f in ('mixed', 'one')])
    assert claims.verdict(mixed) == 'too few seeds (mixed)' and len(mixed['groups']) == 2
    names = []
    assert claims.grouped_gap(mixed, '{:.3f}', names).count('(a)') == 1 and len(names) == 2
    assert claims.verdict(one) == 'supported'


def test_unknown_never_makes_two_runs_alike(tmp_path):
    """Two runs whose thread count is unknown (a backfilled entry naming none) are two groups, not one; the same
    two with a thread count each are one."""
    for s in (1, 2):
        run(tmp_path, 'sym', s, machine={}, code=None)
    entry = dict(backfilled=True, machine='AMD EPYC Genoa', dtype='bfloat16', predates=[], trained_at='9d624ed')
    (tmp_path / 'provenance.json').write_text(json.dumps({'sym_3L_s1': entry, 'sym_3L_s2': entry}))
    ok = report.finished(report.load_runs(tmp_path)[('sym', '3L')])
    for s in ok:
        s.pop('machine')
    assert len(provenance.homogeneous(ok)) == 2
    for s in ok:
        s['_prov'] = dict(entry, threads=1)
    assert len(provenance.homogeneous(ok)) == 1


def test_what_comes_from_the_pages_is_marked_inferred(tmp_path):
    """A backfilled run's processor, threads and commit come from the pages' text: each shows *inferred*."""
    run(tmp_path, 'sym', 1, machine={}, code=None)
    (tmp_path / 'provenance.json').write_text(json.dumps({'sym_3L_s1': dict(
        backfilled=True, machine='AMD EPYC Genoa', dtype='bfloat16', predates=[], trained_at='9d624ed', threads=1)}))
    ok = report.finished(report.load_runs(tmp_path)[('sym', '3L')])
    ok[0].pop('machine')
    where = report.where_section(ok, None)
    assert 'Code: 9d624ed (*inferred*) (1 run).' in where
    assert provenance.group_label(ok) == 'bfloat16 on AMD EPYC Genoa (*inferred*), eager, 1 thread (*inferred*)'


@pytest.mark.parametrize('change, rule', [(dict(code=None), 'no commit recorded'),
                                          (dict(dataset='needle'), 'another corpus'),
                                          (dict(learning_rate=3e-3), 'other sweep settings')])
def test_runs_a_verdict_never_reads_are_named_by_their_rule(tmp_path, monkeypatch, change, rule):
    """A run with no commit, on another corpus or with other sweep settings than the row's other runs is left out
    of the row, which names the rule; report.py's warnings name it too."""
    for s in (1, 2, 3, 4):
        run(tmp_path, 'sym', s, 2.0)
        extra = change if s == 4 else {}
        run(tmp_path, 'diff_sym', s, 1.9 + 0.001 * s, **extra)
    r, = rows(monkeypatch, [claims.Test(2, str(tmp_path), '3L', 'sym', 'diff_sym', 'val', '<0')])
    assert r['seeds'] == [1, 2, 3] and [w.split(' (')[0] for _, w in r['excluded']] == [rule]
    assert f'excluded ({rule}): 1 run' in claims.seeds_cell(r)
    runs = report.load_runs(str(tmp_path))
    text = '\n'.join(report.warnings(runs, [s for c in runs.values() for s in c['ok']]))
    flagged = text.split("verdict reads")[1].split('\n\n')[1]
    assert flagged.startswith(f'- {rule}') and flagged.endswith(': diff_sym_3L_s4')


def test_a_dirty_tree_is_excluded(tmp_path):
    run(tmp_path, 'sym', 1)
    s = report.finished(report.load_runs(tmp_path)[('sym', '3L')])[0]
    assert provenance.excluded(s, [s]) is None
    s['code']['dirty'] = True
    assert provenance.excluded(s, [s]) == 'a tree with uncommitted changes'


def test_a_row_not_committed_names_the_command_that_fills_it(tmp_path, monkeypatch):
    """A folder not committed: "not measured", and the list of runs to come gives its ablate.sh line (both arms, the
    fill's seeds, SWEEP where ablate.sh would name it otherwise) and the rows it fills."""
    folder = str(tmp_path / 'shakespeare_cpu_long_dropout0.2_gpu')
    monkeypatch.setitem(claims.FILLS, folder, ('cpu_long', [], ('--dropout=0.2',) + claims.ON_GPU, (1, 2, 3), 'GPU'))
    r, = rows(monkeypatch, [claims.Test(1, folder, '3L', 'nanogpt', 'diff', 'val', '=')])
    assert claims.verdict(r) == 'not measured'
    fills = claims.plan([r])
    key, cmd, ids = fills[folder]
    assert key == 'GPU 1' and ids == ['1.1']
    assert cmd == ('SWEEP=shakespeare_cpu_long_dropout0.2_gpu PROFILE=cpu_long VARIANTS="nanogpt diff" '
                   'SEEDS="1 2 3" ./ablate.sh --dropout=0.2 --device=cuda --cuda_graph=True --compile=False')
    assert claims.fill_command(r) == cmd


def test_a_claim_of_two_parts_gives_the_weaker_in_the_readme(tmp_path, monkeypatch):
    """Claim 5's sink part removed and its outlier part not shown: the README's row gives the outlier part's words,
    naming the sink part's."""
    for s in (1, 2, 3):
        run(tmp_path, 'bb_nanogpt', s, depth='2L', sink=[0.1, 0.6 + 0.01 * s])
        run(tmp_path, 'bb_softmax1', s, depth='2L', sink=[0.1, 0.05 + 0.01 * s])
    sink = claims.Test(5, str(tmp_path), '2L', 'bb_nanogpt', 'bb_softmax1', 'first_token_L2', '<0', 'sink_L2',
                       removes='sink_L2', part='sink')
    outl = claims.Test(5, str(tmp_path), '2L', 'bb_nanogpt', 'bb_softmax1', 'kurtosis', '<0', 'outliers',
                       removes='outliers', part='outliers')
    results = rows(monkeypatch, [sink, outl])
    strength, row = claims.readme_row(5, results)
    assert strength == claims.PLAIN['not shown'][0]
    assert claims.PLAIN['not shown'][1] in row and 'the sink part: ' + claims.PLAIN['removed'][1] in row


def test_spikes_and_divergence_follow_the_rules_fixed_before_the_runs():
    """SPIKE: a logged loss above SPIKE_RATIO x the median of the SPIKE_WINDOW before it, from the first full
    window; DIVERGED: a final val loss above the iteration-0 one."""
    losses = [3.0, 2.9, 2.8, 2.7, 2.6, 2.5, 4.1, 2.4, 2.3, 2.2, 2.1, 3.5]  # 4.1 > 1.5 x 2.7; 3.5 > 1.5 x 2.3
    log = [dict(iter=10 * i, kind='train', loss=x) for i, x in enumerate(losses)]
    assert claims.spikes(log) == 2
    assert claims.spikes([dict(kind='train', loss=9.0)] + log[1:]) == 2  # the first window's own are not counted
    assert claims.spikes([dict(kind='train', loss=x) for x in [1.0] * 5 + [1.5]]) == 0  # not above 1.5x
    first = [dict(iter=0, kind='eval', val_loss=4.2)]
    assert claims.diverged(dict(final_val_loss=4.3, _log=first)) and not claims.diverged(dict(final_val_loss=2.0,
                                                                                              _log=first))


def test_the_highest_stable_rate_and_the_plot(tmp_path, monkeypatch):
    """The learning rates' row: nanogpt fails (FAILED) at the two highest rates, gated at the highest only:
    gated's highest stable rate is higher ("supported"); too few seeds at a rate is "too few seeds"; the plot is
    written from the finished runs."""
    lr = {rate: str(tmp_path / f'shakespeare_cpu_long_lr{rate}') for rate in claims.LR_RATES}
    monkeypatch.setattr(claims, 'LR', lr)
    monkeypatch.setattr(claims, 'HERE', str(tmp_path))
    os.makedirs(tmp_path / 'results')
    first = [dict(iter=0, kind='eval', val_loss=4.2)]
    for i, rate in enumerate(claims.LR_RATES):
        for s in (1, 2, 3):
            for v, fails in (('nanogpt', i >= 2), ('gated', i >= 3)):
                d = run(tmp_path / f'shakespeare_cpu_long_lr{rate}', v, s, 2.0 - 0.1 * i, log=first)
                if fails:
                    os.remove(d / 'summary.json')
                    (d / 'FAILED').write_text('non-finite training loss\n')
    t = claims.Test(10, tuple(lr.values()), '3L', 'nanogpt', 'gated', 'stable_lr', '>0')
    monkeypatch.setitem(claims.FILLS, lr['1e-3'], 'the command')
    r = claims.measure(t)
    assert r['stable'] == {'nanogpt': '3e-3', 'gated': '1e-2'} and claims.verdict(r) == 'supported'
    assert r['counts'] == ['diverged, by rate (1e-3, 3e-3, 1e-2, 3e-2): nanogpt 0/3 0/3 3/3 3/3; '
                           'Gated (G1) 0/3 0/3 0/3 3/3']
    import shutil
    shutil.rmtree(tmp_path / 'shakespeare_cpu_long_lr3e-3' / 'gated_3L_s3')
    claims._RUNS.clear()
    assert claims.verdict(claims.measure(t)) == 'too few seeds'
    assert claims.lr_plot(write=True) == 'lr_gate.png' and (tmp_path / 'results' / 'lr_gate.png').stat().st_size > 0


def sinks(root, variant, by_seed):
    """Bigram-Backcopy runs of one variant: {seed: layer-2 first-token attention} (layer 1 at 0.1)."""
    for s, x in by_seed.items():
        run(root, variant, s, depth='2L', sink=[0.1, x])


def test_removed_needs_the_decrease_supported_in_its_holm_family(tmp_path, monkeypatch):
    """B without a sink in every seed is "removed" only where the decrease is called in its Holm family; a noisy
    decrease (uncorrected p above 0.05) whose B has no sink in any seed is what the difference test says, within
    noise (the audit's row 5.2, called "removed" though within noise after Holm)."""
    sinks(tmp_path / 'noisy', 'bb_nanogpt', {1: 0.35, 2: 0.9, 3: 0.4})
    sinks(tmp_path / 'noisy', 'bb_softmax1', {1: 0.05, 2: 0.2, 3: 0.1})
    sinks(tmp_path / 'clear', 'bb_nanogpt', {1: 0.6, 2: 0.62, 3: 0.61})
    sinks(tmp_path / 'clear', 'bb_softmax1', {1: 0.05, 2: 0.06, 3: 0.05})
    noisy, _, clear, _ = rows(monkeypatch, [claims.Test(5, str(tmp_path / f), '2L', 'bb_nanogpt', 'bb_softmax1',
                                                        'first_token_L2', '<0', 'sink_L2', removes='sink_L2')
                                            for f in ('noisy', 'clear')], {'5': ('5.1',), '5b': ('5.2',)})
    assert noisy['removed'] and noisy['adj']['p'] >= claims.ALPHA
    assert claims.verdict(noisy) == 'within noise'
    assert clear['removed'] and claims.verdict(clear) == 'removed'


def test_a_control_that_removes_it_too_is_named_in_the_claims_verdict(tmp_path, monkeypatch):
    """The gate removes layer 2's sink, and so does a control (claim 0 of the same claim, same runs, head and
    threshold): the claim's verdict says the removal is not specific to the gate, naming the control, and the
    README's words name the control's variant; a control that only lowers the sink leaves "removed" as it is."""
    for f, control in (('both', 0.05), ('gate', 0.4)):
        sinks(tmp_path / f, 'bb_nanogpt', {1: 0.6, 2: 0.62, 3: 0.61})
        sinks(tmp_path / f, 'bb_gated', {1: 0.05, 2: 0.06, 3: 0.05})
        sinks(tmp_path / f, 'bb_orthoadam', {s: control + 0.001 * s for s in (1, 2, 3)})
    tests = [t for f in ('both', 'gate') for t in (
        claims.Test(6, str(tmp_path / f), '2L', 'bb_nanogpt', 'bb_gated', 'first_token_L2', '<0', 'sink_L2',
                    removes='sink_L2'),
        claims.Test(0, str(tmp_path / f), '2L', 'bb_nanogpt', 'bb_orthoadam', 'first_token_L2', '', 'sink_L2',
                    removes='sink_L2', of=6))]
    both, control, gate, weak = [r for r in rows(monkeypatch, tests) if r.get('twin_of') is None]
    assert claims.verdict(control) == 'removed' and claims.verdict(weak) == 'B lower'
    assert claims.verdict(both) == f"removed, not specific to B ({control['id']} removes it too)"
    assert claims.verdict(gate) == 'removed'
    strength, words = claims.plain(both)
    assert claims.label('bb_orthoadam') in words and strength > claims.plain(gate)[0]


def needle_runs(root, prefix, acc, noise):
    """Needle runs of nanogpt and Diff: {variant: {seed: accuracy}} and {variant: {seed: unrelated share}}, at one
    needle count."""
    for v in acc:
        for s in acc[v]:
            d = run(root, prefix + v, s, depth='2L', dataset='needle')
            (d / 'needle_eval.json').write_text(json.dumps(dict(by_needles={'1': dict(
                accuracy=acc[v][s], answer_share=1 - noise[v][s])})))
            (d / 'analysis.json').unlink(missing_ok=True)


def test_a_part_whose_decided_rows_disagree_gives_the_weaker(tmp_path, monkeypatch):
    """Claim 7's retrieval part read on two tasks, each decided on three seeds of one group: better with distractors,
    within noise without them. The README's row gives the weaker (the rule's first row alone would say "holds")."""
    seeds = (1, 2, 3)
    needle_runs(tmp_path / 'distractors', 'nd_', dict(nanogpt={s: 0.5 for s in seeds},
                                                      diff={s: 0.7 + 0.01 * s for s in seeds}),
                dict(nanogpt={s: 0.5 for s in seeds}, diff={s: 0.3 for s in seeds}))
    needle_runs(tmp_path / 'plain', '', dict(nanogpt={s: 0.9 for s in seeds}, diff={1: 0.95, 2: 0.85, 3: 0.91}),
                dict(nanogpt={s: 0.5 for s in seeds}, diff={s: 0.5 for s in seeds}))
    tests = [claims.Test(7, str(tmp_path / 'distractors'), '2L', 'nd_nanogpt', 'nd_diff', 'needle_acc', '>0',
                         part='retrieval'),
             claims.Test(7, str(tmp_path / 'plain'), '2L', 'nanogpt', 'diff', 'needle_acc', '>0', part='retrieval')]
    distractors, plain = results = rows(monkeypatch, tests, {'7a': ('7.1',), '7b': ('7.2',)})
    assert claims.verdict(distractors) == 'supported' and claims.verdict(plain) == 'within noise'
    assert claims.part_pick(list(enumerate(results))) is plain
    assert claims.readme_row(7, results)[0] == claims.PLAIN['within noise'][0]


def test_a_note_001_claim_is_shown_on_its_own_dataset(tmp_path, monkeypatch):
    """Claim 2 (note 001, the seed's Shakespeare setup): its README row is its Shakespeare row, undecided on two
    seeds, and not a decided row of another dataset (the audit's needle row for the Shakespeare loss)."""
    for s in (1, 2, 3):
        run(tmp_path / 'needle', 'nd_sym', s, 2.0, dataset='needle')
        run(tmp_path / 'needle', 'nd_diff_sym', s, 1.8 + 0.001 * s, dataset='needle')
    for s in (1, 2):
        run(tmp_path / 'shakespeare', 'sym', s, 2.0)
        run(tmp_path / 'shakespeare', 'diff_sym', s, 1.9)
    tests = [claims.Test(2, str(tmp_path / 'needle'), '2L', 'nd_sym', 'nd_diff_sym', 'val', '<0'),
             claims.Test(2, str(tmp_path / 'shakespeare'), '3L', 'sym', 'diff_sym', 'val', '<0')]
    needle, shakespeare = results = rows(monkeypatch, [replace_depth(tests[0], '3L'), tests[1]])
    assert claims.verdict(needle) == 'supported' and claims.verdict(shakespeare) == 'too few seeds'
    strength, row = claims.readme_row(2, results)
    assert '`shakespeare` 3L' in row and strength == claims.PLAIN['too few seeds'][0]


def replace_depth(t, depth):
    return claims.replace(t, depth=depth)


def eranks(root, variant, by_seed):
    """Shakespeare runs with analysis.json's effective ranks: {seed: (erank of Q Kᵀ, erank of the maps)}."""
    for s, (qk, attn) in by_seed.items():
        d = run(root, variant, s)
        (d / 'analysis.json').write_text(json.dumps(dict(layers=[dict(erank_qk=qk, erank_attention=attn)],
                                                         overall={}, checkpoint=str(d / 'ckpt.pt'))))


def test_the_softmax_breaks_only_a_low_rank_sym_has(tmp_path, monkeypatch):
    """Claim 11's "the softmax breaks the low rank" needs Sym's scores of lower rank than the baseline's in the
    seed (any Q Kᵀ has rank at most d_head, as Q Qᵀ has): where the baseline's are as low, the row is not shown
    whatever the maps give; where Sym's are lower, the seeds are kept."""
    for f, base in (('as_low', 3.0), ('higher', 6.0)):
        eranks(tmp_path / f, 'nanogpt', {s: (base, 120.0) for s in (1, 2, 3)})
        eranks(tmp_path / f, 'sym', {s: (3.0 + 0.1 * s, 110.0 + s) for s in (1, 2, 3)})
    tests = [claims.Test(11, str(tmp_path / f), '3L', 'sym', 'sym', 'erank_attn', '>0', 'low_rank',
                         metric_a='erank_qk') for f in ('as_low', 'higher')]
    as_low, twin, higher = rows(monkeypatch, tests, {'11': ('11.1', '11.2')})
    assert as_low['dropped'] == [1, 2, 3] and claims.verdict(as_low) == 'not shown (precondition absent)'
    assert twin['twin_of'] is as_low and claims.verdict(twin) == 'not shown (precondition absent)'
    assert higher['seeds'] == [1, 2, 3] and claims.verdict(higher) == 'supported'


def test_the_highest_stable_rate_needs_a_baseline_that_diverges(tmp_path, monkeypatch):
    """A baseline that trains at every rate leaves the gate no higher rate to take: the stable-rate row is not shown
    (not "no difference"), counts in no tally (undecided), and says so already where only the highest rate's
    folder is committed; a baseline that diverges at the highest rate gets a verdict."""
    lr = {rate: str(tmp_path / f'lr{rate}') for rate in claims.LR_RATES}
    monkeypatch.setattr(claims, 'LR', lr)
    monkeypatch.setitem(claims.FILLS, lr['1e-3'], 'the command')
    first = [dict(iter=0, kind='eval', val_loss=4.2)]
    t = claims.Test(10, tuple(lr.values()), '3L', 'nanogpt', 'gated', 'stable_lr', '>0')
    for rate in claims.LR_RATES[-1:]:
        for s in (1, 2, 3):
            for v in ('nanogpt', 'gated'):
                run(tmp_path / f'lr{rate}', v, s, 2.0, log=first)
    r = claims.measure(t)
    assert claims.verdict(r) == claims.PRECONDITION_LR and not claims.decided(r)
    assert claims.plain(dict(r, id='10.3'))[1] == claims.PLAIN['not shown'][1]
    for rate in claims.LR_RATES[:-1]:
        for s in (1, 2, 3):
            for v in ('nanogpt', 'gated'):
                run(tmp_path / f'lr{rate}', v, s, 2.0, log=first)
    claims._RUNS.clear()
    assert claims.verdict(claims.measure(t)) == claims.PRECONDITION_LR
    for s in (1, 2, 3):  # the baseline ends above its iteration-0 loss at the highest rate: it diverged there
        path = tmp_path / f'lr{claims.LR_RATES[-1]}' / f'nanogpt_3L_s{s}' / 'summary.json'
        path.write_text(json.dumps(dict(json.loads(path.read_text()), final_val_loss=5.0)))
    claims._RUNS.clear()
    r = claims.measure(t)
    assert r['stable'] == {'nanogpt': '1e-2', 'gated': '3e-2'} and claims.verdict(r) == 'supported'
