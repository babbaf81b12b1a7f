"""
The findings pages other than claims.md, rendered from the committed runs: each page of PAGES is its template
(evidence/pages/<page>.in), short prose and {{ expression }} lines, each expression a table this file computes from
the committed run folders (summary.json, log.jsonl, analysis.json, needle_eval.json, read through report.py and
claims.py) or the committed benchmark records (results/bench_cpu*.json, results/dropout_noise.json, the GPU checks'
results/gpu_check/*/results.json). Each GPU check's own results.md (records()) is evidence/bench_gpu.py's render of
its results.json, written again here where that render has changed since the check ran.

  python evidence/pages.py            # renders every page
  python evidence/pages.py --check    # exit 1, naming each page that differs from its render (tests do the same)

A template's prose states no number and no count: every number is in a table, and every table is an expression on a
line of its own (tests/test_findings_pages.py lints the prose). The history of how a page's evidence was gathered is
in git: a page cites the commit of its older version. Pooling follows the claims' rule (report.homogeneous): a Runs
object holds one homogeneous group, and a page whose runs fall in several groups shows each group on its own.
"""
import argparse
import glob
import json
import os
import re
import statistics
import sys
import textwrap

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)  # report.py, claims.py: `python evidence/pages.py` from the repository's root

import bench  # noqa: E402
import bench_gpu  # noqa: E402
import claims  # noqa: E402
import output  # noqa: E402
import provenance  # noqa: E402
import report  # noqa: E402
from report import NAMES, compare, finished, group_label, homogeneous, run_file  # noqa: E402

# The templates are here; the runs are read where claims.py reads them (claims.HERE, the repository), and the pages
# are written under ROOT (a test points ROOT at copies of the pages)
TEMPLATES = os.path.join(HERE, 'pages')
FIELD = re.compile(r'\{\{(.+?)\}\}', re.S)

# ----------------------------------------------------------------------------- formatting


def num(x, fmt='{:.2f}'):
    """x in fmt, with the pages' minus sign (U+2212) for a negative number."""
    return fmt.format(x).replace('-', '−')


def span(xs, fmt='{:.2f}'):
    """'lo-hi' of the values as printed (one value where they print alike)."""
    lo, hi = num(min(xs), fmt), num(max(xs), fmt)
    return lo if lo == hi else f'{lo}-{hi}'


def pm(xs, fmt='{:.2f}'):
    """report.mean_std in the pages' minus sign."""
    return report.mean_std(list(xs), fmt).replace('-', '−')


def seeds_text(seeds):
    """'1-5' for a run of three or more consecutive seeds: '1-4, 6-10', '1, 3, 4'."""
    return claims.seed_ranges(seeds, 3)


def p_text(st):
    """'p = 0.034', or 'p < 0.001'."""
    p = report.fmt_p(st['p'])
    return f'p {p[0]} {p[1:]}' if p.startswith('<') else f'p = {p}'


def interval(st, fmt='{:.3f}', p=False):
    """A comparison (report.compare) as 'B − A [lo, hi]', with ', p = ...' where asked, in bold where the interval
    excludes 0; where it has no interval, the one difference."""
    f = fmt.replace('{:', '{:+')
    if st['test'] == 'single':
        return num(st['diff'], f) + ' (one seed)'
    text = f"{num(st['diff'], f)} [{num(st['lo'], f)}, {num(st['hi'], f)}]" + (f', {p_text(st)}' if p else '')
    return f'**{text}**' if report.gap_words(st).startswith('not within') else text


def table(head, rows):
    """A Markdown table: a heading row and rows, each a list of cells."""
    lines = ['| ' + ' | '.join(head) + ' |', '|' + '---|' * len(head)]
    return '\n'.join(lines + ['| ' + ' | '.join(map(str, r)) + ' |' for r in rows])


def name(v):
    return NAMES.get(v, v)


def read_json(path):
    """A committed JSON file, its path from the repository's root."""
    with open(os.path.join(claims.HERE, path), encoding='utf-8') as f:
        return json.load(f)


VAL = lambda s: s['final_val_loss']  # noqa: E731

# ----------------------------------------------------------------------------- runs


class Runs:
    """The finished runs of one homogeneous group (report.homogeneous) among the folders' runs at one depth, by
    variant and seed; group: the group's index in the order report.homogeneous meets them."""

    def __init__(self, folders, depth, group=0):
        runs = claims.runs_of(folders)
        if runs is None:
            raise SystemExit(f'pages.py: none of {folders} is committed')
        everything = [s for key in sorted(runs) if key[1] == depth for s in finished(runs[key])]
        groups = list(homogeneous(everything).values())
        self.others = len(groups) - 1
        self.label = group_label(groups[group])
        self.cells = {}
        for s in groups[group]:
            self.cells.setdefault(s['_variant'], {})[s['_seed']] = s

    def groups(self):
        """This group and every other of the same folders and depth."""
        return [self] + [type(self)(*self.args, group=i) for i in range(1, self.others + 1)]

    def seeds(self, v):
        return sorted(self.cells[v])

    def values(self, v, read, file='analysis.json', seeds=None):
        """{seed: read(the run's file)} of variant v (summary.json: the summary itself), over seeds (default all)."""
        out = {}
        for seed in seeds or self.seeds(v):
            s = self.cells[v].get(seed)
            f = None if s is None else (s if file == 'summary.json' else run_file(s, file))
            if f is not None:
                out[seed] = read(f)
        return out

    def config(self, v, key):
        """The one value of config[key] over v's runs (an error where they differ)."""
        vs = {repr(s['config'][key]) for s in self.cells[v].values()}
        if len(vs) != 1:
            raise SystemExit(f'pages.py: {v} runs differ in {key}: {sorted(vs)}')
        return next(iter(self.cells[v].values()))['config'][key]

    def caption(self):
        """The group's line above its tables: its seeds and what it was computed on."""
        seeds = sorted({x for c in self.cells.values() for x in c})
        return f'**Seeds {seeds_text(seeds)}**, {self.label}:'


# ----------------------------------------------------------------------------- results/sink_cpu.md

SINK_VARIANTS = ['nanogpt', 'softmax1', 'gated', 'gated_headwise', 'orthoadam', 'softmax1_orthoadam']
# analysis.json's measures the sink page reads: name -> read(analysis.json)
M = dict(all=lambda a: a['overall']['first_token_attention'], L1=claims.LAYER(0), L2=claims.LAYER(1),
         gu=lambda a: a['overall']['sink_heads'], kurt=lambda a: a['overall']['kurtosis_rest'],
         ratio=lambda a: a['overall']['massive_ratio'], int4=lambda a: a['quantization']['loss_penalty_int4'])


class Sink(Runs):
    """One homogeneous group of Bigram-Backcopy's sink runs (claims.BB)."""

    def __init__(self, group=0):
        self.args = ()
        super().__init__(claims.BB, '2L', group)

    def v(self, variant, m):
        """{seed: measure m (M's, or 'val')} of variant (without the bb_ prefix)."""
        if m == 'val':
            return self.values('bb_' + variant, VAL, 'summary.json')
        return self.values('bb_' + variant, M[m])

    def per_seed_table(self):
        """Layer 1 / layer 2 first-token attention (Gu's share of sink heads), per variant and seed."""
        seeds = self.seeds('bb_nanogpt')
        rows = []
        for variant in SINK_VARIANTS:
            l1, l2, gu = (self.v(variant, m) for m in ('L1', 'L2', 'gu'))
            rows.append([name(variant)] + [f'{l1[x]:.2f} / {l2[x]:.2f} ({gu[x]:.1f})' if x in l1 else '—'
                                           for x in seeds])
        return table(['variant'] + [f'seed {x}' for x in seeds], rows)

    def summary_table(self):
        """The baseline's mean ± std in each measure, then each variant's paired difference from it."""
        cols = [('all', '{:.3f}'), ('L1', '{:.3f}'), ('L2', '{:.3f}'), ('gu', '{:.2f}'), ('kurt', '{:.2f}'),
                ('int4', '{:.4f}'), ('val', '{:.4f}')]
        rows = []
        for variant in SINK_VARIANTS:
            if variant == 'nanogpt':
                cells = [pm(self.v(variant, m).values(), f) for m, f in cols]
            else:
                cells = [interval(compare(self.v('nanogpt', m), self.v(variant, m)), f) for m, f in cols]
            rows.append([name(variant)] + cells + [pm(self.v(variant, 'ratio').values(), '{:.0f}')])
        return table(['variant', 'first-token attn, all layers', 'layer 1', 'layer 2', 'Gu share', 'kurtosis',
                      'int4 penalty', 'val loss', 'max / median act'], rows)


def sink_groups():
    """Each homogeneous group of the sink runs: its caption and both tables."""
    return '\n\n'.join(f'{g.caption()}\n\n{g.per_seed_table()}\n\n{g.summary_table()}' for g in Sink().groups())


def settings_table():
    """The settings tried for a sink, a row each: steps, first-token attention by layer (the uniform reference),
    Gu's share, kurtosis, max / median activation, final val loss."""
    bos = finished(claims.runs_of('results/shakespeare_cpu_long_bos')[('nanogpt', '3L')])[0]
    bb = Sink().cells['bb_nanogpt'][1]
    rows = []
    for setting, s in (('Shakespeare, `--bos=True`, 3L', bos), ('Bigram-Backcopy, 2L, one head', bb)):
        a = run_file(s, 'analysis.json')
        o = a['overall']
        rows.append([setting, f"`{s['_name']}`", s['iter'],
                     ', '.join(f"{x['first_token_attention']:.3f}" for x in a['layers'])
                     + f" ({o['first_token_uniform']:.3f})", f"{o['sink_heads']:.2f}", f"{o['kurtosis_rest']:.1f}",
                     f"{o['massive_ratio']:.0f}", f"{s['final_val_loss']:.3f}"])
    return table(['setting', 'run', 'steps', 'first-token attn by layer (uniform)', 'Gu share', 'kurtosis',
                  'max / median act', 'val loss'], rows)


def sink_names():
    return dict(groups=sink_groups, settings_table=settings_table)


# ----------------------------------------------------------------------------- results/needle_cpu.md

NEEDLE = claims.NEEDLE  # the task without distractors
NEEDLE_VARIANTS = ['nanogpt', 'diff', 'diff_sym', 'sym', 'gated', 'softmax1']
LEARNED = 0.1  # "learned the task": the first eval with val loss below 0.1 (the copy plateau is above 1)


class Needle(Runs):
    """One homogeneous group of the needle runs (prefix: the folder's config prefix, nd_ for the distractors)."""

    def __init__(self, folders, prefix='', group=0):
        self.args, self.prefix = (folders, prefix), prefix
        super().__init__(folders, '2L', group)

    def s(self, v):
        return self.seeds(self.prefix + v)

    def ev(self, v, key, seeds=None):
        """{seed: needle_eval.json's key, mean over the needle counts}."""
        return self.values(self.prefix + v, lambda f: statistics.mean(x[key] for x in f['by_needles'].values()),
                           'needle_eval.json', seeds)

    def first(self, v, seeds=None):
        """{seed: the first eval step with val loss below LEARNED, None where none is}."""
        def read(s):
            return next((e['iter'] for e in s['_log'] if e.get('kind') == 'eval' and e['val_loss'] < LEARNED), None)
        return self.values(self.prefix + v, read, 'summary.json', seeds)

    def acc_table(self, variants):
        """Mean accuracy over needle counts per seed, mean ± std, and paired against the baseline."""
        seeds, base = self.s('nanogpt'), self.ev('nanogpt', 'accuracy')
        rows = []
        for v in variants:
            a = self.ev(v, 'accuracy')
            rows.append([name(v)] + [f'{a[x]:.3f}' for x in seeds] + [
                pm(a.values(), '{:.3f}'), '' if v == 'nanogpt' else interval(compare(base, a), '{:.3f}', p=True)])
        return table(['variant'] + [f's{x}' for x in seeds] + ['mean ± std', '− nanogpt, paired, 95% interval'], rows)

    def measure_table(self, keys, variants, seeds=None):
        """needle_eval.json's measures: the baseline's mean ± std, then each variant minus the baseline, paired."""
        rows = [[k.replace('_', ' '), pm(self.ev('nanogpt', k, seeds).values(), '{:.3f}')]
                + [interval(compare(self.ev('nanogpt', k, seeds), self.ev(v, k, seeds))) for v in variants]
                for k in keys]
        return table(['measure', 'nanogpt'] + [f'{name(v)} − nanogpt' for v in variants], rows)

    def first_table(self, variants, seeds):
        """Steps to the first eval below LEARNED per seed, and paired against the baseline where both learned."""
        base, rows = self.first('nanogpt', seeds), []
        for v in variants:
            f = self.first(v, seeds)
            ok = [x for x in seeds if f[x] is not None and base[x] is not None]
            where = '' if len(ok) == len(seeds) else f' (seeds {seeds_text(ok)})'
            rows.append([name(v)] + [f[x] if f[x] is not None else 'never' for x in seeds] + [
                pm([f[x] for x in ok], '{:.0f}') + where,
                '' if v == 'nanogpt' else interval(compare({x: base[x] for x in ok}, {x: f[x] for x in ok}),
                                                   '{:.0f}', p=True) + where])
        return table([f'first eval with val loss < {LEARNED}'] + [f'seed {x}' for x in seeds]
                     + ['mean ± std', '− nanogpt, paired'], rows)


def needle_names():
    nd, nc = Needle(claims.ND, 'nd_'), Needle(NEEDLE)
    if nd.others or nc.others:  # the page pools every seed of a folder: the claims' rule must allow it
        raise SystemExit('pages.py: the needle runs are not one homogeneous group: show each group on its own')
    five = nc.s('diff')
    return dict(nd=nd, nc=nc, V=NEEDLE_VARIANTS, S5=five, S10=nc.s('nanogpt'), LEARNED=LEARNED,
                shares=['answer_attention', 'noise_attention', 'answer_share'])


# ----------------------------------------------------------------------------- results/diagnostics_cpu.md

DIAG = 'results/shakespeare_cpu_long'  # the committed Shakespeare sweep whose runs analyze.py measured
# analysis.json's measures: name -> (column, read(analysis.json), format). Over layers: first-token attention and
# kurtosis the mean, the largest activation and logit the maximum (analyze.py's overall), the ranks the mean
D = dict(
    first=('first-token attn', lambda a: a['overall']['first_token_attention'], '{:.4f}'),
    heads=('heads on token 0', lambda a: a['overall']['first_token_heads'], '{:.2f}'),
    kurt=('kurtosis', lambda a: a['overall']['kurtosis_rest'], '{:.2f}'),
    act=('max abs act', lambda a: a['overall']['max_activation'], '{:.1f}'),
    top1=('top-1 abs logit', lambda a: a['overall']['logit_top1'], '{:.1f}'),
    erank_attn=('erank attn', lambda a: statistics.mean(x['erank_attention'] for x in a['layers']), '{:.1f}'),
    erank_qk=('erank QK', lambda a: statistics.mean(x['erank_qk'] for x in a['layers']), '{:.2f}'),
    int8=('int8 loss penalty', lambda a: a['quantization']['loss_penalty_int8'], '{:+.4f}'),
    int4=('int4 loss penalty', lambda a: a['quantization']['loss_penalty_int4'], '{:+.4f}'),
)


class Diag(Runs):
    """The analysed runs of the Shakespeare sweep, one homogeneous group."""

    def __init__(self, group=0):
        self.args = ()
        super().__init__(DIAG, '3L', group)
        self.variants = sorted((v for v in self.cells if all(run_file(s, 'analysis.json') is not None
                                                              for s in self.cells[v].values())),
                               key=report.variant_key)

    def table(self):
        """Per variant, mean ± std over the seeds of the final val loss and each of D's measures."""
        rows = [[name(v), len(self.cells[v]), pm(self.values(v, VAL, 'summary.json').values(), '{:.3f}')]
                + [pm(self.values(v, read).values(), fmt) for _, read, fmt in D.values()] for v in self.variants]
        return table(['model', 'seeds', 'val loss'] + [c for c, _, _ in D.values()], rows)


def diagnostics_names():
    return dict(groups=diagnostics_groups)


def diagnostics_groups():
    """Each group's table; where every group is one run a variant under one label (runs whose thread counts are not
    recorded, which the pooling rule never pools), one table of every run instead of a table each."""
    groups = Diag().groups()
    if len(groups) == 1 or len({g.label for g in groups}) > 1 or any(len(c) > 1 for g in groups
                                                                      for c in g.cells.values()):
        return '\n\n'.join(f'{g.caption()}\n\n{g.table()}' for g in groups)
    rows = sorted(((v, seed, g) for g in groups for v in g.variants for seed in g.seeds(v)),
                  key=lambda r: (report.variant_key(r[0]), r[1]))
    body = [[name(v), seed, num(g.values(v, VAL, 'summary.json')[seed], '{:.3f}')]
            + [num(g.values(v, read)[seed], fmt) for _, read, fmt in D.values()] for v, seed, g in rows]
    return f"**Every run on its own**, {groups[0].label}:\n\n" + table(
        ['model', 'seed', 'val loss'] + [c for c, _, _ in D.values()], body)


# ----------------------------------------------------------------------------- results/seed_table_explained.md

# The seed notes' own numbers (note 001, docs/seed_notes.md): citations, not findings of these runs.
# val (3L: its one number a cell), and (train, val) at 6L and 8L; the 6-layer lambda table
SEED_VARIANTS = ['nanogpt', 'diff', 'sym', 'diff_sym', 'norm_sym']
SEED_VAL = {'3L': dict(nanogpt=0.69, diff=0.69, sym=0.84, diff_sym=0.69, norm_sym=1.1),
            '6L': dict(nanogpt=0.08, diff=0.09, sym=0.22, diff_sym=0.1, norm_sym=0.77),
            '8L': dict(nanogpt=0.11, diff=0.08, sym=0.1)}
SEED_TRAIN = {'6L': dict(nanogpt=0.18, diff=0.21, sym=0.5, diff_sym=0.23, norm_sym=0.94),
              '8L': dict(nanogpt=0.29, diff=0.14, sym=0.21)}
SEED_LAMBDA = dict(diff=[0.30, 0.77, 0.68, 0.69, 0.76, 0.78], diff_sym=[0.53, 0.83, 0.82, 0.80, 0.85, 0.95])
SEED_L12 = dict(diff=[(0.98, 1.04), (1.14, 0.84), (1.02, 0.90)],  # the notes' λ_1, λ_2 of layers 1-3 (their 6L table)
                diff_sym=[(1.05, 0.87), (1.15, 0.80), (1.10, 0.84)])
GPU_FULL, GPU_NONCAUSAL = 'results/shakespeare_full', 'results/shakespeare_full_noncausal'
DEPTHS = ['3L', '6L', '8L']
TAIL = 250  # "train step": the mean training-step loss over the last 250 steps (one eval interval of the profile)
CPU_LONG = 'results/shakespeare_cpu_long'
# the masking bugs at the notes' 3-layer row, 500 CPU steps: (the sweep's suffix, the row's name)
MECH = [('', 'causal'), ('_dropout0.2', 'causal, dropout 0.2'), ('_noncausal', 'no mask'),
        ('_noncausal_dropout0.2', 'no mask, dropout 0.2')] + [
    (f'_leak_{k}{d}', f"`{k}`{', dropout 0.2' if d else ''}") for k in ('off_by_one', 'zero_future', 'after_norm',
                                                                     'time_norm') for d in ('', '_dropout0.2')]
PIPE, SEQ, FC = ('results/shakespeare_seed_pipeline_cpu', 'results/shakespeare_full_sequential_cpu',
                 'results/shakespeare_full_cpu')


SEQUENTIAL = [('nanogpt, sequential windows', SEQ, 'nanogpt_3L_s1'), ('nanogpt, random windows', FC, 'nanogpt_3L_s1')]


def train_step(s, tail=TAIL):
    """The mean training-step loss (train mode, dropout on) over the run's last `tail` steps, from log.jsonl."""
    return statistics.mean(e['loss'] for e in s['_log'] if e.get('kind') == 'train' and s['iter'] - tail < e['iter'])


class Full(Runs):
    """One homogeneous group of a sweep at the notes' schedule (PROFILE=full), at one depth."""

    def __init__(self, folder, depth, group=0):
        self.args = (folder, depth)
        super().__init__(folder, depth, group)

    def cell(self, variant):
        """'train step / val (n)', means over the group's seeds."""
        if variant not in self.cells:
            return '—'
        step = statistics.mean(self.values(variant, train_step, 'summary.json').values())
        val = statistics.mean(self.values(variant, VAL, 'summary.json').values())
        return f'{step:.3f} / {val:.3f} ({len(self.seeds(variant))})'


def seed_table():
    """The seed notes' table (citations: SEED_VAL, SEED_TRAIN), train/validate where it has both."""
    return table(["the seed notes' table"] + [name(v) for v in SEED_VARIANTS], [
        [f'{d}, train/validate'] + [(f'{SEED_TRAIN[d][v]:g}/' if d in SEED_TRAIN else '') + f'{SEED_VAL[d][v]:g}'
                                    if v in SEED_VAL[d] else '' for v in SEED_VARIANTS] for d in DEPTHS])


def full_table():
    """Train step / val (seeds) per depth, sweep and variant at the notes' schedule, each homogeneous group a row."""
    rows = []
    for d in DEPTHS:
        for folder, what in ((GPU_NONCAUSAL, 'no mask'), (GPU_FULL, 'causal')):
            rows += [[f'{d}, {what}, {g.label}'] + [g.cell(v) for v in SEED_VARIANTS] for g in Full(folder, d).groups()]
    return table(['train step / val loss (seeds)'] + [name(v) for v in SEED_VARIANTS], rows)


def mechanisms_table():
    """A row per masking bug and dropout (3L, 500 CPU steps), a column per variant: train step / val, mean ± std over
    each homogeneous group of a cell's seeds (n where more than one), † for superseded numerics."""
    rows = []
    for suffix, what in MECH:
        runs, cells = claims.runs_of(CPU_LONG + suffix), []
        for v in SEED_VARIANTS:
            parts = [f"{report.mean_std([report.train_step_loss(s) for s in g])} / "
                     f"{report.mean_std([s['final_val_loss'] for s in g])}"
                     + ('†' if report.provenance(g[0])['superseded'] else '') + (f' (n={len(g)})' if len(g) > 1 else '')
                     for g in homogeneous(finished(runs.get((v, '3L'), dict(ok=[])))).values()]
            cells.append('; '.join(parts) or '—')
        rows.append([what] + cells)
    return table(['3L, 500 steps: train step / val loss'] + [name(v) for v in SEED_VARIANTS], rows)


def log_rows(folder, run):
    """A committed run's log.jsonl (finished or not), its rows in order."""
    with open(os.path.join(claims.HERE, folder, run, 'log.jsonl'), encoding='utf-8') as f:
        return [json.loads(line) for line in f if line.strip()]


def evals_table(runs, steps):
    """Train split / val loss at the evals of the given steps of committed runs (finished or not): runs are
    (row name, folder, run)."""
    rows = []
    for what, folder, run in runs:
        ev = {e['iter']: e for e in log_rows(folder, run) if e.get('kind') == 'eval'}
        rows.append([what] + [f"{ev[k]['train_loss']:.3f} / {ev[k]['val_loss']:.3f}" if k in ev else '—'
                              for k in steps])
    return table(['eval at step: train split / val loss'] + [str(k) for k in steps], rows)


def steps_loss_table(runs, spans):
    """The mean training-step loss (train mode) over each span lo < step <= hi of committed logs: runs are (row name,
    folder, run)."""
    rows = []
    for what, folder, run in runs:
        log = [e for e in log_rows(folder, run) if e.get('kind') == 'train']
        rows.append([what] + [f"{statistics.mean(e['loss'] for e in log if lo < e['iter'] <= hi):.3f}"
                              for lo, hi in spans])
    return table(['mean training-step loss, steps'] + [f'{lo + 1}-{hi}' for lo, hi in spans], rows)


def seed_table_names():
    return dict(seed_table=seed_table, full_table=full_table, mechanisms_table=mechanisms_table, pipeline=lambda: evals_table(
        [(f'{name(v)}, `PROFILE=seed_pipeline`', PIPE, f'{v}_3L_s1') for v in ('nanogpt', 'sym')], [2500, 5000, 7500, 10000]),
        sequential=lambda: steps_loss_table(SEQUENTIAL, [(lo, lo + 250) for lo in range(0, 1000, 250)]),
        sequential_evals=lambda: evals_table(SEQUENTIAL, [250, 500, 750, 1000]))


# ----------------------------------------------------------------------------- results/bench_cpu.md

BENCH_CPU = 'results/bench_cpu.json'  # bench.py --json of one CPU, every variant at two dtypes and two dropouts
BENCH_REPEAT = 'results/bench_cpu_repeat.json'  # the same configurations again, later, on the same kind of CPU
BENCH_COLUMNS = ('T', 'dtype', 'dropout', 'compile')  # what a table's heading names, so its rows leave it out


class Bench:
    """A bench.py --json record: its configurations by (T, dtype, dropout, compile), in the order bench.py ran."""

    def __init__(self, path=BENCH_CPU):
        self.path, self.doc, self.groups = path, read_json(path), {}
        for r in self.doc['results']:
            self.groups.setdefault((r['seq'], r['dtype'], r['dropout'], r['compile']), []).append(r)

    def ms(self, variant, dtype, dropout):
        """A variant's step time at one dtype and dropout (the file's one T and compile setting)."""
        return next(r for (_, d, p, _), rows in self.groups.items() if (d, p) == (dtype, dropout)
                    for r in rows if r['variant'] == variant and 'error' not in r)['ms_per_step']

    def tables(self):
        """A table a configuration (bench.markdown, without the columns its heading names), T and compile named
        only where the file has several."""
        several = [len({k[i] for k in self.groups}) > 1 for i in range(4)]
        parts = []
        for k, rows in self.groups.items():
            head = f'{k[1]}, dropout {k[2]:g}' + (f', T = {k[0]}' if several[0] else '') + \
                (f', compile {k[3]}' if several[3] else '')
            parts += [f'### {head}', '', bench.markdown(rows, drop=BENCH_COLUMNS), '']
        return '\n'.join(parts).rstrip('\n')

    def machine(self):
        cpu = self.doc['processor']
        return table(['record', 'processor', 'threads'], [[f'`{self.path}`', report.machine_label(dict(cpu=cpu)),
                                                           cpu.get('threads', '')]])


def repeat_table(b, rep):
    """A row a dtype and dropout: the repeat's step time over the first's (its range over variants), and the
    largest move of a variant's ratio to softmax."""
    rows = []
    for (_, d, p, _), rs in b.groups.items():
        vs = [r['variant'] for r in rs if 'error' not in r]
        over = [rep.ms(v, d, p) / b.ms(v, d, p) for v in vs]
        moved = max(vs, key=lambda v: abs(rep.ms(v, d, p) / rep.ms('softmax', d, p) - b.ms(v, d, p) / b.ms('softmax', d, p)))
        by = abs(rep.ms(moved, d, p) / rep.ms('softmax', d, p) - b.ms(moved, d, p) / b.ms('softmax', d, p))
        rows.append([f'{d}, dropout {p:g}', span(over), f'{by:.2f} ({moved})'])
    return table(['configuration', 'repeat / first, step time', 'largest move of a ratio to softmax'], rows)


def bench_cpu_names():
    b, rep = Bench(), Bench(BENCH_REPEAT)
    if rep.doc['processor'] != b.doc['processor']:
        raise SystemExit(f'pages.py: {BENCH_REPEAT} ran on another processor than {BENCH_CPU}: the page compares '
                         f'two runs on one kind of machine')
    return dict(b=b, repeat=lambda: repeat_table(b, rep))


# ----------------------------------------------------------------------------- results/bench_gpu.md, the GPU checks

GPU_CHECK = 'results/gpu_check'
# the checks, by folder: the two of 2026-11-26 (named by the code's commit: their files name 1d3817f, an older .git's)
# and the third, which ran the queue
ALONE, GATHER, QUEUE1 = '2026-11-26_h200_779ab8c', '2026-11-26_h200_09c4cb4', '2026-11-27_h200_6cb9fa0'
EVAL_GROUP = 'results/eval_group_cpu'
ALONE_PATHS = dict(eager='eager', compiled='`--compile=True`', graphed='`--cuda_graph=True`',
                   graphed_compiled='`--cuda_graph=True --compile=True`')


def check(name):
    """The results.json of one committed GPU check, results/gpu_check/<name>/ (a path for another folder)."""
    return read_json(name if '/' in name else f'{GPU_CHECK}/{name}/results.json')


def step_of(name, step):
    return check(name)['steps'][step]


def commit_of(name):
    """The commit a check's folder is named by (the code it ran)."""
    return name.rsplit('_', 1)[1]


def bounds(name):
    """A check's bounds of one step, in ms, at that check's own ceilings: train_flops, train_bytes, eval_flops,
    eval_bytes (the floor step's FLOPs at the matmul's rate, its eager bytes at the copy's)."""
    env, f = step_of(name, 'env'), step_of(name, 'floor')
    return {f'{k}_{m}': 1e3 * f[f'{k}_{m}'] / (rate * 1e12 if m == 'flops' else bw * 1e9) for k in ('train', 'eval')
            for m, rate, bw in (('flops', env['bf16_tflops'], None), ('bytes', None, env['bandwidth_gbs']))}


def bounds_table(names):
    """A row a check and kind of step: its FLOPs, eager bytes, and the two bounds at that check's ceilings."""
    rows = []
    for name in names:
        env, f, b = step_of(name, 'env'), step_of(name, 'floor'), bounds(name)
        head = f"`{commit_of(name)}` ({env['bf16_tflops']:.0f} TFLOP/s, {env['bandwidth_gbs'] / 1e3:.2f} TB/s)"
        for k, what in (('train', 'training step'), ('eval', 'eval batch (forward)')):
            rows.append([head, what, f"{f[k + '_flops'] / 1e9:.1f} G", f"{f[k + '_bytes'] / 1e9:.3f} GB",
                         f"{b[k + '_flops']:.2f} ms", f"{b[k + '_bytes']:.2f} ms"])
            head = ''
    return table(['check (its ceilings)', '', 'FLOPs', 'eager bytes', 'FLOP bound', 'eager-traffic bound'], rows)


def alone(name=ALONE):
    """{path: its run} of the check's one 3-layer run alone (eager, compiled, graphed, graphed and compiled)."""
    return step_of(name, 'alone')['runs']


def alone_table(name=ALONE):
    """ms/step, tokens/s, each bound over the step and val at the end of each path of the check's run alone."""
    b = bounds(name)
    rows = [[ALONE_PATHS[k], f"{r['ms_per_iter']:.2f}", f"{r['tokens_per_sec'] / 1e6:.2f}M",
             f"{b['train_bytes'] / r['ms_per_iter']:.2f}", f"{b['train_flops'] / r['ms_per_iter']:.2f}",
             f"{r['final_val_loss']:.4f}"] for k, r in alone(name).items()]
    return table(['path', 'ms/step', 'tokens/s', 'eager-traffic bound / step', 'FLOP bound / step', 'val at the end'],
                 rows)


def steps_table(names):
    """Each check's steps and their status, a row a check (its GPU, torch, date, and whether its tree had uncommitted
    changes, from its record's env step)."""
    return table(['check', 'tree', 'GPU, torch', 'started', 'steps: status'], [
        [f'`{commit_of(n)}`', 'with uncommitted changes' if step_of(n, 'env').get('dirty') else 'clean',
         f"{step_of(n, 'env')['gpu']}, {step_of(n, 'env')['torch']}", check(n)['started'][:10],
         ', '.join(f"{k}: {v['status']}" for k, v in check(n)['steps'].items())] for n in names])


def sci(x, digits=2):
    """x in scientific notation to so many significant digits, as '4.2e-5'."""
    return re.sub(r'e([+-])0*(\d)', lambda m: 'e' + m[1].replace('+', '') + m[2], f'{x:.{digits - 1}e}')


def probe_table(name=ALONE):
    """The batched-seeds probe's residuals |L − ⟨V, ∂L/∂V⟩| / Σ|V ∂L/∂V|, a row a kernel and dropout."""
    rows = []
    for r in step_of(name, 'probe')['rows']:
        cells = [r['error'], '', ''] if 'error' in r else [
            ' '.join(sci(x) for x in r[k]) for k in ('vmap_of_grad', 'grad_of_vmap', 'per_seed_loop')]
        rows.append([r['backend'], r['dropout']] + cells)
    return table(['kernel', 'dropout', 'vmap of grad', 'grad of vmap', 'one seed at a time'], rows)


def runs_table(runs, columns):
    """A step's runs, a row each: columns are (heading, key, format)."""
    return table(['run'] + [c[0] for c in columns], [[k] + [num(r[key], fmt) for _, key, fmt in columns]
                                                      for k, r in runs.items()])


def bench_gpu_names():
    return dict(steps_table=lambda: steps_table([ALONE, GATHER, QUEUE1]), bounds_table=bounds_table,
                alone_table=alone_table, ALONE=ALONE, GATHER=GATHER)


def check_readme_names(name):
    """A GPU check folder's README.md: what its results.md (bench_gpu.py's render of results.json) cannot show."""
    steps = check(name)['steps']
    return dict(steps=steps, runs_table=runs_table, probe_table=lambda: probe_table(name),
                head=lambda: steps_table([name]))


def eval_group_names():
    """results/eval_group_cpu/README.md: the CPU's eval step (bench_gpu.py --steps env eval), from its results.json."""
    res = check(f'{EVAL_GROUP}/results.json')
    ev, env = res['steps']['eval'], res['steps']['env']
    rows = [[k, f"{e['ms_per_batch']:.0f}", f"{e['train']:.6f}", f"{e['val']:.6f}"] for k, e in ev['evals'].items()]
    return dict(machine=lambda: table(['commit', 'tree', 'started', 'processor', 'threads', 'torch'], [[
        f"`{env['commit']}`", 'with changes' if env['dirty'] else 'clean', res['started'][:10],
        report.machine_label(dict(cpu=env['host_cpu'])), env['host_cpu']['threads'], env['torch']]]),
        evals=lambda: table(['how', 'ms a batch', 'train loss', 'val loss'], rows))


# ----------------------------------------------------------------------------- results/dropout_noise.md

def dropout_noise_names():
    """results/dropout_noise.md: evidence/dropout_noise.py's rows (results/dropout_noise.json)."""
    dn = read_json('results/dropout_noise.json')
    rows = [[r['model'], r['layer'], r['weights'], num(r['lambda_full'], '{:+.3f}'), f"{r['std_earlier']:.4f}",
             f"{r['std_current']:.4f}", f"{r['std_earlier'] / r['std_current']:.2f}"] for r in dn['rows']]
    cpu = dn['machine']['cpu']
    return dict(table=lambda: table(['model', 'layer', 'weights', 'λ_full', 'std, earlier rule', 'std, current rule',
                                     'earlier / current'], rows),
                machine=lambda: table(['processor', 'threads', 'commit'], [[report.machine_label(dn['machine']),
                                                                            cpu['threads'], f"`{dn['commit']}`"]]))


# ----------------------------------------------------------------------------- the pages

PAGES = {'results/sink_cpu.md': sink_names, 'results/needle_cpu.md': needle_names,
         'results/diagnostics_cpu.md': diagnostics_names, 'results/seed_table_explained.md': seed_table_names,
         'results/shakespeare_char_cpu.md': dict, 'results/shakespeare_char_llama_cpu.md': dict,
         'results/dropout_noise.md': dropout_noise_names, 'results/bench_cpu.md': bench_cpu_names,
         'results/bench_gpu.md': bench_gpu_names,
         f'{GPU_CHECK}/{ALONE}/README.md': lambda: check_readme_names(ALONE),
         f'{GPU_CHECK}/{GATHER}/README.md': lambda: check_readme_names(GATHER),
         f'{GPU_CHECK}/{QUEUE1}/README.md': lambda: check_readme_names(QUEUE1),
         f'{EVAL_GROUP}/README.md': eval_group_names}
# a page whose file name is not its template's (a folder's README.md): its template in pages/, without the .in
TEMPLATE_NAMES = {f'{GPU_CHECK}/{ALONE}/README.md': 'gpu_check_alone.md',
                  f'{GPU_CHECK}/{GATHER}/README.md': 'gpu_check_gather.md',
                  f'{GPU_CHECK}/{QUEUE1}/README.md': 'gpu_check_queue1.md',
                  f'{EVAL_GROUP}/README.md': 'eval_group_cpu.md'}


def template(page):
    with open(os.path.join(TEMPLATES, TEMPLATE_NAMES.get(page, os.path.basename(page)) + '.in'), encoding='utf-8') as f:
        return f.read()


def evaluate(text, m, names):
    """The text of the field m (a FIELD match in text); a field that is a name is called (a table); an expression
    that fails names its line."""
    try:
        value = eval(m.group(1), dict(names))  # noqa: S307 (the repository's own templates)
        return str(value() if callable(value) else value)
    except Exception as e:
        line = text.count('\n', 0, m.start()) + 1
        raise SystemExit(f'pages.py: line {line} of the template, {{{{{m.group(1)}}}}}: {e!r}') from None


def render_text(text, names):
    """text with every {{ expression }} evaluated in names."""
    return FIELD.sub(lambda m: evaluate(text, m, names), text)


def fields(page):
    """[(expression, its rendered text)] of the page's template, in order (tests change a rendered number)."""
    text, names = template(page), PAGES[page]()
    return [(m.group(1), evaluate(text, m, names)) for m in FIELD.finditer(text)]


# ----------------------------------------------------------------------------- README.md's quick start

# The quick start's two commands, each timed whole by evidence/time_command.py (command.json) into a committed folder
QUICKSTART = 'results/quickstart_cpu'
DEMO = 'results/shakespeare_demo_cpu'
README_BLOCK = ('<!-- quickstart:start -->', '<!-- quickstart:end -->')


def quickstart_block():
    """The README's lines on how long the quick start takes without a GPU and what its run learns: from the committed
    run of `python train.py configs/diff_sym_6L.py` and of `PROFILE=demo ./ablate.sh`, each timed whole."""
    q, d = (os.path.join(claims.HERE, f, 'command.json') for f in (QUICKSTART, DEMO))
    if not os.path.exists(q):
        return f'Its time on a CPU is not measured yet (`{QUICKSTART}` is not committed).'
    q, s = read_json(q), read_json(os.path.join(claims.HERE, QUICKSTART, 'diff_sym_6L', 'summary.json'))
    evals = [r for _, r in output.read_log_lines(os.path.join(claims.HERE, QUICKSTART, 'diff_sym_6L', 'log.jsonl'))
             if r.get('kind') == 'eval']
    lam = s['lambda_table']
    moved = max(lam, key=lambda r: abs(r['lambda_full'] - r['lambda_init']))
    text = (f"Measured without a GPU (`{QUICKSTART}`, commit `{q['commit'][:7]}`, a {q['cpu']['threads']}-core "
            f"{provenance.machine_label(dict(cpu=q['cpu']))}): the command took {output.duration(q['elapsed_s'])}; "
            f"val loss went from {num(evals[0]['val_loss'], '{:.2f}')} at step {evals[0]['iter']} to "
            f"{num(s['final_val_loss'], '{:.2f}')} at step {s['iter']}, and layer {moved['layer']}'s λ_full from "
            f"its λ_init {num(moved['lambda_init'])} to {num(moved['lambda_full'])}.")
    if os.path.exists(d):
        d = read_json(d)
        text += f" `PROFILE=demo ./ablate.sh` took {output.duration(d['elapsed_s'])} on the same machine (`{DEMO}`)."
    return text


def readme(text):
    """README.md with its quick-start block rendered (the findings block is claims.py's)."""
    start, end = README_BLOCK
    a, b = text.index(start) + len(start), text.index(end)
    return text[:a] + '\n' + textwrap.fill(quickstart_block(), 117) + '\n' + text[b:]


def records():
    """{results.md: its results.json} of every committed GPU check (results/gpu_check/*/) and of the CPU's check of
    the grouped evaluation: each results.md is evidence/bench_gpu.py's render of its results.json."""
    found = sorted(glob.glob(os.path.join(claims.HERE, GPU_CHECK, '*', 'results.json')))
    found += [os.path.join(claims.HERE, EVAL_GROUP, 'results.json')]
    return {os.path.relpath(os.path.join(os.path.dirname(p), 'results.md'), claims.HERE):
            os.path.relpath(p, claims.HERE) for p in found}


def render(page):
    """The page's text, rendered from its template and the committed runs; a check's results.md (records()) by
    evidence/bench_gpu.py's render from its results.json."""
    claims._RUNS.clear()  # a run file changed since the last render (tests) is read again
    if page == 'README.md':
        with open(os.path.join(ROOT, page), encoding='utf-8') as f:
            return readme(f.read())
    if page not in PAGES:
        return bench_gpu.render(read_json(records()[page]))
    return render_text(template(page), PAGES[page]())


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[1].strip())
    ap.add_argument('--check', action='store_true', help='write nothing; exit 1 where a page differs from its render')
    ap.add_argument('pages', nargs='*', help='pages to render (default: every page of PAGES and the GPU checks\' '
                    'results.md)')
    args = ap.parse_args(argv)
    stale = []
    for page in args.pages or [*PAGES, *records(), 'README.md']:
        text, path = render(page), os.path.join(ROOT, page)
        with open(path, encoding='utf-8') as f:
            if f.read() != text:
                stale.append(page)
                if not args.check:
                    report.write_text(path, text)
    if args.check and stale:
        print(f"pages.py: {', '.join(stale)} differ{'s' * (len(stale) == 1)} from the render: run python "
              f"evidence/pages.py", file=sys.stderr)
        sys.exit(1)
    print(('rendered: ' + ', '.join(stale)) if stale else 'up to date')


if __name__ == '__main__':
    main()
