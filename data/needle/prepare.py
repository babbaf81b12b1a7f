"""
Synthetic multi-needle retrieval ("needle in a haystack") for small models, as in the Differential Transformer
paper's key-information retrieval, shrunk so every attention variant trains on a CPU in minutes.

A record has record_len = block_size + 1 tokens:

    [ haystack: filler tokens with N needles at chosen depths ] SEP q_1 a_1 q_2 a_2 ... q_R a_R

A needle is one token standing for a (key, value) pair (the default, --fused), or the two tokens `k v`
(--no-fused). Keys, values, filler and pairs come from disjoint vocabularies; each query q_j is the key of one of
the needles, drawn with replacement, and its answer a_j is that needle's value. The loss counts only the answers
(the *_mask.bin files mark them), so the task is pure retrieval: the value of each (key, value) pair is random per
record and cannot be memorised.

$ python data/needle/prepare.py                  # defaults: block 32, 2-6 fused needles, 4 queries, 16 filler symbols
$ python data/needle/prepare.py --no-fused       # two-token needles `k v` (results/needle_cpu.md's history used
                                                 # --block_size 16 --min_needles 1 --max_needles 3 --n_filler 4
                                                 # --n_queries 2 --n_keys 32 --n_values 32, with distinct queries)

Why fused: with two-token needles the query must find the position whose *previous* token is its key, an
induction circuit across two layers (a previous-token head, then a head matching on what it wrote). On this
project's CPU budget no 2-layer model formed that circuit (results/needle_cpu.md: every setting tried, up to
10 000 steps, stayed at chance), so the table could not speak to the claim. A fused needle asks the attention
itself to find the one position among N needles and the filler that matches the query, which is what the
Differential Transformer's noise-cancelling claim is about, and a 2-layer model learns it within a few hundred
steps. Records with N = 1 (the answer is the only value in the haystack: copying, not retrieval) are left out
of training by default (--min_needles 2); needle_eval.py still tests N = 1.

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


def vocab(n_keys, n_values, n_filler, fused=False):
    """Token ranges: SEP = 0, then keys, values, filler and, for fused needles, one token per (key, value) pair:
    pair (i, j) is pairs[i * n_values + j]. Returns keys, values, filler, pairs (empty unless fused)."""
    keys = np.arange(1, 1 + n_keys)
    values = np.arange(1 + n_keys, 1 + n_keys + n_values)
    filler = np.arange(1 + n_keys + n_values, 1 + n_keys + n_values + n_filler)
    start = 1 + n_keys + n_values + n_filler
    pairs = np.arange(start, start + n_keys * n_values if fused else start)
    return keys, values, filler, pairs


TASK_KEYS = ('n_keys', 'n_values', 'n_filler', 'fused')  # meta.json's keys that say what each token id means


def max_needles(record_len, n_queries, n_keys, distractors=0, fused=False):
    """The most needles a record holds: a slot each in the haystack (less the distractors'), each a distinct key."""
    slots = (record_len - 1 - 2 * n_queries) // (1 if fused else 2)
    return min(slots - distractors, n_keys)


def make_record(rng, record_len, n_needles, n_queries, n_keys, n_values, n_filler, depth=None, fused=False,
                distractors=0):
    """One record. depth in [0, 1] places the first queried needle at that fraction of the haystack (0: its
    start, 1: its end); None places every needle at random. fused: a needle is one token standing for its
    (key, value) pair rather than the two tokens `key value`. distractors: that many extra needles with the first
    queried needle's key and other values, all earlier in the haystack: the answer is the key's latest value (a
    store that was overwritten), so attention must pick one of several matching needles, not just a match. With
    distractors, depth places the answer among the slots that leave room for them before it. Returns
    (tokens, mask, info); info['distractor_pos'] lists the distractors' positions."""
    keys, values, filler, pairs = vocab(n_keys, n_values, n_filler, fused)
    width = 1 if fused else 2                       # tokens per needle
    hay = record_len - 1 - 2 * n_queries           # haystack length
    slots = hay // width                            # needle i sits on positions width * slot_i (+ 1)
    if n_needles > max_needles(record_len, n_queries, n_keys, distractors, fused) or (distractors and n_values < 2):
        raise ValueError(f"{n_needles} needles and {distractors} distractors do not fit ({slots} slots, "
                         f"{n_keys} keys, {n_values} values)")
    tokens = rng.choice(filler, size=record_len)
    ki = rng.choice(n_keys, size=n_needles, replace=False)  # keys are distinct within a record
    vi = rng.integers(0, n_values, size=n_needles)
    # queries with replacement: with distinct queries the last answer of a record would be the one value not yet
    # asked for, a shortcut that needs no key matching (results/needle_cpu.md)
    queried = rng.choice(n_needles, size=n_queries)
    slot = rng.choice(slots, size=n_needles, replace=False)
    if distractors and depth is None:  # room for the distractors before the answer: it moves to a later slot
        j = queried[0]
        if slot[j] < distractors:
            want = rng.integers(distractors, slots)
            other = np.nonzero(slot == want)[0]
            if len(other):
                slot[other[0]] = slot[j]
            slot[j] = want
    if depth is not None:  # move the first queried needle to the requested depth
        want = distractors + int(round(depth * (slots - 1 - distractors)))
        j = queried[0]
        other = np.nonzero(slot == want)[0]
        if len(other):
            slot[other[0]] = slot[j]
        slot[j] = want
    dk, dv = ki[:0], vi[:0]
    if distractors:  # the same key, earlier, each with a value other than the answer's (the other needles move)
        j = queried[0]
        before = np.arange(slot[j])
        d_slot = rng.choice(before, size=distractors, replace=False)
        free = np.setdiff1d(np.arange(slots), np.concatenate([slot, d_slot]))
        moved = np.isin(slot, d_slot)
        slot[moved] = rng.choice(free, size=int(moved.sum()), replace=False)
        dk = np.full(distractors, ki[j])
        dv = (vi[j] + rng.integers(1, n_values, size=distractors)) % n_values
        slot, ki, vi = np.concatenate([slot, d_slot]), np.concatenate([ki, dk]), np.concatenate([vi, dv])
    pos = width * slot
    if fused:
        tokens[pos] = pairs[ki * n_values + vi]
    else:
        tokens[pos], tokens[pos + 1] = keys[ki], values[vi]
    tokens[hay] = SEP
    mask = np.zeros(record_len, dtype=np.uint8)
    qpos = hay + 1 + 2 * np.arange(n_queries)      # query key positions; the answer follows each
    tokens[qpos], tokens[qpos + 1] = keys[ki[queried]], values[vi[queried]]  # ki, vi [:n_needles]: the needles
    mask[qpos + 1] = 1
    info = dict(needle_pos=pos[:n_needles], needle_width=width, queried=queried, query_pos=qpos, haystack_len=hay,
                distractor_pos=pos[n_needles:])
    return tokens.astype(np.uint16), mask, info


def build(rng, n, args):
    toks, masks = [], []
    for _ in range(n):
        n_needles = int(rng.integers(args.min_needles, args.max_needles + 1))
        t, m, _ = make_record(rng, args.block_size + 1, n_needles, args.n_queries, args.n_keys, args.n_values,
                              args.n_filler, fused=args.fused, distractors=args.distractors)
        toks.append(t)
        masks.append(m)
    return np.stack(toks), np.stack(masks)


def write(folder, name, arr):
    path = os.path.join(folder, name)
    arr.tofile(path + '.tmp')
    os.replace(path + '.tmp', path)


def get_args(argv=None):
    ap = argparse.ArgumentParser(description='Synthetic multi-needle retrieval data.')
    ap.add_argument('--block_size', type=int, default=32)
    ap.add_argument('--min_needles', type=int, default=2,
                    help='needle counts in the data are uniform in [min_needles, max_needles]; at N = 1 the answer '
                         'is the only value in the haystack, so those records teach copying, not key matching')
    ap.add_argument('--max_needles', type=int, default=6)
    ap.add_argument('--n_queries', type=int, default=4)
    ap.add_argument('--n_keys', type=int, default=16)
    ap.add_argument('--n_values', type=int, default=16)
    ap.add_argument('--n_filler', type=int, default=16)
    ap.add_argument('--fused', action=argparse.BooleanOptionalAction, default=True,
                    help='a needle is one token for its (key, value) pair (default); --no-fused: the two tokens k v')
    ap.add_argument('--distractors', type=int, default=0,
                    help="needles with the first queried key and other values, before the answer, which is the "
                         "key's latest value (see make_record)")
    ap.add_argument('--n_train', type=int, default=200000)
    ap.add_argument('--n_val', type=int, default=2000)
    ap.add_argument('--seed', type=int, default=0)
    ap.add_argument('--out_dir', default=HERE, help='where the files go (default: this folder)')
    args = ap.parse_args(argv)
    if not 1 <= args.min_needles <= args.max_needles:
        ap.error(f'need 1 <= --min_needles <= --max_needles, got {args.min_needles} and {args.max_needles}')
    if args.n_queries < 1:
        ap.error(f'--n_queries must be at least 1 (the answers a record asks for), got {args.n_queries}')
    most = max_needles(args.block_size + 1, args.n_queries, args.n_keys, args.distractors, args.fused)
    if args.max_needles > most or (args.distractors and args.n_values < 2):
        ap.error(f'--max_needles {args.max_needles} with --distractors {args.distractors} do not fit a record of '
                 f'--block_size {args.block_size} with --n_queries {args.n_queries} and --n_keys {args.n_keys} '
                 f'distinct keys (room for {most} needles): fewer needles or queries, or a larger block_size')
    return args


def main(argv=None):
    args = get_args(argv)
    os.makedirs(args.out_dir, exist_ok=True)
    rng = np.random.default_rng([args.seed, 0])
    train_t, train_m = build(rng, args.n_train, args)
    val_t, val_m = build(np.random.default_rng([args.seed, 1]), args.n_val, args)
    seen = {r.tobytes() for r in train_t}
    keep = np.array([r.tobytes() not in seen for r in val_t])  # held-out records never occur in training
    val_t, val_m = val_t[keep], val_m[keep]
    for name, arr in (('train.bin', train_t), ('train_mask.bin', train_m), ('val.bin', val_t), ('val_mask.bin', val_m)):
        write(args.out_dir, name, arr)
    vocab_size = 1 + sum(map(len, vocab(args.n_keys, args.n_values, args.n_filler, args.fused)))  # SEP and the rest
    meta = dict(vocab_size=vocab_size, record_len=args.block_size + 1, tokenizer='needle',
                **{k: v for k, v in vars(args).items() if k not in ('n_train', 'n_val', 'out_dir')})
    path = os.path.join(args.out_dir, 'meta.json')
    with open(path + '.tmp', 'w') as f:
        json.dump(meta, f)
    os.replace(path + '.tmp', path)
    print(f"{len(train_t):,} train and {len(val_t):,} val records of {args.block_size + 1} tokens, "
          f"vocab {meta['vocab_size']}")


if __name__ == '__main__':
    main()
