"""
Evaluate a model trained on data/needle: retrieval accuracy by needle count and depth, and the attention given
to the answer versus the rest of the haystack ("attention noise"), as in the Differential Transformer paper.

$ python needle_eval.py --out_dir=out/needle_diff                     # one model
$ python needle_eval.py --out_dir out/needle_nanogpt out/needle_diff  # several: one table row each
$ python needle_eval.py --out_dir out/needle_diff --ckpt_name best.pt --device cuda --dtype bfloat16

For every needle count N and depth (where the first queried needle sits in the haystack), `n_eval` fresh records
are drawn (a seed the training and validation sets do not use). Accuracy: the argmax prediction at the first
query equals its needle's value. Attention, at the first query position (the token whose next-token prediction
is the answer), from GPT.attention_maps, averaged over heads, layers and records:
  answer: the weight on the queried needle's token(s): the fused pair token, or its key and value tokens;
  noise:  the weight on every other haystack token (filler and the other needles);
  answer share: sum_answer |w| / sum_haystack |w|, the answer's share of the row's absolute weight on the
          haystack. For a softmax row it is answer / (answer + noise); a Diff row (A1 - lambda A2) has signed
          weights, whose plain sums cancel, so this is the one of the three that means the same for both.
With distractors (data/needle_distractors: earlier needles of the queried key holding older values), also:
  stale rate: the share of records whose prediction is a value only the distractors hold (the right key, the
          wrong occurrence), of all errors the kind the distractors cause;
  distractor share: sum_distractors |w| / sum_haystack |w|, the weight on the stale needles, as answer share;
  unrelated share: 1 - answer share - distractor share, the weight on haystack tokens that do not hold the
          queried key (filler and the other needles): attention noise in the paper's sense, for both kinds of row.
Each run folder's checkpoint is --ckpt_name: ckpt.pt (the last state, the default) or best.pt (the weights of the
best val loss). Writes needle_eval.json in each run folder; with matplotlib, needle_attention.png (one record's
attention of the first query, per layer, over positions); of best.pt, needle_eval_best.json and
needle_attention_best.png beside them (report.py reads the run's own, ckpt.pt's).
"""
import argparse
import os

import numpy as np
import torch

from checkpoint import load_checkpoint
from dataset import data_dir, load_meta, load_prepare
from hardware import add_device_args, autocast_context, device_and_dtype
from output import pyplot, save_figure, write_json

needle = load_prepare('needle')  # data/needle/prepare.py: the generator the data was written with
make_record = needle.make_record


def default_needles(max_needles):
    """Every needle count the training data has (1-3 by default); past 6, only the even ones and the largest."""
    if max_needles <= 6:
        return list(range(1, max_needles + 1))
    return sorted({1, 2} | set(range(4, max_needles + 1, 2)) | {max_needles})


def haystack_share(w, starts, query_pos, haystack_len, needle_width=2):
    """w (H, T, T) -> the first query's share of its absolute weight on the haystack that lands on the needles
    starting at `starts` (needle_width tokens each), averaged over heads (0 for a head with no weight on the
    haystack). Absolute weights, so it means the same for a softmax row and a Diff row."""
    row = w[:, query_pos[0], :haystack_len].abs()
    cols = np.concatenate([np.asarray(starts) + i for i in range(needle_width)])
    return (row[:, cols].sum(-1) / row.sum(-1).clamp_min(1e-12)).mean().item()


def attention_split(w, needle_pos, queried, query_pos, haystack_len, needle_width=2):
    """w (H, T, T) one record's weights in one layer -> (answer weight, noise weight, answer share) for the
    first query, averaged over heads. The answer needle is needle_width tokens (2: key, value; 1: a fused pair).
    answer share = sum_answer |w| / sum_haystack |w| (0 for a head with no weight on the haystack)."""
    row = w[:, query_pos[0], :]                    # (H, T): what the first query attends to
    p = int(needle_pos[queried[0]])
    hay = row[:, :haystack_len]
    answer = hay[:, p:p + needle_width].sum(-1)
    share = haystack_share(w, [p], query_pos, haystack_len, needle_width)
    return answer.mean().item(), (hay.sum(-1) - answer).mean().item(), share


def stale_values(tok, info, meta):
    """The value tokens that only the distractors hold (with fused needles decoded from the pair token,
    pairs[k * V + v]). A value another needle also holds is left out: predicting it is not a sign of the stale
    match rather than of another key's."""
    keys, values, filler, pairs = needle.vocab(meta['n_keys'], meta['n_values'], meta['n_filler'],
                                               meta.get('fused', False))

    def value(p):
        return int(values[(tok[p] - pairs[0]) % meta['n_values']]) if meta.get('fused', False) else int(tok[p + 1])
    return {value(p) for p in info['distractor_pos']} - {value(p) for p in info['needle_pos']}


@torch.no_grad()
def evaluate(model, meta, needles, depths, n_eval, seed, device='cpu'):
    T1 = meta['record_len']
    grid = {}
    for n in needles:
        for depth in depths:
            rng = np.random.default_rng([seed, 7, n, int(depth * 1000)])
            recs = [make_record(rng, T1, n, meta['n_queries'], meta['n_keys'], meta['n_values'], meta['n_filler'],
                                depth, meta.get('fused', False), meta.get('distractors', 0)) for _ in range(n_eval)]
            x = torch.from_numpy(np.stack([r[0][:-1] for r in recs]).astype(np.int64)).to(device)
            logits, _ = model(x, x)  # targets make the model return logits at every position
            maps = model.attention_maps(x)
            correct, ans, noise, share, stale, dshare = [], [], [], [], [], []
            for b, (tok, _, info) in enumerate(recs):
                qp = info['query_pos'][0]
                guess = int(logits[b, qp].argmax())
                correct.append(guess == int(tok[qp + 1]))
                per_layer = [attention_split(m[b].float(), info['needle_pos'], info['queried'], info['query_pos'],
                                             info['haystack_len'], info['needle_width']) for m in maps]
                for out, value in zip((ans, noise, share), np.mean(per_layer, axis=0)):  # mean over layers
                    out.append(value)
                dpos = info.get('distractor_pos', ())
                if len(dpos):  # the answer a distractor holds: its value token (fused: decoded from the pair)
                    stale.append(guess in stale_values(tok, info, meta))
                    dshare.append(np.mean([haystack_share(m[b].float(), dpos, info['query_pos'],
                                                            info['haystack_len'], info['needle_width'])
                                           for m in maps]))
            grid[(n, depth)] = dict(accuracy=float(np.mean(correct)), answer_attention=float(np.mean(ans)),
                                    noise_attention=float(np.mean(noise)), answer_share=float(np.mean(share)))
            if stale:  # wrong answers that are the key's older values, the weight on those needles, and on the rest
                grid[(n, depth)].update(stale_rate=float(np.mean(stale)), distractor_share=float(np.mean(dshare)),
                                        unrelated_share=float(1 - np.mean(share) - np.mean(dshare)))
    return grid


def heatmap(model, meta, path, seed, device='cpu'):
    plt = pyplot()
    if plt is None:
        return False
    rng = np.random.default_rng([seed, 8])
    tok, _, info = make_record(rng, meta['record_len'], meta['max_needles'], meta['n_queries'], meta['n_keys'],
                               meta['n_values'], meta['n_filler'], 0.5, meta.get('fused', False),
                               meta.get('distractors', 0))
    x = torch.from_numpy(tok[None, :-1].astype(np.int64)).to(device)
    rows = np.stack([m[0, :, info['query_pos'][0], :].float().mean(0).cpu().numpy() for m in model.attention_maps(x)])
    fig, ax = plt.subplots(figsize=(8, 1 + 0.4 * len(rows)))
    image = ax.imshow(np.abs(rows), aspect='auto', cmap='viridis')
    p = info['needle_pos'][info['queried'][0]]
    ax.axvline(p, color='red', lw=0.8)
    ax.set_yticks(range(len(rows)), [str(i + 1) for i in range(len(rows))])  # whole layers, counted from 1
    ax.set(xlabel='key position (red: the answer needle)', ylabel='layer', title='attention of the first query')
    fig.colorbar(image, ax=ax, label='weight, mean over heads (|w| for Diff)')
    save_figure(fig, path)
    return True


def main():
    # allow_abbrev=False: --ckpt (sample.py's and analyze.py's option, a path) is not taken as --ckpt_name (a name)
    ap = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0], allow_abbrev=False)
    ap.add_argument('--out_dir', nargs='+', default=['out'])
    ap.add_argument('--needles', nargs='+', type=int, default=None,
                    help='default: 1 .. max_needles (past 6: 1 2 4 6 ... max_needles)')
    ap.add_argument('--depths', nargs='+', type=float, default=[0.0, 0.25, 0.5, 0.75, 1.0])
    ap.add_argument('--n_eval', type=int, default=100, help='records per (needles, depth) cell')
    ap.add_argument('--seed', type=int, default=1)
    ap.add_argument('--ckpt_name', default='ckpt.pt', help="the checkpoint in each run folder: 'ckpt.pt' (the last "
                    "state) or 'best.pt' (the weights of the best val loss)")
    # full precision by default: the same numbers on every machine ('auto' is bf16 on some CPUs)
    add_device_args(ap, dtype='float32')
    args = ap.parse_args()
    device, device_type, dtype = device_and_dtype(args)
    rows = []
    for out in args.out_dir:
        path = os.path.join(out, args.ckpt_name)
        try:
            model, ckpt = load_checkpoint(path, device)
        except (FileNotFoundError, ValueError) as e:
            raise SystemExit(f'error: {e}')
        model.eval()
        dataset = ckpt['config']['dataset']
        meta = load_meta(dataset)
        if not meta:
            raise SystemExit(f"error: {data_dir(dataset)}/meta.json is missing: prepare the data {out} was trained on")
        if meta.get('tokenizer') != 'needle':
            raise SystemExit(f"error: {out} was not trained on the needle task (dataset {dataset})")
        # the records are made from meta.json: data prepared again with other settings would test another task
        # (the checkpoint keeps the task's vocabulary settings since commit 06481b3; its vocab size always)
        task = ckpt.get('tokenizer', {})
        differs = [f"{k} {task[k]} (data: {meta.get(k)})" for k in needle.TASK_KEYS
                   if k in task and task[k] != meta.get(k)]
        if meta.get('vocab_size') != model.config.vocab_size:
            differs.append(f"vocab_size {model.config.vocab_size} (data: {meta.get('vocab_size')})")
        if meta.get('record_len') != model.config.block_size + 1:
            differs.append(f"records of {model.config.block_size + 1} tokens (data: {meta.get('record_len')})")
        if differs:
            raise SystemExit(f"error: {data_dir(dataset)} is not the data {out} was trained on (the model's "
                             f"{', '.join(differs)}): prepare it again with that run's settings "
                             f"(python {os.path.relpath(data_dir(dataset))}/prepare.py --help)")
        most = needle.max_needles(meta['record_len'], meta['n_queries'], meta['n_keys'], meta.get('distractors', 0),
                                  meta.get('fused', False))
        bad = [n for n in args.needles or [] if not 1 <= n <= most]
        if bad or not all(0 <= d <= 1 for d in args.depths):
            raise SystemExit(f"error: --needles takes counts from 1 to {most} (what a record of {data_dir(dataset)} "
                             f"holds; it trained on up to {meta['max_needles']}) and --depths fractions from 0 to 1; "
                             f"got needles {args.needles}, depths {args.depths}")
        needles = args.needles or default_needles(meta['max_needles'])
        with autocast_context(dtype, device_type):
            grid = evaluate(model, meta, needles, args.depths, args.n_eval, args.seed, device)
        res = dict(checkpoint=path, iter=ckpt['iter_num'], needles=needles, depths=args.depths, n_eval=args.n_eval,
                   device=device, dtype=dtype,
                   cells=[dict(needles=n, depth=d, **v) for (n, d), v in grid.items()],
                   by_needles={n: {k: float(np.mean([grid[(n, d)][k] for d in args.depths]))
                                   for k in grid[(n, args.depths[0])]} for n in needles})
        tag = os.path.splitext(os.path.basename(args.ckpt_name))[0]
        tag = '' if tag == 'ckpt' else f'_{tag}'  # another checkpoint's results beside the run's, not over them
        write_json(os.path.join(out, f'needle_eval{tag}.json'), res)
        heatmap(model, meta, os.path.join(out, f'needle_attention{tag}.png'), args.seed, device)
        rows.append((os.path.basename(os.path.normpath(out)), res, grid))
    print_tables(rows, args.depths)


def print_tables(rows, depths):
    """Accuracy and attention by needle count, then accuracy by depth at the largest count: a row per model."""
    needles = rows[0][1]['needles']
    print('Retrieval accuracy by number of needles (mean over depths):\n')
    extra = [k for k in ('stale_rate', 'distractor_share', 'unrelated_share')
             if all(k in r[1]['by_needles'][needles[0]] for r in rows)]
    cols = ['answer_attention', 'noise_attention', 'answer_share'] + extra
    print('| model | ' + ' | '.join(f'N={n}' for n in needles) + ' | answer attn | noise attn | answer share |'
          + ''.join(f" {k.replace('_', ' ')} |" for k in extra))
    print('|---' * (len(needles) + 1 + len(cols)) + '|')
    for name, res, _ in rows:
        bn = res['by_needles']
        print(f'| {name} | ' + ' | '.join(f"{bn[n]['accuracy']:.2f}" for n in needles) + ' | '
              + ' | '.join(f"{np.mean([bn[n][k] for n in needles]):.3f}" for k in cols) + ' |')
    n = needles[-1]
    print(f'\nAccuracy by depth of the queried needle, N={n}:\n')
    print('| model | ' + ' | '.join(f'depth {d:g}' for d in depths) + ' |')
    print('|---' * (len(depths) + 1) + '|')
    for name, _, grid in rows:
        print(f'| {name} | ' + ' | '.join(f"{grid[(n, d)]['accuracy']:.2f}" for d in depths) + ' |')


if __name__ == '__main__':
    main()
