"""
The seed notes' claims as data, one verdict rule, and the two pages rendered from them and the committed runs:
results/claims.md (whole) and README's "What we found" (between its findings markers).

  python claims.py            # renders both from the runs under results/
  python claims.py --check    # exit 1, naming the file, where either differs from its render (tests do the same)

A claim is tested by rows of TESTS: which runs it reads (a results folder, reference A and variant B as sweep.py
names them, a depth), what it measures (METRICS), which sign of B - A it predicts, and the precondition (NEEDS) that
makes the phenomenon present in a seed, checked on A's run of that seed: a seed without it is dropped, not counted.
Pointing a row at a rerun is a change of its folder. A folder or a cell not committed renders as not measured.
"""
import argparse
import os
import statistics
import sys
from dataclasses import dataclass

import report
from report import NAMES, NUMERICS, compare, finished, load_runs, provenance, run_file
from sweep import VARIANTS

HERE = os.path.dirname(os.path.abspath(__file__))
CLAIMS_MD = os.path.join(HERE, 'results', 'claims.md')
README_MD = os.path.join(HERE, 'README.md')
START, END = '<!-- findings:start -->', '<!-- findings:end -->'

# ----------------------------------------------------------------------------- the claims

# the seed notes' claims (docs/seed_notes.md): number -> (the statement, the seed's own number, published elsewhere,
# from docs/anchors.md)
CLAIMS = {
    1: ('Diff does not help the asymmetric baseline (001)', '3L 0.69 vs 0.69; 6L 0.08 vs 0.09; 8L 0.11 vs 0.08',
        'Diff paper 1.4B: 3.087 → 3.062; diff-mlx 30M, 4 paired seeds: −0.016 ± 0.023'),
    2: ('Diff rescues Sym (001)', '3L Sym 0.84 → Diff+Sym 0.69; 6L 0.22 → 0.10',
        'none found for K = Q in a causal LM'),
    3: ('Norm+Sym is the worst (001)', '3L 1.1; 6L 0.77 (others 0.08-0.22)', '—'),
    4: ("Diff+Sym's λ_full is closer to 1 than Diff's (001)",
        '6L Diff 0.30-0.78; Diff+Sym 0.53-0.95', 'microsoft/unilm 1699: most layers ≈ 0.8, first layers 0.2-0.4'),
    5: ('Softmax-1 (and OrthoAdam) remove the first-token sink and the outliers (002)',
        'first-token attention 65% → 3.3%; kurtosis 1657 → 3.1', 'Kaul et al. 2025 (GPT-2, Llama-2 sizes)'),
    6: ('The gate removes the sink (004)', 'first-token attention 46.7% → 4.8%',
        'Qiu et al. 2025 (third-party summary)'),
    7: ('Diff retrieves needles better, with less attention noise (000, 003)', 'qualitative',
        'Diff paper: multi-needle gains at 4K-64K context'),
}

# the measures: name -> (what it is, the run file it reads, how, format)
LAYER = lambda i: lambda a: a['layers'][i]['first_token_attention']  # noqa: E731
METRICS = dict(
    val=('final val loss', 'summary.json', lambda s: s['final_val_loss'], '{:.3f}'),
    lambda_dist=('mean over layers of \\|1 − λ_full\\|', 'summary.json',
                 lambda s: statistics.mean(abs(1 - x['lambda_full']) for x in s['lambda_table']), '{:.3f}'),
    first_token=('first-token attention', 'analysis.json', lambda a: a['overall']['first_token_attention'],
                 '{:.3f}'),
    first_token_L1=('first-token attention, layer 1', 'analysis.json', LAYER(0), '{:.3f}'),
    first_token_L2=('first-token attention, layer 2', 'analysis.json', LAYER(1), '{:.3f}'),
    kurtosis=('kurtosis of the hidden states', 'analysis.json', lambda a: a['overall']['kurtosis_rest'], '{:.2f}'),
    needle_acc=('first-query accuracy, mean over needle counts', 'needle_eval.json',
                lambda f: statistics.mean(c['accuracy'] for c in f['by_needles'].values()), '{:.3f}'),
    unrelated_share=("share of \\|w\\| on tokens that do not hold the key", 'needle_eval.json',
                     lambda f: statistics.mean(c['unrelated_share'] for c in f['by_needles'].values()), '{:.3f}'),
)

# Preconditions, on A's run of a seed: name -> (the phenomenon, the file, the test). A sink is Gu et al.'s: a head
# whose mean attention to position 0 exceeds 0.3 (docs/anchors.md); the models read here have one head a layer.
# Outliers are Sun et al.'s massive activations, taken at their lenient end: the largest activation >= 100x the median.
SINK, MASSIVE = 0.3, 100
NEEDS = dict(
    sink=('a sink (first-token attention > 0.3 in a layer)', 'analysis.json',
          lambda a: max(x['first_token_attention'] for x in a['layers']) > SINK),
    sink_L1=('a sink in layer 1', 'analysis.json', lambda a: a['layers'][0]['first_token_attention'] > SINK),
    sink_L2=('a sink in layer 2', 'analysis.json', lambda a: a['layers'][1]['first_token_attention'] > SINK),
    outliers=('outliers (largest activation ≥ 100× the median)', 'analysis.json',
              lambda a: a['overall']['massive_ratio'] >= MASSIVE),
)


@dataclass(frozen=True)
class Test:
    claim: int        # CLAIMS' number; 0: a control the claims do not predict
    folder: object    # results/<sweep>: a one-line change points the row at a rerun; a tuple: folders pooled by seed
    depth: str
    a: str            # reference A and variant B (sweep.py's names): the row measures B - A, paired by seed
    b: str
    metric: str       # METRICS
    predicts: str     # the sign of B - A the claim predicts: '<0', '>0', or 'not <0' (no gain); '' for a control
    needs: str = ''   # NEEDS: A's seeds without it are dropped
    halves: bool = False  # also count the seeds where B <= A / 2 (a claim of "halves")
    worst: bool = False   # also count the seeds where B is the highest of the seed's five variants
    readme: bool = False  # a row of README's "What we found" table too


CPU, GPU = 'results/shakespeare_cpu_long', 'results/shakespeare_full'
ZF, ZF2 = 'results/shakespeare_cpu_long_leak_zero_future', 'results/shakespeare_cpu_long_leak_zero_future_dropout0.2'
OBO, OBO2 = 'results/shakespeare_cpu_long_leak_off_by_one', 'results/shakespeare_cpu_long_leak_off_by_one_dropout0.2'
AN, AN2 = 'results/shakespeare_cpu_long_leak_after_norm', 'results/shakespeare_cpu_long_leak_after_norm_dropout0.2'
TN, TN2 = 'results/shakespeare_cpu_long_leak_time_norm', 'results/shakespeare_cpu_long_leak_time_norm_dropout0.2'
NC, NC2 = 'results/shakespeare_cpu_long_noncausal', 'results/shakespeare_cpu_long_noncausal_dropout0.2'
DROP = 'results/shakespeare_cpu_long_dropout0.2'
# Bigram-Backcopy: seeds 1-5, and seeds 6-10 in a sweep of their own (another machine), pooled by seed
BB = ('results/bigram_backcopy_sink', 'results/bigram_backcopy_sink_seeds6-10')
ND = 'results/needle_distractors_retrieval'
TESTS = [
    # claim 1: Diff against the baseline
    Test(1, CPU, '3L', 'nanogpt', 'diff', 'val', 'not <0', readme=True),
    Test(1, GPU, '3L', 'nanogpt', 'diff', 'val', 'not <0', readme=True),
    Test(1, GPU, '6L', 'nanogpt', 'diff', 'val', 'not <0'),
    Test(1, GPU, '8L', 'nanogpt', 'diff', 'val', 'not <0'),
    Test(1, DROP, '3L', 'nanogpt', 'diff', 'val', 'not <0'),
    # claim 2: Diff on top of Sym
    Test(2, CPU, '3L', 'sym', 'diff_sym', 'val', '<0', readme=True),
    Test(2, GPU, '3L', 'sym', 'diff_sym', 'val', '<0', readme=True),
    Test(2, GPU, '6L', 'sym', 'diff_sym', 'val', '<0'),
    Test(2, GPU, '8L', 'sym', 'diff_sym', 'val', '<0'),
    Test(2, DROP, '3L', 'sym', 'diff_sym', 'val', '<0'),
    Test(2, ZF, '3L', 'sym', 'diff_sym', 'val', '<0', readme=True),
    Test(2, ZF2, '3L', 'sym', 'diff_sym', 'val', '<0', readme=True),
    Test(2, OBO, '3L', 'sym', 'diff_sym', 'val', '<0'),
    Test(2, OBO2, '3L', 'sym', 'diff_sym', 'val', '<0'),
    Test(2, AN, '3L', 'sym', 'diff_sym', 'val', '<0'),
    Test(2, AN2, '3L', 'sym', 'diff_sym', 'val', '<0'),
    Test(2, NC, '3L', 'sym', 'diff_sym', 'val', '<0'),
    Test(2, NC2, '3L', 'sym', 'diff_sym', 'val', '<0'),
    Test(2, ND, '2L', 'nd_sym', 'nd_diff_sym', 'needle_acc', '>0'),
    # claim 3: Norm+Sym against Sym, and whether it is the highest of the seed's five in each seed
    Test(3, CPU, '3L', 'sym', 'norm_sym', 'val', '>0', worst=True, readme=True),
    Test(3, GPU, '3L', 'sym', 'norm_sym', 'val', '>0', worst=True, readme=True),
    Test(3, GPU, '6L', 'sym', 'norm_sym', 'val', '>0', worst=True),
    Test(3, GPU, '8L', 'sym', 'norm_sym', 'val', '>0', worst=True),
    Test(3, DROP, '3L', 'sym', 'norm_sym', 'val', '>0', worst=True),
    Test(3, ZF, '3L', 'sym', 'norm_sym', 'val', '>0', worst=True),
    Test(3, ZF2, '3L', 'sym', 'norm_sym', 'val', '>0', worst=True),
    Test(3, OBO2, '3L', 'sym', 'norm_sym', 'val', '>0', worst=True),
    # claim 4: the distance of lambda_full from 1, Diff+Sym against Diff
    Test(4, CPU, '3L', 'diff', 'diff_sym', 'lambda_dist', '<0', readme=True),
    Test(4, GPU, '3L', 'diff', 'diff_sym', 'lambda_dist', '<0'),
    Test(4, GPU, '6L', 'diff', 'diff_sym', 'lambda_dist', '<0'),
    Test(4, GPU, '8L', 'diff', 'diff_sym', 'lambda_dist', '<0'),
    Test(4, ZF, '3L', 'diff', 'diff_sym', 'lambda_dist', '<0', readme=True),
    Test(4, ZF2, '3L', 'diff', 'diff_sym', 'lambda_dist', '<0', readme=True),
    Test(4, OBO2, '3L', 'diff', 'diff_sym', 'lambda_dist', '<0'),
    Test(4, AN2, '3L', 'diff', 'diff_sym', 'lambda_dist', '<0'),
    Test(4, TN2, '3L', 'diff', 'diff_sym', 'lambda_dist', '<0'),
    Test(4, NC, '3L', 'diff', 'diff_sym', 'lambda_dist', '<0'),
    # claim 5: softmax-1 (with OrthoAdam) and the sink, where the baseline has one (Bigram-Backcopy) and where not
    Test(5, BB, '2L', 'bb_nanogpt', 'bb_softmax1', 'first_token', '<0', 'sink', halves=True, readme=True),
    Test(5, BB, '2L', 'bb_nanogpt', 'bb_softmax1', 'first_token_L2', '<0', 'sink_L2', halves=True, readme=True),
    Test(5, BB, '2L', 'bb_nanogpt', 'bb_softmax1_orthoadam', 'first_token', '<0', 'sink', readme=True),
    Test(5, BB, '2L', 'bb_nanogpt', 'bb_softmax1_orthoadam', 'kurtosis', '<0', 'outliers', readme=True),
    Test(5, CPU, '3L', 'nanogpt', 'softmax1', 'first_token', '<0', 'sink'),
    # claim 6: the gates and the sink; OrthoAdam alone as a control on the same head
    Test(6, BB, '2L', 'bb_nanogpt', 'bb_gated', 'first_token_L1', '<0', 'sink_L1', halves=True, readme=True),
    Test(6, BB, '2L', 'bb_nanogpt', 'bb_gated_headwise', 'first_token_L1', '<0', 'sink_L1', halves=True),
    Test(6, BB, '2L', 'bb_nanogpt', 'bb_gated', 'first_token', '<0', 'sink', readme=True),
    Test(0, BB, '2L', 'bb_nanogpt', 'bb_orthoadam', 'first_token_L1', '', 'sink_L1', halves=True, readme=True),
    Test(6, CPU, '3L', 'nanogpt', 'gated', 'first_token', '<0', 'sink'),
    # claim 7: retrieval with distractors, and attention on the tokens that do not hold the key
    Test(7, ND, '2L', 'nd_nanogpt', 'nd_diff', 'needle_acc', '>0', readme=True),
    Test(7, ND, '2L', 'nd_nanogpt', 'nd_diff', 'unrelated_share', '<0', readme=True),
]

# README's "What we found", its variant table: the causal sweeps it reads (folder, depth, what the column is)
VARIANT_SWEEPS = [(CPU, '3L'), (GPU, '3L')]

# ----------------------------------------------------------------------------- the verdict rule

MIN_SEEDS = 3  # a paired t interval on 2 seeds has 1 degree of freedom: t(0.975, 1) = 12.7, its spread is one number
RULE = f"""\
One rule, `claims.py`'s `verdict()`, in this order:

1. **not measured under the current code**: the folder or the cell is not committed, or a run it reads was trained
   before a commit that changed its model's numerics (`report.NUMERICS`: {', '.join(f'`{c}`' for c, *_ in NUMERICS)});
   the numbers are shown, no verdict.
2. **not shown (precondition absent)**: the claim is about a phenomenon the baseline must have (a sink, outliers);
   seeds whose baseline run lacks it are dropped, not counted, and none is left.
3. **too few seeds**: fewer than {MIN_SEEDS} paired seeds remain. With 2 the 95% interval has one degree of freedom
   (t = 12.7) and rests on a single estimate of the spread, so it is shown but not called.
4. Otherwise the paired 95% t interval of B − A over the remaining seeds (`report.paired_t`) decides: **supported**
   where it excludes 0 on the side the claim predicts, **contradicted** where it excludes 0 on the other side,
   **within noise** where it contains 0. A claim of no gain (B − A not below 0) is contradicted only by an interval
   below 0 and supported by one above it.

A row whose runs differ in processor or number format keeps its verdict and says so (*mixed*). Per-seed statements
("in k of n seeds", "halves", "the highest") are counted from the runs, over the seeds the precondition keeps."""


def verdict(r):
    """The rule above, on one measured row (measure())."""
    if r['missing']:
        return 'not measured under the current code'
    if r['superseded']:
        return f"not measured under the current code (runs before {', '.join(r['superseded'])})"
    if not r['seeds']:
        return 'not shown (precondition absent)'
    if len(r['seeds']) < MIN_SEEDS:
        return 'too few seeds'
    lo, hi, want = r['stat']['lo'], r['stat']['hi'], r['test'].predicts
    side = 'below' if hi < 0 else 'above' if lo > 0 else ''
    if not side:
        return 'within noise'
    if want == '':
        return f'B {"lower" if side == "below" else "higher"}'
    if want == 'not <0':
        return 'contradicted' if side == 'below' else 'supported'
    return 'supported' if (side == 'below') == (want == '<0') else 'contradicted'


# ----------------------------------------------------------------------------- measuring

_RUNS = {}


def runs_of(folder):
    """report.load_runs of a committed folder, once; None where it is not there. A tuple of folders: the runs of
    those committed, pooled by seed (a sweep continued in a folder of its own); a seed of a cell in two of them is an
    error, since it would count one seed twice."""
    if isinstance(folder, tuple):
        pooled = {}
        for part in filter(None, map(runs_of, folder)):
            for key, cell in part.items():
                into = pooled.setdefault(key, {k: [] for k in cell})
                twice = {s['_seed'] for s in into['ok']} & {s['_seed'] for s in cell['ok']}
                if twice:
                    raise SystemExit(f"claims.py: seed {min(twice)} of {key[0]} {key[1]} is in two of {folder}: "
                                     f"pooled folders must hold different seeds")
                for k in into:
                    into[k] += cell[k]
        return pooled or None
    path = os.path.join(HERE, folder)
    if folder not in _RUNS:
        _RUNS[folder] = load_runs(path) if os.path.isdir(path) else None
    return _RUNS[folder]


def folders(t):
    """The folders a row reads."""
    return t.folder if isinstance(t.folder, tuple) else (t.folder,)


def read(s, file, fn):
    f = s if file == 'summary.json' else run_file(s, file)
    return None if f is None else fn(f)


def measure(t):
    """One row of TESTS against its runs: {'test', 'missing', 'a', 'b' ({seed: value}), 'dropped' (seeds without
    the precondition), 'seeds' (kept and shared), 'stat' (report.compare), 'superseded', 'on' (what the runs were
    computed on), 'counts' (per-seed statements)}."""
    r = dict(test=t, missing=True, superseded=[], seeds=[], dropped=[], counts=[], on=[])
    runs = runs_of(t.folder)
    cells = [finished(runs.get((v, t.depth), dict(ok=[]))) if runs else [] for v in (t.a, t.b)]
    _, file, fn, _ = METRICS[t.metric]
    vals = [{s['_seed']: x for s in cell if (x := read(s, file, fn)) is not None} for cell in cells]
    if not all(vals):
        return r
    by_seed = [{s['_seed']: s for s in cell} for cell in cells]
    shared = sorted(set(vals[0]) & set(vals[1]))
    if t.needs:
        what, nfile, test = NEEDS[t.needs]
        r['dropped'] = [x for x in shared if not read(by_seed[0][x], nfile, test)]
    kept = [x for x in shared if x not in r['dropped']]
    used = [by_seed[i][x] for i in (0, 1) for x in kept] or [s for cell in cells for s in cell]
    r.update(missing=False, a=vals[0], b=vals[1], seeds=kept,
             superseded=sorted({c for s in used for c in provenance(s)['superseded']}),
             on=sorted({f"{provenance(s)['dtype']} on {provenance(s)['machine']}" for s in used}))
    a, b = ({x: v[x] for x in kept} for v in vals)
    if len(kept) >= 2:
        r['stat'] = compare(a, b)
    elif kept:
        r['stat'] = dict(test='single', diff=b[kept[0]] - a[kept[0]])
    if kept and t.predicts:
        sign = {'<0': lambda d: d < 0, '>0': lambda d: d > 0, 'not <0': lambda d: d >= 0}[t.predicts]
        r['counts'].append(f"B − A {t.predicts.replace('<0', '< 0').replace('>0', '> 0')} in "
                           f"{sum(sign(b[x] - a[x]) for x in kept)} of {len(kept)}")
    if kept and t.halves:
        r['counts'].append(f"B ≤ A/2 in {sum(b[x] <= a[x] / 2 for x in kept)} of {len(kept)}")
    if t.worst:
        five = [name for name, _, seed in VARIANTS if seed]
        per = {x: {v: s['final_val_loss'] for v in five for s in finished(runs.get((v, t.depth), dict(ok=[])))
                   if s['_seed'] == x} for x in kept}
        full = {x: p for x, p in per.items() if len(p) == len(five)}
        if full:
            top = sum(max(p, key=p.get) == t.b for p in full.values())
            r['counts'].append(f"highest of the seed's five in {top} of {len(full)}")
    return r


# ----------------------------------------------------------------------------- rendering

def setting(t):
    """What the row's runs are, from their configs: the folder, depth, steps and dropout."""
    runs = runs_of(t.folder)
    name = ' + '.join(f'`{os.path.basename(f)}`' for f in folders(t)) + f' {t.depth}'
    ok = [s for v in (t.a, t.b) for s in finished((runs or {}).get((v, t.depth), dict(ok=[])))]
    if not ok:
        return name
    return (f"{name}, {report.joined(report.values(ok, 'max_iters'))} steps, dropout "
            f"{report.joined(report.values(ok, 'dropout'))}")


def gap(r, fmt):
    """'B − A ± sd [lo, hi]' (paired), the one difference, or '—'."""
    st = r.get('stat')
    if st is None:
        return '—'
    f = fmt.replace('{:', '{:+')
    if st['test'] == 'single':
        return f.format(st['diff']) + ' (one seed)'
    if st['test'] != 'paired':
        return f.format(st['diff']) + ' (unpaired)'
    return (f"{f.format(st['diff'])} [{f.format(st['lo'])}, {f.format(st['hi'])}]")


def label(v):
    return NAMES.get(v, v)


def cell_text(vals, seeds, fmt):
    xs = [vals[x] for x in seeds] or list(vals.values())
    return report.mean_std(xs, fmt)


def row_cells(r):
    """The columns every table shares: A, B, n, B − A, per seed, computed on, verdict."""
    t = r['test']
    fmt = METRICS[t.metric][3]
    if r['missing']:
        return ['—', '—', '0', '—', '', '', verdict(r)]
    kept = r['seeds']
    seeds = f"{len(kept)}" + (f"; dropped: seed {', '.join(map(str, r['dropped']))}, without "
                              f"{NEEDS[t.needs][0].split(' (')[0]}" if r['dropped'] else '')
    on = r['on'][0] if len(r['on']) == 1 else '*mixed*: ' + '; '.join(r['on'])
    return [cell_text(r['a'], kept, fmt), cell_text(r['b'], kept, fmt), seeds, gap(r, fmt), '; '.join(r['counts']),
            on, f"**{verdict(r)}**" + (' (*mixed*)' if len(r['on']) > 1 else '')]


def claims_table(results):
    lines = ['| # | runs | measure | A | B | A: mean ± std | B: mean ± std | seeds | B − A [95% interval] | per seed '
             '| computed on | verdict |', '|' + '---|' * 12]
    for r in results:
        t = r['test']
        lines.append(f"| {t.claim or 'control'} | {setting(t)} | {METRICS[t.metric][0]} | {label(t.a)} | "
                     f"{label(t.b)} | " + ' | '.join(row_cells(r)) + ' |')
    return '\n'.join(lines)


def claims_md(results):
    claims = ['| # | claim (seed note) | the seed\'s number | published elsewhere (`docs/anchors.md`) |', '|---|---|---|---|']
    claims += [f'| {n} | {c} | {s} | {a} |' for n, (c, s, a) in CLAIMS.items()]
    commands = sorted({f for t in TESTS for f in folders(t)})
    return '\n'.join([
        "# The seeds' claims, tested",
        '',
        "Rendered by `python claims.py` from the claims as data (`claims.py`'s `TESTS`) and the committed runs; do "
        'not edit by hand (`tests/test_report.py` re-renders it and compares). Each row reads one results folder '
        '(or several joined by +, whose seeds are pooled: a sweep continued in a folder of its own): '
        'B − A of one measure, paired by seed (seed s gives both variants the same batches in the same order). How '
        'each folder was run, and its tables: its `results.md`; what the seed notes were and how their table can '
        'have come about: `seed_table_explained.md`.',
        '',
        '## The claims',
        '',
    ] + claims + [
        '',
        '## The verdict rule',
        '',
        RULE,
        '',
        'Preconditions: ' + '; '.join(f'`{k}`: the baseline has {w}' for k, (w, _, _) in NEEDS.items()) + '.',
        '',
        '## What the runs say',
        '',
        claims_table(results),
        '',
        '## Commands',
        '',
        'Each folder: `python report.py <folder>` renders its tables; how it was run is at its top and in '
        '`seed_table_explained.md`. The folders read:',
        '',
    ] + [f'- `{f}`' + ('' if runs_of(f) is not None else ' (not committed)') for f in commands] + [
        '',
        "Provenance: each run's `summary.json` (`machine`, `dtype`, `code`), or for older runs its folder's "
        '`provenance.json`, backfilled by `results/backfill_provenance.py`.',
        '',
    ])


def variant_table():
    """A row per variant of the seed's causal sweeps: val loss and B − nanogpt in each sweep of VARIANT_SWEEPS,
    λ_full by layer for the Differential ones, and the command that reproduces the first column."""
    head = ['variant']
    for folder, depth in VARIANT_SWEEPS:
        head += [f'`{os.path.basename(folder)}` {depth}: val', '− nanogpt [95%]']
    lines = ['| ' + ' | '.join(head + ['λ_full, layers 1-3 (first sweep)', 'reproduce (first sweep)']) + ' |',
             '|' + '---|' * (len(head) + 2)]
    loaded = [(runs_of(f) or {}, d) for f, d in VARIANT_SWEEPS]
    for name, _, _ in VARIANTS:
        if not any((name, d) in runs for runs, d in loaded):
            continue
        cells = [f'`{name}` ({label(name)})']
        for runs, d in loaded:
            ok = finished(runs.get((name, d), dict(ok=[])))
            base = {s['_seed']: s['final_val_loss'] for s in finished(runs.get(('nanogpt', d), dict(ok=[])))}
            mine = {s['_seed']: s['final_val_loss'] for s in ok}
            cells.append(report.mean_std(list(mine.values()), '{:.3f}') + f' (n={len(mine)})' if mine else '—')
            r = dict(stat=compare(base, mine)) if mine and base and name != 'nanogpt' else {}
            cells.append(gap(r, '{:.3f}') if r else '—')
        ok = finished(loaded[0][0].get((name, loaded[0][1]), dict(ok=[])))
        lam = [s['lambda_table'] for s in ok if s.get('lambda_table')]
        cells.append(' / '.join(f"{statistics.mean(t[i]['lambda_full'] for t in lam):.2f}"
                                for i in range(len(lam[0]))) if lam else '—')
        cells.append(f'`PROFILE=cpu_long SEEDS="1 2 3" VARIANTS={name} ./ablate.sh`')
        lines.append('| ' + ' | '.join(cells) + ' |')
    return '\n'.join(lines)


def findings(results):
    """README's "What we found": the block between the markers."""
    rows = ['| claim | runs | B − A [95% interval] (seeds) | verdict |', '|---|---|---|---|']
    for r in results:
        t = r['test']
        if not t.readme:
            continue
        what = CLAIMS[t.claim][0] if t.claim else f'control: {label(t.b)} alone'
        metric = METRICS[t.metric][0]
        cells = row_cells(r)
        rows.append(f'| {what} | {setting(t)}; {metric}, {label(t.b)} − {label(t.a)} | {cells[3]} (n = {cells[2]}) | '
                    f'{cells[6]} |')
    return '\n'.join([
        START,
        '',
        'Rendered by `python claims.py` (do not edit between the markers). What each variant did in the seed\'s causal '
        'setting, mean ± std over seeds, and its paired gap to nanogpt (negative: lower loss):',
        '',
        variant_table(),
        '',
        'The seed notes\' claims, each by the verdict rule of `results/claims.md` (which has every row, the '
        'per-seed counts and the machines):',
        '',
    ] + rows + ['', END])


def render():
    """(claims.md's text, README's "What we found" rendered between the markers)."""
    results = [measure(t) for t in TESTS]
    with open(README_MD) as f:
        readme = f.read()
    if START not in readme or END not in readme:
        raise SystemExit(f"claims.py: README's \"What we found\" has no {START} ... {END} block to render into")
    head, rest = readme.split(START, 1)
    readme = head + findings(results) + rest.split(END, 1)[1]
    return claims_md(results), readme


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0].strip())
    ap.add_argument('--check', action='store_true', help='write nothing; exit 1 where a page differs from its render')
    args = ap.parse_args()
    pages = dict(zip((CLAIMS_MD, README_MD), render()))
    stale = []
    for path, text in pages.items():
        with open(path) as f:
            if f.read() != text:
                stale.append(os.path.relpath(path, HERE))
                if not args.check:
                    report.write_text(path, text)
    if args.check and stale:
        print(f"claims.py: {', '.join(stale)} differ from the render: run python claims.py", file=sys.stderr)
        sys.exit(1)
    print(('rendered: ' + ', '.join(stale)) if stale else 'up to date')


if __name__ == '__main__':
    main()
