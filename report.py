"""
Render a sweep's tables in the seed notes' layout from the runs' summary.json and log.jsonl files.

$ python report.py runs/shakespeare_cpu        # prints the markdown and writes runs/shakespeare_cpu/results.md

Run folders are named <variant>_<depth>_s<seed> (ablate.sh's layout). results.md has:
  0. a title saying what the sweep is, from the runs' configs (dataset, causal mask or not, schedule, dropout,
     mask_self where used);
  1. final loss, rows depth, columns the seed's variants, cells train/val (mean +- std over seeds), the best
     val loss of a row of two or more in bold; a cell says 'missing' (no run), '—' (no such config in configs/, so
     no run was due) or 'FAILED' / 'unfinished' instead of a blank;
  2. the extra variants (Sym without self-attention, gated, softmax-1, ...) in the same layout as 1;
  3. one row per (depth, variant) with more digits and the training-step loss (train mode, dropout on) beside
     the eval train/val losses;
  4. val loss over training, mean +- std over seeds at the evaluations every run logged;
  5. comparisons the seeds' claims make (B - A in val loss): paired t-test over shared seeds, Welch's t
     otherwise, a 95% interval and whether it contains 0;
  6. the per-layer lambda table of every Differential model, columns lambda_1, lambda_2, lambda_init, lambda_full,
     and Diff+Sym against Diff in the distance of lambda_full from 1 (the same statistics as 5);
  7. the runs, and analyze.py's diagnostics where analysis.json exists: per run, per variant (mean +- std over
     seeds), and the sink claims (softmax-1 and the gate against the baseline) with the statistics of 5;
  8. the same for needle_eval.py's retrieval measures where needle_eval.json exists (each variant against the
     baseline).
results.md is a pure function of the run files and the sweep folder's name (the command's SWEEP): no paths, no
dates, and the same text whether or not matplotlib is installed. At its top: the command that makes the runs again,
their commits and what they were computed on, and the runs no claim's verdict reads (provenance.excluded). With
matplotlib, val_loss.png (from the eval lines) and lambda_full.png (every line that logs λ_full) are written beside it
(the text names them).
"""
import argparse
import json
import math
import os
import re
import statistics
import sys

from scipy import stats

from output import pyplot, read_log_lines, save_figure, write_text
from profiles import PROFILES, changed_by, sweep_name
from provenance import (CPU_NAMES, FREE_KEYS, FREE_ON_RESUME, NUMERICS, SETUP_KEYS, SHARED_KEYS,  # noqa: F401
                        computed_on, contains, excluded, group_key, group_label, group_number, grouped, groups_disagree,
                        homogeneous, legend, machine_label, path_of, provenance, read_provenance)
from variants import LABELS as NAMES, PREFIXES, VARIANTS

# (reference A, variant B): the gaps B - A that the claims are about, in the order results.md lists them, by measure.
# A new variant's comparisons go here
PAIRS = dict(
    loss=[('nanogpt', 'diff'), ('sym', 'diff_sym'), ('sym', 'norm_sym'), ('nanogpt', 'sym'), ('nanogpt', 'gated'),
          ('nanogpt', 'softmax1'), ('sym', 'sym_noself'), ('nanogpt', 'gated_headwise'), ('nanogpt', 'orthoadam'),
          ('nanogpt', 'softmax1_orthoadam')],  # final val loss
    lambda_full=[('diff', 'diff_sym')],  # the seed's lambda claim: the distance of lambda_full from 1
    sink=[('nanogpt', 'softmax1'), ('nanogpt', 'gated'), ('nanogpt', 'gated_headwise'), ('nanogpt', 'orthoadam'),
          ('nanogpt', 'softmax1_orthoadam')],  # the sink claims, in analyze.py's measures
    # the retrieval claim, in needle_eval.py's measures (diffv2: configs/needle_diffv2.py, no variant configs)
    needle=[('nanogpt', 'diff'), ('nanogpt', 'sym'), ('nanogpt', 'diff_sym'), ('nanogpt', 'gated'),
            ('nanogpt', 'softmax1'), ('nanogpt', 'diffv2'), ('sym', 'diff_sym')],
)


def with_prefixes(items):
    """items (variant names, or tuples of them) and then their copies under each prefix."""
    def add(p, v):
        return tuple(p + x for x in v) if isinstance(v, tuple) else p + v
    return list(items) + [add(p, v) for p in PREFIXES for v in items]


# the variants' table (variants.py): the seed's columns in its order, then ours, each also under the prefixes (llama_,
# bb_, nd_, pc_)
SEED_VARIANTS = with_prefixes([name for name, v in VARIANTS.items() if v['seed']])
EXTRA_VARIANTS = with_prefixes([name for name, v in VARIANTS.items() if not v['seed']])
# (reference A, variant B) pairs whose val-loss gap B - A the seeds' claims are about
COMPARISONS = with_prefixes(PAIRS['loss'])
LAMBDA_PAIRS = with_prefixes(PAIRS['lambda_full'])
# the sink claims: softmax-1, the gates and OrthoAdam against the baseline, in analyze.py's measures
DIAG_PAIRS = with_prefixes(PAIRS['sink'])
# (column, how to read it from the file's dict, format)
_DIAG_METRICS = [('first-token attn', lambda a: a['overall']['first_token_attention'], '{:.4f}'),
                 ('heads on token 0', lambda a: a['overall']['first_token_heads'], '{:.3f}'),
                 ('kurtosis', lambda a: a['overall']['kurtosis_rest'], '{:.2f}'),
                 ('max abs act', lambda a: a['overall']['max_activation'], '{:.2f}'),
                 ('int4 loss penalty', lambda a: a['quantization']['loss_penalty_int4'], '{:+.4f}')]


def diag_metrics(files):
    """analyze.py's measures; Gu et al.'s sink share and the massive-activation ratio where every file has them
    (analysis.json files before commit 1d93be1, 2026-11-24, lack them)."""
    if not all('sink_heads' in f['overall'] for f in files):
        return _DIAG_METRICS
    # in models of up to 4 layers, also first-token attention layer by layer: there a sink is one layer's
    # (data/bigram_backcopy's dormant head), and the mean over layers would mix it with layers that have none
    n_layers = {len(f.get('layers', [])) for f in files}
    L = n_layers.pop() if len(n_layers) == 1 else 0
    per_layer = [(f'first-token attn, layer {i + 1}', lambda a, i=i: a['layers'][i]['first_token_attention'],
                  '{:.4f}') for i in range(L if L <= 4 else 0)]
    return (_DIAG_METRICS[:1] + per_layer + _DIAG_METRICS[1:2]
            + [('heads > 0.3 (Gu)', lambda a: a['overall']['sink_heads'], '{:.3f}')]
            + _DIAG_METRICS[2:4] + [('max / median act', lambda a: a['overall']['massive_ratio'], '{:.0f}')]
            + _DIAG_METRICS[4:])
# the retrieval claim: every variant against the baseline in needle_eval.py's measures (needle_eval.json)
NEEDLE_PAIRS = with_prefixes(PAIRS['needle'])


def needle_metrics(files):
    """needle_eval.json's measures: accuracy at each needle count the files share, then the first query's
    attention on the answer needle, on the rest of the haystack, and the answer's share of the absolute weight
    on the haystack (mean over needle counts); with distractors, the stale rate and the shares of the distractors
    and of the unrelated tokens."""
    counts = sorted(set.intersection(*(set(f['by_needles']) for f in files)), key=int)
    mean = lambda f, k: statistics.mean(f['by_needles'][n][k] for n in counts)  # noqa: E731
    metrics = ([(f'acc N={n}', lambda f, n=n: f['by_needles'][n]['accuracy'], '{:.3f}') for n in counts]
               + [('answer attn', lambda f: mean(f, 'answer_attention'), '{:.3f}'),
                  ('noise attn', lambda f: mean(f, 'noise_attention'), '{:.3f}')])
    for key in ('answer_share', 'stale_rate', 'distractor_share', 'unrelated_share'):  # older files lack some
        if all(key in f['by_needles'][n] for f in files for n in counts):
            metrics.append((key.replace('_', ' '), lambda f, key=key: mean(f, key), '{:.3f}'))
    return metrics


CONFIGS = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'configs')
RUN_RE = re.compile(r'^(?P<variant>.+)_(?P<depth>\d+[LM])_s(?P<seed>\d+)$')  # 3L, 6L, ...; 124M (GPT-2 small)
PLOTS = ('val_loss.png', 'lambda_full.png')
LAMBDA_RE = re.compile(r'^lambda/L(\d+)/full$')


# ----------------------------------------------------------------------------- loading

def read_log(path):
    """log.jsonl's records, [] without one; a torn last line (a run killed mid-write) is dropped."""
    if not os.path.exists(path):
        return []
    return [record for _, record in read_log_lines(path)]


def load_runs(root):
    """{(variant, depth): {'ok': [summary, ...], 'failed': [seed, ...], 'unfinished': [seed, ...], 'same_seed':
    [folder, ...]}}, seeds in numeric order; each summary gets _dir, _name, _variant, _depth, _seed and _log (its
    log.jsonl records). A finished run's seed is the one it trained with (its config), not its folder's name: a
    copied or renamed folder would otherwise count as another seed. A second finished run of a cell with a seed
    already there (a copy: the same batches) goes to 'same_seed', out of the tables."""
    found = []
    for name in os.listdir(root):
        m = RUN_RE.match(name)
        if m and os.path.isdir(os.path.join(root, name)):
            found.append((m['variant'], m['depth'], int(m['seed']), name))
    backfilled = read_provenance(root)
    runs = {}
    for variant, depth, seed, name in sorted(found):  # seed 2 before seed 10
        path = os.path.join(root, name)
        cell = runs.setdefault((variant, depth), dict(ok=[], failed=[], unfinished=[], same_seed=[]))
        summary = os.path.join(path, 'summary.json')
        if os.path.exists(summary):
            with open(summary) as f:
                try:
                    s = json.load(f)
                except ValueError as e:  # train.py writes it atomically: a hand edit or a copy cut short
                    raise SystemExit(f"report.py: {summary} is not valid JSON ({e}): restore it (git checkout), "
                                     f"or remove it and re-launch the sweep, which writes it again") from None
            trained = s.get('config', {}).get('seed', seed)
            if any(o['_seed'] == trained for o in cell['ok']):
                cell['same_seed'].append(name)
                continue
            s.update(_dir=path, _name=name, _variant=variant, _depth=depth, _seed=trained,
                     _log=read_log(os.path.join(path, 'log.jsonl')), _prov=backfilled.get(name, {}))
            cell['ok'].append(s)
        elif os.path.exists(os.path.join(path, 'FAILED')):
            cell['failed'].append(str(seed))
        else:
            cell['unfinished'].append(str(seed))
    return runs


def variant_key(v):
    """The seed's variants in its order, then ours, then anything else alphabetically."""
    known = SEED_VARIANTS + EXTRA_VARIANTS
    return (known.index(v), '') if v in known else (len(known), v)


# ----------------------------------------------------------------------------- pooling

def paired_groups(ra, rb, a, b):
    """The homogeneous groups of a paired comparison: ra, rb {seed: run}, a, b {seed: value} over the same seeds. A
    seed's group is its runs' computed_on where A's and B's agree, else the pair of the two (a group of its own
    kind). -> [{'label', 'seeds', 'homogeneous', 'stat' (compare() of the group's seeds)}], one entry where the
    comparison is homogeneous."""
    by = {}
    for x in a:
        ka, kb = group_key(ra[x]), group_key(rb[x])
        by.setdefault(ka if ka == kb else (ka, kb), []).append(x)
    out = []
    for key, seeds in by.items():
        alike = isinstance(key, str)
        label = group_label([r[x] for r in (ra, rb) for x in seeds]) if alike else '; '.join(
            f'{side} {group_label([r[x] for x in seeds])}' for side, r in (('A', ra), ('B', rb)))
        out.append(dict(label=label, seeds=seeds, homogeneous=alike,
                        stat=compare({x: a[x] for x in seeds}, {x: b[x] for x in seeds})))
    return out


def depth_key(d):
    return (d[-1] == 'M', int(d[:-1]))  # layers, then model sizes


def finished(cell):
    return [s for s in cell['ok'] if s.get('final_val_loss') is not None]


# ----------------------------------------------------------------------------- statistics

def t_result(res, diff):
    """(lo, hi, p) of a scipy.stats t test result: its 95% interval (confidence_interval) and two-sided p. A zero
    spread (identical differences) has no t: the interval is the point, and p is 0 unless the difference is 0 too."""
    if not math.isfinite(res.statistic):
        return diff, diff, (1.0 if diff == 0 else 0.0)
    ci = res.confidence_interval(0.95)
    return float(ci.low), float(ci.high), float(res.pvalue)


def paired_t(a, b):
    """Paired t on seeds both have (scipy.stats.ttest_rel): d_s = b_s - a_s, mean d, sd of d, se = sd / sqrt(n),
    df = n - 1. a, b: {seed: val loss}; needs 2 shared seeds."""
    seeds = sorted(set(a) & set(b))
    d = [b[s] - a[s] for s in seeds]
    n, m, sd = len(d), statistics.mean(d), statistics.stdev(d)
    lo, hi, p = (m, m, 1.0 if m == 0 else 0.0) if sd == 0 else t_result(
        stats.ttest_rel([b[s] for s in seeds], [a[s] for s in seeds]), m)
    return dict(test='paired', seeds=seeds, n=n, diff=m, sd=sd, lo=lo, hi=hi, p=p, df=n - 1)


def welch_t(xa, xb):
    """Welch's t on unpaired runs (scipy.stats.ttest_ind, equal_var=False): diff = mean b - mean a, se^2 = va/na +
    vb/nb, and the Welch-Satterthwaite df = se^4 / ((va/na)^2 / (na - 1) + (vb/nb)^2 / (nb - 1)). Needs 2 runs
    each."""
    ua, ub = statistics.variance(xa) / len(xa), statistics.variance(xb) / len(xb)
    se2 = ua + ub
    df = se2 ** 2 / (ua ** 2 / (len(xa) - 1) + ub ** 2 / (len(xb) - 1)) if se2 > 0 else len(xa) + len(xb) - 2
    diff = statistics.mean(xb) - statistics.mean(xa)
    lo, hi, p = (diff, diff, 1.0 if diff == 0 else 0.0) if se2 == 0 else t_result(
        stats.ttest_ind(xb, xa, equal_var=False), diff)
    return dict(test='welch', n=(len(xa), len(xb)), diff=diff, lo=lo, hi=hi, p=p, df=df)


def compare(a, b):
    """B - A in val loss from {seed: loss} of each: paired where 2+ seeds are shared, Welch where each has 2+
    runs, else one difference with no interval: on the one shared seed, or of the means where none is shared."""
    shared = sorted(set(a) & set(b))
    if len(shared) >= 2:
        return paired_t(a, b)
    if len(a) >= 2 and len(b) >= 2:
        return welch_t(list(a.values()), list(b.values()))
    if shared:
        return dict(test='single', seeds=shared, diff=b[shared[0]] - a[shared[0]])
    diff = statistics.mean(b.values()) - statistics.mean(a.values())
    return dict(test='single', seeds=sorted(set(a) | set(b)), diff=diff)


# ----------------------------------------------------------------------------- formatting

def mean_std(xs, fmt='{:.2f}'):
    """'mean ± std' (sample std), or the value alone for one run; a signed format ('{:+.4f}') signs the mean only."""
    if len(xs) == 1:
        return fmt.format(xs[0])
    return (fmt + ' ± ' + fmt.replace('+', '')).format(statistics.mean(xs), statistics.stdev(xs))


def fmt_p(p):
    return '<0.001' if p < 0.001 else f'{p:.3f}'


def mixed_settings(ok):
    """What differs between runs that the tables set side by side as if it did not: across the sweep, SHARED_KEYS;
    within a cell (variant, depth), every config key but FREE_KEYS. A key that a run's config lacks (a run older
    than the key) is not compared. -> a line per key and group that differ."""
    out = []

    def note(key, group):
        by = {}
        for s in group:
            if key in s['config']:
                by.setdefault(repr(s['config'][key]), []).append(s['_name'])
        if len(by) > 1:
            out.append(f"`{key}`: " + ' / '.join(
                f"{v} ({', '.join(names[:3])}{', ...' if len(names) > 3 else ''})" for v, names in by.items()))

    for key in SHARED_KEYS:
        note(key, ok)
    cells = {}
    for s in ok:
        cells.setdefault((s['_variant'], s['_depth']), []).append(s)
    for key in sorted({k for s in ok for k in s['config']} - set(FREE_KEYS) - set(SHARED_KEYS)):
        for group in cells.values():
            note(key, group)
    return out


def mixed_code(ok):
    """Runs of one table trained at different commits, or from a tree with uncommitted changes (train.py records both
    in summary.json's `code`; runs older than that record are not compared). -> a line per finding."""
    def names(ss):
        ss = sorted(ss, key=lambda s: s['_name'])
        return ', '.join(s['_name'] for s in ss[:3]) + (', ...' if len(ss) > 3 else '')
    by_commit, dirty, superseded = {}, [], {}
    for s in ok:
        code, p = s.get('code') or {}, provenance(s)
        if p['commit']:
            by_commit.setdefault(p['commit'][:7], []).append(s)
        if code.get('dirty'):
            dirty.append(s)
        for c in p['superseded']:
            superseded.setdefault(c, []).append(s)
    out = []
    if len(by_commit) > 1:
        out.append('commits ' + ' / '.join(f"{c} ({names(ss)})" for c, ss in sorted(by_commit.items())))
    if dirty:
        out.append(f"a tree with uncommitted changes: {names(dirty)}")
    for c, date, what, _ in NUMERICS:
        if c in superseded:
            out.append(f"trained before {c} ({date}: {what}), so of superseded numerics: {names(superseded[c])}")
    return out


def code_warning(ok):
    """The warning of mixed_code's findings: 'mixed code' where the runs span commits or numerics, 'uncommitted
    changes' where they are all of one commit (or none recorded) and only the tree's edits are in question."""
    found = mixed_code(ok)
    if not found:
        return []
    if all(f.startswith('a tree with uncommitted changes') for f in found):
        return ['', '**Warning: uncommitted changes.** These runs were trained from a tree with changes that were not '
                'committed (summary.json\'s `code`), so their commit does not say all of the code that made them:',
                ''] + [f'- {m}' for m in found]
    return ['', '**Warning: mixed code.** These runs were not all trained by one committed version of the code '
            '(summary.json\'s `code`, or the sweep\'s backfilled provenance.json), so a difference between them may '
            'be the code\'s:', ''] + [f'- {m}' for m in found]


def mixed_machines(runs):
    """Cells (variant, depth) and comparisons B − A whose runs are not one homogeneous group (computed_on: processor,
    number format, execution path, threads, code era). -> a line per such cell and comparison."""
    def groups(ss):
        return {group_label(g): [f"s{s['_seed']}" for s in g] for g in homogeneous(ss).values()}

    out, cells = [], {}
    for (v, d) in sorted(runs, key=lambda vd: (depth_key(vd[1]), variant_key(vd[0]))):
        cells[(v, d)] = ok = finished(runs[(v, d)])
        by = groups(ok)
        if len(by) > 1:
            out.append(f"{NAMES.get(v, v)} {d}: " + '; '.join(f"{k} ({', '.join(x)})" for k, x in by.items()))
    pairs = list(dict.fromkeys(COMPARISONS + LAMBDA_PAIRS + DIAG_PAIRS + NEEDLE_PAIRS))
    for d in sorted({d for _, d in runs}, key=depth_key):
        for a, b in pairs:
            ga, gb = (homogeneous(cells.get((v, d), [])) for v in (a, b))
            if ga and gb and len(set(ga) | set(gb)) > 1:
                ga, gb = (' / '.join(group_label(g) for g in x.values()) for x in (ga, gb))
                out.append(f"{NAMES.get(b, b)} − {NAMES.get(a, a)}, {d}: A {ga}; B {gb}")
    return out


def flags(schedule):
    """{key: value as written} of a profile's train.py arguments ('--max_iters=500 ...')."""
    return dict(a[2:].split('=', 1) for a in schedule.split())


def common(ok, key):
    """The runs' one value of config[key] as train.py's command line writes it (str(0.2), 'True'), None where they
    differ or lack it."""
    vs = {repr(s['config'].get(key)) for s in ok}
    return str(ok[0]['config'][key]) if len(vs) == 1 and key in ok[0]['config'] else None


def same(x, y):
    """Two values as a command line writes them: equal as numbers where both are ('0.001' and '1e-3'), else as text."""
    try:
        return float(x) == float(y)
    except ValueError:
        return x == y


def command(ok, sweep=None):
    """The ablate.sh line that makes these runs again, from their configs: the profile whose data, config prefix and
    schedule fit them best (fewest flags to change), LEAK / CAUSAL / WINDOWS / ARCH / ANALYZE where the runs had
    them, their variants, depths and seeds, the profile's flags the runs changed as extra --key=value, and SWEEP where
    the folder's name is not the one ablate.sh would give. It makes the same runs, not the same machine."""
    variants = sorted({s['_variant'] for s in ok}, key=variant_key)
    llama = all(v.startswith('llama_') for v in variants)
    prefixes = tuple(p.prefix for p in PROFILES.values() if p.prefix)  # a profile's own configs (bb_, nd_, ...)
    data = common(ok, 'dataset') or ''

    def fit(item):
        name, prof = item
        if not data.startswith(prof.data) or not all(v.startswith(prof.prefix) for v in variants) \
                or (not prof.prefix and any(v.startswith(prefixes) for v in variants)):
            return None
        return [f'--{k}={common(ok, k)}' for k, v in flags(prof.schedule).items()
                if k not in FREE_ON_RESUME and common(ok, k) is not None and not same(common(ok, k), v)]
    fits = [(name, prof, extra) for name, prof in PROFILES.items() if (extra := fit((name, prof))) is not None]
    if not fits:
        return None
    name, prof, extra = min(fits, key=lambda f: len(f[2]))
    leak = common(ok, 'leak') or 'none'
    env = [f'LEAK={leak}'] if leak != 'none' else ['CAUSAL=0'] if common(ok, 'causal') == 'False' else []
    env += ['WINDOWS=sequential'] if common(ok, 'window_order') == 'sequential' else []
    env += ['ARCH=llama'] if llama else []
    extra += ['--bos=True'] if common(ok, 'bos') == 'True' else []
    strip = len('llama_') if llama else len(prof.prefix)
    return ablate_line(name, env, [v[strip:] for v in variants], sorted({s['_depth'] for s in ok}, key=depth_key),
                       sorted({s['_seed'] for s in ok}), extra, sweep,
                       any(os.path.exists(os.path.join(s['_dir'], prof.analysis)) for s in ok))


def ablate_line(name, env, variants, depths, seeds, extra=(), sweep=None, analyze=False):
    """The ablate.sh line of profile `name`: env (LEAK=, CAUSAL=0, WINDOWS=, ARCH=), VARIANTS (without the
    profile's prefix), DEPTHS where not the profile's, SEEDS, ANALYZE=1, then the extra --key=value, and SWEEP first
    where `sweep` is not the folder ablate.sh would name. command() renders a committed sweep's by it, and
    evidence/claims.py the line that fills a row not yet measured."""
    prof = PROFILES[name]
    env = [f'PROFILE={name}'] + list(env) + ['VARIANTS="' + ' '.join(variants) + '"']
    depths = ' '.join(depths)
    env += [f'DEPTHS="{depths}"'] if depths != prof.depths else []
    env.append('SEEDS="' + ' '.join(str(x) for x in seeds) + '"')
    env += ['ANALYZE=1'] if analyze else []
    extra = list(extra)
    leak = next((e[5:] for e in env if e.startswith('LEAK=')), 'none')
    if sweep and sweep != sweep_name(name, leak, 'CAUSAL=0' not in env, 'WINDOWS=sequential' in env,
                                     changed_by(prof.schedule.split(), extra)):
        env.insert(0, f'SWEEP={sweep}')
    return ' '.join(env + ['./ablate.sh'] + extra)


def where_section(ok, sweep):
    """What made the runs: the command (command()), the commits (summary.json's `code`, else the backfilled
    provenance.json's `trained_at`; none recorded: unknown) and the machines (homogeneous groups, group_label)."""
    cmd = command(ok, sweep)
    commits = {}
    for s in ok:
        p = provenance(s)
        commits.setdefault((p['commit'][:7] + (' (*inferred*)' if p['inferred'] else '')) if p['commit'] else
                           'not recorded', []).append(s)
    lines = ['Command: ' + (f'`{cmd}`' if cmd else 'none of ablate.sh\'s profiles fits these runs') + '.',
             'Code: ' + '; '.join(f'{c} ({len(ss)} run{"s" * (len(ss) > 1)})' for c, ss in sorted(commits.items()))
             + '.',
             'Computed on: ' + '; '.join(f'{group_label(g)} ({len(g)} run{"s" * (len(g) > 1)})'
                                         for g in homogeneous(ok).values()) + '.']
    return '\n'.join(lines)


def values(summaries, key, default=None):
    """The distinct values of config[key] over the runs: numbers in numeric order, then the rest by repr."""
    vs = {s['config'].get(key, default) for s in summaries}
    return sorted(vs, key=lambda v: (0, v, '') if isinstance(v, (int, float)) else (1, 0, repr(v)))


def joined(vs):
    return '/'.join(map(str, vs))  # str(0.001) == '0.001', str(0.0) == '0.0'


# ----------------------------------------------------------------------------- sections

def title(ok):
    """What the sweep is, from its runs' configs: causal or not, schedule, dropout, mask_self where used.
    A key that differs between runs lists its values (a/b)."""
    causal = values(ok, 'causal', True)
    what = {(True,): 'causal language model',
            (False,): 'attention without the causal mask: not a causal language model'}.get(
        tuple(causal), 'mixed: some runs without the causal mask (those are not causal language models)')
    leak = [v for v in values(ok, 'leak', 'none') if v != 'none']
    if leak:  # a reproduction of a masking bug (model.py, leak)
        what = f"the causal mask applied with the bug leak={joined(leak)}: not a causal language model"
    head = (f"# {joined(values(ok, 'dataset'))}: {what}, {joined(values(ok, 'max_iters'))} steps at learning rate "
            f"{joined(values(ok, 'learning_rate'))}, dropout {joined(values(ok, 'dropout'))}")
    lines = [head]
    noself = sorted({s['_variant'] for s in ok if s['config'].get('mask_self')}, key=variant_key)
    if noself:
        lines += ['', 'mask_self=True (a query may not attend to its own key, Reformer\'s rule for K = Q) in: '
                  + ', '.join(NAMES.get(v, v) for v in noself) + '; every other model attends to itself.']
    setup = {k: values(ok, k, True if k == 'causal' else None) for k in SETUP_KEYS}  # runs before 'causal' were causal
    if values(ok, 'bos', False) != [False]:  # named only where some run had a BOS token (train.py's bos)
        setup['bos'] = values(ok, 'bos', False)
    lines += ['', 'Setup: ' + ', '.join(f'{k}={joined(vs)}' for k, vs in setup.items())
              + (' (a/b: differs between runs).' if any(len(vs) > 1 for vs in setup.values()) else '.')]
    return '\n'.join(lines)


def loss_table(runs, variants):
    depths = sorted({d for (_, d) in runs}, key=depth_key)
    if not depths or not variants:
        return ''
    lines = ['| | ' + ' | '.join(NAMES.get(v, v) for v in variants) + ' |', '|---' * (len(variants) + 1) + '|']
    for d in depths:
        vals = {v: statistics.mean(s['final_val_loss'] for s in finished(runs[(v, d)]))
                for v in variants if finished(runs.get((v, d), dict(ok=[])))}
        best = min(vals, key=vals.get) if len(vals) > 1 else None  # a lone value is the lowest of nothing
        cells = []
        for v in variants:
            cell = runs.get((v, d))
            if cell is None:  # a pair ablate.sh skips for want of a config (e.g. diff_gated_3L) is not missing
                has_config = os.path.exists(os.path.join(CONFIGS, f'{v}_{d}.py'))
                cells.append('missing' if has_config else '—')
                continue
            ok = finished(cell)
            notes = [f"FAILED s{s}" for s in cell['failed']] + [f"unfinished s{s}" for s in cell['unfinished']]
            if not ok:
                cells.append(', '.join(notes))
                continue
            text = mean_std([s['final_train_loss'] for s in ok]) + '/' + mean_std([s['final_val_loss'] for s in ok])
            if v == best:
                text = f'**{text}**'
            if len(ok) > 1:
                text += f' (n={len(ok)})'
            cells.append(' '.join([text] + ([f"({', '.join(notes)})"] if notes else [])))
        lines.append(f'| {d} | ' + ' | '.join(cells) + ' |')
    return '\n'.join(lines)


def train_step_loss(s):
    """Mean of the 'train' lines' loss in the final eval window, iterations (last eval - eval_interval, last eval].
    Each is one optimizer step's loss on its training batch in train mode, so with dropout > 0 it is what a
    'train loss' printed during training measures, unlike the eval train_loss (dropout off, eval_iters batches).
    None without such lines."""
    last = s.get('final_eval_iter', s.get('iter'))
    window = s['config'].get('eval_interval', 0)
    xs = [e['loss'] for e in s['_log'] if e.get('kind') == 'train' and e.get('loss') is not None
          and last - window < e['iter'] <= last]
    return statistics.mean(xs) if xs else None


def detail_table(runs):
    """A row per (depth, variant) with finished runs: eval train and val loss and the training-step loss."""
    lines = ['| depth | variant | seeds | train (eval) | val (eval) | train step | dropout |',
             '|---|---|---|---|---|---|---|']
    for (v, d) in sorted(runs, key=lambda vd: (depth_key(vd[1]), variant_key(vd[0]))):
        ok = finished(runs[(v, d)])
        if not ok:
            continue
        steps = [x for x in map(train_step_loss, ok) if x is not None]
        step = mean_std(steps, '{:.3f}') if steps else '—'
        if 0 < len(steps) < len(ok):  # some runs' logs have no train lines in the window
            step += f' (n={len(steps)})'
        lines.append(f"| {d} | {NAMES.get(v, v)} | {', '.join(str(s['_seed']) for s in ok)} | "
                     f"{mean_std([s['final_train_loss'] for s in ok], '{:.3f}')} | "
                     f"{mean_std([s['final_val_loss'] for s in ok], '{:.3f}')} | {step} | "
                     f"{joined(values(ok, 'dropout'))} |")
    return '\n'.join(lines)


def curve_table(runs, max_cols=11):
    """Val loss over training: a row per (depth, variant) with finished runs, a column per eval iteration every
    one of its runs logged (at most max_cols, evenly spaced, the last always kept); cells mean ± std over seeds."""
    curves = {}
    for (v, d) in sorted(runs, key=lambda vd: (depth_key(vd[1]), variant_key(vd[0]))):
        ok = finished(runs[(v, d)])
        series = [eval_series(s, 'val_loss') for s in ok]
        if ok and all(series):
            curves[(v, d)] = series
    iters = sorted(set.intersection(*(set(x) for series in curves.values() for x in series))) if curves else []
    if len(iters) < 2:
        return ''
    if len(iters) > max_cols:
        iters = [iters[round(i * (len(iters) - 1) / (max_cols - 1))] for i in range(max_cols)]
    lines = ['| depth | variant | n | ' + ' | '.join(map(str, iters)) + ' |', '|---|---|---|' + '---|' * len(iters)]
    for (v, d), series in curves.items():
        lines.append(f'| {d} | {NAMES.get(v, v)} | {len(series)} | '
                     + ' | '.join(mean_std([x[i] for x in series], '{:.3f}') for i in iters) + ' |')
    return '\n'.join(lines)


# The claims' rule for what a table calls a difference (evidence/claims.py's verdict): from fewer than 3 seeds (paired) or
# runs a side (Welch) the 95% interval is shown but not called. On 2 it has 1 degree of freedom, t(0.975, 1) = 12.7,
# and rests on one estimate of the spread
MIN_SEEDS = 3


def gap_words(c):
    """'too few seeds', 'within noise' (the 95% interval contains 0) or 'not within noise: B lower / higher'."""
    n = c['n'] if c['test'] == 'paired' else min(c['n'])
    if n < MIN_SEEDS:
        return 'too few seeds'
    return 'within noise' if c['lo'] <= 0 <= c['hi'] else 'not within noise: B ' + ('lower' if c['diff'] < 0 else
                                                                                     'higher')


def comparison_row(d, a, b, va, vb):
    """One comparison B - A of val loss at depth d; va, vb: {seed: final val loss}."""
    c = compare(va, vb)
    seeds = lambda xs: ', '.join(map(str, xs))  # noqa: E731
    if c['test'] == 'single':
        why = 'one seed' if set(va) & set(vb) else 'one run on a side, no seed shared'  # compare()'s two cases
        cols = [seeds(c['seeds']), f"{c['diff']:+.4f}", f'none: {why}', '—', why, 'unknown']
    else:
        gap = gap_words(c)
        if c['test'] == 'paired':
            cols = [seeds(c['seeds']), f"{c['diff']:+.4f} ± {c['sd']:.4f}", f'paired t, n={c["n"]}']
        else:
            cols = [f'A: {seeds(va)}; B: {seeds(vb)}', f"{c['diff']:+.4f}",
                    f"Welch t, n={c['n'][0]}+{c['n'][1]}, df={c['df']:.1f}"]
        cols = cols[:2] + [f"[{c['lo']:+.4f}, {c['hi']:+.4f}]", fmt_p(c['p']), cols[2], gap]
    spread = [mean_std(list(x.values()), '{:.4f}') for x in (va, vb)]
    return f'| {d} | {NAMES.get(a, a)} | {NAMES.get(b, b)} | ' + ' | '.join(cols + spread) + ' |'


def comparison_table(runs):
    """The seeds' comparisons at each depth where both variants have finished runs."""
    rows = []
    for d in sorted({d for _, d in runs}, key=depth_key):
        for a, b in COMPARISONS:
            ra, rb = (finished(runs.get((v, d), dict(ok=[]))) for v in (a, b))
            if ra and rb:
                rows.append(comparison_row(d, a, b, *({s['_seed']: s['final_val_loss'] for s in r} for r in (ra, rb))))
    if not rows:
        return ''
    return '\n'.join(['| depth | A | B | seeds | B − A | 95% interval | p | test | gap | A val | B val |',
                      '|---|---|---|---|---|---|---|---|---|---|---|'] + rows)


def lambda_tables(runs):
    """One table per depth, the seed's layout: per diff variant lambda_1, lambda_2, lambda_init, lambda_full."""
    out = []
    for d in sorted({d for (_, d) in runs}, key=depth_key):
        cols = [(v, c) for (v, dd), c in runs.items() if dd == d and any(s.get('lambda_table') for s in c['ok'])]
        cols.sort(key=lambda vc: variant_key(vc[0]))
        if not cols:
            continue
        head = '| layer | ' + ' | '.join(f'{NAMES.get(v, v)} λ1 | λ2 | λ_init | λ_full' for v, _ in cols) + ' |'
        counts = sorted({len(c['ok']) for _, c in cols})
        lines = [f'Per-layer lambda, {d} (mean over {"/".join(map(str, counts))} seed(s) per model):', '',
                 head, '|---' * (1 + 4 * len(cols)) + '|']
        n_layers = max(len(s['lambda_table']) for _, c in cols for s in c['ok'])
        for i in range(n_layers):
            cells = []
            for _, c in cols:
                rows = [s['lambda_table'][i] for s in c['ok'] if len(s.get('lambda_table') or []) > i]
                for k in ('lambda_1', 'lambda_2', 'lambda_init', 'lambda_full'):
                    cells.append(mean_std([r[k] for r in rows]) if rows else '')
            lines.append(f'| {i + 1} | ' + ' | '.join(cells) + ' |')
        out.append('\n'.join(lines))
    return '\n\n'.join(out)


def lambda_comparison(runs):
    """The seed's lambda claim, "Diff+Sym's lambda_full is closer to 1 than Diff's", as one comparison per depth:
    B - A of the distance to 1 averaged over layers, mean_l |1 - lambda_full_l| (negative: B is closer)."""
    def distance(cell):  # {seed: mean_l |1 - lambda_full_l|}
        return {s['_seed']: statistics.mean(abs(1 - x['lambda_full']) for x in s['lambda_table'])
                for s in finished(cell) if s.get('lambda_table')}

    rows = []
    for d in sorted({d for _, d in runs}, key=depth_key):
        for a, b in LAMBDA_PAIRS:
            da, db = (distance(runs.get((v, d), dict(ok=[]))) for v in (a, b))
            if da and db:
                rows.append(comparison_row(d, a, b, da, db))
    if not rows:
        return ''
    return '\n'.join(['Distance of λ_full from 1, averaged over layers, mean_l |1 − λ_full,l|: B − A negative means B '
                      "is closer to 1 (the seed: Diff+Sym's λ ≈ 1). Same statistics as the loss comparisons.", '',
                      '| depth | A | B | seeds | B − A | 95% interval | p | test | gap | A | B |',
                      '|---|---|---|---|---|---|---|---|---|---|---|'] + rows)


def run_file(s, name):
    """A JSON file a tool wrote in the run folder (analysis.json, needle_eval.json), or None: also when it is of
    another checkpoint than the run's last (analyze.py --ckpt=best.pt, or a run trained further since), which a
    table of final runs must not mix in."""
    path = os.path.join(s['_dir'], name)
    if not os.path.exists(path):
        return None
    with open(path) as f:
        try:
            out = json.load(f)
        except ValueError as e:
            raise ValueError(f"{path} is not valid JSON ({e}): run its tool again on the run's checkpoint, or "
                             f"remove it") from None
    if out.get('iter', s['iter']) != s['iter']:
        print(f"warning: {path} is of iteration {out['iter']}, not the run's last ({s['iter']}): left out; run "
              f"its tool again on the run's ckpt.pt", file=sys.stderr)
        return None
    return out


def diagnostics_table(summaries):
    """A row per run whose folder has analysis.json (written by analyze.py)."""
    found = [(s, a) for s in summaries if (a := run_file(s, 'analysis.json')) is not None]
    new = all('sink_heads' in a['overall'] for _, a in found)  # Gu's share and the massive ratio (since 1d93be1)
    lines = []
    for s, a in found:
        o, q = a['overall'], a['quantization']
        # beside what uniform weights would give (analysis.json files before commit a949fc3, 2026-11-23, lack it)
        uniform = f" ({o['first_token_uniform']:.3f})" if 'first_token_uniform' in o else ''
        gu, ratio = (f" / {o['sink_heads']:.2f}", f" ({o['massive_ratio']:.0f}x)") if new else ('', '')
        lines.append(f"| {s['_name']} | {o['first_token_attention']:.3f}{uniform} | "
                     f"{o['first_token_heads']:.2f}{gu} | {o['kurtosis_rest']:.1f} | {o['max_activation']:.1f}{ratio} | {o['logit_top1']:.1f} | "
                     f"{q['loss_penalty_int8']:+.4f} | {q['loss_penalty_int4']:+.4f} |")
    if not lines:
        return ''
    heads, act = ('heads on token 0 / > 0.3 (Gu)', 'max abs act (/ median)') if new else ('heads on token 0',
                                                                                          'max abs act')
    return '\n'.join([f'| run | first-token attn (uniform) | {heads} | kurtosis | {act} '
                      '| top-1 abs logit | int8 loss penalty | int4 loss penalty |', '|---' * 8 + '|'] + lines)


def measures_summary(runs, name, metrics, pairs, claim):
    """Per (depth, variant) with 2+ seeds that have the file `name`: mean ± std over seeds of each metric
    (column, read(file dict), format); then B − A per metric for the pairs, with the loss comparisons' statistics
    (paired by seed), where both have 2+ such seeds. claim: what the pairs test, for the table's sentence."""
    files = {key: {s['_seed']: f for s in finished(c) if (f := run_file(s, name)) is not None}
             for key, c in runs.items()}
    files = {key: fs for key, fs in files.items() if fs}
    if not files:
        return ''
    if callable(metrics):
        metrics = metrics([f for fs in files.values() for f in fs.values()])
    value = lambda key, read: {seed: read(f) for seed, f in files.get(key, {}).items()}  # noqa: E731
    rows, cmp_rows = [], []
    for (v, d) in sorted(files, key=lambda k: (depth_key(k[1]), variant_key(k[0]))):
        if len(files[(v, d)]) >= 2:
            rows.append(f'| {d} | {NAMES.get(v, v)} | {len(files[(v, d)])} | '
                        + ' | '.join(mean_std(list(value((v, d), read).values()), fmt) for _, read, fmt in metrics)
                        + ' |')
    same = []  # measures where every run of both models has the same value: nothing to compare
    for d in sorted({d for _, d in files}, key=depth_key):
        for a, b in pairs:
            for col, read, _ in metrics:
                va, vb = value((a, d), read), value((b, d), read)
                if len(va) >= 2 and len(vb) >= 2:
                    if len(set(va.values()) | set(vb.values())) == 1:
                        same.append(f'{col} ({d}, {NAMES.get(a, a)} and {NAMES.get(b, b)}: {next(iter(va.values()))})')
                    else:
                        cmp_rows.append(f'| {col} ' + comparison_row(d, a, b, va, vb))
    if not rows:
        return ''
    out = [f'Mean ± std over the seeds with {name} (n):', '',
           '| depth | variant | n | ' + ' | '.join(m[0] for m in metrics) + ' |',
           '|---|---|---|' + '---|' * len(metrics)] + rows
    if cmp_rows:
        out += ['', f'{claim}: B − A in each measure, with the statistics of the loss comparisons:', '',
                '| measure | depth | A | B | seeds | B − A | 95% interval | p | test | gap | A | B |',
                '|---|---|---|---|---|---|---|---|---|---|---|---|'] + cmp_rows
    if same:
        out += ['', 'The same value in every run of both models, so no comparison: ' + '; '.join(same) + '.']
    return '\n'.join(out)


def needle_table(summaries):
    """A row per run whose folder has needle_eval.json, in needle_metrics' columns; '' where runs' grids differ."""
    lines, head = [], None
    for s in summaries:
        f = run_file(s, 'needle_eval.json')
        if f is None:
            continue
        metrics = needle_metrics([f])
        row_head = '| run | ' + ' | '.join(m[0] for m in metrics) + ' |'
        if head not in (None, row_head):
            return ''  # different needle grids: no common table
        head = row_head
        lines.append(f"| {s['_name']} | " + ' | '.join(fmt.format(read(f)) for _, read, fmt in metrics) + ' |')
    if not lines:
        return ''
    return '\n'.join([head, '|---' * (1 + len(metrics)) + '|'] + lines)


def runs_table(ok):
    """A row per run. tokens/s: summary.json's, the training steps' rate past the first log window (warm-up and
    compiling left out); a run of one log window has none there, and the window's own rate from log.jsonl is given,
    marked (warm-up). train s: summary.json's wall_time_s, timed from the first step to the summary (evaluations and
    checkpoints in; Python's start, loading the data, building the model and timing the MFU peak out)."""
    lines = ['| run | params | iters | tokens/s | train s | device | dtype |', '|---|---|---|---|---|---|---|']
    for s in ok:
        first = [e['tokens_per_sec'] for e in s['_log'] if e.get('kind') == 'train' and e.get('tokens_per_sec')]
        tps = (f"{s['tokens_per_sec']:,.0f}" if s.get('tokens_per_sec') else
               f"{statistics.mean(first):,.0f} (warm-up)" if first else '—')
        lines.append(f"| {s['_name']} | {s['n_params'] / 1e6:.2f}M | {s['iter']} | {tps} | "
                     f"{s['wall_time_s']:.0f} | {s['device']} | {s['dtype']} |")
    return '\n'.join(lines + ['', 'train s: from the first training step to the end, evaluations and checkpoints '
                                   'included; the start of Python, loading the data, building the model and timing '
                                   'the MFU peak are not in it, so ablate.sh\'s "done ... in Ns" (the whole '
                                   'process) is longer. tokens/s: the training steps past the first log window.'])


# ----------------------------------------------------------------------------- plots

def eval_series(s, key):
    """{iter: value} of `key` on a run's eval lines."""
    return {e['iter']: e[key] for e in s['_log'] if e.get('kind') == 'eval' and e.get(key) is not None}


def log_series(s, key):
    """{iter: value} of `key` on every line of a run's log.jsonl that has it (train and eval lines)."""
    return {e['iter']: e[key] for e in s['_log'] if e.get(key) is not None}


def eval_curve(group, key, series_of=eval_series):
    """(iters, mean, min, max) over a group's runs of `key` (series_of: the eval lines', or log_series: every
    line's), at the iterations every run has; None where no run logged it."""
    series = [x for x in (series_of(s, key) for s in group) if x]
    iters = sorted(set.intersection(*map(set, series))) if series else []
    if not iters:
        return None
    ys = [[x[i] for x in series] for i in iters]
    return iters, [statistics.mean(y) for y in ys], [min(y) for y in ys], [max(y) for y in ys]


def plot_data(runs):
    """{'val_loss.png': {depth: {variant: curve}}, 'lambda_full.png': {(variant, depth): {layer: curve}}}."""
    val, lam = {}, {}
    for v, d in sorted(runs, key=lambda vd: (depth_key(vd[1]), variant_key(vd[0]))):
        ok = runs[(v, d)]['ok']
        curve = eval_curve(ok, 'val_loss')
        if curve:
            val.setdefault(d, {})[v] = curve
        layers = sorted({int(m[1]) for s in ok for e in s['_log'] for m in map(LAMBDA_RE.match, e) if m})
        curves = {n: eval_curve(ok, f'lambda/L{n}/full', log_series) for n in layers}
        if any(curves.values()):
            lam[(v, d)] = {n: c for n, c in curves.items() if c}
    return {'val_loss.png': val, 'lambda_full.png': lam}


def plots(data, root):
    """Write the plots of plot_data() beside results.md if matplotlib is importable; returns the names written.
    One panel per depth (val loss, a line per variant) or per diff model (lambda_full, a line per layer): the
    mean over seeds, shaded from the lowest to the highest seed."""
    plt = pyplot()
    if plt is None:
        return []
    written = []
    for name, ylabel in (('val_loss.png', 'val loss'), ('lambda_full.png', 'λ_full')):
        panels = data[name]
        if not panels:
            continue
        ncols = min(3, len(panels))
        nrows = math.ceil(len(panels) / ncols)
        fig, axes = plt.subplots(nrows, ncols, figsize=(5 * ncols, 3.6 * nrows), squeeze=False)
        for ax, (key, lines) in zip(axes.flat, panels.items()):
            for label, (x, m, lo, hi) in lines.items():
                line, = ax.plot(x, m, label=NAMES.get(label, label) if name == 'val_loss.png' else f'layer {label}')
                ax.fill_between(x, lo, hi, color=line.get_color(), alpha=0.2, linewidth=0)
            ax.set(title=key if isinstance(key, str) else f'{NAMES.get(key[0], key[0])} {key[1]}',
                   xlabel='iteration', ylabel=ylabel)
            if name == 'val_loss.png':  # iteration 0 (about ln 65 = 4.2) and the ends both show on a log axis
                ax.set_yscale('log')
                lo, hi = ax.get_ylim()
                ticks = []  # round values, at least an eighth of the axis apart
                for t in (0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 1.2, 1.4, 1.6, 1.8, 2, 2.5, 3, 4, 6, 8):
                    if lo <= t <= hi and (not ticks or math.log(t / ticks[-1]) >= math.log(hi / lo) / 8):
                        ticks.append(t)
                ax.minorticks_off()
                ax.set_yticks(ticks, [f'{t:g}' for t in ticks])
            ax.legend(fontsize=7)
        for ax in list(axes.flat)[len(panels):]:
            ax.set_visible(False)
        save_figure(fig, os.path.join(root, name))
        written.append(name)
    return written


def plot_section(data):
    """Names the plots the runs' logs support, whether or not matplotlib is here to draw them."""
    what = {'val_loss.png': 'val loss over training, a panel per depth, a line per variant',
            'lambda_full.png': 'λ_full of each layer over training, a panel per Differential model'}
    names = [n for n in PLOTS if data[n]]
    if not names:
        return ''
    return '\n'.join(['report.py writes these beside this file when matplotlib is installed (mean over seeds, '
                      'shaded from the lowest to the highest seed; from log.jsonl: the val loss of its eval lines, '
                      'λ_full of every line that logs it):', ''] +
                     [f'- [{n}]({n}): {what[n]}' for n in names])


# ----------------------------------------------------------------------------- the report

def warnings(runs, ok):
    """The warnings at the top of results.md: folder names, code, machines, settings."""
    parts = []
    named = [f"`{s['_name']}` trained with seed {s['_seed']} (its config): counted as seed {s['_seed']}"
             for s in ok if not s['_name'].endswith(f"_s{s['_seed']}")]
    named += [f"`{n}`: a second run of its cell with a seed already counted (a copy?): left out"
              for c in runs.values() for n in c.get('same_seed', [])]
    if named:
        parts += ['', '**Warning: folder names.** A run\'s seed is the one in its summary.json, not in its folder\'s '
                  'name:', ''] + [f'- {m}' for m in named]
    parts += code_warning(ok)
    left_out = {}
    for s in ok:
        if excluded(s, ok):
            left_out.setdefault(excluded(s, ok), []).append(s['_name'])
    if left_out:
        parts += ['', '**Warning: runs no claim\'s verdict reads** (`provenance.excluded`: no commit recorded, a tree '
                  'with uncommitted changes, another corpus or other sweep settings than the sweep\'s other runs):',
                  ''] + [f"- {why}: {', '.join(names)}" for why, names in left_out.items()]
    machines = mixed_machines(runs)
    if machines:
        parts += ['', '**Warning: mixed processors, number formats, execution paths, threads or numerics.** These '
                  'cells and comparisons set side by side runs that were computed differently (summary.json\'s '
                  '`machine`, `dtype`, `compile` and `cuda_graph`, or the sweep\'s backfilled provenance.json), so a '
                  'difference between them may be the computation\'s:', ''] + [f'- {m}' for m in machines]
    mixed = mixed_settings(ok)
    if mixed:
        parts += ['', '**Warning: mixed settings.** These runs differ in more than their seed, and the tables below '
                  'average and pair them as if they did not. Give each setting a sweep of its own (ablate.sh '
                  'refuses a launch that would mix them):', ''] + [f'- {m}' for m in mixed]
    return parts


def loss_sections(runs):
    """The final losses (the seed's variants, the others), per variant, and over training."""
    parts = []
    seed_cols = [v for v in SEED_VARIANTS if any(vv == v for vv, _ in runs)]
    extra = sorted({v for v, _ in runs} - set(SEED_VARIANTS), key=variant_key)
    if seed_cols:
        parts += ['', '## Final loss, train/val', '',
                  'Rows: depth; columns: the seed notes\' variants. Cells: train/val loss at the last evaluation '
                  '(mean ± std over seeds where there are several); bold: the lowest val loss of a row of two or '
                  'more.', '',
                  loss_table(runs, seed_cols)]
    if extra:
        parts += ['', '## Other variants, train/val', '', loss_table(runs, extra)]
    if any(finished(c) for c in runs.values()):
        parts += ['', '## Per variant: eval losses and the training-step loss', '',
                  'train (eval), val (eval): the last evaluation, in eval mode (no dropout), mean over eval_iters '
                  'batches. train step: the mean loss of the training steps logged in the last eval interval, in '
                  'train mode (with dropout when dropout > 0): what a training log calls its train loss. '
                  'Mean ± std over seeds.', '', detail_table(runs)]
    curves = curve_table(runs)
    if curves:
        parts += ['', '## Val loss over training', '',
                  'Val loss at each evaluation (columns: iteration) that every run of the sweep logged, mean ± std '
                  'over seeds; at most 11 columns, evenly spaced.', '', curves]
    return parts


def comparison_sections(runs):
    """The seeds' comparisons in val loss, the λ tables and Diff+Sym against Diff in λ_full, and the plots."""
    parts = []
    comparisons = comparison_table(runs)
    if comparisons:
        parts += ['', '## Comparisons', '',
                  'B − A: final val loss of B minus that of the reference A (negative: B is lower). Where A and B '
                  'have seeds in common (seed s gives both the same batches in the same order), the paired '
                  'differences over those seeds: mean ± std, the 95% interval mean ± t(0.975, n−1)·std/√n and '
                  'the two-sided p of the paired t-test; otherwise Welch\'s t on the two groups. gap, by the rule of '
                  f'`results/claims.md`: "too few seeds" under {MIN_SEEDS} seeds (paired) or runs a side (Welch), '
                  'else "within noise" when the 95% interval contains 0. A val, B val: mean ± std over each one\'s '
                  'seeds, the seed-to-seed spread to set the gap against.', '', comparisons]
    lam = lambda_tables(runs)
    if lam:
        parts += ['', '## Per-layer lambda after training', '', lam]
        lam_cmp = lambda_comparison(runs)
        parts += ['', lam_cmp] if lam_cmp else []
    figures = plot_section(plot_data(runs))
    if figures:
        parts += ['', '## Plots', '', figures]
    return parts


def run_sections(runs, ok):
    """The runs, analyze.py's diagnostics and needle_eval.py's retrieval measures."""
    parts = ['', '## Runs', '', runs_table(ok)]
    diag = diagnostics_table(ok)
    if diag:
        parts += ['', '## Diagnostics (analyze.py, where analysis.json exists)', '', diag]
        summary = measures_summary(runs, 'analysis.json', diag_metrics, DIAG_PAIRS, 'The sink claims')
        parts += ['', summary] if summary else []
    needle = needle_table(ok)
    summary = measures_summary(runs, 'needle_eval.json', needle_metrics, NEEDLE_PAIRS, 'The retrieval claim')
    if needle or summary:
        parts += ['', '## Retrieval (needle_eval.py, where needle_eval.json exists)', '',
                  'Accuracy at the first query by needle count N (mean over depths), and the first query\'s '
                  'attention on the answer needle and on the rest of the haystack (mean over N, heads and '
                  'layers).'] + [x for t in (needle, summary) if t for x in ('', t)]
    return parts


def markdown(runs, sweep=None):
    """results.md's text: a pure function of the runs' summary.json and log.jsonl (and analysis.json); sweep: the
    folder's name, for the command's SWEEP where ablate.sh would name it otherwise."""
    ok = sorted((s for c in runs.values() for s in c['ok']),
                key=lambda s: (depth_key(s['_depth']), variant_key(s['_variant']), s['_seed']))
    parts = [title(ok) if ok else '# Results: no finished runs']
    parts += ['', where_section(ok, sweep)] if ok else []
    parts += warnings(runs, ok) + loss_sections(runs) + comparison_sections(runs)
    parts += run_sections(runs, ok) if ok else []
    return '\n'.join(parts) + '\n'


def across_table(roots):
    """Sweeps side by side (e.g. one per masking bug): a row per sweep and depth, a column per variant, the
    training-step loss / val loss at the last evaluation, mean ± std over finished seeds (n = their number when
    more than one), so one table sets each mechanism's cells beside another's. A cell whose runs are not one
    homogeneous group is *mixed* and gives each group's values after the pooled ones (grouped(), the claims' rule),
    the groups named under the table."""
    loaded = [(os.path.basename(os.path.normpath(r)), load_runs(r)) for r in roots]
    variants = sorted({v for _, runs in loaded for v, _ in runs}, key=variant_key)
    lines = ['| sweep, depth: train step / val | ' + ' | '.join(NAMES.get(v, v) for v in variants) + ' |',
             '|---' * (len(variants) + 1) + '|']
    names = []
    for name, runs in loaded:
        for d in sorted({d for _, d in runs}, key=depth_key):
            cells = [finished(runs.get((v, d), dict(ok=[]))) for v in variants]
            lines.append(f'| {name} {d} | ' + ' | '.join(grouped(ok, step_val, names) if ok else '—'
                                                         for ok in cells) + ' |')
    return '\n'.join(lines + (['', legend(names)] if names else [])) + '\n'


def step_val(ok):
    """'train step / val' of runs, mean ± std, (n=k) where several."""
    steps = [train_step_loss(s) for s in ok]
    step = mean_std(steps) if None not in steps else '?'
    return f"{step} / {mean_std([s['final_val_loss'] for s in ok])}" + (f' (n={len(ok)})' if len(ok) > 1 else '')


def render(root):
    """Write root/results.md (and the plots, with matplotlib) and return the markdown."""
    runs = load_runs(root)
    if not runs:
        raise SystemExit(f"report.py: no run folders (<variant>_<depth>_s<seed>) in {root}")
    text, data = markdown(runs, os.path.basename(os.path.normpath(root))), plot_data(runs)  # all before writing
    write_text(os.path.join(root, 'results.md'), text)
    plots(data, root)
    return text


if __name__ == '__main__':
    ap = argparse.ArgumentParser(description="The seed's tables (results.md) and plots from a sweep's run folders "
                                 "(<variant>_<depth>_s<seed>/summary.json, log.jsonl), as ablate.sh writes them.")
    ap.add_argument('sweep', nargs='+', help='the sweep folder, e.g. runs/shakespeare_cpu_long or '
                    'results/shakespeare_full; several only with --across')
    ap.add_argument('--across', action='store_true', help='print one table of the sweeps side by side (a row per '
                    'sweep and depth: train step / val per variant) and write nothing')
    args = ap.parse_args()
    for sweep_dir in args.sweep:
        if not os.path.isdir(sweep_dir):
            raise SystemExit(f"report.py: {sweep_dir} is not a folder (a sweep is runs/<sweep>/, made by ablate.sh)")
    try:
        if args.across:
            print(across_table(args.sweep), end='')
        elif len(args.sweep) > 1:
            raise SystemExit("report.py: one sweep at a time writes results.md; add --across to compare several")
        else:
            print(render(args.sweep[0]), end='')
    except (ValueError, OSError) as e:  # a corrupt log.jsonl (its message names the file and line), a full disk
        if os.environ.get('REPORT_DEBUG'):
            raise
        raise SystemExit(f"report.py: {e}; " + (
            "each file is written whole, so one not written is as it was" if isinstance(e, OSError) else
            "nothing was written (REPORT_DEBUG=1 shows the traceback)")) from None
