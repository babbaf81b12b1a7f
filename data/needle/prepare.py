"""
Synthetic multi-needle retrieval ("needle in a haystack") for small models, as in the Differential Transformer
paper's key-information retrieval, shrunk so every attention variant trains on a CPU in minutes.

A record has record_len = block_size + 1 tokens:

    [ haystack: filler tokens with N needles "k v" at chosen depths ] SEP q_1 a_1 q_2 a_2 ... q_R a_R

keys k, values v and filler come from disjoint vocabularies; each query q_j is the key of one of the needles and
its answer a_j is that needle's value. The loss counts only the answers (the *_mask.bin files mark them), so the
task is pure retrieval: the value of each (key, value) pair is random per record and cannot be memorised.

$ python data/needle/prepare.py                      # defaults: block 16, 1-3 needles, 2 queries, 4 filler symbols
$ python data/needle/prepare.py --block_size 128 --max_needles 6 --n_filler 32   # the first, harder task

The defaults are small on purpose: a 2-layer model has to form an induction-style circuit (the value's position
takes its key from the previous token; the query then matches that key), and the shorter the haystack, the
stronger the signal that starts it. At block 128, up to 6 needles and 32 filler symbols every variant sat at
chance (1/N) after 1500 steps; the 12-token haystack with up to 3 needles trains in minutes on one CPU core, but
results/needle_cpu.md has it still at chance at N = 2 after 3500 steps (see there for what was tried).

Writes train.bin / val.bin (uint16 records), train_mask.bin / val_mask.bin (uint8, 1 at answer tokens) and
meta.json. Deterministic from --seed; no val record equals a train record. needle_eval.py builds its
evaluation grid (needle count x depth) with make_record() below (dataset.load_prepare('needle') loads this file).
"""
import argparse
import json
import os

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
SEP = 0


def vocab(n_keys, n_values, n_filler):
    """Token ranges: SEP = 0, then keys, values, filler."""
    keys = np.arange(1, 1 + n_keys)
    values = np.arange(1 + n_keys, 1 + n_keys + n_values)
    filler = np.arange(1 + n_keys + n_values, 1 + n_keys + n_values + n_filler)
    return keys, values, filler


def make_record(rng, record_len, n_needles, n_queries, n_keys, n_values, n_filler, depth=None):
    """One record. depth in [0, 1] places the first queried needle at that fraction of the haystack (0: its
    start, 1: its end); None places every needle at random. Returns (tokens, mask, info)."""
    keys, values, filler = vocab(n_keys, n_values, n_filler)
    hay = record_len - 1 - 2 * n_queries           # haystack length
    slots = hay // 2                                # needles sit on even positions, 2 tokens each
    if n_needles > min(slots, n_keys):
        raise ValueError(f"{n_needles} needles do not fit ({slots} slots, {n_keys} keys)")
    tokens = rng.choice(filler, size=record_len)
    k = rng.choice(keys, size=n_needles, replace=False)
    v = rng.choice(values, size=n_needles)
    queried = rng.choice(n_needles, size=n_queries, replace=n_needles < n_queries)
    slot = rng.choice(slots, size=n_needles, replace=False)
    if depth is not None:  # move the first queried needle to the requested depth
        want = int(round(depth * (slots - 1)))
        j = queried[0]
        other = np.nonzero(slot == want)[0]
        if len(other):
            slot[other[0]] = slot[j]
        slot[j] = want
    pos = 2 * slot
    tokens[pos], tokens[pos + 1] = k, v
    tokens[hay] = SEP
    mask = np.zeros(record_len, dtype=np.uint8)
    qpos = hay + 1 + 2 * np.arange(n_queries)      # query key positions; the answer follows each
    tokens[qpos], tokens[qpos + 1] = k[queried], v[queried]
    mask[qpos + 1] = 1
    info = dict(needle_pos=pos, queried=queried, query_pos=qpos, haystack_len=hay)
    return tokens.astype(np.uint16), mask, info


def build(rng, n, args):
    toks, masks = [], []
    for _ in range(n):
        t, m, _ = make_record(rng, args.block_size + 1, int(rng.integers(1, args.max_needles + 1)), args.n_queries,
                              args.n_keys, args.n_values, args.n_filler)
        toks.append(t)
        masks.append(m)
    return np.stack(toks), np.stack(masks)


def write(name, arr):
    path = os.path.join(HERE, name)
    arr.tofile(path + '.tmp')
    os.replace(path + '.tmp', path)


def get_args(argv=None):
    ap = argparse.ArgumentParser(description='Synthetic multi-needle retrieval data.')
    ap.add_argument('--block_size', type=int, default=16)
    ap.add_argument('--max_needles', type=int, default=3)
    ap.add_argument('--n_queries', type=int, default=2)
    ap.add_argument('--n_keys', type=int, default=32)
    ap.add_argument('--n_values', type=int, default=32)
    ap.add_argument('--n_filler', type=int, default=4)
    ap.add_argument('--n_train', type=int, default=50000)
    ap.add_argument('--n_val', type=int, default=2000)
    ap.add_argument('--seed', type=int, default=0)
    return ap.parse_args(argv)


def main(argv=None):
    args = get_args(argv)
    rng = np.random.default_rng([args.seed, 0])
    train_t, train_m = build(rng, args.n_train, args)
    val_t, val_m = build(np.random.default_rng([args.seed, 1]), args.n_val, args)
    seen = {r.tobytes() for r in train_t}
    keep = np.array([r.tobytes() not in seen for r in val_t])  # held-out records never occur in training
    val_t, val_m = val_t[keep], val_m[keep]
    write('train.bin', train_t)
    write('train_mask.bin', train_m)
    write('val.bin', val_t)
    write('val_mask.bin', val_m)
    meta = dict(vocab_size=1 + args.n_keys + args.n_values + args.n_filler, record_len=args.block_size + 1,
                tokenizer='needle', **{k: v for k, v in vars(args).items() if k not in ('n_train', 'n_val')})
    with open(os.path.join(HERE, 'meta.json.tmp'), 'w') as f:
        json.dump(meta, f)
    os.replace(os.path.join(HERE, 'meta.json.tmp'), os.path.join(HERE, 'meta.json'))
    print(f"{len(train_t):,} train and {len(val_t):,} val records of {args.block_size + 1} tokens, "
          f"vocab {meta['vocab_size']}")


if __name__ == '__main__':
    main()
