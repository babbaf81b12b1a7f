"""report.py: the t-tests (scipy's Student's t), the comparisons, the labels, and results.md as a pure function of the
runs."""
import json
import math
import os
import re
import shutil
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, 'evidence'))  # claims.py
import report  # noqa: E402
from test_train import one_line, script  # noqa: E402

CONFIG = dict(dataset='shakespeare_char', causal=True, dropout=0.0, max_iters=500, lr_decay_iters=500,
              warmup_iters=50, learning_rate=1e-3, min_lr=1e-4, batch_size=32, block_size=256, n_embd=256, n_head=8,
              eval_interval=100, eval_iters=20, seed=1)


def make_run(root, name, val, train=None, step=None, lambdas=(), **config):
    """A finished run folder as train.py leaves it (summary.json, log.jsonl): eval lines every 100 iterations
    falling to `val`; 'train' lines every 10, in the last eval interval from step - 0.045 to step + 0.045 (mean
    `step`) and 9.0 before, so a window that reaches too far shows; lambda/L{n}/full on the eval lines."""
    seed = re.search(r'_s(\d+)$', name)  # as ablate.sh names a run: its folder's seed is the one it trains with
    cfg = dict(CONFIG, **(dict(seed=int(seed[1])) if seed else {}))
    cfg.update(config)
    d = os.path.join(root, name)
    os.makedirs(d)
    step = val + 0.1 if step is None else step
    log = []
    for it in range(0, cfg['max_iters'] + 1, 10):
        if it and it % 10 == 0:
            k = (it - cfg['max_iters'] + 100) // 10  # 1..10 in the last eval interval
            log.append(dict(iter=it, kind='train', loss=step + 0.01 * (k - 5.5) if k > 0 else 9.0, lr=1e-4))
        if it % cfg['eval_interval'] == 0:
            frac = it / cfg['max_iters']
            lam = {f'lambda/L{i + 1}/full': l * frac for i, l in enumerate(lambdas)}
            log.append(dict(iter=it, kind='eval', train_loss=4 - (4 - (train or val)) * frac,
                            val_loss=4 - (4 - val) * frac, lr=1e-4, **lam))
    table = [dict(layer=i + 1, lambda_1=1.0, lambda_2=1.0 - l, lambda_init=0.5, lambda_full=l)
             for i, l in enumerate(lambdas)]
    summary = dict(config=cfg, n_params=1.2e6, iter=cfg['max_iters'], finished=True,
                   final_train_loss=train if train is not None else val - 0.01, final_val_loss=val,
                   final_eval_iter=cfg['max_iters'], lambda_table=table, tokens_per_sec=1e4, wall_time_s=400.0,
                   device='cpu', dtype='bfloat16', compile=False, cuda_graph=False,
                   machine=dict(cpu=dict(name='AMD EPYC', vendor='AuthenticAMD', family='25', model='17', threads=2)))
    with open(os.path.join(d, 'summary.json'), 'w') as f:
        json.dump(summary, f)
    with open(os.path.join(d, 'log.jsonl'), 'w') as f:
        f.writelines(json.dumps(r) + '\n' for r in log)


def finished_runs(root):
    """(the runs of a sweep folder, its finished runs), as markdown() reads them."""
    runs = report.load_runs(root)
    return runs, sorted((s for c in runs.values() for s in c['ok']),
                        key=lambda s: (report.depth_key(s['_depth']), report.variant_key(s['_variant']), s['_seed']))


def section(text, name):
    return text.split(f'## {name}')[1].split('\n## ')[0]


def cells(line):
    return [c.strip() for c in line.split('|')[1:-1]]


# ----------------------------------------------------------------------------- Student's t

def test_paired_t_closed_forms_and_the_zero_spread_guard():
    """paired_t (scipy's ttest_rel): on two seeds (df = 1) its p is Cauchy's tail 1 - 2 atan|t| / pi and its 95%
    interval d +- 12.706 se; identical differences (sd 0, where scipy has no t) give the point as the interval and p 0,
    or p 1 where the difference is 0 too."""
    for d1, d2 in ((0.01, 0.03), (-0.2, 0.1), (0.5, 0.52)):
        r = report.paired_t({1: 0.0, 2: 0.0}, {1: d1, 2: d2})
        se = abs(d1 - d2) / 2  # sd / sqrt(2) with sd = |d1 - d2| / sqrt(2)
        t = (d1 + d2) / 2 / se
        assert r['p'] == pytest.approx(1 - 2 * math.atan(abs(t)) / math.pi, rel=1e-8)
        assert (r['lo'], r['hi']) == (pytest.approx(r['diff'] - 12.7062 * se, abs=1e-4 * se),
                                      pytest.approx(r['diff'] + 12.7062 * se, abs=1e-4 * se))
    flat = report.paired_t({1: 1.0, 2: 2.0, 3: 3.0}, {1: 1.25, 2: 2.25, 3: 3.25})
    assert (flat['lo'], flat['hi'], flat['p']) == (pytest.approx(0.25), pytest.approx(0.25), 0.0)
    assert report.paired_t({1: 1.0, 2: 2.0}, {1: 1.0, 2: 2.0})['p'] == 1.0
    assert report.welch_t([1.0, 1.0], [2.0, 2.0])['p'] == 0.0


def test_paired_t_by_hand():
    # d = 0.01, 0.02, 0.03: mean 0.02, sd 0.01, se = 0.01 / sqrt(3), t = sqrt(12), df 2;
    # p = 1 - t / sqrt(2 + t^2) = 1 - sqrt(6/7) (the df = 2 closed form), interval 0.02 +- 4.3027 se
    a = {1: 1.520, 2: 1.505, 3: 1.500, 4: 9.99}  # seed 4 has no partner: left out
    b = {1: 1.530, 2: 1.525, 3: 1.530}  # pairs by seed, not by rank (that would give 0.025, 0.025, 0.01)
    r = report.paired_t(a, b)
    assert r['seeds'] == [1, 2, 3] and r['n'] == 3
    assert r['diff'] == pytest.approx(0.02) and r['sd'] == pytest.approx(0.01)
    assert r['p'] == pytest.approx(1 - math.sqrt(6 / 7), rel=1e-9)
    half = 4.302652729911275 * 0.01 / math.sqrt(3)
    assert (r['lo'], r['hi']) == (pytest.approx(0.02 - half), pytest.approx(0.02 + half))


def test_welch_t_matches_reference_values():
    # reference: Welch's test of b against a as statistics packages compute it (p, 95% interval of b - a, df)
    a, b = [1.50, 1.52, 1.49], [1.47, 1.50, 1.45, 1.48]
    r = report.welch_t(a, b)
    assert r['diff'] == pytest.approx(-0.0283333333333, abs=1e-12)
    assert r['df'] == pytest.approx(4.993325917686, rel=1e-9)
    assert r['p'] == pytest.approx(0.09250246798041768, rel=1e-8)
    assert (r['lo'], r['hi']) == (pytest.approx(-0.06341596816472117, rel=1e-8),
                                  pytest.approx(0.006749301498054978, rel=1e-8))
    # equal sizes and variances: Welch's df is the pooled 2 (n - 1)
    assert report.welch_t([1.0, 2.0, 3.0], [2.0, 3.0, 4.0])['df'] == pytest.approx(4.0)


def test_pairing_uses_the_seed_not_the_order():
    # a large seed effect shared by both variants, B always 0.01 lower: paired, the gap is clear; Welch on the
    # same numbers (no seed in common) sees mostly seed spread and an interval around 0
    a = {1: 1.60, 2: 1.40, 3: 1.50, 10: 1.55}
    b = {s: v - 0.01 + 0.001 * (s % 2) for s, v in a.items()}
    r = report.compare(a, b)
    assert r['test'] == 'paired' and r['hi'] < 0 and r['p'] < 0.001
    w = report.compare(a, {s + 100: v for s, v in b.items()})
    assert w['test'] == 'welch' and w['lo'] < 0 < w['hi']
    one = report.compare({1: 1.5, 2: 1.7, 3: 1.9}, {1: 1.45})  # the one shared seed, not the means
    assert one == dict(test='single', seeds=[1], diff=pytest.approx(-0.05))
    assert report.compare({1: 1.5}, {2: 1.45, 3: 1.55})['diff'] == pytest.approx(0.0)
    same = report.compare({1: 1.5, 2: 1.6}, {1: 1.49, 2: 1.59})  # identical differences: se 0, a point interval
    assert same['lo'] == same['hi'] == pytest.approx(-0.01) and same['p'] == 0.0


# ----------------------------------------------------------------------------- the report's sections

def test_comparisons_section(tmp_path):
    for s, (a, b) in {1: (1.50, 1.48), 2: (1.60, 1.57), 10: (1.40, 1.39)}.items():
        make_run(tmp_path, f'nanogpt_3L_s{s}', a)
        make_run(tmp_path, f'diff_3L_s{s}', b, lambdas=[0.3, 0.5])
        make_run(tmp_path, f'sym_3L_s{s}', a + 0.003 * (-1) ** s)
    make_run(tmp_path, 'sym_noself_3L_s1', 1.55, mask_self=True)
    make_run(tmp_path, 'gated_3L_s4', 1.45)
    make_run(tmp_path, 'gated_3L_s5', 1.47)
    make_run(tmp_path, 'diff_6L_s1', 1.30)  # no nanogpt at 6L: no comparison there
    text = report.render(str(tmp_path))
    rows = [cells(l) for l in section(text, 'Comparisons').splitlines() if l.startswith('| 3L') or l.startswith('| 6L')]
    assert [r[1:3] for r in rows] == [['nanogpt', 'gpt+Diff'], ['nanogpt', 'gpt+Sym'], ['nanogpt', 'Gated (G1)'],
                                      ['gpt+Sym', 'Sym, no self']]
    diff, sym, gated, noself = rows
    # diff - nanogpt: -0.02, -0.03, -0.01 over seeds 1, 2, 10 (numeric order): mean -0.02, sd 0.01, df 2
    half = 4.302652729911275 * 0.01 / math.sqrt(3)
    assert diff[3:] == ['1, 2, 10', '-0.0200 ± 0.0100', f'[{-0.02 - half:+.4f}, {-0.02 + half:+.4f}]', '0.074',
                        'paired t, n=3', 'within noise', '1.5000 ± 0.1000', '1.4800 ± 0.0900']
    assert sym[7:9] == ['paired t, n=3', 'within noise']
    assert gated[3] == 'A: 1, 2, 10; B: 4, 5' and gated[7].startswith('Welch t, n=3+2, df=')
    assert gated[8] == 'too few seeds'  # 2 runs on a side: the claims' rule, whatever the interval
    assert noself[3:9] == ['1', '+0.0530', 'none: one seed', '—', 'one seed', 'unknown']
    # a clear gap: B always 0.05 higher give or take 0.001
    for s, v in {1: 1.5, 2: 1.6, 3: 1.4}.items():
        make_run(tmp_path / 'clear', f'nanogpt_3L_s{s}', v)
        make_run(tmp_path / 'clear', f'softmax1_3L_s{s}', v + 0.05 + 0.001 * (s - 2))
    row = cells(section(report.render(str(tmp_path / 'clear')), 'Comparisons').splitlines()[-1])
    assert row[2] == 'Softmax-1' and row[4] == '+0.0500 ± 0.0010' and row[6] == '<0.001'
    assert row[8] == 'not within noise: B higher'


def test_lambda_comparison_is_the_distance_from_one(tmp_path):
    """Diff+Sym against Diff in mean_l |1 - lambda_full|, paired by seed. Layer values above 1 count by their
    distance, so a lambda of 1.2 is as far as 0.8."""
    lam = {1: ([0.3, 0.5], [0.5, 1.2]), 2: ([0.4, 0.6], [0.6, 0.7]), 3: ([0.2, 0.6], [0.5, 0.9])}
    for s, (a, b) in lam.items():
        make_run(tmp_path, f'diff_3L_s{s}', 1.5, lambdas=a)
        make_run(tmp_path, f'diff_sym_3L_s{s}', 1.5, lambdas=b)
    make_run(tmp_path, 'nanogpt_3L_s1', 1.5)
    text = report.render(str(tmp_path))
    rows = [cells(l) for l in section(text, 'Per-layer lambda after training').splitlines() if l.startswith('| 3L')]
    assert len(rows) == 1 and rows[0][1:3] == ['gpt+Diff', 'gpt+Diff+Sym']
    # distances: diff 0.6, 0.5, 0.6; diff_sym 0.35, 0.35, 0.3; differences -0.25, -0.15, -0.3
    d = [-0.25, -0.15, -0.3]
    m, sd = sum(d) / 3, math.sqrt(sum((x - sum(d) / 3) ** 2 for x in d) / 2)
    assert rows[0][3:5] == ['1, 2, 3', f'{m:+.4f} ± {sd:.4f}'] and rows[0][7] == 'paired t, n=3'
    assert rows[0][8] == 'not within noise: B lower'
    # one Differential model alone: no comparison
    shutil.rmtree(tmp_path / 'diff_sym_3L_s1'), shutil.rmtree(tmp_path / 'diff_sym_3L_s2')
    shutil.rmtree(tmp_path / 'diff_sym_3L_s3')
    assert report.lambda_comparison(report.load_runs(tmp_path)) == ''


def test_mean_std_signs_the_mean_only():
    assert report.mean_std([0.01, 0.03], '{:+.4f}') == '+0.0200 ± 0.0141'
    assert report.mean_std([-0.5], '{:+.2f}') == '-0.50' and report.mean_std([1.0, 3.0]) == '2.00 ± 1.41'


def write_analysis(root, name, first, kurt, int4):
    """analysis.json as analyze.py writes it, with the measures report.py reads."""
    a = dict(overall=dict(first_token_attention=first, first_token_heads=0.25, max_activation=3.0, logit_top1=9.0,
                          kurtosis_rest=kurt),
             quantization=dict(loss_penalty_int8=0.0001, loss_penalty_int4=int4))
    with open(os.path.join(root, name, 'analysis.json'), 'w') as f:
        json.dump(a, f)


def test_diagnostics_summary_and_sink_comparisons(tmp_path):
    """Per variant mean ± std of analyze.py's measures, and softmax-1 against nanogpt paired by seed; a variant
    with one analysed seed has no summary row, and a run without analysis.json is left out."""
    first = {1: (0.30, 0.05), 2: (0.40, 0.04), 3: (0.35, 0.06)}   # (nanogpt, softmax1): a sink that softmax-1 removes
    for s, (a, b) in first.items():
        make_run(tmp_path, f'nanogpt_3L_s{s}', 1.5)
        make_run(tmp_path, f'softmax1_3L_s{s}', 1.5)
        write_analysis(tmp_path, f'nanogpt_3L_s{s}', a, 3.0 + s, 0.02)
        write_analysis(tmp_path, f'softmax1_3L_s{s}', b, 3.0 + s, 0.02)
    make_run(tmp_path, 'gated_3L_s1', 1.5)
    write_analysis(tmp_path, 'gated_3L_s1', 0.1, 3.0, 0.02)
    make_run(tmp_path, 'sym_3L_s1', 1.5)  # no analysis.json
    make_run(tmp_path, 'sym_3L_s2', 1.5)
    diag = section(report.render(str(tmp_path)), 'Diagnostics')
    summary = [cells(l) for l in diag.splitlines() if l.startswith('| 3L | ') and len(cells(l)) == 8]
    assert [r[1:3] for r in summary] == [['nanogpt', '3'], ['Softmax-1', '3']]
    assert summary[0][3] == '0.3500 ± 0.0500' and summary[0][5] == '5.00 ± 1.00'
    rows = {cells(l)[0]: cells(l) for l in diag.splitlines() if len(cells(l)) == 12 and cells(l)[1] == '3L'}
    # no gated row (one analysed seed); heads on token 0, max act and int4 are the same in every run: named once
    assert set(rows) == {'first-token attn', 'kurtosis'}
    assert 'so no comparison: heads on token 0 (3L, nanogpt and Softmax-1: 0.25); max abs act' in diag
    d = [-0.25, -0.36, -0.29]
    m, sd = sum(d) / 3, math.sqrt(sum((x - sum(d) / 3) ** 2 for x in d) / 2)
    r = rows['first-token attn']
    assert r[2:4] == ['nanogpt', 'Softmax-1'] and r[5] == f'{m:+.4f} ± {sd:.4f}'
    assert r[9] == 'not within noise: B lower'
    assert rows['kurtosis'][5] == '+0.0000 ± 0.0000' and rows['kurtosis'][9] == 'within noise'


def test_an_analysis_of_another_checkpoint_is_left_out_and_a_torn_log_line_dropped(tmp_path, capsys):
    """analysis.json of best.pt (or of a run trained further since) is not the final run's: left out, with a word;
    a log.jsonl whose last line a kill tore renders without it."""
    for s in (1, 2):
        make_run(tmp_path, f'nanogpt_3L_s{s}', 1.5)
        write_analysis(tmp_path, f'nanogpt_3L_s{s}', 0.3, 3.0, 0.02)
    path = os.path.join(tmp_path, 'nanogpt_3L_s2', 'analysis.json')
    a = json.load(open(path))
    json.dump(dict(a, iter=CONFIG['max_iters'] - 100), open(path, 'w'))  # not the run's last iteration
    with open(os.path.join(tmp_path, 'nanogpt_3L_s1', 'log.jsonl'), 'a') as f:
        f.write('{"iter": 10')  # torn
    diag = section(report.render(str(tmp_path)), 'Diagnostics')
    assert [c[0] for c in map(cells, diag.splitlines()) if c and c[0].startswith('nanogpt_')] == ['nanogpt_3L_s1']
    err = capsys.readouterr().err  # a word on each: the file left out, and the log's torn line
    assert 'nanogpt_3L_s2/analysis.json' in err and 'nanogpt_3L_s1/log.jsonl' in err, err


def test_diagnostics_table_gives_the_uniform_reference_where_the_file_has_it(tmp_path):
    """analyze.py writes first_token_uniform since commit a949fc3 (2026-11-23); the per-run table shows it beside the measure, and an
    older analysis.json without it still renders."""
    make_run(tmp_path, 'nanogpt_3L_s1', 1.5)
    make_run(tmp_path, 'nanogpt_3L_s2', 1.5)
    write_analysis(tmp_path, 'nanogpt_3L_s1', 0.015, 3.0, 0.02)
    write_analysis(tmp_path, 'nanogpt_3L_s2', 0.012, 3.0, 0.02)
    path = os.path.join(tmp_path, 'nanogpt_3L_s2', 'analysis.json')
    with open(path) as f:
        a = json.load(f)
    a['overall']['first_token_uniform'] = 0.0201
    with open(path, 'w') as f:
        json.dump(a, f)
    diag = section(report.render(str(tmp_path)), 'Diagnostics')
    rows = {cells(l)[0]: cells(l) for l in diag.splitlines() if len(cells(l)) == 8 and cells(l)[0].startswith('nano')}
    assert rows['nanogpt_3L_s1'][1] == '0.015' and rows['nanogpt_3L_s2'][1] == '0.012 (0.020)'


def test_gu_sink_share_and_massive_ratio_where_every_analysis_has_them(tmp_path):
    """analyze.py writes sink_heads (Gu et al.) and massive_ratio since commit 1d93be1 (2026-11-24): both get columns in the per-run
    table and the summary, and are compared by seed, where every file has them; with one older file, neither."""
    for s, (gu_a, gu_b) in {1: (0.5, 0.1), 2: (0.6, 0.0), 3: (0.4, 0.1)}.items():
        for v, gu in (('nanogpt', gu_a), ('softmax1', gu_b)):
            make_run(tmp_path, f'{v}_3L_s{s}', 1.5)
            write_analysis(tmp_path, f'{v}_3L_s{s}', 0.3, 3.0 + s, 0.02)
            path = os.path.join(tmp_path, f'{v}_3L_s{s}', 'analysis.json')
            a = json.load(open(path))
            a['overall'].update(sink_heads=gu, massive_ratio=100.0 * s + (v == 'nanogpt') * 1000)
            json.dump(a, open(path, 'w'))
    diag = section(report.render(str(tmp_path)), 'Diagnostics')
    per_run = {cells(l)[0]: cells(l) for l in diag.splitlines() if cells(l) and cells(l)[0].endswith('_s2')}
    assert per_run['nanogpt_3L_s2'][2] == '0.25 / 0.60' and per_run['nanogpt_3L_s2'][4] == '3.0 (1200x)'
    summary = [cells(l) for l in diag.splitlines() if l.startswith('| 3L | ') and len(cells(l)) == 10]
    assert summary[0][5] == '0.500 ± 0.100' and summary[0][8] == '1200 ± 100'
    rows = {cells(l)[0]: cells(l) for l in diag.splitlines() if len(cells(l)) == 12 and cells(l)[1] == '3L'}
    assert rows['heads > 0.3 (Gu)'][9] == 'not within noise: B lower'
    assert rows['max / median act'][5] == '-1000.0000 ± 0.0000'
    os.remove(path)  # softmax1_3L_s3 as an older file: without the new keys
    write_analysis(tmp_path, 'softmax1_3L_s3', 0.3, 6.0, 0.02)
    diag = section(report.render(str(tmp_path)), 'Diagnostics')
    assert [len(cells(line)) for line in diag.splitlines() if line.startswith('| 3L | ')] == [8, 8]  # no columns
    rows = {cells(l)[0] for l in diag.splitlines() if len(cells(l)) == 12 and cells(l)[1] == '3L'}
    assert rows == {'kurtosis'}  # nor comparisons (first-token attention is the same in every run)


def test_first_token_attention_by_layer_in_small_models(tmp_path):
    """In models of up to 4 layers the summary and the comparisons give first-token attention layer by layer (a
    sink held by one layer is not averaged away); with deeper models, or files without layers, they do not."""
    def write(name, layers, gu):
        a = dict(overall=dict(first_token_attention=sum(layers) / len(layers), first_token_heads=1.0,
                              max_activation=3.0, logit_top1=9.0, kurtosis_rest=3.0, sink_heads=gu, massive_ratio=9.0),
                 layers=[dict(first_token_attention=x) for x in layers],
                 quantization=dict(loss_penalty_int8=0.0, loss_penalty_int4=0.01))
        json.dump(a, open(os.path.join(tmp_path, name, 'analysis.json'), 'w'))
    for s, (l2_a, l2_b) in {1: (0.7, 0.02), 2: (0.6, 0.03), 3: (0.8, 0.01)}.items():
        for v, l2 in (('bb_nanogpt', l2_a), ('bb_softmax1', l2_b)):
            make_run(tmp_path, f'{v}_2L_s{s}', 1.7)
            write(f'{v}_2L_s{s}', [0.4, l2], 0.5)
    diag = section(report.render(str(tmp_path)), 'Diagnostics')
    rows = {cells(l)[0]: cells(l) for l in diag.splitlines() if len(cells(l)) == 12 and cells(l)[1] == '2L'}
    assert rows['first-token attn, layer 2'][2:4] == ['BB nanogpt', 'BB Softmax-1']
    assert rows['first-token attn, layer 2'][5] == f'{-0.68:+.4f} ± {0.11:.4f}'
    assert 'first-token attn, layer 1 (2L, BB nanogpt and BB Softmax-1: 0.4)' in diag  # the same in every run
    runs = [n for n in os.listdir(tmp_path) if os.path.isdir(tmp_path / n)]
    for name in runs:  # the same runs as 6-layer models: no per-layer measures
        write(name, [0.4] * 5 + [0.7 if 'nanogpt' in name else 0.02], 0.5)
    diag = section(report.render(str(tmp_path)), 'Diagnostics')
    assert {cells(l)[0] for l in diag.splitlines() if len(cells(l)) == 12 and cells(l)[1] == '2L'} == {
        'first-token attn'}


def write_needle_eval(root, name, acc, answer, noise, share=None):
    """needle_eval.json as needle_eval.py writes it: by_needles keyed by the needle count (a string in JSON);
    without share, as it was written before the answer share existed."""
    by = {str(n): dict(accuracy=a, answer_attention=answer, noise_attention=noise) for n, a in acc.items()}
    if share is not None:
        for d in by.values():
            d['answer_share'] = share
    with open(os.path.join(root, name, 'needle_eval.json'), 'w') as f:
        json.dump(dict(by_needles=by, cells=[]), f)


def test_retrieval_section_from_needle_eval(tmp_path):
    """needle_eval.json's accuracy by N and attention: a row per run, mean ± std per variant, and Diff against the
    baseline paired by seed, for each N both have."""
    for s, (a, b) in {1: (0.6, 0.9), 2: (0.5, 0.7), 3: (0.7, 0.8)}.items():
        make_run(tmp_path, f'nanogpt_2L_s{s}', 0.5)
        make_run(tmp_path, f'diff_2L_s{s}', 0.4)
        write_needle_eval(tmp_path, f'nanogpt_2L_s{s}', {1: 1.0, 2: a}, 0.3, 0.6)
        write_needle_eval(tmp_path, f'diff_2L_s{s}', {1: 1.0, 2: b, 3: 0.5}, 0.2 + 0.1 * s, 0.4)
    text = report.render(str(tmp_path))
    ret = section(text, 'Retrieval')
    per_run = [cells(l) for l in ret.splitlines() if l.startswith('| nanogpt_2L_s1 |') or l.startswith('| diff_2L_s1')]
    assert per_run == []  # the runs have different grids (diff has N=3): no common per-run table
    summary = {cells(l)[1]: cells(l) for l in ret.splitlines() if l.startswith('| 2L |')}
    # only the needle counts every file has (1, 2), then the attention columns
    assert summary['gpt+Diff'][2:] == ['3', '1.000 ± 0.000', '0.800 ± 0.100', '0.400 ± 0.100', '0.400 ± 0.000']
    rows = {cells(l)[0]: cells(l) for l in ret.splitlines() if len(cells(l)) == 12 and cells(l)[1] == '2L'}
    assert set(rows) == {'acc N=2', 'answer attn', 'noise attn'}
    assert rows['acc N=2'][2:4] == ['nanogpt', 'gpt+Diff'] and rows['acc N=2'][5] == '+0.2000 ± 0.1000'
    assert rows['acc N=2'][9] == 'within noise'  # differences 0.3, 0.2, 0.1: t = 3.46 on 2 df, p = 0.074
    assert rows['noise attn'][9] == 'not within noise: B lower'
    # N = 1 is 1.0 in every run of both: named once, not a table row of zeros
    assert ('The same value in every run of both models, so no comparison: '
            'acc N=1 (2L, nanogpt and gpt+Diff: 1.0).') in ret
    # with the same grid everywhere, the per-run table is there
    for s in (1, 2, 3):
        write_needle_eval(tmp_path, f'diff_2L_s{s}', {1: 1.0, 2: 0.9}, 0.3, 0.4)
    ret = section(report.render(str(tmp_path)), 'Retrieval')
    assert cells(next(l for l in ret.splitlines() if l.startswith('| diff_2L_s1 |'))) == [
        'diff_2L_s1', '1.000', '0.900', '0.300', '0.400']
    # the answer share, once every file has it: a column and a paired comparison of its own
    for s in (1, 2, 3):
        write_needle_eval(tmp_path, f'nanogpt_2L_s{s}', {1: 1.0, 2: 0.9}, 0.3, 0.6, share=0.3)
        write_needle_eval(tmp_path, f'diff_2L_s{s}', {1: 1.0, 2: 0.9}, 0.3, 0.4, share=0.3 + 0.1 * s)
    ret = section(report.render(str(tmp_path)), 'Retrieval')
    assert cells(next(l for l in ret.splitlines() if l.startswith('| diff_2L_s1 |'))) == [
        'diff_2L_s1', '1.000', '0.900', '0.300', '0.400', '0.400']
    row = next(cells(l) for l in ret.splitlines() if l.startswith('| answer share | 2L |'))
    assert row[2:6] == ['nanogpt', 'gpt+Diff', '1, 2, 3', '+0.2000 ± 0.1000']


def test_val_curve_table(tmp_path):
    """make_run's eval lines fall linearly from 4 to the final val loss: mean ± std over seeds at each eval, and
    at most max_cols columns, evenly spaced, the last kept."""
    for s, v in {1: 1.5, 2: 1.7}.items():
        make_run(tmp_path, f'nanogpt_3L_s{s}', v)
    make_run(tmp_path, 'diff_3L_s1', 2.0)
    text = report.render(str(tmp_path))
    lines = section(text, 'Val loss over training').strip().splitlines()
    assert cells(lines[2])[3:] == ['0', '100', '200', '300', '400', '500']
    nano = cells(lines[4])
    assert nano[1:3] == ['nanogpt', '2'] and nano[3] == '4.000 ± 0.000' and nano[-1] == '1.600 ± 0.141'
    assert nano[5] == '3.040 ± 0.057'  # iter 200: 4 - (4 - v) * 0.4 for v = 1.5, 1.7
    assert cells(lines[5])[1:4] == ['gpt+Diff', '1', '4.000'] and cells(lines[5])[-1] == '2.000'
    head = cells(report.curve_table(report.load_runs(str(tmp_path)), max_cols=3).splitlines()[0])
    assert head[3:] == ['0', '200', '500']  # iters[round(i * 5 / 2)]: 0, 2 (round half to even), 5


def test_title_says_what_the_sweep_is(tmp_path):
    make_run(tmp_path, 'sym_3L_s1', 1.5, causal=False, dropout=0.2)
    make_run(tmp_path, 'sym_noself_3L_s1', 1.6, causal=False, dropout=0.2, mask_self=True)
    text = report.render(str(tmp_path))
    head = text.splitlines()[0]
    assert head == ('# shakespeare_char: attention without the causal mask: not a causal language model, '
                    '500 steps at learning rate 0.001, dropout 0.2')
    assert 'mask_self=True' in text and 'in: Sym, no self;' in text
    assert 'causal=False' in text
    make_run(tmp_path / 'mixed', 'nanogpt_3L_s1', 1.5)
    make_run(tmp_path / 'mixed', 'sym_3L_s1', 1.5, causal=False, max_iters=5000, learning_rate=3e-4)
    head = report.render(str(tmp_path / 'mixed')).splitlines()[0]
    assert head.startswith('# shakespeare_char: mixed: some runs without the causal mask')
    assert head.endswith(', 500/5000 steps at learning rate 0.0003/0.001, dropout 0.0'), head
    make_run(tmp_path / 'causal', 'nanogpt_3L_s1', 1.5)
    assert report.render(str(tmp_path / 'causal')).startswith('# shakespeare_char: causal language model, 500 steps')


def test_train_step_loss_column(tmp_path):
    # the training-step loss: the 'train' lines after the second-to-last eval (iterations 410..500), not the
    # 9.0 logged before; beside the eval losses; with dropout it can sit above the val loss
    make_run(tmp_path, 'nanogpt_3L_s1', 1.50, train=1.45, step=1.70, dropout=0.2)
    make_run(tmp_path, 'nanogpt_3L_s2', 1.52, train=1.47, step=1.74, dropout=0.2)
    make_run(tmp_path, 'gated_3L_s1', 1.40, train=1.35, step=1.60, dropout=0.2)
    text = report.render(str(tmp_path))
    rows = [cells(l) for l in section(text, 'Per variant').splitlines() if l.startswith('| 3L')]
    assert rows == [['3L', 'nanogpt', '1, 2', '1.460 ± 0.014', '1.510 ± 0.014', '1.720 ± 0.028', '0.2'],
                    ['3L', 'Gated (G1)', '1', '1.350', '1.400', '1.600', '0.2']]


def test_variant_names_and_order(tmp_path):
    for v in ('softmax1', 'sym_noself', 'norm_sym', 'gated', 'nanogpt', 'diff', 'my_new', 'diff_sym', 'sym'):
        make_run(tmp_path, f'{v}_3L_s1', 1.5)
    text = report.render(str(tmp_path))
    assert '| | nanogpt | gpt+Diff | gpt+Sym | gpt+Diff+Sym | Norm+Sym |' in section(text, 'Final loss')
    assert '| | Sym, no self | Gated (G1) | Softmax-1 | my_new |' in section(text, 'Other variants')
    order = [cells(l)[1] for l in section(text, 'Per variant').splitlines() if l.startswith('| 3L')]
    assert order == ['nanogpt', 'gpt+Diff', 'gpt+Sym', 'gpt+Diff+Sym', 'Norm+Sym', 'Sym, no self', 'Gated (G1)',
                     'Softmax-1', 'my_new']


# ----------------------------------------------------------------------------- reproducibility

def test_markdown_does_not_depend_on_matplotlib(tmp_path, monkeypatch):
    make_run(tmp_path, 'nanogpt_3L_s1', 1.5)
    make_run(tmp_path, 'diff_3L_s1', 1.4, lambdas=[0.3, 0.6])
    monkeypatch.setitem(sys.modules, 'matplotlib', None)  # import matplotlib raises ImportError
    without = report.render(str(tmp_path))
    monkeypatch.setattr(report, 'plots', lambda data, root: list(report.PLOTS))  # as if it drew both
    assert report.render(str(tmp_path)) == without
    assert '[val_loss.png](val_loss.png)' in without and '[lambda_full.png](lambda_full.png)' in without
    shutil.rmtree(tmp_path / 'diff_3L_s1')  # no diff model, no lambda plot to name
    assert re.findall(r'\]\((\w+\.png)\)', report.render(str(tmp_path))) == ['val_loss.png']


def test_plots_with_matplotlib(tmp_path):
    pytest.importorskip('matplotlib')
    for s in (1, 2):
        make_run(tmp_path, f'nanogpt_3L_s{s}', 1.5 + s / 100)
        make_run(tmp_path, f'diff_3L_s{s}', 1.4, lambdas=[0.3, 0.6 + s / 10])
    report.render(str(tmp_path))
    for name in report.PLOTS:
        with open(tmp_path / name, 'rb') as f:
            assert f.read(8) == b'\x89PNG\r\n\x1a\n'
    curves = report.plot_data(report.load_runs(str(tmp_path)))['lambda_full.png'][('diff', '3L')]
    iters, mean, lo, hi = curves[2]
    assert iters[-1] == 500 and (mean[-1], lo[-1], hi[-1]) == (pytest.approx(0.75), 0.7, 0.8)


def sweep_folders(base):
    """Folders under base with a results.md and run folders (<variant>_<depth>_s<seed>/summary.json)."""
    found = []
    for dirpath, dirnames, filenames in os.walk(base):
        runs = [d for d in dirnames
                if report.RUN_RE.match(d) and os.path.exists(os.path.join(dirpath, d, 'summary.json'))]
        if runs and 'results.md' in filenames:
            found.append(dirpath)
    return sorted(found)


def rerender_matches(folder, tmp):
    """Copy only the run folders' files (summary.json, log.jsonl, analyze.py's analysis.json and needle_eval.py's
    needle_eval.json) and the sweep's backfilled provenance.json to a fresh folder of the same name elsewhere (the
    name is the command's SWEEP), re-render there and compare byte for byte with folder/results.md."""
    copy = os.path.join(tmp, os.path.basename(folder))
    os.makedirs(copy)
    if os.path.exists(os.path.join(folder, 'provenance.json')):
        shutil.copy(os.path.join(folder, 'provenance.json'), copy)
    for name in sorted(os.listdir(folder), reverse=True):  # another creation order too
        if report.RUN_RE.match(name):
            os.makedirs(os.path.join(copy, name))
            for f in ('summary.json', 'log.jsonl', 'analysis.json', 'needle_eval.json'):
                if os.path.exists(os.path.join(folder, name, f)):
                    shutil.copy(os.path.join(folder, name, f), os.path.join(copy, name, f))
    report.render(copy)
    with open(os.path.join(folder, 'results.md'), 'rb') as f, open(os.path.join(copy, 'results.md'), 'rb') as g:
        return f.read() == g.read()


def test_committed_results_rerender_byte_for_byte(tmp_path, monkeypatch):
    # every committed sweep under results/; none committed yet is a pass for that reason alone. The plots are not
    # drawn: results.md does not depend on them (test_markdown_does_not_depend_on_matplotlib)
    monkeypatch.setattr(report, 'plots', lambda data, root: [])
    for i, folder in enumerate(sweep_folders(os.path.join(ROOT, 'results'))):
        (tmp_path / str(i)).mkdir()
        assert rerender_matches(folder, str(tmp_path / str(i))), f'{folder}/results.md is not what report.py renders'


def test_rerender_check_on_a_synthetic_committed_sweep(tmp_path):
    sweep = tmp_path / 'results' / 'shakespeare_cpu_long'
    for s in (1, 2, 10):
        make_run(sweep, f'nanogpt_3L_s{s}', 1.5 + s / 1000)
        make_run(sweep, f'diff_3L_s{s}', 1.49 + s / 900, lambdas=[0.3, 0.5])
        make_run(sweep, f'sym_3L_s{s}', 1.51)
    make_run(sweep, 'gated_3L_s1', 1.45)
    (sweep / 'sym_3L_s10' / 'train.log').write_text('not committed\n')
    report.render(str(sweep))
    assert sweep_folders(str(tmp_path / 'results')) == [str(sweep)]
    (tmp_path / 'a').mkdir()
    assert rerender_matches(str(sweep), str(tmp_path / 'a'))
    text = (sweep / 'results.md').read_text()
    (sweep / 'results.md').write_text(text.replace('1.5', '1.6', 1))  # a hand edit is caught
    (tmp_path / 'b').mkdir()
    assert not rerender_matches(str(sweep), str(tmp_path / 'b'))


def _figures(monkeypatch, module):
    """The figures a module saves, kept open instead of written."""
    figs = []
    monkeypatch.setattr(module, 'save_figure', lambda fig, path: figs.append(fig))
    return figs


def test_val_loss_plot_shows_every_point_and_report_cli_errors(tmp_path, monkeypatch):
    pytest.importorskip('matplotlib')
    for s in (1, 2):
        make_run(tmp_path, f'nanogpt_3L_s{s}', 1.5 + s / 100)
    figs = _figures(monkeypatch, report)
    report.plots(report.plot_data(report.load_runs(str(tmp_path))), str(tmp_path))
    ax = figs[0].axes[0]
    ys = [y for line in ax.get_lines() for y in line.get_ydata()]
    lo, hi = ax.get_ylim()
    assert max(ys) == pytest.approx(4.0) and lo <= min(ys) and max(ys) <= hi  # iteration 0 is not clipped
    assert script('report.py', '--help').returncode == 0
    p = script('report.py', str(tmp_path / 'none'))
    assert p.returncode == 1, p.stderr
    one_line(p.stderr, tmp_path / 'none')


def test_attention_map_figure_has_a_log_colour_scale(monkeypatch):
    pytest.importorskip('matplotlib')
    import torch
    import analyze
    from matplotlib.colors import LogNorm
    from model import GPT, GPTConfig
    model = GPT(GPTConfig(n_layer=2, n_head=2, n_embd=16, block_size=32, vocab_size=11)).eval()
    figs = _figures(monkeypatch, analyze)
    assert analyze.heatmaps(model, torch.randint(11, (1, 32)), 'unused.png')
    images = [im for ax in figs[0].axes for im in ax.get_images()]
    assert len(images) == 2 and all(isinstance(im.norm, LogNorm) for im in images)
    assert len(figs[0].axes) == 3  # a panel per layer and the colour bar


def test_across_sets_sweeps_side_by_side(tmp_path):
    """--across: a row per sweep and depth, the union of the variants as columns in the seed's order, training-step
    loss / val as mean ± std over the finished seeds, '—' where a sweep has no finished run of a variant; the CLI
    prints it and writes nothing, and refuses several sweeps without --across."""
    a, b = tmp_path / 'causal', tmp_path / 'leak_x'
    make_run(a, 'diff_3L_s1', 2.10, step=2.00)
    make_run(a, 'diff_3L_s2', 2.20, step=2.10)
    make_run(a, 'nanogpt_3L_s1', 1.99, step=1.90)
    make_run(b, 'nanogpt_3L_s1', 1.54, step=1.50)
    make_run(b, 'nanogpt_6L_s1', 1.20, step=1.10)
    os.makedirs(b / 'diff_3L_s1')  # unfinished: no summary.json
    lines = report.across_table([str(a), str(b)]).splitlines()
    assert cells(lines[0])[1:] == ['nanogpt', 'gpt+Diff']
    assert cells(lines[2]) == ['causal 3L', '1.90 / 1.99', '2.05 ± 0.07 / 2.15 ± 0.07 (n=2)']
    assert cells(lines[3]) == ['leak_x 3L', '1.50 / 1.54', '—']
    assert cells(lines[4]) == ['leak_x 6L', '1.10 / 1.20', '—']
    p = script('report.py', '--across', a, b)
    assert p.returncode == 0 and p.stdout.splitlines() == lines
    assert not (a / 'results.md').exists() and not (b / 'results.md').exists()
    p = script('report.py', a, b)
    assert p.returncode == 1, p.stderr
    one_line(p.stderr, '--across')


def test_runs_that_differ_in_more_than_their_seed_are_named_in_a_warning(tmp_path):
    """Seeds of one cell with another dropout, or a sweep whose variants ran other schedules, are averaged and
    paired by the tables as if they were alike: results.md says so at the top, naming the key and the runs. Where
    runs differ only in the keys that say where they ran (device, dtype, ...), there is no warning."""
    make_run(tmp_path, 'nanogpt_3L_s1', 1.50)
    make_run(tmp_path, 'nanogpt_3L_s2', 1.52, device='cuda', dtype='float32', seed=2)
    make_run(tmp_path, 'diff_3L_s1', 1.45, attn='diff')  # a model key that differs between cells: the variant
    assert report.mixed_settings(finished_runs(tmp_path)[1]) == []
    make_run(tmp_path, 'nanogpt_3L_s3', 1.40, dropout=0.1, seed=3)
    make_run(tmp_path, 'diff_3L_s2', 1.47, attn='diff', weight_decay=0.0, seed=2)
    make_run(tmp_path, 'diff_3L_s3', 1.46, attn='diff', weight_decay=0.1, seed=3)
    mixed = report.mixed_settings(finished_runs(tmp_path)[1])
    assert mixed == ['`dropout`: 0.0 (nanogpt_3L_s1, nanogpt_3L_s2, diff_3L_s1, ...) / 0.1 (nanogpt_3L_s3)',
                     '`weight_decay`: 0.0 (diff_3L_s2) / 0.1 (diff_3L_s3)']  # diff_3L_s1 has no such key
    assert [f'- {m}' for m in mixed] == report.markdown(report.load_runs(tmp_path)).split(
        '**Warning: mixed settings.**')[1].split('\n## ')[0].strip().splitlines()[2:]  # results.md says so


def test_seeds_of_a_cell_may_differ_in_the_keys_a_resume_may_change(tmp_path):
    """Within a cell, runs may differ in the keys that say where and how they ran (config.py's FREE_ON_RESUME) and in
    their seed without a warning; any other key is named."""
    import config
    make_run(tmp_path, 'nanogpt_3L_s1', 1.50, n_layer=3, **{k: f'here {k}' for k in config.FREE_ON_RESUME})
    make_run(tmp_path, 'nanogpt_3L_s2', 1.52, n_layer=3, **{k: f'there {k}' for k in config.FREE_ON_RESUME})
    assert report.mixed_settings(finished_runs(tmp_path)[1]) == []
    make_run(tmp_path, 'nanogpt_3L_s3', 1.51, n_layer=4)
    assert report.mixed_settings(finished_runs(tmp_path)[1]) == [
        '`n_layer`: 3 (nanogpt_3L_s1, nanogpt_3L_s2) / 4 (nanogpt_3L_s3)']


def test_a_corrupt_summary_is_named_without_a_traceback(tmp_path):
    make_run(tmp_path, 'nanogpt_3L_s1', 1.50)
    (tmp_path / 'nanogpt_3L_s1' / 'summary.json').write_text('{"config": ')
    p = script('report.py', tmp_path)
    assert p.returncode == 1, p.stderr
    one_line(p.stderr, tmp_path / 'nanogpt_3L_s1' / 'summary.json')


def test_a_plot_that_cannot_be_written_leaves_the_previous_one_whole(tmp_path):
    """report.py, analyze.py and needle_eval.py save their PNGs through save_figure: on a full disk it wrote into the
    file itself, leaving a truncated plot where a good one was. Now the previous file stays as it was."""
    from output import pyplot, save_figure
    plt, path = pyplot(), str(tmp_path / 'val_loss.png')
    fig = plt.figure()
    plt.plot([1, 2, 3])
    save_figure(fig, path)
    good = open(path, 'rb').read()
    assert good.startswith(b'\x89PNG')
    os.symlink('/dev/full', path + '.tmp')  # every write of the plot fails with ENOSPC
    fig = plt.figure()
    plt.plot([3, 2, 1])
    with pytest.raises(OSError):
        save_figure(fig, path)
    assert open(path, 'rb').read() == good and not os.path.lexists(path + '.tmp')
    assert fig.number not in plt.get_fignums()  # the figure was closed all the same


def test_a_corrupt_log_or_analysis_file_is_named_in_one_line(tmp_path):
    """A bad line in the middle of log.jsonl, or an analysis.json cut short, ended report.py in a traceback (the
    first with a good message inside it, the second without the file's name)."""
    make_run(str(tmp_path), 'nanogpt_3L_s1', 1.5)
    log = tmp_path / 'nanogpt_3L_s1' / 'log.jsonl'
    good = log.read_text()
    lines = good.splitlines(keepends=True)
    log.write_text(''.join(lines[:3] + ['{"iter": 30, "kind": \n'] + lines[3:]))
    p = script('report.py', tmp_path)
    assert p.returncode == 1, p.stderr
    one_line(p.stderr, f'{log}, line 4')
    log.write_text(good)
    (tmp_path / 'nanogpt_3L_s1' / 'analysis.json').write_text('{"iter": ')
    p = script('report.py', tmp_path)
    assert p.returncode == 1, p.stderr
    one_line(p.stderr, tmp_path / 'nanogpt_3L_s1' / 'analysis.json')


def test_a_table_of_runs_from_mixed_code_says_so(tmp_path):
    """train.py records the commit and whether the tree was dirty (summary.json's `code`): runs of one table made at
    two commits, or from an edited tree, are named at the top; runs older than the record, or all of one clean
    commit, raise nothing."""
    def code(root, name, commit, dirty):
        path = os.path.join(root, name, 'summary.json')
        s = json.load(open(path))
        s['code'] = dict(commit=commit, dirty=dirty)
        json.dump(s, open(path, 'w'))
    for i, v in enumerate(('nanogpt', 'diff', 'sym')):
        make_run(tmp_path, f'{v}_3L_s1', 1.5 + i / 10)
    assert report.mixed_code(finished_runs(tmp_path)[1]) == []  # no record: older runs
    for v in ('nanogpt', 'diff', 'sym'):
        code(tmp_path, f'{v}_3L_s1', 'a' * 40, False)
    assert report.mixed_code(finished_runs(tmp_path)[1]) == []
    code(tmp_path, 'sym_3L_s1', 'a' * 40, True)  # one commit, one run from an edited tree: not mixed code
    assert report.mixed_code(finished_runs(tmp_path)[1]) == ['a tree with uncommitted changes: sym_3L_s1']
    text = report.markdown(report.load_runs(tmp_path))
    assert 'Code: aaaaaaa (3 runs).' in text
    assert 'a tree with uncommitted changes: sym_3L_s1' in text.split('**Warning: uncommitted changes.**')[1]
    code(tmp_path, 'sym_3L_s1', 'b' * 40, True)
    warning = report.markdown(report.load_runs(tmp_path)).split('**Warning: mixed code.**')[1].split('\n## ')[0]
    assert 'commits aaaaaaa (diff_3L_s1, nanogpt_3L_s1) / bbbbbbb (sym_3L_s1)' in warning
    assert 'uncommitted changes: sym_3L_s1' in warning


def test_runs_of_other_machines_formats_or_superseded_numerics_are_named(tmp_path):
    """A cell or a comparison whose runs differ in processor, number format or numerics is named at the top of
    results.md: from summary.json's own `machine` and `dtype` where train.py wrote them, else from the sweep's
    backfilled provenance.json; a run that predates a NUMERICS commit in a config it changes is named as of
    superseded numerics (and no longer silently: the mixed-code warning fires on it)."""
    def edit(name, **kw):
        path = tmp_path / name / 'summary.json'
        s = json.loads(path.read_text())
        s.update(kw)
        path.write_text(json.dumps(s))
    for seed in (1, 2):
        for i, v in enumerate(('nanogpt', 'diff', 'sym', 'diff_sym')):
            make_run(tmp_path, f'{v}_3L_s{seed}', 1.5 + i / 10 + seed / 100)
    for name in os.listdir(tmp_path):
        edit(name, machine=dict(cpu=dict(name='AMD EPYC 7551', threads=2)), dtype='float32')  # hardware.machine()
    runs, ok = finished_runs(tmp_path)
    assert report.mixed_machines(runs) == [] and report.mixed_code(ok) == []  # one machine, one format
    edit('diff_sym_3L_s2', machine=dict(cpu=dict(name='AMD EPYC 7551', threads=2), gpu='NVIDIA H200',
                                        capability='9.0'), dtype='bfloat16')
    warning = report.markdown(report.load_runs(tmp_path)).split('mixed processors')[1].split('\n## ')[0]
    assert '- gpt+Diff+Sym 3L: float32 on AMD EPYC 7551, eager, 2 threads (s1); bfloat16 on NVIDIA H200, eager ' \
        '(s2)' in warning  # a GPU run's CPU threads do not compute its numbers
    assert 'gpt+Diff+Sym − gpt+Sym, 3L: A float32 on AMD EPYC 7551, eager, 2 threads; B float32 on AMD EPYC 7551, ' \
        'eager, 2 threads / bfloat16 on NVIDIA H200, eager' in warning
    assert all('gpt+Diff+Sym' in m for m in report.mixed_machines(report.load_runs(tmp_path)))  # its cell alone
    # the execution path and the thread count move numbers too; a run that does not record its threads is of its own
    edit('sym_3L_s1', compile=True)
    edit('nanogpt_3L_s2', machine=dict(cpu=dict(name='AMD EPYC 7551', threads=1)))
    edit('nanogpt_3L_s1', machine=dict(cpu=dict(name='AMD EPYC 7551')))
    warning = report.markdown(report.load_runs(tmp_path)).split('mixed processors')[1].split('\n## ')[0]
    assert '- gpt+Sym 3L: float32 on AMD EPYC 7551, compiled, 2 threads (s1); float32 on AMD EPYC 7551, eager, ' \
        '2 threads (s2)' in warning
    assert '- nanogpt 3L: float32 on AMD EPYC 7551, eager, threads unknown, each run alike to no other (s1); float32 ' \
        'on AMD EPYC 7551, eager, 1 thread (s2)' in warning
    # runs older than that record: the backfilled file, and the numerics it marks
    (tmp_path / 'provenance.json').write_text(json.dumps({
        'diff_3L_s1': dict(backfilled=True, machine='AMD EPYC Genoa', dtype='bfloat16', predates=['8b66842'],
                           trained_at=None)}))
    for name in os.listdir(tmp_path):
        if name != 'provenance.json':
            edit(name, machine=None, dtype='bfloat16')
    text = report.markdown(report.load_runs(tmp_path))
    assert 'trained before 8b66842' in text.split('mixed code')[1] and 'superseded numerics: diff_3L_s1' in text
    # the backfilled entry's processor comes from the pages' text, and says so
    assert '- gpt+Diff 3L: bfloat16 on AMD EPYC Genoa (*inferred*), eager, threads unknown, before 8b66842, each run ' \
        'alike to no other (s1); bfloat16 on unknown, eager, threads unknown, each run alike to no other (s2)' in text
    assert 'Code: not recorded (8 runs).' in text
    # a run with its own record: superseded where its commit predates the rule in a config the rule changes
    assert report.NUMERICS[0][3](dict(attn='diff', leak='zero_future', dropout=0.2))
    assert not report.NUMERICS[0][3](dict(attn='diff', leak='none', dropout=0.2))  # the fused path: always the rule
    assert not report.NUMERICS[0][3](dict(attn='diff', leak='zero_future', dropout=0.0))  # nothing to drop


def test_claims_pages_are_what_claims_py_renders():
    """results/claims.md and README's "What we found" block are rendered from claims.py's TESTS and the committed runs:
    a hand edit of a number or a verdict in either fails here (python evidence/claims.py renders them again)."""
    import claims
    claims._RUNS.clear()
    md, readme = claims.render()
    assert open(claims.CLAIMS_MD).read() == md, 'results/claims.md is not what claims.py renders'
    assert open(claims.README_MD).read() == readme, "README.md's \"What we found\" is not what claims.py renders"


def synthetic_row(diffs, predicts='<0', metric='val', claim=2, **kw):
    """A measured row as claims.measure leaves it, on differences B - A by seed (A = 0), one homogeneous group."""
    import claims
    seeds = list(range(1, len(diffs) + 1))
    r = dict(missing=False, superseded=[], seeds=seeds, dropped=[], on=['x'], counts=[],
             test=claims.Test(claim, 'results/<x>', '3L', 'sym', 'diff_sym', metric, predicts))
    if len(diffs) >= 2:
        r['stat'] = report.paired_t({s: 0.0 for s in seeds}, dict(zip(seeds, diffs)))
        r['groups'] = [dict(label='x', seeds=seeds, homogeneous=True, stat=r['stat'])]
    r.update(kw)
    return r


@pytest.fixture
def family(monkeypatch):
    """register(*rows): the rows, numbered by claim, are their claims' Holm families (claims.FAMILIES for this
    test alone), then corrected."""
    import claims
    fams, of = {}, {}
    monkeypatch.setattr(claims, 'FAMILIES', fams)
    monkeypatch.setattr(claims, 'FAMILY_OF', of)

    def register(*rows):
        fams.clear()
        of.clear()
        for r in rows:
            name = str(r['test'].claim)
            r['id'] = f"{name}.{len(fams.get(name, ())) + 1}"
            fams[name] = fams.get(name, ()) + (r['id'],)
            of[r['id']] = name
        claims.correct(list(rows))
        return rows
    return register


def test_claims_verdict_rule(family):
    """The rule on synthetic rows: the interval decides only with 3+ paired seeds of current numerics; seeds without
    the precondition are dropped, not counted; an absent folder or a run of superseded numerics is not measured."""
    import claims

    def called(*rows):
        return [claims.verdict(r) for r in family(*rows)]
    assert called(synthetic_row([-0.1, -0.12, -0.11])) == ['supported']
    assert called(synthetic_row([0.1, 0.12, 0.11])) == ['contradicted']
    assert called(synthetic_row([-0.1, 0.12, 0.01])) == ['within noise']
    assert called(synthetic_row([-0.1, -0.11])) == ['too few seeds']  # even where the interval excludes 0
    assert called(synthetic_row([-0.1, -0.12, -0.11], '')) == ['B lower']
    assert called(synthetic_row([-0.1, -0.12, -0.11], superseded=['8b66842']))[0].startswith('not measured')
    assert called(synthetic_row([], seeds=[])) == ['not shown (precondition absent)']
    # an absent folder renders as not measured instead of failing
    r = claims.measure(claims.Test(2, 'results/<an absent sweep>', '3L', 'sym', 'diff_sym', 'val', '<0'))
    assert r['missing'] and claims.verdict(r) == 'not measured'
    assert claims.row_cells(r, [])[-1] == '**not measured**'
    # the precondition drops the baseline's seeds without a sink: on the committed Bigram-Backcopy runs, seed 2's
    # layer 2 has first-token attention below 0.3
    r = claims.measure(claims.Test(5, 'results/bigram_backcopy_sink', '2L', 'bb_nanogpt', 'bb_softmax1',
                                   'first_token_L2', '<0', 'sink_L2', halves=True))
    assert r['dropped'] == [2] and r['seeds'] == [1, 3, 4, 5]
    assert all(r['a'][s] > claims.SINK for s in r['seeds']) and r['a'][2] <= claims.SINK


def test_holm_on_known_values():
    """Holm's step-down: sorted p 0.005, 0.01, 0.03, 0.04 of m = 4 become 4 x 0.005, 3 x 0.01, 2 x 0.03 and
    max(0.06, 1 x 0.04), each returned in its own place; capped at 1; one test is its own p."""
    import claims
    assert claims.holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert claims.holm([0.5, 0.4]) == pytest.approx([0.8, 0.8]) and claims.holm([0.9, 0.6]) == [1.0, 1.0]
    assert claims.holm([0.03]) == [0.03]


def test_holm_makes_a_claims_rows_one_family(family):
    """Two rows of one claim, each p = 0.03 alone: uncorrected both would be called; Holm over the two gives 0.06 and
    neither is, and the verdict says which it used and what the uncorrected call was. A row of another claim is of
    another family."""
    import claims
    sd = 0.1 / (float(report.stats.t.ppf(1 - 0.03 / 2, 4)) / math.sqrt(5))  # the sd that gives p = 0.03
    diffs = [-0.1 + sd * z for z in (-1.2649, -0.6325, 0, 0.6325, 1.2649)]  # sample sd of these z is 1
    assert report.paired_t({i: 0 for i in range(5)}, dict(enumerate(diffs)))['p'] == pytest.approx(0.03, 1e-3)
    one, two, other = family(synthetic_row(diffs), synthetic_row(diffs), synthetic_row(diffs, claim=3))
    assert one['adj']['p'] == pytest.approx(0.06, 1e-3) and one['adj']['m'] == 2
    assert claims.verdict(one) == 'within noise' and claims.verdict(other) == 'supported'
    assert claims.method(one) == 'Holm, m = 2; uncorrected: supported'
    assert claims.method(other) == 'Holm, m = 1'


def test_tost_is_the_90_percent_interval_inside_the_margin():
    """Two one-sided tests: p < 0.05 exactly where the 90% interval d +- t(0.95, n-1) se lies inside (-m, m); the
    p is the larger one-sided tail, computed here in closed form for a case by hand."""
    import claims
    m = 0.01
    for d in (-0.012, -0.008, -0.004, 0.0, 0.003, 0.0075, 0.009, 0.02):
        for sd in (0.001, 0.003, 0.01):
            st = dict(diff=d, sd=sd, n=5)
            half = report.stats.t.ppf(0.95, 4) * sd / math.sqrt(5)
            inside = -m < d - half and d + half < m
            assert (claims.tost(st, m) < 0.05) == inside, (d, sd)
    se = 0.003 / math.sqrt(5)
    assert claims.tost(dict(diff=0.002, sd=0.003, n=5), m) == pytest.approx(
        report.stats.t.cdf((0.002 - m) / se, 4), rel=1e-12)


def test_a_parity_claim_renders_equivalent_worse_better_or_inconclusive(family):
    """Claim 1 ('='): equivalent within the margin where TOST says so; else worse / better where B - A excludes 0;
    else inconclusive (a small, noisy study cannot tell equal from unmeasured)."""
    import claims

    def call(diffs):
        r, = family(synthetic_row(diffs, '=', claim=1))
        return claims.verdict(r)
    assert call([0.001, -0.001, 0.0005, 0.0, -0.0005]) == f"equivalent within ±{claims.MARGIN['val']}"
    assert call([0.17, 0.18, 0.19]) == 'worse'  # Diff's loss clearly higher: not "supported"
    assert call([-0.17, -0.18, -0.19]) == 'better'
    assert call([0.05, -0.04, 0.01]) == 'inconclusive'
    r, = family(synthetic_row([0.17, 0.18, 0.19], '=', claim=1))  # the verdict names its test and correction
    assert claims.method(r) == f"TOST within ±{claims.MARGIN['val']}, Holm, m = 1"
    assert claims.verdict_cell(r) == f"**worse** (TOST within ±{claims.MARGIN['val']}, Holm, m = 1)"


def test_a_row_pools_the_seeds_of_several_folders_and_refuses_a_seed_twice(tmp_path, family):
    """A sweep continued in a folder of its own (seeds 6-10 on another machine) is pooled with the first by seed: the
    row's paired seeds are both folders' together; a folder not committed yet adds nothing; a seed in two folders
    would be counted twice and is refused."""
    import claims
    claims._RUNS.clear()

    def runs(folder, seeds, gap):
        for v, base in (('sym', 2.0), ('diff_sym', 2.0 + gap)):
            for s in seeds:
                d = tmp_path / folder / f'{v}_3L_s{s}'
                d.mkdir(parents=True)
                (d / 'summary.json').write_text(json.dumps(dict(
                    config=dict(seed=s, max_iters=10, dropout=0.0), final_val_loss=base + 0.01 * s, device='cpu',
                    machine=EPYC, dtype='float32', compile=False, code=dict(commit='abc1234', dirty=False))))
        return str(tmp_path / folder)
    first, more = runs('a', [1, 2], -0.1), runs('b', [6], -0.12)
    r, = family(claims.measure(claims.Test(2, (first, more, str(tmp_path / 'absent')), '3L', 'sym', 'diff_sym',
                                           'val', '<0')))
    assert r['seeds'] == [1, 2, 6] and r['b'][6] - r['a'][6] == pytest.approx(-0.12)
    assert claims.verdict(r) == 'supported' and '`a` + `b` + `absent` 3L' in claims.setting(r['test'])
    twice = runs('c', [2], -0.1)
    with pytest.raises(SystemExit, match='seed 2 of (diff_)?sym 3L is in two of'):
        claims.runs_of((first, twice))


def test_machine_label_reads_what_train_py_records():
    """summary.json's `machine` is hardware.machine(): the GPU's name on CUDA, else the CPU's name with its family and
    model (an "AMD EPYC" alone does not say whether it has bf16 units)."""
    import hardware
    here = hardware.machine('cpu')
    known = report.CPU_NAMES.get((here['cpu']['vendor'], here['cpu']['family'], here['cpu']['model']))
    assert report.machine_label(here) == known or report.machine_label(here).startswith(here['cpu']['name'] or
                                                                                       'unknown CPU')
    # one processor, one label: the family-25 model-1 EPYC that summary.json records is the pages' "AMD EPYC Milan"
    milan = dict(name='AMD EPYC', vendor='AuthenticAMD', family='25', model='1')
    assert report.machine_label(dict(cpu=milan)) == 'AMD EPYC Milan'
    other = dict(name='AMD EPYC', vendor='AuthenticAMD', family='25', model='99')
    assert report.machine_label(dict(cpu=other)) == 'AMD EPYC (family 25, model 99)'
    assert report.machine_label(dict(cpu=milan, gpu='NVIDIA H200')) == 'NVIDIA H200'


def summaries(root, variant, vals, depth='3L', **fields):
    """Finished runs of one variant, {seed: val loss}, with summary.json fields (machine, dtype, compile, ...)."""
    for seed, val in vals.items():
        d = root / f'{variant}_{depth}_s{seed}'
        d.mkdir(parents=True)
        (d / 'summary.json').write_text(json.dumps(dict(config=dict(seed=seed, max_iters=10, dropout=0.0,
                                                                    dataset='shakespeare_char'),
                                                        final_val_loss=val, device='cpu',
                                                        **dict(dict(code=dict(commit='abc1234', dirty=False)),
                                                               **fields))))


EPYC = dict(cpu=dict(name='AMD EPYC', vendor='AuthenticAMD', family='25', model='1', threads=2))


def test_one_processor_has_one_label_whether_recorded_or_backfilled(tmp_path):
    """summary.json's record of a family-25 model-1 EPYC and a backfilled entry naming "AMD EPYC Milan" are one
    processor; with the same format, path and threads they are one homogeneous group."""
    summaries(tmp_path, 'sym', {1: 2.0}, machine=EPYC, dtype='float32', compile=False)
    summaries(tmp_path, 'sym', {2: 2.0}, dtype='float32', compile=False)
    (tmp_path / 'provenance.json').write_text(json.dumps({'sym_3L_s2': dict(
        backfilled=True, machine='AMD EPYC Milan', dtype='float32', predates=[], trained_at='abc1234')}))
    ok = report.finished(report.load_runs(tmp_path)[('sym', '3L')])
    assert [report.provenance(s)['machine'] for s in ok] == ['AMD EPYC Milan', 'AMD EPYC Milan']
    assert report.computed_on(ok[0]) == 'float32 on AMD EPYC Milan, eager, 2 threads'
    assert report.computed_on(ok[1]) == 'float32 on AMD EPYC Milan, eager, threads unknown'  # unknown: its own


def test_code_era_is_part_of_what_a_run_was_computed_on(tmp_path):
    """A run in a config a NUMERICS commit changes is of that commit's era: before it (superseded), or unknown where
    no commit is recorded to tell; a run the commit does not touch has no era to state."""
    leak = dict(attn='diff', leak='zero_future', dropout=0.2)
    summaries(tmp_path, 'diff', {1: 2.0, 2: 2.0, 3: 2.0}, machine=EPYC, dtype='float32', compile=False)
    for seed, cfg in ((1, leak), (2, leak), (3, dict(leak, dropout=0.0))):
        path = tmp_path / f'diff_3L_s{seed}' / 'summary.json'
        s = json.loads(path.read_text())
        s['config'].update(cfg)
        path.write_text(json.dumps(s))
    (tmp_path / 'provenance.json').write_text(json.dumps({'diff_3L_s1': dict(predates=['8b66842'])}))
    ok = report.finished(report.load_runs(tmp_path)[('diff', '3L')])
    assert [report.computed_on(s).split('2 threads')[1] for s in ok] == [', before 8b66842',
                                                                          ', era of 8b66842 unknown', '']


def test_mixed_fires_on_each_of_processor_format_era_path_and_threads(tmp_path):
    """Runs alike but in one of the five (processor, number format, code era, execution path, thread count) are two
    groups, whichever it is; alike in all five, one."""
    base = dict(machine=EPYC, dtype='float32', compile=False, cuda_graph=False)
    other_cpu = dict(EPYC['cpu'], model='17')
    changes = dict(processor=dict(machine=dict(cpu=other_cpu)), format=dict(dtype='bfloat16'),
                   path=dict(compile=True), threads=dict(machine=dict(cpu=dict(EPYC['cpu'], threads=1))), era=None,
                   none={})
    for what, change in changes.items():
        root = tmp_path / what
        summaries(root, 'diff', {1: 2.0}, **base)
        summaries(root, 'diff', {2: 2.0}, **dict(base, **(change or {})))
        if change is None:  # the second run predates a NUMERICS commit that changes its config
            (root / 'provenance.json').write_text(json.dumps({'diff_3L_s2': dict(predates=['8b66842'])}))
        groups = report.homogeneous(report.finished(report.load_runs(root)[('diff', '3L')]))
        assert len(groups) == (1 if what == 'none' else 2), (what, list(groups))


def test_a_mixed_row_shows_each_group_and_is_called_only_where_they_agree(tmp_path, family):
    """Seeds 1-3 of one machine, path and format, seeds 4-5 of another: each group gets its own interval beside the
    pooled one; where the groups' differences have one sign the pooled verdict stands (marked mixed), where not the
    row renders 'groups disagree' and no verdict."""
    import claims
    claims._RUNS.clear()
    genoa = dict(machine=dict(cpu=dict(vendor='AuthenticAMD', family='25', model='17', threads=2)),
                 dtype='bfloat16', compile=False)
    milan = dict(machine=EPYC, dtype='float32', compile=False)
    for folder, late in (('agree', -0.30), ('disagree', +0.30)):
        summaries(tmp_path / folder, 'sym', {1: 2.0, 2: 2.1, 3: 2.2}, **genoa)
        summaries(tmp_path / folder, 'diff_sym', {1: 1.9, 2: 1.99, 3: 2.11}, **genoa)
        summaries(tmp_path / folder, 'sym', {4: 2.0, 5: 2.1}, **milan)
        summaries(tmp_path / folder, 'diff_sym', {4: 2.0 + late, 5: 2.1 + late + 0.01}, **milan)
    rows = [claims.measure(claims.Test(2, str(tmp_path / f), '3L', 'sym', 'diff_sym', 'val', '<0'))
            for f in ('agree', 'disagree')]
    agree, disagree = family(*rows)
    assert [g['seeds'] for g in agree['groups']] == [[1, 2, 3], [4, 5]]
    assert agree['groups'][0]['label'] == 'bfloat16 on AMD EPYC Genoa, eager, 2 threads'
    assert agree['groups'][1]['label'] == 'float32 on AMD EPYC Milan, eager, 2 threads'
    assert agree['groups'][0]['stat']['diff'] == pytest.approx(-0.1)  # its own paired t, not the pooled -0.178
    names = []
    cells = claims.row_cells(agree, names)
    assert cells[3].startswith(claims.gap(agree, '{:.3f}') + '; (a) -0.100 [') and '; (b) -0.295 [' in cells[3]
    assert cells[6] == '*mixed*: (a) seeds 1, 2, 3; (b) seeds 4, 5' and names[0] == agree['groups'][0]['label']
    assert claims.verdict(agree) == 'supported'
    assert claims.verdict(disagree) == 'groups disagree' and not claims.method(disagree)


def test_the_highest_of_five_reads_its_runs_under_the_rows_checks(tmp_path):
    """The count reads the seed's five variants, not only A and B: a superseded run among them leaves it uncounted,
    a seed whose five runs are not one group is not counted (its baseline on another format would decide which is
    highest), and seeds of different groups are counted by group."""
    import claims
    claims._RUNS.clear()
    five = dict(nanogpt=1.9, diff=1.95, sym=2.0, diff_sym=2.1, norm_sym=2.3)
    same = dict(machine=EPYC, dtype='float32', compile=False)
    for v, val in five.items():
        summaries(tmp_path / 'a', v, {1: val, 2: val + 0.01, 3: val - 0.01}, **same)
    t = claims.Test(3, str(tmp_path / 'a'), '3L', 'sym', 'norm_sym', 'val', '>0', worst=True)
    assert claims.measure(t)['counts'][-1] == "highest of the seed's five in 3 of 3"
    # seed 3's baseline on another machine: that seed's five are mixed, and counted apart
    s = json.loads((tmp_path / 'a' / 'nanogpt_3L_s3' / 'summary.json').read_text())
    s.update(dtype='bfloat16')
    (tmp_path / 'a' / 'nanogpt_3L_s3' / 'summary.json').write_text(json.dumps(s))
    claims._RUNS.clear()
    assert claims.measure(t)['counts'][-1] == "highest of the seed's five in 2 of 2; seed 3 not counted (five runs " \
        "*mixed*)"
    # seed 3's five all on that format: one group a seed, counted by group
    for v in five:
        path = tmp_path / 'a' / f'{v}_3L_s3' / 'summary.json'
        path.write_text(json.dumps(dict(json.loads(path.read_text()), dtype='bfloat16')))
    claims._RUNS.clear()
    assert claims.measure(t)['counts'][-1] == ("highest of the seed's five (*mixed*): 2 of 2 on float32 on AMD EPYC "
                                               "Milan, eager, 2 threads; 1 of 1 on bfloat16 on AMD EPYC Milan, eager, "
                                               "2 threads")
    # a Diff run of superseded numerics among the five: the count is not made, though A and B are current
    (tmp_path / 'a' / 'provenance.json').write_text(json.dumps({'diff_3L_s2': dict(predates=['8b66842'])}))
    claims._RUNS.clear()
    r = claims.measure(t)
    assert r['counts'][-1] == "highest of the seed's five: not counted (runs before 8b66842)" and not r['superseded']


def test_a_selecting_row_is_followed_by_its_unselected_twin(tmp_path, monkeypatch):
    """A row that drops seeds by a precondition is followed by the same comparison over every seed, shown and not
    called; where a row of TESTS is that comparison already, no twin is added and the selecting row names it."""
    from test_claims import rows as measured
    for s, (a, b) in enumerate([(2.0, 1.9), (1.9, 1.85), (2.1, 1.95), (1.7, 1.75)], 1):
        summaries(tmp_path, 'sym', {s: a})
        summaries(tmp_path, 'diff_sym', {s: b})
    monkeypatch.setitem(claims_module().NEEDS, 'high', ('a loss above 1.8', 'summary.json',
                                                        lambda s: s['final_val_loss'] > 1.8))
    claims = claims_module()
    selected = claims.Test(2, str(tmp_path), '3L', 'sym', 'diff_sym', 'val', '<0', 'high')
    rows = measured(monkeypatch, [selected])
    assert [r['test'] for r in rows] == [selected, claims.replace(selected, needs='')]
    assert rows[0]['seeds'] == [1, 2, 3] and rows[1]['seeds'] == [1, 2, 3, 4] and rows[1]['twin_of'] is rows[0]
    assert claims.verdict(rows[1]) == 'not called (the unselected twin)' and rows[1]['twin_of'] is rows[0]
    assert [claims.number(r) for r in rows] == ['2.1', '2.1, unselected']
    rows = measured(monkeypatch, [claims.replace(selected, needs=''), selected])  # the twin is a row already
    assert len(rows) == 2 and [claims.number(r) for r in rows] == ['2.1', '2.2 (its unselected twin: 2.1)']
    assert claims.twin(claims.replace(selected, metric='first_token_L1'), dict(dropped=[])).metric == 'first_token'


def claims_module():
    import claims
    return claims


def test_readme_shows_one_row_per_claim_by_the_rule(tmp_path, monkeypatch):
    """README's findings: one row per claim, the one the rule picks (a decided row on one homogeneous group of 3
    seeds over a mixed one), in plain words, with a command that runs both arms; a claim whose folder is not
    committed is "not measured yet"."""
    from test_claims import rows as measured
    claims = claims_module()
    genoa = dict(machine=dict(cpu=dict(vendor='AuthenticAMD', family='25', model='17', threads=2)),
                 dtype='bfloat16', compile=False)
    summaries(tmp_path / 'one', 'sym', {1: 2.0, 2: 2.1, 3: 2.2}, **genoa)
    summaries(tmp_path / 'one', 'diff_sym', {1: 2.05, 2: 2.16, 3: 2.24}, **genoa)
    summaries(tmp_path / 'two', 'sym', {1: 2.0, 2: 2.1}, **genoa)
    summaries(tmp_path / 'two', 'sym', {3: 2.2, 4: 2.3}, machine=EPYC, dtype='float32', compile=False)
    summaries(tmp_path / 'two', 'diff_sym', {1: 2.05, 2: 2.16}, **genoa)
    summaries(tmp_path / 'two', 'diff_sym', {3: 2.24, 4: 2.4}, machine=EPYC, dtype='float32', compile=False)
    tests = [claims.Test(2, str(tmp_path / f), '3L', 'sym', 'diff_sym', 'val', '<0') for f in ('two', 'one')]
    results = measured(monkeypatch, tests + [claims.Test(3, str(tmp_path / 'none'), '3L', 'sym', 'norm_sym', 'val',
                                                         '>0')])
    strength, row = claims.readme_row(2, results)
    two = cells(row)
    assert two[0] == claims.CLAIMS[2][0] and two[3].startswith('`one` 3L') and two[2].endswith('n = 3')
    assert two[1] == f"**{claims.PLAIN['contradicted'][1]}**" and strength == claims.PLAIN['contradicted'][0]
    assert 'VARIANTS="sym diff_sym"' in two[4] and 'SEEDS="1 2 3"' in two[4]
    _, row = claims.readme_row(3, results)
    assert cells(row)[1] == f"**{claims.PLAIN['not measured'][1]}**" and cells(row)[4] == '—'


def test_mixed_cells_show_each_group_in_every_table_that_pools(tmp_path):
    """One rule, one code path: a cell whose seeds ran on two machines is *mixed* in --across (report.across_table),
    each group's mean beside the pooled one, numbered in a legend."""
    genoa = dict(machine=dict(cpu=dict(vendor='AuthenticAMD', family='25', model='17', threads=2)),
                 dtype='bfloat16', compile=False)
    milan = dict(machine=EPYC, dtype='float32', compile=False)
    summaries(tmp_path, 'nanogpt', {1: 2.0, 2: 2.1}, **genoa)
    summaries(tmp_path, 'nanogpt', {3: 2.4}, **milan)
    across = report.across_table([str(tmp_path)]).splitlines()
    genoa_label = 'bfloat16 on AMD EPYC Genoa, eager, 2 threads'
    milan_label = 'float32 on AMD EPYC Milan, eager, 2 threads'
    assert cells(across[2])[1] == '? / 2.17 ± 0.21 (n=3) *mixed*: G1 ? / 2.05 ± 0.07 (n=2); G2 ? / 2.40'
    assert across[-1] == f'*mixed* groups: G1 = {genoa_label}; G2 = {milan_label}.'


def test_a_committed_fill_moves_its_rows(tmp_path, monkeypatch):
    """A row of a folder FILLS makes is not measured and waits on its line until the folder's runs are there; then
    the same row renders their verdict and waits on nothing."""
    from test_claims import rows as measured
    claims = claims_module()
    monkeypatch.setattr(claims, 'HERE', str(tmp_path))
    t = claims.Test(2, claims.GPU_DROP[''], '3L', 'sym', 'diff_sym', 'val', '<0')
    r, = measured(monkeypatch, [t])
    assert r['missing'] and claims.waits(r) and claims.fill_command(r).startswith(
        'SWEEP=shakespeare_cpu_long_dropout0.2_gpu PROFILE=cpu_long VARIANTS="sym diff_sym" SEEDS="1 2 3"')
    h200 = dict(machine=dict(cpu=EPYC['cpu'], gpu='NVIDIA H200'), dtype='bfloat16', compile=False, cuda_graph=True)
    folder = tmp_path / claims.GPU_DROP['']
    summaries(folder, 'sym', {1: 2.30, 2: 2.32, 3: 2.31}, **h200)
    summaries(folder, 'diff_sym', {1: 2.20, 2: 2.21, 3: 2.22}, **h200)
    claims._RUNS.clear()
    r, = measured(monkeypatch, [t])
    assert r['seeds'] == [1, 2, 3] and claims.verdict(r) == 'supported' and not claims.waits(r)
    assert claims.computed_cell(r, []) == '(a)'
    claims._RUNS.clear()


def test_backfilled_threads_and_the_pages_commits(tmp_path):
    """A backfilled entry's thread count (a page's OMP_NUM_THREADS=1) is part of what the run was computed on, and
    the pages say it, *inferred* wherever it shows. The committed provenance.json of the sink
    and needle sweeps is what evidence/backfill_provenance.py writes: trained at the commits their pages name."""
    summaries(tmp_path, 'sym', {1: 2.0, 2: 2.0}, dtype='bfloat16', compile=False)
    entry = dict(backfilled=True, machine='AMD EPYC Genoa', dtype='bfloat16', predates=[])
    (tmp_path / 'provenance.json').write_text(json.dumps({'sym_3L_s1': dict(entry, trained_at='9d624ed', threads=1),
                                                          'sym_3L_s2': dict(entry, trained_at=None)}))
    one, two = report.finished(report.load_runs(tmp_path)[('sym', '3L')])
    assert report.group_label([one]) == 'bfloat16 on AMD EPYC Genoa (*inferred*), eager, 1 thread (*inferred*)'
    assert report.computed_on(two, mark=True) == 'bfloat16 on AMD EPYC Genoa (*inferred*), eager, threads unknown'
    sys.path.insert(0, os.path.join(ROOT, 'evidence'))
    import backfill_provenance
    for sweep, commit in (('bigram_backcopy_sink', '9d624ed'), ('needle_distractors_retrieval', '9516892')):
        committed = report.read_provenance(os.path.join(ROOT, 'results', sweep))
        run = sorted(committed)[0]
        assert committed[run]['trained_at'] == commit and committed[run]['threads'] == 1
        assert backfill_provenance.entry(sweep, os.path.join(ROOT, 'results', sweep, run, 'summary.json')) \
            == committed[run], f'results/{sweep}/provenance.json is not what evidence/backfill_provenance.py writes'


def test_command_names_the_profile_and_what_the_runs_changed(tmp_path):
    """results.md's command: the profile whose schedule the runs' configs match (here cpu_long), their variants and
    seeds, and the flags they changed (dropout 0.2) with SWEEP where ablate.sh would name the folder otherwise."""
    for s in (1, 2):
        make_run(tmp_path / 'a', f'nanogpt_3L_s{s}', 1.5)
        make_run(tmp_path / 'a', f'diff_3L_s{s}', 1.4)
        make_run(tmp_path / 'b', f'sym_3L_s{s}', 1.5, dropout=0.2, leak='zero_future', causal=False)
    ok = [s for c in report.load_runs(tmp_path / 'a').values() for s in c['ok']]
    assert report.command(ok, 'shakespeare_cpu_long') == 'PROFILE=cpu_long VARIANTS="nanogpt diff" SEEDS="1 2" ' \
        './ablate.sh'
    text = report.render(str(tmp_path / 'b'))
    assert 'Command: `SWEEP=b PROFILE=cpu_long LEAK=zero_future VARIANTS="sym" SEEDS="1 2" ./ablate.sh ' \
        '--dropout=0.2`.' in text
    assert 'Code: not recorded (2 runs).' in text and 'Computed on: bfloat16 on AMD EPYC Genoa, eager, 2 threads ' \
        '(2 runs).' in text


def test_runs_table_tokens_per_second_of_a_one_window_run(tmp_path):
    """A run of one log window has no tokens/s in summary.json (the first window is warm-up, left out): the table
    gives the window's own rate from log.jsonl, marked, instead of an empty cell."""
    make_run(tmp_path, 'nanogpt_3L_s1', 1.5)
    path = tmp_path / 'nanogpt_3L_s1'
    s = json.loads((path / 'summary.json').read_text())
    (path / 'summary.json').write_text(json.dumps(dict(s, tokens_per_sec=None)))
    with open(path / 'log.jsonl', 'a') as f:
        f.write(json.dumps(dict(iter=10, kind='train', loss=3.0, tokens_per_sec=10336.0)) + '\n')
    row = next(l for l in section(report.render(str(tmp_path)), 'Runs').splitlines() if l.startswith('| nano'))
    assert cells(row)[3:5] == ['10,336 (warm-up)', '400']


def test_every_function_of_the_renderers_is_within_80_lines():
    import ast
    for name in ('report.py', 'evidence/claims.py'):
        tree = ast.parse(open(os.path.join(ROOT, name)).read())
        long = [f'{n.name} ({n.end_lineno - n.lineno + 1} lines)' for n in ast.walk(tree)
                if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.end_lineno - n.lineno + 1 > 80]
        assert not long, f'{name}: {long}'


def test_a_bold_marks_the_lowest_of_two_or_more_never_a_lone_value(tmp_path):
    """The loss tables bold the lowest val loss of a row only where the row has two or more values: a lone value
    (an "Other variants" row of one) is the lowest of nothing."""
    make_run(tmp_path, 'nanogpt_3L_s1', 1.5)
    make_run(tmp_path, 'diff_3L_s1', 1.4)
    make_run(tmp_path, 'gated_3L_s1', 1.6)
    runs = report.load_runs(tmp_path)
    two = report.loss_table(runs, ['nanogpt', 'diff']).splitlines()[-1]
    assert cells(two)[2].startswith('**') and not cells(two)[1].startswith('**')
    assert cells(report.loss_table(runs, ['gated']).splitlines()[-1])[1] == '1.59/1.60'  # plain


def test_the_lambda_plot_uses_every_logged_lambda(tmp_path):
    """λ_full's curve reads every line of log.jsonl that logs it (train lines every 10 iterations), not the
    evaluations alone."""
    make_run(tmp_path, 'diff_3L_s1', 1.4, lambdas=(0.5,))
    path = tmp_path / 'diff_3L_s1' / 'log.jsonl'
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    for e in lines:
        if e['kind'] == 'train':
            e['lambda/L1/full'] = 0.001 * e['iter']
    path.write_text(''.join(json.dumps(e) + '\n' for e in lines))
    curve = report.plot_data(report.load_runs(tmp_path))['lambda_full.png'][('diff', '3L')][1]
    assert curve[0] == sorted({e['iter'] for e in lines})  # every logged iteration, train and eval
    assert curve[1][curve[0].index(250)] == pytest.approx(0.25)
