"""
Findings pages rendered from the committed runs, by one renderer: each page of PAGES is its template
(evidence/pages/<page>.in) with every {{ expression }} replaced by its value, computed by this file's functions from
the committed run folders (summary.json, log.jsonl, analysis.json, needle_eval.json, provenance.json, read through
report.py and claims.py) and the committed benchmark records (bench.py's results/bench_cpu.json, the GPU checks'
results/gpu_check/*/results.json and queue*.json). Each GPU check's own results.md (records()) is
evidence/bench_gpu.py's render of its results.json, written again here where that render has changed since the check
ran.

  python evidence/pages.py            # renders every page
  python evidence/pages.py --check    # exit 1, naming each page that differs from its render (tests do the same)

The rule for a template: every number, range, count and "every / all / k of n" that comes from runs is an
expression; prose that interprets stays typed. What may stay typed: the settings a command line sets (it is the
command, not a result), commit hashes and dates, and numbers of other papers; a prediction's range as written before
its runs, or another source's number, goes through written() so the template says it is not a result. The seed's own
table is printed from SEED_VAL / SEED_TRAIN / SEED_LAMBDA / SEED_L12 (citations of docs/seed_notes.md). A number whose
runs are not committed is not on a page.

Pooling follows the claims' rule (report.computed_on: processor, number format, code era, execution path, threads):
a Runs object holds one homogeneous group, and a page that has runs of several groups shows each group on its own.
"""
import argparse
import glob
import json
import os
import re
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)  # report.py, claims.py: `python evidence/pages.py` from the repository's root

import bench  # noqa: E402
import bench_gpu  # noqa: E402
import claims  # noqa: E402
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
    """'1-5' for a run of consecutive seeds, else '1, 3, 4'."""
    seeds = sorted(seeds)
    if len(seeds) > 2 and seeds == list(range(seeds[0], seeds[-1] + 1)):
        return f'{seeds[0]}-{seeds[-1]}'
    return ', '.join(map(str, seeds))


def k_of_n(flags):
    """'k of n' over {seed: bool}."""
    return f'{sum(flags.values())} of {len(flags)}'


def interval(st, fmt='{:.3f}', p=False):
    """A comparison (report.compare) as 'B − A [lo, hi]', with ', p = ...' where asked; where it has no interval,
    the one difference and why."""
    f = fmt.replace('{:', '{:+')
    if st['test'] == 'single':
        return num(st['diff'], f) + ' (one seed)'
    text = f"{num(st['diff'], f)} [{num(st['lo'], f)}, {num(st['hi'], f)}]"
    return text + (f', {p_text(st)}' if p else '')


def p_text(st):
    """'p = 0.034', or 'p < 0.001'."""
    p = report.fmt_p(st['p'])
    return f'p {p[0]} {p[1:]}' if p.startswith('<') else f'p = {p}'


def noise(st):
    """report.gap_words' verdict in a page's words: 'within noise' where the interval contains 0, else that it
    excludes 0 (B lower / higher); 'too few seeds' under report.MIN_SEEDS."""
    words = report.gap_words(st)
    return {'not within noise: B lower': 'lower, the interval excludes 0',
            'not within noise: B higher': 'higher, the interval excludes 0'}.get(words, words)


def both(*sts):
    """noise() of several comparisons: 'both within noise' where they agree, else each's in turn."""
    words = [noise(st) for st in sts]
    return f'both {words[0]}' if len(set(words)) == 1 and len(words) == 2 else ' and '.join(words)


def bold_if(st, text):
    """text in bold where st's interval excludes 0 (a table's mark of a difference)."""
    return f'**{text}**' if report.gap_words(st).startswith('not within') else text


# ----------------------------------------------------------------------------- runs

class Runs:
    """The finished runs of one homogeneous group (report.computed_on) among the folders' runs, pooled by seed as
    claims.runs_of pools them; group: the group's index in the order report.homogeneous meets the groups over every
    run of the folders (variants in load order, seeds in order). depth: the cells' depth."""

    def __init__(self, folders, depth, group=0):
        self.folders, self.depth = folders, depth
        runs = claims.runs_of(folders)
        if runs is None:
            raise SystemExit(f'pages.py: none of {folders} is committed')
        everything = [s for key in sorted(runs) if key[1] == depth for s in finished(runs[key])]
        groups = list(homogeneous(everything).values())
        self.others = len(groups) - 1
        mine = groups[group]
        self.label = group_label(mine)
        self.cells = {}
        for s in mine:
            self.cells.setdefault(s['_variant'], {})[s['_seed']] = s

    def seeds(self, v):
        return sorted(self.cells[v])

    def run(self, v, seed):
        return self.cells[v][seed]

    def values(self, v, read, file='analysis.json', seeds=None):
        """{seed: read(file's dict)} of variant v (summary.json: the summary itself), over seeds (default all) that
        have the file."""
        out = {}
        for seed in seeds or self.seeds(v):
            s = self.cells[v].get(seed)
            f = None if s is None else (s if file == 'summary.json' else run_file(s, file))
            if f is not None:  # read(f) may be None (a run that never reached a mark), and is kept as that
                out[seed] = read(f)
        return out

    def config(self, v, key):
        """The one value of config[key] over v's runs (an error where they differ: the page would say one)."""
        vs = {repr(s['config'][key]) for s in self.cells[v].values()}
        if len(vs) != 1:
            raise SystemExit(f'pages.py: {v} runs differ in {key}: {sorted(vs)}')
        return next(iter(self.cells[v].values()))['config'][key]

    def one(self, read, file='analysis.json'):
        """The one value of read(file) over every run of the group (an error where runs differ: the page says
        one)."""
        vs = {repr(y) for v in self.cells for y in self.values(v, read, file).values()}
        if len(vs) != 1:
            raise SystemExit(f'pages.py: the runs differ in what the page states as one value: {sorted(vs)}')
        return eval(vs.pop())  # noqa: S307 (a repr of a JSON value)

    def wall(self):
        """The range of summary.json's wall_time_s over every run of the group, in seconds."""
        return span([s['wall_time_s'] for c in self.cells.values() for s in c.values()], '{:.0f}')

    def compare(self, a, b, read, file='analysis.json', seeds=None):
        """B − A paired by seed (report.compare) in read's measure."""
        return compare(self.values(a, read, file, seeds), self.values(b, read, file, seeds))


# ----------------------------------------------------------------------------- rendering

def evaluate(template, m, names):
    """The text of the field m (a FIELD match in template); an expression that fails names its line."""
    try:
        return str(eval(m.group(1), dict(names)))  # noqa: S307 (the repository's own templates)
    except Exception as e:
        line = template.count('\n', 0, m.start()) + 1
        raise SystemExit(f'pages.py: line {line} of the template, {{{{{m.group(1)}}}}}: {e!r}') from None


def render_text(template, names):
    """template with every {{ expression }} evaluated in names."""
    return FIELD.sub(lambda m: evaluate(template, m, names), template)


def fields(page):
    """[(expression, its rendered text)] of the page's template, in order (tests change a rendered number)."""
    text, names = template(page), PAGES[page]()
    return [(m.group(1), evaluate(text, m, names)) for m in FIELD.finditer(text)]


def template(page):
    name = TEMPLATE_NAMES.get(page, os.path.basename(page))
    with open(os.path.join(TEMPLATES, name + '.in'), encoding='utf-8') as f:
        return f.read()


# ----------------------------------------------------------------------------- results/sink_cpu.md

BB = claims.BB  # Bigram-Backcopy's seeds 1-5 and 6-10, the folders claims 5 and 6 read
SINK = claims.SINK  # Gu et al.'s sink: a head's mean attention to position 0 above 0.3
SINK_VARIANTS = ['nanogpt', 'softmax1', 'gated', 'gated_headwise', 'orthoadam', 'softmax1_orthoadam']
# analysis.json's measures the sink page reads: name -> read(analysis.json)
M = dict(all=lambda a: a['overall']['first_token_attention'], L1=claims.LAYER(0), L2=claims.LAYER(1),
         gu=lambda a: a['overall']['sink_heads'], kurt=lambda a: a['overall']['kurtosis_rest'],
         ratio=lambda a: a['overall']['massive_ratio'], int4=lambda a: a['quantization']['loss_penalty_int4'],
         uniform=lambda a: a['overall']['first_token_uniform'],
         gate_mean=lambda a: a['layers'][0]['gate_mean'], gate_low=lambda a: a['layers'][0]['gate_below_0_1'])
VAL = lambda s: s['final_val_loss']  # noqa: E731


class Sink(Runs):
    """One homogeneous group of Bigram-Backcopy's sink runs, with the measures the sink page states."""

    def __init__(self, group=0):
        super().__init__(BB, '2L', group)

    def v(self, variant, m, seeds=None):
        """{seed: value} of measure m (M's, or 'val': the final val loss) of variant (without the bb_ prefix)."""
        if m == 'val':
            return self.values('bb_' + variant, VAL, 'summary.json', seeds)
        return self.values('bb_' + variant, M[m], seeds=seeds)

    def span(self, variant, m, fmt='{:.2f}', seeds=None):
        return span(self.v(variant, m, seeds).values(), fmt)

    def mean(self, variant, m, fmt='{:.2f}', seeds=None):
        return num(statistics.mean(self.v(variant, m, seeds).values()), fmt)

    def listed(self, variant, m, fmt='{:.2f}', seeds=None):
        """'a, b and c in seeds 1-3': the values seed by seed."""
        vs = self.v(variant, m, seeds)
        xs = [num(y, fmt) for y in vs.values()]
        return ((', '.join(xs[:-1]) + ' and ' + xs[-1] if len(xs) > 1 else xs[0])
                + f" in seed{'s' * (len(xs) > 1)} {seeds_text(vs)}")

    def times_uniform(self, variant, m):
        """The range of m / the uniform reference (the weight uniform attention would give position 0), as 'lo-hi'."""
        u = self.v(variant, 'uniform')
        return span([y / u[x] for x, y in self.v(variant, m).items()], '{:.0f}')

    def all_runs(self, m):
        """m over every run of every variant in the group."""
        return [x for variant in SINK_VARIANTS for x in self.v(variant, m).values()]

    def cmp(self, variant, m, seeds=None):
        """variant − the baseline in m, paired by seed."""
        return compare(self.v('nanogpt', m, seeds), self.v(variant, m, seeds))

    def sink_seeds(self, variant='nanogpt', m='L2'):
        """The seeds where variant has a sink (> SINK) in layer m."""
        return [x for x, y in self.v(variant, m).items() if y > SINK]

    def no_sink_seeds(self, variant='nanogpt', m='L2'):
        return [x for x, y in self.v(variant, m).items() if y <= SINK]

    def where(self, variant, m, test, seeds=None):
        """'k of n' seeds where test(value) holds."""
        return k_of_n({x: test(y) for x, y in self.v(variant, m, seeds).items()})

    def halved(self, variant, m):
        """'k of n' seeds where variant's m is at most half the baseline's (the claims' "halves": B <= A / 2)."""
        a, b = self.v('nanogpt', m), self.v(variant, m)
        return k_of_n({x: b[x] <= a[x] / 2 for x in sorted(set(a) & set(b))})

    def not_halved(self, variant, m, fmt='{:.2f}'):
        """'seed s (b against a)' for each seed where the variant does not halve the baseline's m."""
        a, b = self.v('nanogpt', m), self.v(variant, m)
        return '; '.join(f'seed {x} ({num(b[x], fmt)} against {num(a[x], fmt)})'
                         for x in sorted(set(a) & set(b)) if b[x] > a[x] / 2) or 'none'

    def reduction(self, variant, m, seeds=None):
        """1 − mean(variant) / mean(baseline) over seeds, in percent."""
        a, b = self.v('nanogpt', m, seeds), self.v(variant, m, seeds)
        return f'{100 * (1 - statistics.mean(b.values()) / statistics.mean(a.values())):.0f}%'

    def per_seed_table(self):
        """Layer 1 / layer 2 first-token attention and Gu's share, per variant and seed."""
        seeds = self.seeds('bb_nanogpt')
        rows = ['| variant | ' + ' | '.join(f'seed {x}' for x in seeds) + ' |', '|---' * (len(seeds) + 1) + '|']
        for variant in SINK_VARIANTS:
            l1, l2, gu = (self.v(variant, m) for m in ('L1', 'L2', 'gu'))
            rows.append(f'| {NAMES.get(variant, variant)} | ' + ' | '.join(
                f'{l1[x]:.2f} / {l2[x]:.2f} ({gu[x]:.1f})' if x in l1 else '—' for x in seeds) + ' |')
        return '\n'.join(rows)

    def summary_table(self):
        """Mean ± std of the baseline in each measure, each variant's paired difference from it (bold where the
        interval excludes 0), and the massive-activation ratio's mean ± std."""
        cols = [('all', '{:.3f}'), ('L1', '{:.3f}'), ('L2', '{:.3f}'), ('gu', '{:.2f}'), ('kurt', '{:.2f}'),
                ('int4', '{:.4f}'), ('val', '{:.4f}')]
        rows = ['| variant | first-token attn (all layers) | B − A, 95% interval | layer 1, B − A | layer 2, B − A '
                '| Gu share, B − A | kurtosis, B − A | max / median act | int4 penalty, B − A | val, B − A |',
                '|---' * 10 + '|']
        for variant in SINK_VARIANTS:
            cells = [pm(self.v(variant, 'all').values(), '{:.3f}')]
            for i, (m, fmt) in enumerate(cols):
                if variant == 'nanogpt':
                    cells.append('' if i == 0 else f"({pm(self.v(variant, m).values(), fmt)})")
                else:
                    st = self.cmp(variant, m)
                    cells.append(bold_if(st, interval(st, fmt)))
                if i == 4:  # the ratio is a column of its own, mean ± std (no difference: there are no outliers)
                    cells.append(pm(self.v(variant, 'ratio').values(), '{:.0f}'))
            rows.append(f'| {NAMES.get(variant, variant)} | ' + ' | '.join(cells) + ' |')
        return '\n'.join(rows)


def probe_row(setting, s):
    """A row of the sink page's table of settings tried: steps, first-token attention by layer (the uniform
    reference), Gu's share, kurtosis, max / median activation, final val loss; from the run's analysis.json."""
    a = run_file(s, 'analysis.json')
    o = a['overall']
    layers = ', '.join(f"{x['first_token_attention']:.3f}" for x in a['layers'])
    return (f"| {setting} | {s['iter']} | {layers} ({o['first_token_uniform']:.3f}) | {o['sink_heads']:.2f} | "
            f"{o['kurtosis_rest']:.1f} | {o['massive_ratio']:.0f}× | {s['final_val_loss']:.3f} |")


def tokens(s):
    """The tokens a run trained on: steps × batch × accumulation × block."""
    c = s['config']
    return s['iter'] * c['batch_size'] * c['gradient_accumulation_steps'] * c['block_size']


def sink_names():
    bb = claims.runs_of(BB)
    bos = claims.runs_of('results/shakespeare_cpu_long_bos')
    bos_run = finished(bos[('nanogpt', '3L')])[0]
    groups = [Sink(0)] + [Sink(i) for i in range(1, Sink(0).others + 1)]
    return dict(g=groups[0], others=groups[1:], probe_row=probe_row, tokens=tokens, claims=claims, report=report,
                above=lambda x: x > SINK, below=lambda x: x <= SINK, num=num, span=span, pm=pm, seeds_text=seeds_text, k_of_n=k_of_n,
                interval=interval, noise=noise, both=both, SINK=SINK, NAMES=NAMES, bb=bb, bos=bos_run,
                bos_a=run_file(bos_run, 'analysis.json'), statistics=statistics)


# ----------------------------------------------------------------------------- results/needle_cpu.md

NEEDLE = ('results/needle_cpu', 'results/needle_cpu_seeds6-10')  # seeds 1-5 of six variants; 6-10 of two
ND = claims.ND  # needles with distractors, seeds 1-5 of six variants
NEEDLE_VARIANTS = ['nanogpt', 'diff', 'diff_sym', 'sym', 'gated', 'softmax1']
LEARNED = 0.1  # "learned the task": the first eval with val loss below 0.1 (the copy plateau is above 1)


def paired_text(st, fmt='{:.3f}'):
    """A paired comparison as 'd ± sd, [lo, hi], p = p' (the pages' long form)."""
    f = fmt.replace('{:', '{:+')
    return (f"{num(st['diff'], f)} ± {num(st['sd'], fmt)}, [{num(st['lo'], f)}, {num(st['hi'], f)}], "
            f"{p_text(st)}")


class Needle(Runs):
    """One homogeneous group of the needle runs (prefix: the folder's config prefix, nd_ for the distractors), with
    needle_eval.json's measures and the training logs' evals."""

    def __init__(self, folders, prefix='', group=0):
        super().__init__(folders, '2L', group)
        self.prefix = prefix

    def has(self, v):
        return self.prefix + v in self.cells

    def s(self, v):
        return self.seeds(self.prefix + v)

    def one_file(self, key):
        """needle_eval.json's key, one value over every run (the grid: depths, n_eval, dtype)."""
        return self.one(lambda f: f[key], 'needle_eval.json')

    def ev(self, v, key, counts=None, seeds=None):
        """{seed: needle_eval.json's key, mean over the needle counts (counts: those only)}."""
        def read(f):
            return statistics.mean(f['by_needles'][n][key] for n in (counts or f['by_needles']))
        return self.values(self.prefix + v, read, 'needle_eval.json', seeds)

    def summ(self, v, read, seeds=None):
        return self.values(self.prefix + v, read, 'summary.json', seeds)

    def val(self, v, seeds=None):
        return self.summ(v, VAL, seeds)

    def counts(self, v):
        """The needle counts every run of v was evaluated at, in order."""
        fs = self.values(self.prefix + v, lambda f: f['by_needles'], 'needle_eval.json')
        return sorted(set.intersection(*(set(f) for f in fs.values())), key=int)

    def cells_below(self, variants, seeds=None, top=1.0):
        """'<variant> seed s at N = n (acc)' for every (variant, seed, needle count) whose accuracy is below top."""
        out = []
        for v in variants:
            fs = self.values(self.prefix + v, lambda f: f['by_needles'], 'needle_eval.json', seeds)
            out += [f"{NAMES.get(v, v)} seed {x} at N = {n} ({f[n]['accuracy']:.3f})" for x, f in fs.items()
                    for n in sorted(f, key=int) if f[n]['accuracy'] < top]
        return out

    def per_n(self, v, key='accuracy', seeds=None):
        """The mean over seeds of key at each needle count, in order."""
        return [statistics.mean(self.ev(v, key, [n], seeds).values()) for n in self.counts(v)]

    def separates(self, a, b, key='accuracy', seeds=None):
        """'k of n' needle counts where B − A's paired interval excludes 0."""
        return k_of_n({n: report.gap_words(self.cmp(a, b, self.ev, seeds, key=key, counts=[n])).startswith(
            'not within') for n in self.counts(a)})

    def more(self, a, b, get, seeds=None, **kw):
        """'k of n' seeds where B's measure is above A's."""
        va, vb = get(a, seeds=seeds, **kw), get(b, seeds=seeds, **kw)
        return k_of_n({x: vb[x] > va[x] for x in sorted(set(va) & set(vb))})

    def less(self, a, b, get, seeds=None, **kw):
        """'k of n' seeds where B's measure is below A's."""
        va, vb = get(a, seeds=seeds, **kw), get(b, seeds=seeds, **kw)
        return k_of_n({x: vb[x] < va[x] for x in sorted(set(va) & set(vb))})

    def order(self, a, b, get, seeds=None, **kw):
        """'B is lower in k, level in l and higher in m of n seeds' (where each is not 0) in get's measure."""
        va, vb = get(a, seeds=seeds, **kw), get(b, seeds=seeds, **kw)
        shared = sorted(set(va) & set(vb))
        n = dict(lower=sum(vb[x] < va[x] for x in shared), level=sum(vb[x] == va[x] for x in shared),
                 higher=sum(vb[x] > va[x] for x in shared))
        parts = [f'{w} in {k}' for w, k in n.items() if k]
        return (', '.join(parts[:-1]) + ' and ' + parts[-1] if len(parts) > 1 else parts[0]) + f' of {len(shared)} seeds'

    def first(self, v, seeds=None):
        """{seed: the first eval step with val loss below LEARNED, None where none is}."""
        def read(s):
            return next((e['iter'] for e in s['_log'] if e.get('kind') == 'eval' and e['val_loss'] < LEARNED), None)
        return self.summ(v, read, seeds)

    def learned(self, v, seeds=None):
        return [x for x, y in self.first(v, seeds).items() if y is not None]

    def failed(self, v, seeds=None):
        return [x for x, y in self.first(v, seeds).items() if y is None]

    def val_at(self, v, step, seeds=None):
        """{seed: val loss at the eval of that step}."""
        return self.summ(v, lambda s: next(e['val_loss'] for e in s['_log'] if e.get('kind') == 'eval'
                                           and e['iter'] == step), seeds)

    def lam(self, v, layer, key, seeds=None):
        """{seed: lambda_table's key of that layer (1-based)}."""
        return self.summ(v, lambda s: s['lambda_table'][layer - 1][key], seeds)

    def cmp(self, a, b, get, seeds=None, **kw):
        """B − A paired by seed in get(variant, seeds=..., **kw)'s measure (a method such as self.ev)."""
        return compare(get(a, seeds=seeds, **kw), get(b, seeds=seeds, **kw))

    def first_table(self, variants, seeds):
        """Steps to the first eval below LEARNED, per variant and seed, mean ± std, and paired against the baseline
        over the seeds where both learned the task."""
        rows = ['| variant | ' + ' | '.join(f'seed {x}' for x in seeds) + ' | mean ± std | paired against nanogpt: '
                'mean ± std, 95% interval, p |', '|---' * (len(seeds) + 3) + '|']
        base = self.first('nanogpt', seeds)
        for v in variants:
            f = self.first(v, seeds)
            ok = [x for x in seeds if f[x] is not None and base[x] is not None]
            where = '' if len(ok) == len(seeds) else f' (seeds {seeds_text(ok)})'
            cells = [str(f[x]) if f[x] is not None else 'never' for x in seeds]
            cells.append(pm([f[x] for x in seeds if f[x] is not None], '{:.0f}') + where)
            cells.append('' if v == 'nanogpt' else
                         paired_text(compare({x: base[x] for x in ok}, {x: f[x] for x in ok}), '{:.0f}') + where)
            rows.append(f'| {NAMES.get(v, v)} | ' + ' | '.join(cells) + ' |')
        return '\n'.join(rows)

    def acc_table(self, variants):
        """Mean accuracy over needle counts per seed, mean ± std, and paired against the baseline."""
        seeds = self.s('nanogpt')
        rows = ['| variant | ' + ' | '.join(f's{x}' for x in seeds) + ' | mean ± std | − nanogpt, paired, 95% '
                'interval |', '|---' * (len(seeds) + 3) + '|']
        base = self.ev('nanogpt', 'accuracy')
        for v in variants:
            a = self.ev(v, 'accuracy')
            rows.append(f'| {NAMES.get(v, v)} | ' + ' | '.join(f'{a[x]:.3f}' for x in seeds) + f' | '
                        f"{pm(a.values(), '{:.3f}')} | "
                        + ('' if v == 'nanogpt' else interval(compare(base, a), '{:.3f}', p=True)) + ' |')
        return '\n'.join(rows)

    def measure_table(self, keys, variants):
        """needle_eval.json's measures (mean over needle counts): the baseline's mean ± std, then each variant
        minus the baseline, paired."""
        rows = ['| measure | nanogpt | ' + ' | '.join(f'{NAMES.get(v, v)} − nanogpt' for v in variants) + ' |',
                '|---' * (len(variants) + 2) + '|']
        for k in keys:
            rows.append(f"| {k.replace('_', ' ')} | {pm(self.ev('nanogpt', k).values(), '{:.3f}')} | " + ' | '.join(
                interval(self.cmp('nanogpt', v, self.ev, key=k)) for v in variants) + ' |')
        return '\n'.join(rows)

    def curve_table(self, variants, steps, seeds):
        """Val loss at the given eval steps, mean ± std over the seeds."""
        rows = ['| step | ' + ' | '.join(map(str, steps)) + ' |', '|---' * (len(steps) + 1) + '|']
        for v in variants:
            rows.append(f'| {NAMES.get(v, v)} | ' + ' | '.join(
                pm(self.val_at(v, step, seeds).values(), '{:.3f}') for step in steps) + ' |')
        return '\n'.join(rows)


def needle_names():
    nd, nc = Needle(ND, 'nd_'), Needle(NEEDLE)
    if nd.others or nc.others:  # the page pools every seed of a folder: the claims' rule must allow it
        raise SystemExit('pages.py: the needle runs are not one homogeneous group: show each group on its own')
    worst = min(nd.ev('softmax1', 'accuracy').items(), key=lambda xy: xy[1])[0]
    return dict(nd=nd, nc=nc, S5=nc.s('diff'), S10=nc.s('nanogpt'), V=NEEDLE_VARIANTS, worst=worst,
                learned=[x for x in nd.s('softmax1') if x != worst], num=num, span=span, pm=pm,
                seeds_text=seeds_text, k_of_n=k_of_n, interval=interval, noise=noise, both=both,
                paired_text=paired_text, p_text=p_text, compare=compare, report=report, statistics=statistics, NAMES=NAMES,
                LEARNED=LEARNED, stats=__import__('scipy').stats)


# ----------------------------------------------------------------------------- results/diagnostics_cpu.md

DIAG = 'results/shakespeare_cpu_long'  # the committed Shakespeare sweep whose runs analyze.py measured
# analysis.json's measures the diagnostics page reads: name -> (column, read(analysis.json), format). Over layers:
# first-token attention and kurtosis the mean, the largest activation and logit the maximum (analyze.py's overall),
# the median logit the median of the layers' medians, the effective ranks the mean
D = dict(
    first=('first-token attn', lambda a: a['overall']['first_token_attention'], '{:.4f}'),
    heads=('heads on token 0', lambda a: a['overall']['first_token_heads'], '{:.2f}'),
    kurt=('kurtosis', lambda a: a['overall']['kurtosis_rest'], '{:.2f}'),
    act=('max abs act', lambda a: a['overall']['max_activation'], '{:.1f}'),
    top1=('top-1 abs logit', lambda a: a['overall']['logit_top1'], '{:.1f}'),
    median=('median abs logit', lambda a: statistics.median(x['logit_median'] for x in a['layers']), '{:.2f}'),
    erank_attn=('erank attn', lambda a: statistics.mean(x['erank_attention'] for x in a['layers']), '{:.1f}'),
    erank_qk=('erank QK', lambda a: statistics.mean(x['erank_qk'] for x in a['layers']), '{:.2f}'),
    int8=('int8 loss penalty', lambda a: a['quantization']['loss_penalty_int8'], '{:+.4f}'),
    int4=('int4 loss penalty', lambda a: a['quantization']['loss_penalty_int4'], '{:+.4f}'),
    ppl=('perplexity', lambda a: a['quantization']['ppl_fp'], '{:.2f}'),
)
LAYER_D = [('first_token_attention', '{:.4f}'), ('first_token_heads', '{:.2f}'), ('kurtosis_rest', '{:.2f}'),
           ('max_activation', '{:.1f}'), ('logit_top1', '{:.1f}'), ('erank_attention', '{:.1f}'),
           ('erank_qk', '{:.2f}')]


class Diag(Runs):
    """The analysed runs of the Shakespeare sweep, one homogeneous group."""

    def __init__(self):
        super().__init__(DIAG, '3L')
        self.variants = sorted((v for v in self.cells if all(run_file(s, 'analysis.json') is not None
                                                              for s in self.cells[v].values())),
                               key=report.variant_key)

    def m(self, v, key, seeds=None):
        """{seed: D's measure key}, 'val': the final val loss."""
        if key == 'val':
            return self.values(v, VAL, 'summary.json', seeds)
        return self.values(v, D[key][1], seeds=seeds)

    def layer(self, v, key):
        """[every layer's value of every seed] of analysis.json's per-layer key."""
        return [x[key] for a in self.values(v, lambda a: a['layers']).values() for x in a if key in x]

    def everywhere(self, key, fmt):
        """The range of a per-layer key over every layer of every run."""
        return span([x for v in self.variants for x in self.layer(v, key)], fmt)

    def cmp(self, v, key):
        return compare(self.m('nanogpt', key), self.m(v, key))

    def mean(self, v, key, fmt=None):
        return num(statistics.mean(self.m(v, key).values()), fmt or D[key][2])

    def table(self):
        """Per variant, mean ± std over the seeds of each measure."""
        keys = ['first', 'heads', 'kurt', 'act', 'top1', 'median', 'erank_attn', 'erank_qk', 'int8', 'int4']
        rows = ['| model | n | val loss | ' + ' | '.join(D[k][0] for k in keys) + ' |', '|---' * (len(keys) + 3) + '|']
        for v in self.variants:
            rows.append(f'| {NAMES.get(v, v)} | {len(self.cells[v])} | {pm(self.m(v, "val").values(), "{:.3f}")} | '
                        + ' | '.join(pm(self.m(v, k).values(), D[k][2]) for k in keys) + ' |')
        return '\n'.join(rows)

    def layer_table(self):
        """Per variant and layer, mean ± std over the seeds of the per-layer measures, and the gate's where there is
        one (mean / share below 0.1 / std over queries)."""
        n_layers = self.config('nanogpt', 'n_layer')
        rows = ['| model | layer | ' + ' | '.join(k.replace('_', ' ') for k, _ in LAYER_D) + ' | gate mean / < 0.1 / '
                'std over queries |', '|---' * (len(LAYER_D) + 3) + '|']
        for v in self.variants:
            per = self.values(v, lambda a: a['layers'])
            for i in range(n_layers):
                ls = [a[i] for a in per.values()]
                gate = (' / '.join(pm([x[k] for x in ls], f) for k, f in (('gate_mean', '{:.2f}'), (
                    'gate_below_0_1', '{:.3f}'), ('gate_std_over_queries', '{:.3f}'))) if 'gate_mean' in ls[0] else '')
                rows.append(f'| {NAMES.get(v, v)} | {i + 1} | ' + ' | '.join(pm([x[k] for x in ls], f)
                                                                          for k, f in LAYER_D) + f' | {gate} |')
        return '\n'.join(rows)


def uniform_reference(block):
    """analyze.py's first-token reference for uniform causal attention over `block` positions (the files of this
    sweep predate its record in analysis.json)."""
    import torch
    import analyze
    return analyze.uniform_first_token(torch.ones(block, block).tril().bool())


def diagnostics_names():
    d = Diag()
    if d.others:  # one table pools the seeds of every variant: the claims' rule must allow it
        raise SystemExit(f'pages.py: {DIAG} is not one homogeneous group: show each group on its own')
    return dict(d=d, D=D, num=num, span=span, pm=pm, seeds_text=seeds_text, k_of_n=k_of_n, interval=interval,
                noise=noise, both=both, p_text=p_text, NAMES=NAMES, statistics=statistics, report=report,
                uniform=uniform_reference(d.config('nanogpt', 'block_size')))


# ----------------------------------------------------------------------------- results/seed_table_explained.md

# The seed's own numbers (note 001 of the seed notes, docs/seed_notes.md): citations, not findings of these runs.
# val (3L: its one number a cell), and (train, val) at 6L and 8L; the 6-layer lambda table's λ_full
SEED_VARIANTS = ['nanogpt', 'diff', 'sym', 'diff_sym', 'norm_sym']
SEED_VAL = {'3L': dict(nanogpt=0.69, diff=0.69, sym=0.84, diff_sym=0.69, norm_sym=1.1),
            '6L': dict(nanogpt=0.08, diff=0.09, sym=0.22, diff_sym=0.1, norm_sym=0.77),
            '8L': dict(nanogpt=0.11, diff=0.08, sym=0.1)}
SEED_TRAIN = {'6L': dict(nanogpt=0.18, diff=0.21, sym=0.5, diff_sym=0.23, norm_sym=0.94),
              '8L': dict(nanogpt=0.29, diff=0.14, sym=0.21)}
SEED_LAMBDA = dict(diff=[0.30, 0.77, 0.68, 0.69, 0.76, 0.78], diff_sym=[0.53, 0.83, 0.82, 0.80, 0.85, 0.95])
GPU_FULL, GPU_NONCAUSAL = 'results/shakespeare_full', 'results/shakespeare_full_noncausal'
DEPTHS = ['3L', '6L', '8L']
TAIL = 250  # "train step": the mean training-step loss over the last 250 steps (one eval interval of the profile)
COPIED = 1.0  # "has found the copy": the first eval with val below 1.0, under any causal model's val on this text


def train_step(s, tail=TAIL, at=None):
    """The mean training-step loss (train mode, dropout on) over the `tail` steps up to `at` (default: the run's
    last step), from log.jsonl."""
    at = s['iter'] if at is None else at
    return statistics.mean(e['loss'] for e in s['_log'] if e.get('kind') == 'train' and at - tail < e['iter'] <= at)


def dist1(s):
    """mean over layers of |1 − λ_full| (claims.py's measure of claim 4)."""
    return statistics.mean(abs(1 - x['lambda_full']) for x in s['lambda_table'])


class Full(Runs):
    """One homogeneous group of a sweep at the seed's schedule (PROFILE=full), at one depth."""

    tail = TAIL  # the train step's window

    def v(self, variant, m='val', seeds=None):
        """{seed: m}: 'val' the final val loss, 'step' the train step (over the last self.tail steps), 'dist' mean
        |1 − λ_full|, 'copied' the first eval step with val below COPIED (None where none is)."""
        read = dict(val=VAL, step=lambda s: train_step(s, self.tail), dist=dist1,
                    copied=lambda s: next((e['iter'] for e in s['_log'] if e.get('kind') == 'eval'
                                           and e['val_loss'] < COPIED), None))[m]
        return self.values(variant, read, 'summary.json', seeds)

    def mean(self, variant, m):
        return statistics.mean(self.v(variant, m).values())

    def cell(self, variant):
        """'train step / val (n)', means over the group's seeds."""
        if variant not in self.cells:
            return '—'
        return f"{self.mean(variant, 'step'):.3f} / {self.mean(variant, 'val'):.3f} ({len(self.seeds(variant))})"

    def lam(self, variant, layer, key='lambda_full'):
        """The mean over seeds of a layer's (1-based) λ."""
        return statistics.mean(self.values(variant, lambda s: s['lambda_table'][layer - 1][key],
                                           'summary.json').values())

    def cmp(self, a, b, m='val'):
        return compare(self.v(a, m), self.v(b, m))


def pooled(folder, depth, a, b, m='val', fmt='{:.3f}'):
    """B − A over every seed of the folder's cells, as the claims' rule allows pooling: each homogeneous group's
    interval (claims.paired_groups), and the pooled interval only where the groups agree in sign
    (claims.disagree). One group: its interval alone."""
    g = [Full(folder, depth, i) for i in range(Full(folder, depth).others + 1)]
    va, vb, ra, rb = {}, {}, {}, {}
    for x in g:
        va.update(x.v(a, m)), vb.update(x.v(b, m)), ra.update(x.cells[a]), rb.update(x.cells[b])
    groups = claims.paired_groups(ra, rb, va, vb)
    if len(groups) == 1:
        return interval(groups[0]['stat'], fmt)
    each = '; '.join(f"{interval(q['stat'], fmt)} on {q['label']} (seed{'s' * (len(q['seeds']) > 1)} "
                     f"{seeds_text(q['seeds'])})" for q in groups)
    if claims.disagree(dict(groups=groups)):
        return f'the groups disagree in sign, so no pooled value: {each}'
    return f"{interval(compare(va, vb), fmt)} pooled over {len(va)} seeds, the groups agreeing in sign ({each})"


def full_table():
    """Train step / val per depth, sweep and variant (the homogeneous group of each), beside the seed's table; a
    group other than the first gets a row of its own."""
    rows = ['| | ' + ' | '.join(NAMES.get(v, v) for v in SEED_VARIANTS) + ' |', '|---' * 6 + '|']
    for d in DEPTHS:
        seed = [(f'{SEED_TRAIN[d][v]:g} / ' if d in SEED_TRAIN else '') + f'{SEED_VAL[d][v]:g}'
                if v in SEED_VAL[d] else '' for v in SEED_VARIANTS]
        rows.append(f"| {d}, **seed's table** | " + ' | '.join(seed) + ' |')
        for folder, name in ((GPU_NONCAUSAL, 'non-causal'), (GPU_FULL, 'causal')):
            first = Full(folder, d)
            for i in range(first.others + 1):
                g = Full(folder, d, i)
                where = '' if i == 0 else f' ({g.label})'
                rows.append(f'| {d}, ours {name}{where} | ' + ' | '.join(g.cell(v) for v in SEED_VARIANTS) + ' |')
    return '\n'.join(rows)


def ordered(g, variants, m='val', fmt='{:.3f}'):
    """'a x, b y, ...' in ascending order of m's mean."""
    return ', '.join(f'{NAMES.get(v, v)} {num(g.mean(v, m), fmt)}'
                     for v in sorted(variants, key=lambda v: g.mean(v, m)))





CPU_TAIL = 100  # cpu_long's "train step": the mean training-step loss over its last eval interval, 100 steps


def cell_run(folder, variant, seed=1, depth='3L'):
    """The one finished run of a cell's seed (a single run: no pooling, whatever its group)."""
    runs = claims.runs_of(folder)
    got = [s for s in finished(runs.get((variant, depth), dict(ok=[]))) if s['_seed'] == seed] if runs else []
    if len(got) != 1:
        raise SystemExit(f'pages.py: {folder} {variant} {depth} seed {seed}: {len(got)} finished runs, not one')
    return got[0]


def value(folder, variant, m='val', seed=1, depth='3L'):
    """One run's measure: 'val' (final), 'train' (final, eval mode), 'step' (the mean training-step loss over the
    last CPU_TAIL steps, train mode), an int k (val at the eval of step k), ('lam', layer, key) (1-based layer;
    key 'full', 'lambda_1', 'lambda_2'), 'dist' (mean |1 − λ_full|)."""
    s = cell_run(folder, variant, seed, depth)
    if m == 'val':
        return s['final_val_loss']
    if m == 'train':
        return s['final_train_loss']
    if m == 'step':
        return train_step(s, CPU_TAIL)
    if m == 'dist':
        return dist1(s)
    if isinstance(m, int):
        return next(e['val_loss'] for e in s['_log'] if e.get('kind') == 'eval' and e['iter'] == m)
    _, layer, key = m
    return s['lambda_table'][layer - 1]['lambda_full' if key == 'full' else key]


def x(folder, variant, m='val', seed=1, fmt='{:.3f}', depth='3L'):
    """value() as printed."""
    return num(value(folder, variant, m, seed, depth), fmt)


def lams(folder, variant, seed=1, key='full', sep=' / ', fmt='{:.2f}'):
    """λ of every layer of one run, 'a / b / c'."""
    n = len(cell_run(folder, variant, seed)['lambda_table'])
    return sep.join(x(folder, variant, ('lam', layer, key), seed, fmt) for layer in range(1, n + 1))


SEED_L12 = dict(diff=[(0.98, 1.04), (1.14, 0.84), (1.02, 0.90)],  # the seed's λ_1, λ_2 of layers 1-3 (its 6L table)
                diff_sym=[(1.05, 0.87), (1.15, 0.80), (1.10, 0.84)])
V6 = SEED_VARIANTS + ['sym_noself']
STEPS = [100, 200, 300, 400, 500]


def seed_table():
    """The seed's table (citations: SEED_VAL, SEED_TRAIN), train/validate where it has both."""
    rows = ["| seed's table | " + ' | '.join(NAMES.get(v, v) for v in SEED_VARIANTS) + ' |', '|---' * 6 + '|']
    for d in DEPTHS:
        rows.append(f'| {d}, train/validate | ' + ' | '.join(
            (f'{SEED_TRAIN[d][v]:g}/' if d in SEED_TRAIN else '') + f'{SEED_VAL[d][v]:g}' if v in SEED_VAL[d] else ''
            for v in SEED_VARIANTS) + ' |')
    return '\n'.join(rows)


def first_below(folder, variant, level, seed=1):
    """The first eval step with val below level (None where none is)."""
    s = cell_run(folder, variant, seed)
    return next((e['iter'] for e in s['_log'] if e.get('kind') == 'eval' and e['val_loss'] < level), None)


def jump(folder, variant, seed=1):
    """Layer 1's λ_full across the eval interval with the largest fall of val: 'a → b over steps k-100 to k'."""
    evals = [e for e in cell_run(folder, variant, seed)['_log'] if e.get('kind') == 'eval']
    i = max(range(1, len(evals)), key=lambda i: evals[i - 1]['val_loss'] - evals[i]['val_loss'])
    a, b = evals[i - 1], evals[i]
    return f"{num(a['lambda/L1/full'])} → {num(b['lambda/L1/full'])} over steps {a['iter']}-{b['iter']}"


LEAKS = {k: 'results/shakespeare_cpu_long' + f for k, f in dict(
    ZF0='_leak_zero_future', ZF2='_leak_zero_future_dropout0.2',
    OB0='_leak_off_by_one', OB2='_leak_off_by_one_dropout0.2',
    AN0='_leak_after_norm', AN2='_leak_after_norm_dropout0.2', TN0='_leak_time_norm', TN2='_leak_time_norm_dropout0.2',
    CA2='_dropout0.2', FP32='_fp32').items()}


def dag(folder, variant, seed=1):
    """'†' where the run is of superseded numerics (report.provenance), else ''."""
    return '†' if report.provenance(cell_run(folder, variant, seed))['superseded'] else ''


MECH = [LEAKS[k] if k in LEAKS else k for k in (
    'results/shakespeare_cpu_long', 'CA2', 'results/shakespeare_cpu_long_noncausal',
    'results/shakespeare_cpu_long_noncausal_dropout0.2', 'OB0', 'OB2', 'ZF0', 'ZF2', 'AN0', 'AN2', 'TN0', 'TN2')]


def mechanisms_table():
    """A row per sweep of MECH (3L), a column per SEED_VARIANTS: train step (report.train_step_loss) / val at the
    last step, mean ± std over each homogeneous group of a cell's seeds (n where more than one), † for superseded
    numerics."""
    rows = ['| sweep, depth: train step / val | ' + ' | '.join(NAMES.get(v, v) for v in SEED_VARIANTS) + ' |',
            '|---' * 6 + '|']
    for f in MECH:
        runs, cells = claims.runs_of(f), []
        for v in SEED_VARIANTS:
            ok = finished(runs.get((v, '3L'), dict(ok=[])))
            parts = []
            for g in homogeneous(ok).values():
                mark = '†' if report.provenance(g[0])['superseded'] else ''
                parts.append(f"{report.mean_std([report.train_step_loss(s) for s in g])} / "
                             f"{report.mean_std([s['final_val_loss'] for s in g])}{mark}"
                             + (f' (n={len(g)})' if len(g) > 1 else ''))
            cells.append('; '.join(parts) or '—')
        rows.append(f'| {os.path.basename(f)} 3L | ' + ' | '.join(cells) + ' |')
    return '\n'.join(rows)


def log_rows(folder, run):
    """A committed run's log.jsonl (finished or not), its rows in order."""
    with open(os.path.join(claims.HERE, folder, run, 'log.jsonl'), encoding='utf-8') as f:
        return [json.loads(line) for line in f if line.strip()]


def ev(folder, run, it, key='val_loss'):
    """key of the eval at step it in the run's log."""
    return next(e[key] for e in log_rows(folder, run) if e.get('kind') == 'eval' and e['iter'] == it)


def tmean(folder, run, lo, hi):
    """The mean training-step loss over steps lo < iter <= hi of the run's log."""
    return statistics.mean(e['loss'] for e in log_rows(folder, run)
                           if e.get('kind') == 'train' and lo < e['iter'] <= hi)


def last_iter(folder, run):
    return max(e['iter'] for e in log_rows(folder, run) if e.get('kind') == 'train')


def written(text):
    """A number that is not a result of the runs, kept as written: a prediction's range or threshold as it was
    written before its runs, or another source's number (the seed's author's posts). The template names it so, and
    tests/test_pages.py's lint of typed numbers passes it."""
    return text


PIPE = 'results/shakespeare_seed_pipeline_cpu'


def at(folder, run, it, key):
    """A log's measure at the eval of step it: 'step' (the mean training-step loss over the 250 steps before it),
    'train' (train split, eval mode), 'val', 'gap' (val − train)."""
    if key == 'step':
        return tmean(folder, run, it - 250, it)
    train, val = ev(folder, run, it, 'train_loss'), ev(folder, run, it)
    return dict(train=train, val=val, gap=val - train)[key]


def cell_values(folder, variant, m='val', depth='3L'):
    """{seed: value()} over a cell's finished runs, refused where they are not one homogeneous group (a cell's
    seeds are pooled only as the claims' rule allows)."""
    runs = finished(claims.runs_of(folder).get((variant, depth), dict(ok=[])))
    if len(homogeneous(runs)) != 1:
        raise SystemExit(f'pages.py: {folder} {variant} {depth}: its runs are not one homogeneous group')
    return {s['_seed']: value(folder, variant, m, s['_seed'], depth) for s in runs}


def fmt_loss(y):
    """A loss in the status table: three decimals below 0.1 (a copy), else two."""
    return num(y, '{:.3f}' if y < 0.1 else '{:.2f}')


def status_rows():
    """The status table's rows: each mechanism's val at dropout 0 / 0.2 per variant (a cell's seeds pooled where they
    are one homogeneous group: cell_values), * for Diff's earlier dropout rule."""
    z = {'results/shakespeare_cpu_long': 'causal', 'results/shakespeare_cpu_long_noncausal': 'no mask',
         LEAKS['OB0']: '`off_by_one` (key t + 1 visible)', LEAKS['ZF0']: '`zero_future` (future scores 0, not −∞)',
         LEAKS['AN0']: '`after_norm` (mask after the softmax)',
         LEAKS['TN0']: "`time_norm` (GroupNorm over time in Diff's subln)"}
    pair = {'results/shakespeare_cpu_long': LEAKS['CA2'], 'results/shakespeare_cpu_long_noncausal':
            'results/shakespeare_cpu_long_noncausal_dropout0.2', LEAKS['OB0']: LEAKS['OB2'], LEAKS['ZF0']: LEAKS['ZF2'],
            LEAKS['AN0']: LEAKS['AN2'], LEAKS['TN0']: LEAKS['TN2']}
    rows = []
    for f0, name in z.items():
        cells = []
        for v in SEED_VARIANTS:
            if (v, '3L') not in claims.runs_of(f0):
                cells.append('—')
                continue
            a = statistics.mean(cell_values(f0, v).values())
            b = statistics.mean(cell_values(pair[f0], v).values())
            mark = '*' if report.provenance(cell_run(pair[f0], v))['superseded'] else ''
            cell = f'{fmt_loss(a)} / {fmt_loss(b)}{mark}'
            cells.append(f'**{cell}**' if f0 == LEAKS['OB0'] and v == 'norm_sym' else cell)
        rows.append(f'  | {name} | ' + ' | '.join(cells) + ' |')
    return '\n'.join(rows)


def status_gaps():
    """val − the seed's 3L value over the non-copying leak cells (zero_future, after_norm, time_norm at both
    dropouts; a cell's seeds pooled where homogeneous)."""
    out = []
    for k in ('ZF0', 'ZF2', 'AN0', 'AN2', 'TN0', 'TN2'):
        for v in SEED_VARIANTS:
            if (v, '3L') in claims.runs_of(LEAKS[k]):
                out.append(statistics.mean(cell_values(LEAKS[k], v).values()) - SEED_VAL['3L'][v])
    return out


def drops(run, m):
    """How much m fell over each span of 2,500 steps of a seed_pipeline run (evals 2500 to 10000)."""
    return [at(PIPE, run, k, m) - at(PIPE, run, k + 2500, m) for k in (2500, 5000, 7500)]


def grows(run):
    """How much val − train (eval) grew over each span of 2,500 steps."""
    return [-d for d in drops(run, 'gap')]


def ratios(run):
    """Each drop of train (eval) over the one before."""
    d = drops(run, 'train')
    return [b / a for a, b in zip(d, d[1:])]


def one_group(folder, depth='3L'):
    """The folder's runs at depth as one homogeneous group (Full: val, step, dist), refused where they are not: the
    page pools its seeds."""
    g = Full(folder, depth)
    g.tail = CPU_TAIL if 'cpu_long' in folder else TAIL
    if g.others:
        raise SystemExit(f'pages.py: {folder} is not one homogeneous group: show each group on its own')
    return g


def seed_table_names():
    nc = {d: Full(GPU_NONCAUSAL, d) for d in DEPTHS}
    ca = {d: Full(GPU_FULL, d) for d in DEPTHS}
    for d in DEPTHS:
        if nc[d].others or (ca[d].others and d != '3L'):
            raise SystemExit(f'pages.py: the GPU sweeps at {d} are not as the page describes them: re-read its groups')
    ca3 = [Full(GPU_FULL, '3L', i) for i in range(ca['3L'].others + 1)]
    return dict(nc=nc, ca=ca, ca3=ca3, D=DEPTHS, V=SEED_VARIANTS, SEED_VAL=SEED_VAL, SEED_TRAIN=SEED_TRAIN,
                SEED_LAMBDA=SEED_LAMBDA, full_table=full_table, pooled=pooled, ordered=ordered, GPU_FULL=GPU_FULL,
                GPU_NONCAUSAL=GPU_NONCAUSAL, COPIED=COPIED, TAIL=TAIL, provenance=report.provenance,
                num=num, span=span, pm=pm, seeds_text=seeds_text, k_of_n=k_of_n, interval=interval, noise=noise,
                both=both, p_text=p_text, compare=compare, NAMES=NAMES, statistics=statistics, report=report,
                stats=__import__('scipy').stats, train_step=train_step, x=x, value=value, lams=lams, Runs=Runs,
                NC0='results/shakespeare_cpu_long_noncausal', NC2='results/shakespeare_cpu_long_noncausal_dropout0.2',
                CA0='results/shakespeare_cpu_long', CPU_TAIL=CPU_TAIL, seed_table=seed_table, V6=V6, STEPS=STEPS,
                COPY0=[v for v in V6 if value('results/shakespeare_cpu_long_noncausal', v) < 0.1],
                first_below=first_below, jump=jump, math=__import__('math'), SEED_L12=SEED_L12, cell_run=cell_run,
                WORST0=max(V6, key=lambda v: value('results/shakespeare_cpu_long_noncausal', v)),
                WORSTC=max(V6, key=lambda v: value('results/shakespeare_cpu_long', v)), **LEAKS,
                zf=one_group(LEAKS['ZF0']), ca0=one_group('results/shakespeare_cpu_long'),
                yes=lambda ok: 'yes' if ok else 'no', dag=dag, ev=ev, tmean=tmean, last_iter=last_iter,
                log_rows=log_rows, written=written, at=at, cell_values=cell_values, status_rows=status_rows,
                status_gaps=status_gaps,
                zv=lambda v, m='val': cell_values(LEAKS['ZF2'], v, m), PEVALS=[2500, 5000, 7500, 10000],
                drops=drops, grows=grows, ratios=ratios,
                LONG=[1000, 2000, 3000, 4000, 5000],
                SPANS=[(lo, lo + 250) for lo in range(0, 1000, 250)]
                + [(1000, last_iter('results/shakespeare_full_sequential_cpu', 'nanogpt_3L_s1'))],
                ZFC='results/shakespeare_full_leak_zero_future_cpu', FC='results/shakespeare_full_cpu',
                SEQ='results/shakespeare_full_sequential_cpu', PIPE=PIPE, MECH=MECH,
                mechanisms_table=mechanisms_table, os=os,
                d2=lambda f, g, v: num(value(f, v) - value(g, v), '{:+.2f}'))


# ----------------------------------------------------------------------------- results/bench_cpu.md

BENCH_CPU = 'results/bench_cpu.json'  # bench.py --json of one CPU, every variant at two dtypes and two dropouts
BENCH_REPEAT = 'results/bench_cpu_repeat.json'  # the same configurations again, later, on the same kind of CPU
BENCH_COLUMNS = ('T', 'dtype', 'dropout', 'compile')  # what a table's heading names, so its rows leave it out


def read_json(path):
    """A committed JSON file, its path from the repository's root."""
    with open(os.path.join(claims.HERE, path), encoding='utf-8') as f:
        return json.load(f)


class Bench:
    """results/bench_cpu.json (bench.py --json): its configurations by (T, dtype, dropout, compile), in the order
    bench.py ran them, and each variant's measure in one."""

    def __init__(self, path=BENCH_CPU):
        self.path, self.doc = path, read_json(path)
        self.groups = {}
        for r in self.doc['results']:
            self.groups.setdefault((r['seq'], r['dtype'], r['dropout'], r['compile']), []).append(r)

    def one(self, key):
        """The one value of a setting over every configuration (n_layer, batch_size, steps, ...), refused where
        the file has several: the page states it once."""
        values = {r[key] for r in self.doc['results']}
        if len(values) != 1:
            raise SystemExit(f'pages.py: {self.path} has several {key}: {sorted(values)}')
        return values.pop()

    def values(self, key):
        """The values of a setting the file spans (dtype, dropout), in the order bench.py ran them."""
        return list(dict.fromkeys(r[key] for r in self.doc['results']))

    def r(self, variant, dtype, dropout):
        """The record of one variant at one dtype and dropout (the file's one T and compile setting)."""
        return next(r for (_, d, p, _), rows in self.groups.items() if (d, p) == (dtype, dropout)
                    for r in rows if r['variant'] == variant and 'error' not in r)

    def ms(self, variant, dtype, dropout):
        return self.r(variant, dtype, dropout)['ms_per_step']

    def vs(self, variant, dtype, dropout):
        """The variant's step time over softmax's, at one dtype and dropout (bench.markdown's 'vs softmax')."""
        return self.ms(variant, dtype, dropout) / self.ms('softmax', dtype, dropout)

    def variants(self):
        return [r['variant'] for r in self.doc['results'] if 'error' not in r
                and (r['dtype'], r['dropout']) == (self.values('dtype')[0], self.values('dropout')[0])]

    def over(self, variant, key, a, b, m='ms_per_step', **fixed):
        """The variant's measure m at key=b over key=a, the other setting as fixed (bf16's step time over fp32's at
        dropout 0: over(v, 'dtype', 'float32', 'bfloat16', dropout=0.0))."""
        return self.r(variant, **{**fixed, key: b})[m] / self.r(variant, **{**fixed, key: a})[m]

    def spread(self, key, a, b, m='ms_per_step', **fixed):
        """over() of every variant: {variant: ratio}."""
        return {v: self.over(v, key, a, b, m, **fixed) for v in self.variants()}

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

    def failed(self):
        return [f"{r['variant']} ({r['dtype']}, dropout {r['dropout']:g})" for r in self.doc['results'] if 'error' in r]


def repeat_spread(b, rep):
    """How far a second run of the same configurations moved: (the range of its step time over the first's, the
    largest change of a variant's ratio to softmax, and the variant, dtype and dropout where it was largest)."""
    cells = [(v, t, d) for t in b.values('dtype') for d in b.values('dropout') for v in b.variants()]
    times = [rep.ms(*c) / b.ms(*c) for c in cells]
    moved = max(cells, key=lambda c: abs(rep.vs(*c) - b.vs(*c)))
    return times, abs(rep.vs(*moved) - b.vs(*moved)), moved


def bench_cpu_names():
    b, rep = Bench(), Bench(BENCH_REPEAT)
    doc = b.doc
    if rep.doc['processor'] != doc['processor']:
        raise SystemExit(f'pages.py: {BENCH_REPEAT} ran on another processor than {BENCH_CPU}: the page compares '
                         f'two runs on one kind of machine')
    return dict(b=b, doc=doc, rep=rep, repeat=repeat_spread(b, rep), label=report.machine_label(dict(cpu=doc['processor'])), num=num, span=span,
                k_of_n=k_of_n, statistics=statistics, cpu=doc['processor'], units=' and '.join(
                    f'`{u}`' for u in doc['processor']['bf16']) or 'none (bf16 is emulated)',
                F='float32', H='bfloat16', pct=lambda x: f'{100 * x:.0f}%')


# ----------------------------------------------------------------------------- results/bench_gpu.md, the GPU checks

GPU_CHECK = 'results/gpu_check'
# the checks results/bench_gpu.md reads, by folder: the two checks of 2026-11-26 (named by the code's commit: their
# files name 1d3817f, an older .git's) and the queue's first call
ALONE, GATHER, QUEUE1 = '2026-11-26_h200_779ab8c', '2026-11-26_h200_09c4cb4', '2026-11-27_h200_6cb9fa0'
EVAL_GROUP = 'results/eval_group_cpu'
ALONE_PATHS = dict(eager='eager', compiled='`--compile=True` (the CUDA default)', graphed='`--cuda_graph=True`',
                   graphed_compiled='`--cuda_graph=True --compile=True`')


def check(name):
    """The results.json of one committed GPU check, results/gpu_check/<name>/ (a path for another folder)."""
    return read_json(name if '/' in name else f'{GPU_CHECK}/{name}/results.json')


def step_of(name, step):
    return check(name)['steps'][step]


def queue_jobs(name):
    """{job: its record, with the call's env} of every job a queue call (queue*.json of results/gpu_check/<name>/)
    ran, skipped ones left out."""
    out = {}
    for path in sorted(glob.glob(os.path.join(claims.HERE, GPU_CHECK, name, 'queue*.json'))):
        q = read_json(os.path.relpath(path, claims.HERE))
        out.update({j['job']: dict(j, env=q['env']) for j in q['jobs'] if j['status'] != 'skipped'})
    return out


def queue_job(name, job):
    jobs = queue_jobs(name)
    if job not in jobs:
        raise SystemExit(f'pages.py: no queue file of {GPU_CHECK}/{name} ran {job}')
    return jobs[job]


def bounds(name):
    """A check's bounds of one step, in ms, at that check's own ceilings: train_flops, train_bytes, eval_flops,
    eval_bytes (the floor step's FLOPs at the matmul's rate, its eager bytes at the copy's)."""
    env, f = step_of(name, 'env'), step_of(name, 'floor')
    return {f'{k}_{m}': 1e3 * f[f'{k}_{m}'] / (rate * 1e12 if m == 'flops' else bw * 1e9) for k in ('train', 'eval')
            for m, rate, bw in (('flops', env['bf16_tflops'], None), ('bytes', None, env['bandwidth_gbs']))}


def bounds_table(names):
    """A row a check and kind of step: its FLOPs, eager bytes, and the two bounds at that check's ceilings."""
    rows = ['| check (its ceilings) | | FLOPs | eager bytes | FLOP bound | eager-traffic bound |',
            '|---|---|---|---|---|---|']
    for name in names:
        env, f, b = step_of(name, 'env'), step_of(name, 'floor'), bounds(name)
        head = f"`{commit_of(name)}` ({env['bf16_tflops']:.0f} TFLOP/s, {env['bandwidth_gbs'] / 1e3:.2f} TB/s)"
        for k, what in (('train', 'training step'), ('eval', 'eval batch (forward)')):
            rows.append(f"| {head} | {what} | {f[k + '_flops'] / 1e9:.1f} G | {f[k + '_bytes'] / 1e9:.3f} GB | "
                        f"{b[k + '_flops']:.2f} ms | {b[k + '_bytes']:.2f} ms |")
            head = ''
    return '\n'.join(rows)


def commit_of(name):
    """The commit a check's folder is named by (the code it ran; see ALONE's note for the 2026-11-26 checks)."""
    return name.rsplit('_', 1)[1]


def alone(name=ALONE):
    """{path: its run} of the check's one 3-layer run alone (eager, compiled, graphed, graphed and compiled)."""
    return step_of(name, 'alone')['runs']


def floor_ms(name):
    """The larger of a check's two bounds of a training step, ms."""
    b = bounds(name)
    return max(b['train_flops'], b['train_bytes'])


def alone_table(name=ALONE):
    """ms/step, tokens/s, the floor over the step and val at the end of each path of the check's run alone, the
    best in bold."""
    runs, best = alone(name), min(alone(name), key=lambda k: alone(name)[k].get('ms_per_iter', 1e9))
    rows = ['| path | ms/step | tokens/s | floor / step | val at the end |', '|---|---|---|---|---|']
    for k, r in runs.items():
        cells = [f"{r['ms_per_iter']:.2f}", f"{r['tokens_per_sec'] / 1e6:.2f}M",
                 f"{floor_ms(name) / r['ms_per_iter']:.2f}"]
        cells = [f'**{c}**' for c in cells] if k == best else cells
        rows.append(f"| {ALONE_PATHS[k]} | {' | '.join(cells)} | {r['final_val_loss']:.4f} |")
    return '\n'.join(rows)


def sci(x, digits=2):
    """x in scientific notation to so many significant digits, as '4.2e-5' (digits=1: '4e-5')."""
    return re.sub(r'e([+-])0*(\d)', lambda m: 'e' + m[1].replace('+', '') + m[2], f'{x:.{digits - 1}e}')


def probe_split(name=ALONE):
    """The batched-seeds probe's residuals: (those where each seed's backward saw its forward's masks: dropout 0,
    one seed at a time, grad of vmap and vmap of grad's first seed; vmap of grad's other seeds under dropout)."""
    good, bad = [], []
    for row in step_of(name, 'probe')['rows']:
        if 'error' in row:
            continue
        good += row['per_seed_loop'] + row['grad_of_vmap'] + row['vmap_of_grad'][:1]
        (bad if row['dropout'] > 0 else good).extend(row['vmap_of_grad'][1:])
    return good, bad


def summaries(folder, pattern):
    """{run: summary.json} of a committed sweep's runs whose folder matches pattern (a glob)."""
    return {os.path.basename(os.path.dirname(p)): read_json(os.path.relpath(p, claims.HERE)) for p in
            sorted(glob.glob(os.path.join(claims.HERE, folder, pattern, 'summary.json')))}


def tokens_k(runs):
    """The span of the runs' tokens/s, in thousands."""
    return span([s['tokens_per_sec'] / 1e3 for s in runs.values()], '{:.0f}') + 'k'


def bench_gpu_names():
    c1, c2, env = check(ALONE), check(GATHER), step_of(ALONE, 'env')
    a, ab = alone(), bounds(ALONE)
    seeds, probe = step_of(ALONE, 'seeds')['runs'], probe_split()
    full = 'results/shakespeare_full'
    h100 = {d: summaries(full, f'*_{d}_s[12]') for d in ('3L', '6L', '8L')}
    s3 = summaries(full, '*_3L_s3')
    graph_failed = step_of(GATHER, 'graph_tests')['failed']
    return dict(
        c1=c1, c2=c2, env=env, a=a, ab=ab, seeds=seeds, good=probe[0], bad=probe[1], sci=sci, num=num, span=span,
        bounds=bounds, bounds_table=bounds_table, alone_table=alone_table, step_of=step_of, check=check, k=tokens_k,
        ALONE=ALONE, GATHER=GATHER, QUEUE1=QUEUE1, commit_of=commit_of, queue_job=queue_job, written=written,
        q=lambda job: queue_job(QUEUE1, job), ms=lambda name, path: alone(name)[path]['ms_per_iter'],
        h100_3=h100['3L'], h100_68={**h100['6L'], **h100['8L']}, s3=s3, floor_ms=floor_ms,
        s3_total=sum(s['tokens_per_sec'] for s in s3.values()), gpt2=step_of(ALONE, 'gpt2')['runs']['nanogpt'],
        probe=step_of(ALONE, 'probe'), tests=step_of(GATHER, 'cuda_tests'), graph_failed=graph_failed,
        reduce_overhead=[t for t in graph_failed if 'reduce_overhead' in t],
        group=check(f'{EVAL_GROUP}/results.json')['steps']['eval']['evals'],
        queue_table=bench_gpu.queue_table, alone=alone, pct=lambda x, f='{:.0f}': f'{num(100 * x, f)}%')


def probe_table(name=ALONE):
    """The batched-seeds probe's residuals, a row a kernel and dropout (the check's results.md had it when the check
    ran; bench_gpu.py's render has no table for the step since the path was removed)."""
    rows = ['| kernel | dropout | vmap of grad | grad of vmap | one seed at a time |', '|---|---|---|---|---|']
    for r in step_of(name, 'probe')['rows']:
        cells = [r['error'], '', ''] if 'error' in r else \
            [' '.join(sci(x) for x in r[k]) for k in ('vmap_of_grad', 'grad_of_vmap', 'per_seed_loop')]
        rows.append(f"| {r['backend']} | {r['dropout']} | {' | '.join(cells)} |")
    return '\n'.join(rows)


def runs_table(runs, columns):
    """A step's runs, a row each: columns are (heading, key, format)."""
    rows = ['| run | ' + ' | '.join(c[0] for c in columns) + ' |', '|---' * (len(columns) + 1) + '|']
    for k, r in runs.items():
        rows.append(f'| {k} | ' + ' | '.join(num(r[key], fmt) for _, key, fmt in columns) + ' |')
    return '\n'.join(rows)


def check_readme_names(name):
    """A GPU check folder's README.md: what its results.md (bench_gpu.py's render of results.json) cannot say, from
    its results.json and queue*.json."""
    res = check(name)
    return dict(res=res, env=res['steps']['env'], steps=res['steps'], commit=commit_of(name), name=name, num=num,
                sci=sci, jobs=queue_jobs(name), probe=res['steps'].get('probe'), probe_table=probe_table,
                runs_table=runs_table,
                good=probe_split(name)[0] if 'probe' in res['steps'] else None,
                bad=probe_split(name)[1] if 'probe' in res['steps'] else None)


def eval_group_names():
    """results/eval_group_cpu/README.md: the CPU's eval step (bench_gpu.py --steps env eval), from its results.json."""
    res = check(f'{EVAL_GROUP}/results.json')
    ev, env = res['steps']['eval'], res['steps']['env']
    one, four = ev['evals']['eager, 1 a forward'], ev['evals']['eager, 4 a forward']
    cpu = env['host_cpu']
    return dict(res=res, ev=ev, env=env, one=one, four=four, cpu=cpu, num=num,
                label=report.machine_label(dict(cpu=cpu)), batches=round(1e3 * one['seconds'] / one['ms_per_batch'] / 2),
                isa='no bf16 units' if not cpu['bf16'] else 'bf16 units: ' + ' '.join(cpu['bf16']),
                slower=f"{100 * (four['ms_per_batch'] / one['ms_per_batch'] - 1):.0f}%")


# ----------------------------------------------------------------------------- the pages

def uncommitted_names():
    """The pages whose runs were never committed (shakespeare_char_cpu.md, shakespeare_char_llama_cpu.md): they keep
    their prose and history, cite the commit that had the numbers, and render only the seed's numbers they cite."""
    return dict(SEED_VAL=SEED_VAL, SEED_LAMBDA=SEED_LAMBDA, num=num, span=span)


def dropout_noise_names():
    """results/dropout_noise.md: evidence/dropout_noise.py's rows (results/dropout_noise.json), a table and the ratio
    earlier / current where lambda_full > 0 and < 0."""
    with open(os.path.join(claims.HERE, 'results', 'dropout_noise.json'), encoding='utf-8') as f:
        dn = json.load(f)
    rows = ['| model | layer | weights | λ_full | std, earlier rule | std, current rule | earlier / current |',
            '|---|---|---|---|---|---|---|']
    for r in dn['rows']:
        rows.append(f"| {r['model']} | {r['layer']} | {r['weights']} | {num(r['lambda_full'], '{:+.3f}')} "
                    f"| {r['std_earlier']:.4f} | {r['std_current']:.4f} | {r['std_earlier'] / r['std_current']:.2f} |")
    ratio = lambda sign: [r['std_earlier'] / r['std_current'] for r in dn['rows']  # noqa: E731
                          if r['lambda_full'] * sign > 0]
    return dict(dn=dn, table='\n'.join(rows), pos=ratio(1), neg=ratio(-1), num=num, span=span, k_of_n=k_of_n,
                statistics=statistics, label=report.machine_label(dn['machine']),
                threads=dn['machine']['cpu']['threads'])


PAGES = {'results/sink_cpu.md': sink_names, 'results/needle_cpu.md': needle_names,
         'results/diagnostics_cpu.md': diagnostics_names, 'results/seed_table_explained.md': seed_table_names,
         'results/shakespeare_char_cpu.md': uncommitted_names,
         'results/shakespeare_char_llama_cpu.md': uncommitted_names,
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


def records():
    """{results.md: its results.json} of every committed GPU check (results/gpu_check/*/) and of the CPU's check of
    the grouped evaluation (results/eval_group_cpu/): each results.md is what evidence/bench_gpu.py's render writes
    from its results.json when the check runs, so here it is rendered again, and written where that render changed."""
    found = sorted(glob.glob(os.path.join(claims.HERE, GPU_CHECK, '*', 'results.json')))
    found += [os.path.join(claims.HERE, EVAL_GROUP, 'results.json')]
    return {os.path.relpath(os.path.join(os.path.dirname(p), 'results.md'), claims.HERE):
            os.path.relpath(p, claims.HERE) for p in found}


def render(page):
    """The page's text, rendered from its template and the committed runs; a check's results.md (records()) by
    evidence/bench_gpu.py's render from its results.json."""
    claims._RUNS.clear()  # a run file changed since the last render (tests) is read again
    if page not in PAGES:
        return bench_gpu.render(read_json(records()[page]))
    return render_text(template(page), PAGES[page]())


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[1].strip())
    ap.add_argument('--check', action='store_true', help='write nothing; exit 1 where a page differs from its render')
    ap.add_argument('pages', nargs='*', help=f'pages to render (default: all: {", ".join(PAGES)}, and the GPU '
                    f'checks\' results.md)')
    args = ap.parse_args(argv)
    stale = []
    for page in args.pages or [*PAGES, *records()]:
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
