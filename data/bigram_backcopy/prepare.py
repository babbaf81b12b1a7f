"""
Bigram-Backcopy (Guo et al. 2024, "Active-Dormant Attention Heads"): a synthetic task on which 1-3 layer
transformers grow an attention sink on the beginning-of-sequence token, with a value drain and a residual peak
there. It gives the sink, outlier and softmax-1 / gate claims a baseline that has the phenomenon.

A record is BOS followed by block_size tokens of a character Markov chain, in which k trigger characters (the
k most frequent ones) break the chain and copy the token before them:

    x_{t+1} = x_{t-1}               if x_t is a trigger   ("backcopy": needs attention to the previous token)
    x_{t+1} ~ P(. | x_t)            otherwise             (a bigram: needs no attention at all)

P is tiny Shakespeare's character bigram; x_1 is drawn from the unigram of the non-trigger characters. A head
that does the copy has nothing to do at the other positions, and Guo et al. find it parks its attention on BOS
(a "dormant" head): the sink. Every token after BOS is a target (the *_mask.bin files are all ones past BOS).

$ python data/bigram_backcopy/prepare.py                  # block 128, 3 triggers, 50 000 train records
$ python data/bigram_backcopy/prepare.py --input FILE     # bigram statistics from another text

Writes train.bin / val.bin (uint16 records of block_size + 1 tokens), train_mask.bin / val_mask.bin and
meta.json (last), each through a .tmp file. meta.json records the triggers and loss_floor: the expected loss of
the exact predictor (the copy costs nothing; a bigram step costs the entropy of its row), the value a model
that solved both parts would reach.
"""
import argparse
import importlib.util
import json
import os

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
SHAKESPEARE = os.path.join(HERE, '..', 'shakespeare_char', 'prepare.py')


def shakespeare_text():
    """Tiny Shakespeare, through data/shakespeare_char/prepare.py (which downloads it when it is not there)."""
    spec = importlib.util.spec_from_file_location('shakespeare_char_prepare', SHAKESPEARE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.fetch_text(None)


def chain(text, k):
    """The characters (sorted), the k triggers (ids of the most frequent characters), the bigram P[a, b] and the
    distribution of x_1 (the unigram without the triggers)."""
    chars = sorted(set(text))
    ids = np.searchsorted(np.array(chars), np.array(list(text)))
    V = len(chars)
    if not 1 <= k < V:
        raise ValueError(f"--k {k}: the text has {V} distinct characters; need 1 <= k < {V}")
    counts = np.zeros((V, V))
    np.add.at(counts, (ids[:-1], ids[1:]), 1)
    unigram = np.bincount(ids, minlength=V).astype(float)
    triggers = np.argsort(-unigram, kind='stable')[:k]
    rows = counts.sum(1, keepdims=True)
    P = np.where(rows > 0, counts / np.maximum(rows, 1), unigram / unigram.sum())  # a character never followed
    first = unigram.copy()
    first[triggers] = 0
    return chars, triggers, P, first / first.sum()


def sample_next(rng, cdf, cur):
    """One draw per row from the distributions cdf[cur] (cumulative rows)."""
    u = rng.random(len(cur))[:, None]
    return np.minimum((cdf[cur] < u).sum(1), cdf.shape[1] - 1)


def make_records(rng, n, T, triggers, P, first):
    """n records [BOS, x_1 .. x_T] (BOS = len(P)), and for each target position whether it was a copy."""
    V = len(P)
    cdf, cdf_first = np.cumsum(P, 1), np.cumsum(first)[None]
    is_trigger = np.zeros(V, dtype=bool)
    is_trigger[triggers] = True
    x = np.empty((n, T + 1), dtype=np.int64)
    copied = np.zeros((n, T + 1), dtype=bool)
    x[:, 0] = V
    x[:, 1] = sample_next(rng, cdf_first, np.zeros(n, dtype=np.int64))
    for t in range(1, T):
        copy = is_trigger[x[:, t]] & (t >= 2)     # x_1 is never a trigger, so x_{t-1} is a character
        x[:, t + 1] = np.where(copy, x[:, t - 1], sample_next(rng, cdf, x[:, t]))
        copied[:, t + 1] = copy
    return x, copied


def loss_floor(x, copied, P, first):
    """The exact predictor's mean cross-entropy over every target: 0 at a copy, H(P[x_t]) at a bigram step,
    H(first) at x_1."""
    H = -(P * np.log(np.where(P > 0, P, 1))).sum(1)
    h_first = -(first * np.log(np.where(first > 0, first, 1))).sum()
    per = np.where(copied[:, 2:], 0.0, H[x[:, 1:-1]])
    return float((per.sum() + h_first * len(x)) / (per.size + len(x)))


def write(name, arr):
    path = os.path.join(HERE, name)
    arr.tofile(path + '.tmp')
    os.replace(path + '.tmp', path)


def main(argv=None):
    ap = argparse.ArgumentParser(description='Bigram-Backcopy records (Guo et al. 2024).')
    ap.add_argument('--input', default=None, help='text whose character bigram drives the chain (default: tiny '
                                                 'Shakespeare, from data/shakespeare_char)')
    ap.add_argument('--block_size', type=int, default=128)
    ap.add_argument('--k', type=int, default=3, help='trigger characters: the k most frequent (Guo et al.: 3)')
    ap.add_argument('--n_train', type=int, default=50000)
    ap.add_argument('--n_val', type=int, default=1000)
    ap.add_argument('--seed', type=int, default=0)
    args = ap.parse_args(argv)
    if args.block_size < 3:
        ap.error(f'--block_size {args.block_size}: a record needs at least 3 tokens after BOS')
    if args.input is not None and not os.path.isfile(args.input):
        ap.error(f'--input {args.input}: no such file')
    if args.input is None:
        text = shakespeare_text()
    else:
        with open(args.input, encoding='utf-8') as f:
            text = f.read()
    try:
        chars, triggers, P, first = chain(text, args.k)
    except ValueError as e:
        ap.error(str(e))
    T = args.block_size
    train, _ = make_records(np.random.default_rng([args.seed, 0]), args.n_train, T, triggers, P, first)
    val, val_copied = make_records(np.random.default_rng([args.seed, 1]), args.n_val, T, triggers, P, first)
    mask = np.ones(T + 1, dtype=np.uint8)
    mask[0] = 0  # BOS is never a target
    write('train.bin', train.astype(np.uint16))
    write('train_mask.bin', np.tile(mask, args.n_train))
    write('val.bin', val.astype(np.uint16))
    write('val_mask.bin', np.tile(mask, args.n_val))
    floor = loss_floor(val, val_copied, P, first)
    meta = dict(vocab_size=len(chars) + 1, record_len=T + 1, tokenizer='char', itos=chars + ['<s>'], bos=len(chars),
                triggers=[chars[i] for i in triggers], loss_floor=floor, copy_share=float(val_copied[:, 1:].mean()),
                **{k: v for k, v in vars(args).items() if k not in ('n_train', 'n_val', 'input')})
    with open(os.path.join(HERE, 'meta.json.tmp'), 'w') as f:
        json.dump(meta, f)
    os.replace(os.path.join(HERE, 'meta.json.tmp'), os.path.join(HERE, 'meta.json'))
    print(f"{args.n_train:,} train and {args.n_val:,} val records of {T + 1} tokens (BOS first), vocab "
          f"{meta['vocab_size']}, triggers {meta['triggers']}; loss floor {floor:.4f} "
          f"({meta['copy_share']:.1%} of targets are copies)")


if __name__ == '__main__':
    main()
