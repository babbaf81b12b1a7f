"""
Render a sweep's tables in the seed notes' layout from the runs' summary.json files.

$ python report.py runs/shakespeare_cpu        # prints the markdown and writes runs/shakespeare_cpu/results.md

Run folders are named <variant>_<depth>_s<seed> (ablate.sh's layout). Tables:
  1. final loss, rows depth, columns the seed's variants, cells train/val (mean +- std over seeds), the best
     val loss of each row in bold; a cell says 'missing' (no run), '—' (no such config in configs/, so no run
     was due) or 'FAILED' / 'unfinished' instead of a blank;
  2. the per-layer lambda table of every Differential model, columns lambda_1, lambda_2, lambda_init, lambda_full;
  3. the extra variants (gated, softmax-1, ...) in the same layout as 1.
With matplotlib installed it also writes lambda_full.png and val_loss.png beside results.md.
"""
import json
import os
import re
import statistics
import sys

_SEED = ['nanogpt', 'diff', 'sym', 'diff_sym', 'norm_sym']  # the seed's columns, in its order
# ARCH=llama runs are named llama_<variant>: the same columns in the Diff paper's RMSNorm/SwiGLU/RoPE layer
SEED_VARIANTS = _SEED + ['llama_' + v for v in _SEED]
NAMES = dict(nanogpt='nanogpt', diff='gpt+Diff', sym='gpt+Sym', diff_sym='gpt+Diff+Sym', norm_sym='Norm+Sym')
NAMES.update({'llama_' + v: 'llama ' + n for v, n in NAMES.items()})
CONFIGS = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'configs')
RUN_RE = re.compile(r'^(?P<variant>.+)_(?P<depth>\d+L)_s(?P<seed>\d+)$')


def load_runs(root):
    """{(variant, depth): {'ok': [summary, ...], 'failed': [seed, ...], 'unfinished': [seed, ...]}}"""
    runs = {}
    for name in sorted(os.listdir(root)):
        m = RUN_RE.match(name)
        path = os.path.join(root, name)
        if not m or not os.path.isdir(path):
            continue
        cell = runs.setdefault((m['variant'], m['depth']), dict(ok=[], failed=[], unfinished=[]))
        summary = os.path.join(path, 'summary.json')
        if os.path.exists(summary):
            with open(summary) as f:
                s = json.load(f)
            s['_dir'] = path
            cell['ok'].append(s)
        elif os.path.exists(os.path.join(path, 'FAILED')):
            cell['failed'].append(m['seed'])
        else:
            cell['unfinished'].append(m['seed'])
    return runs


def mean_std(xs, fmt='{:.2f}'):
    if len(xs) == 1:
        return fmt.format(xs[0])
    return (fmt + ' ± ' + fmt).format(statistics.mean(xs), statistics.stdev(xs))


def depth_key(d):
    return int(d[:-1])


def loss_table(runs, variants):
    depths = sorted({d for (_, d) in runs}, key=depth_key)
    if not depths or not variants:
        return ''
    lines = ['| | ' + ' | '.join(NAMES.get(v, v) for v in variants) + ' |', '|---' * (len(variants) + 1) + '|']
    for d in depths:
        vals = {}
        for v in variants:
            ok = runs.get((v, d), {}).get('ok', [])
            vs = [s['final_val_loss'] for s in ok if s.get('final_val_loss') is not None]
            if vs:
                vals[v] = statistics.mean(vs)
        best = min(vals, key=vals.get) if vals else None
        cells = []
        for v in variants:
            cell = runs.get((v, d))
            if cell is None:  # a pair ablate.sh skips for want of a config (e.g. gated_3L) is not missing
                has_config = os.path.exists(os.path.join(CONFIGS, f'{v}_{d}.py'))
                cells.append('missing' if has_config else '—')
                continue
            ok = [s for s in cell['ok'] if s.get('final_val_loss') is not None]
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


def lambda_tables(runs):
    """One table per depth, the seed's layout: per diff variant lambda_1, lambda_2, lambda_init, lambda_full."""
    out = []
    for d in sorted({d for (_, d) in runs}, key=depth_key):
        cols = [(v, c) for (v, dd), c in sorted(runs.items()) if dd == d and any(s.get('lambda_table') for s in c['ok'])]
        cols.sort(key=lambda vc: (SEED_VARIANTS + [vc[0]]).index(vc[0]))
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


def diagnostics_table(summaries):
    """A row per run whose folder has analysis.json (written by analyze.py)."""
    lines = []
    for s in sorted(summaries, key=lambda s: s['_dir']):
        path = os.path.join(s['_dir'], 'analysis.json')
        if not os.path.exists(path):
            continue
        with open(path) as f:
            a = json.load(f)
        o, q = a['overall'], a['quantization']
        lines.append(f"| {os.path.basename(s['_dir'])} | {o['first_token_attention']:.3f} | "
                     f"{o['first_token_heads']:.2f} | {o['kurtosis_rest']:.1f} | {o['max_activation']:.1f} | "
                     f"{o['logit_top1']:.1f} | {q['loss_penalty_int8']:+.4f} | {q['loss_penalty_int4']:+.4f} |")
    if not lines:
        return ''
    return '\n'.join(['| run | first-token attn | heads on token 0 | kurtosis | max abs act | top-1 abs logit '
                      '| int8 loss penalty | int4 loss penalty |', '|---|---|---|---|---|---|---|---|'] + lines)


def plots(runs, root):
    """lambda_full per layer and val loss curves, one line per run (the first seed of each cell)."""
    try:
        import matplotlib
        matplotlib.use('Agg')
        import matplotlib.pyplot as plt
    except ImportError:
        return []
    lam, val = {}, {}
    for (v, d), c in sorted(runs.items()):
        for s in c['ok'][:1]:
            if s.get('lambda_table'):
                lam[f'{v} {d}'] = ([r['layer'] for r in s['lambda_table']], [r['lambda_full'] for r in s['lambda_table']])
            log = os.path.join(s['_dir'], 'log.jsonl')
            if os.path.exists(log):
                with open(log) as f:
                    ev = [e for e in map(json.loads, filter(str.strip, f)) if e.get('kind') == 'eval']
                val[f'{v} {d}'] = ([e['iter'] for e in ev], [e['val_loss'] for e in ev])
    written = []
    for name, series, xlabel, ylabel in (('lambda_full.png', lam, 'layer', 'lambda_full'),
                                         ('val_loss.png', val, 'iteration', 'val loss')):
        if not series:
            continue
        fig, ax = plt.subplots(figsize=(6, 4))
        for label, (x, y) in series.items():
            ax.plot(x, y, marker='o' if name.startswith('lambda') else None, label=label)
        ax.set(xlabel=xlabel, ylabel=ylabel)
        ax.legend(fontsize=7)
        fig.savefig(os.path.join(root, name), dpi=120, bbox_inches='tight')
        plt.close(fig)
        written.append(name)
    return written


def render(root):
    runs = load_runs(root)
    if not runs:
        raise SystemExit(f"report.py: no run folders (<variant>_<depth>_s<seed>) in {root}")
    seed_cols = [v for v in SEED_VARIANTS if any(vv == v for vv, _ in runs)]
    extra = sorted({v for v, _ in runs} - set(SEED_VARIANTS))
    parts = [f'# Results: {root}']
    if seed_cols:
        parts += ['', '## Final loss, train/val', '',
                  'Rows: depth; columns: the seed notes\' variants. Cells: train/val loss at the last evaluation '
                  '(mean ± std over seeds where there are several); bold: the lowest val loss of the row.', '',
                  loss_table(runs, seed_cols)]
    lam = lambda_tables(runs)
    if lam:
        parts += ['', '## Per-layer lambda after training', '', lam]
    if extra:
        parts += ['', '## Other variants, train/val', '', loss_table(runs, extra)]
    ok = [s for c in runs.values() for s in c['ok']]
    if ok:
        cfg = ok[0]['config']
        keys = ('max_iters', 'batch_size', 'block_size', 'n_embd', 'n_head', 'learning_rate', 'dropout', 'eval_iters')
        parts += ['', '## Runs', '', 'Schedule of the first run: ' + ', '.join(f'{k}={cfg.get(k)}' for k in keys), '',
                  '| run | params | iters | tokens/s | wall s | device | dtype |', '|---|---|---|---|---|---|---|']
        for s in sorted(ok, key=lambda s: s['_dir']):
            tps = f"{s['tokens_per_sec']:,.0f}" if s.get('tokens_per_sec') else ''
            parts.append(f"| {os.path.basename(s['_dir'])} | {s['n_params'] / 1e6:.2f}M | {s['iter']} | {tps} | "
                         f"{s['wall_time_s']:.0f} | {s['device']} | {s['dtype']} |")
        diag = diagnostics_table(ok)
        if diag:
            parts += ['', '## Diagnostics (analyze.py, where analysis.json exists)', '', diag]
    text = '\n'.join(parts) + '\n'
    written = plots(runs, root)
    if written:
        text += '\nPlots: ' + ', '.join(written) + '\n'
    tmp = os.path.join(root, 'results.md.tmp')
    with open(tmp, 'w') as f:
        f.write(text)
    os.replace(tmp, os.path.join(root, 'results.md'))
    return text


if __name__ == '__main__':
    if len(sys.argv) != 2:
        raise SystemExit('usage: python report.py runs/<sweep>')
    print(render(sys.argv[1]))
