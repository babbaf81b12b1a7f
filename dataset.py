"""
The datasets under data/: uint16 token files written by data/<dataset>/prepare.py, read through np.memmap, and
the batches drawn from them. train.py, sample.py, analyze.py and needle_eval.py all read data through this module.
"""
import contextlib
import difflib
import hashlib
import importlib.util
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch

from output import lock_at


def data_dir(dataset):
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), 'data', dataset)


def load_meta(dataset):
    """The dataset's meta.json (vocab_size, tokenizer, ...), {} when it has none."""
    path = os.path.join(data_dir(dataset), 'meta.json')
    if not os.path.exists(path):
        return {}
    with open(path) as f:
        return json.load(f)


def ensure_data(dataset):
    """Run data/<dataset>/prepare.py when train.bin, val.bin or meta.json is missing: each prepare.py writes
    meta.json last, so a run that starts while it works waits for the whole dataset rather than taking a default
    vocab_size; and under a lock on the folder, so that runs starting at once run it once. A folder without
    prepare.py must hold all three (meta.json says how its tokens decode)."""
    d = data_dir(dataset)
    prep = os.path.join(d, 'prepare.py')
    missing = [f for f in ('train.bin', 'val.bin', 'meta.json') if not os.path.exists(os.path.join(d, f))]
    if not missing:
        return
    if not os.path.isdir(d):
        raise FileNotFoundError(f"dataset '{dataset}': no folder {d}{dataset_hint(dataset)}")
    if not os.path.exists(prep):
        raise FileNotFoundError(
            f"dataset '{dataset}': {d} has no {' or '.join(missing)}, and no prepare.py to make it. A dataset folder "
            f"holds uint16 train.bin and val.bin, and a meta.json with the vocabulary size and how the tokens "
            f"decode, e.g. {{\"vocab_size\": 50304, \"tokenizer\": \"gpt2\"}} for GPT-2 tokens (the key dataset "
            f"in docs/config.md's \"Training keys\")")
    with prepare_lock(d):  # runs that start at once (ablate.sh JOBS=8): one prepares, the others wait and find it done
        if all(os.path.exists(os.path.join(d, f)) for f in missing):
            return
        print(f"dataset '{dataset}' is not prepared yet: running {prep}")
        if subprocess.run([sys.executable, prep]).returncode != 0:
            raise FileNotFoundError(f"{prep} failed (its message above says why); once that is fixed, start again, or "
                                    f"run it by hand first (python {prep} --help lists its options)")


def dataset_hint(dataset):
    """'; did you mean shakespeare_char?' for a bare name close to a folder of data/, else the list of them."""
    if os.path.dirname(dataset):
        return ''
    names = sorted(n for n in os.listdir(os.path.dirname(data_dir(dataset))) if os.path.isdir(data_dir(n)))
    close = difflib.get_close_matches(dataset, names, n=1)
    return f"; did you mean {close[0]}?" if close else f"; the datasets: {', '.join(names)}"


@contextlib.contextmanager
def prepare_lock(d):
    """An exclusive lock on d/.prepare.lock for one prepare.py, the file removed at the end whatever the outcome, so
    that a failed prepare leaves nothing behind (a run that waited on it locks a new one: output.lock_at)."""
    path = os.path.join(d, '.prepare.lock')
    f = lock_at(path)
    try:
        yield
    finally:
        os.unlink(path)  # still held: a run that opened it is let in to find the file gone, and locks anew
        f.close()


def load_bpe(name):
    """tiktoken's encoding `name` (e.g. 'gpt2'), for the prepare.py scripts. tiktoken downloads its files once into a
    cache folder; offline and without them, a ValueError that names the file missing from the cache and how to put
    it there, instead of a network error from deep in tiktoken."""
    import tiktoken
    import tiktoken.load
    fetched = []  # what tiktoken had to download: the files its cache lacks
    read = tiktoken.load.read_file

    def read_noted(url):
        fetched.append(url)
        return read(url)
    tiktoken.load.read_file = read_noted
    try:
        return tiktoken.get_encoding(name)
    except Exception as e:  # noqa: BLE001: requests' and tiktoken's own types
        if not fetched:
            raise ValueError(f"tiktoken could not load the {name} encoding ({type(e).__name__}: {e})") from None
        cache = (os.environ.get('TIKTOKEN_CACHE_DIR') or os.environ.get('DATA_GYM_CACHE_DIR')
                 or os.path.join(tempfile.gettempdir(), 'data-gym-cache'))
        key = hashlib.sha1(fetched[-1].encode()).hexdigest()
        raise ValueError(
            f"tiktoken's cache ({cache}) lacks the {name} encoding's {fetched[-1]}, and downloading it failed "
            f"({type(e).__name__}). Supply the cache: where there is internet, `TIKTOKEN_CACHE_DIR=DIR python -c "
            f"\"import tiktoken; tiktoken.get_encoding('{name}')\"` fills DIR; copy DIR here and run this again with "
            f"TIKTOKEN_CACHE_DIR=DIR (each file is kept under the sha1 of its URL: {key} for this one)") from None
    finally:
        tiktoken.load.read_file = read


def load_prepare(dataset):
    """data/<dataset>/prepare.py as a module, for its generators (e.g. the needle task's make_record). Loaded
    from its path: each prepare.py is a standalone script (`python data/needle/prepare.py`), not a package."""
    path = os.path.join(data_dir(dataset), 'prepare.py')
    spec = importlib.util.spec_from_file_location(f'{dataset}_prepare', path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def batch_rng(seed, *stream):
    """A generator that is a pure function of (seed, *stream), so batches never depend on history."""
    return np.random.default_rng([seed, *stream])


def seed_torch(seed, *stream):
    """Reseed torch (dropout) from (seed, *stream): resume and DDP need no saved generator state."""
    torch.manual_seed(int(np.random.SeedSequence([seed, *stream]).generate_state(1)[0]))


def sequential_start(cfg, it, g, n):
    """window_order='sequential' reproduces a loader that walks every stride-1 window of the text in order
    (DataLoader(shuffle=False) over windows starting at 0, 1, 2, ...): micro-batch g of n in iteration `it` takes
    the batch_size windows from (it * n + g) * batch_size on. A batch then spans batch_size + block_size
    characters, all but batch_size of them already in the batch before: the model trains on text it saw one step
    earlier, at a shifted position. None: random windows."""
    return None if cfg['window_order'] == 'random' else (it * n + g) * cfg['batch_size']


RESIDENT_MAX_TOKENS = 2 ** 27  # a token stream up to this long (four bytes a token as int32) is held on the GPU


def load_split(dataset, split, meta, bos=None, device='cpu', resident=None):
    """A split as a token stream, or, for datasets of fixed-length records (meta['record_len'], e.g. data/needle),
    records of record_len = block_size + 1 tokens with a mask of the positions whose token is a target. bos: a
    token id that get_batch puts at position 0 of every window (train.py's bos=True), or None. resident: a copy of
    the stream on `device`, where get_batch then gathers its windows (no host gather, pinning or copy per batch);
    None: for a stream of up to RESIDENT_MAX_TOKENS on a GPU (tiny Shakespeare is 1M tokens)."""
    d = data_dir(dataset)
    split_data = dict(tokens=np.memmap(os.path.join(d, f'{split}.bin'), dtype=np.uint16, mode='r'),
                      record_len=meta.get('record_len'), mask=None, bos=bos, resident=None)
    if split_data['record_len']:
        split_data['mask'] = np.memmap(os.path.join(d, f'{split}_mask.bin'), dtype=np.uint8, mode='r')
    elif resident or (resident is None and device != 'cpu' and len(split_data['tokens']) <= RESIDENT_MAX_TOKENS):
        split_data['resident'] = torch.from_numpy(np.asarray(split_data['tokens'], dtype=np.int32)).to(device)
    return split_data


def get_batch(data, rng, batch_size, block_size, device, start=None):
    """Random windows of a token stream (x, y = x shifted by one); or random whole records, where y is -1 (no
    loss) except at the masked target positions. With a bos token, a window is bos then block_size - 1 tokens of
    text: x = [bos, w_0 .. w_{T-2}], y = [w_0 .. w_{T-1}], so position 0 always holds the same token, as the first
    position of an LLM's context does (where attention sinks form). start (token streams only): the windows at
    start, start + 1, ..., wrapping at the end of the stream, instead of random ones (train.py's window_order)."""
    tokens, L = data['tokens'], data['record_len']
    if L:
        ix = rng.integers(0, len(tokens) // L, size=batch_size)
        rec = np.stack([tokens[i * L:(i + 1) * L] for i in ix]).astype(np.int64)
        keep = np.stack([data['mask'][i * L + 1:(i + 1) * L] for i in ix]).astype(bool)
        x = torch.from_numpy(rec[:, :-1])
        y = torch.from_numpy(np.where(keep, rec[:, 1:], -1))
    else:
        bos = data.get('bos')
        n = len(tokens) - block_size + (bos is not None)  # windows of block_size + 1 tokens; with bos, block_size
        ix = rng.integers(0, n, size=batch_size) if start is None else (start + np.arange(batch_size)) % n
        if data.get('resident') is not None:  # the same windows, gathered where the stream is held
            res = data['resident']
            # the starts go over asynchronously (pinned): a copy from pageable memory would wait for the device
            # to finish the previous step before the host could go on
            i = torch.from_numpy(ix)
            i = (i.pin_memory().to(res.device, non_blocking=True) if res.is_cuda else i)[:, None]
            pos = torch.arange(block_size, device=res.device)
            y = res[i + pos + (bos is None)].long()
            if bos is None:
                return res[i + pos].long(), y
            return torch.cat((torch.full((batch_size, 1), bos, dtype=torch.int64, device=res.device), y[:, :-1]), 1), y
        if bos is not None:
            y = torch.from_numpy(np.stack([tokens[i:i + block_size] for i in ix]).astype(np.int64))
            x = torch.cat((torch.full((batch_size, 1), bos, dtype=torch.int64), y[:, :-1]), dim=1)
        else:
            x = torch.from_numpy(np.stack([tokens[i:i + block_size] for i in ix]).astype(np.int64))
            y = torch.from_numpy(np.stack([tokens[i + 1:i + 1 + block_size] for i in ix]).astype(np.int64))
    if device.startswith('cuda'):
        return x.pin_memory().to(device, non_blocking=True), y.pin_memory().to(device, non_blocking=True)
    return x.to(device), y.to(device)


# -----------------------------------------------------------------------------------------------------------
# a run's data: its splits checked against its config, and its evaluation batches

def setup_data(cfg, device='cpu'):
    """Every rank opens the train and val splits (a small token stream held on the GPU, dataset.load_split);
    vocab_size, unless set, comes from the dataset's meta.json.
    Returns the splits, the tokenizer's description (checkpoints carry it, so that sample.py can decode without the
    dataset) and the number of token ids the batches hold."""
    T = cfg['block_size']
    meta = load_meta(cfg['dataset'])
    if not isinstance(meta.get('vocab_size'), int):
        raise ValueError(f"dataset '{cfg['dataset']}': its meta.json has no vocab_size (an integer); "
                         f"e.g. 50304 for GPT-2 tokens (50257 padded to a multiple of 64)")
    n_vocab = meta['vocab_size']
    bos = n_vocab if cfg['bos'] else None    # the first id past the dataset's
    n_tokens = n_vocab + cfg['bos']          # the ids the batches hold: the embedding needs a row for each
    if cfg['vocab_size'] is None:
        cfg['vocab_size'] = n_tokens
    elif cfg['vocab_size'] < n_tokens and not cfg['bos']:
        raise ValueError(f"vocab_size={cfg['vocab_size']} is below dataset '{cfg['dataset']}''s {n_tokens} token ids "
                         f"(its meta.json): the embedding would have no row for ids {cfg['vocab_size']}..{n_tokens - 1}. "
                         f"Leave vocab_size unset (None takes the dataset's), or give at least {n_tokens}")
    if cfg['bos'] and (meta.get('record_len') or cfg['vocab_size'] <= bos):
        raise ValueError(f"bos=True needs a token stream (dataset '{cfg['dataset']}' is fixed-length records)"
                         if meta.get('record_len') else f"bos=True puts token {bos} at position 0: vocab_size="
                         f"{cfg['vocab_size']} must be at least {bos + 1} (or None, which takes it)")
    if cfg['window_order'] == 'sequential' and meta.get('record_len'):
        raise ValueError(f"window_order='sequential' walks the windows of a token stream; dataset "
                         f"'{cfg['dataset']}' is fixed-length records: use window_order='random'")
    splits = tuple(load_split(cfg['dataset'], split, meta, bos, device) for split in ('train', 'val'))
    if meta.get('record_len') and meta['record_len'] != T + 1:
        raise ValueError(f"dataset '{cfg['dataset']}' has records of {meta['record_len']} tokens: "
                         f"set block_size={meta['record_len'] - 1}, or make the data again for block_size={T} "
                         f"(python data/{cfg['dataset']}/prepare.py --help)")
    for name, d in zip(('train', 'val'), splits):
        if len(d['tokens']) <= T:
            raise ValueError(f"{name}.bin has {len(d['tokens'])} tokens, fewer than block_size + 1 = {T + 1}")
    # a dataset whose records start with its own BOS (data/bigram_backcopy) names it in meta.json, as bos=True does
    # with the needle task's vocabulary settings (data/needle/prepare.py's TASK_KEYS), which say what its ids mean
    tokenizer = {k: meta[k] for k in ('tokenizer', 'itos', 'bos', 'n_keys', 'n_values', 'n_filler', 'fused')
                 if k in meta} or dict(tokenizer='gpt2')
    if bos is not None:
        tokenizer['bos'] = bos  # sample.py starts every prompt with it
    return splits, tokenizer, n_tokens


def eval_group(cfg, env, vocab_size):
    """How many eval batches go through one forward: eval_group, or for 0 (auto) 1 on a CPU (4 batches of the seed's
    3-layer model at once took longer a batch than one at a time: results/eval_group_cpu) and on CUDA as many as
    keep a forward within 2^16 tokens and 2^28 bytes of float logits: the seed's 3L model 8 batches of 32 x 256,
    GPT-2 124M 1. A small model's eval forward is launch-bound on a GPU: 8,400 eval batches were 39% of a 5000-step
    run's floor (results/bench_gpu.md)."""
    if cfg['eval_group'] or env.device_type != 'cuda':
        return cfg['eval_group'] or 1
    tokens = cfg['batch_size'] * cfg['block_size']
    return max(1, min(2 ** 16 // tokens, 2 ** 28 // (tokens * vocab_size * 4)))


def eval_batches(cfg, env, data, vocab_size):
    """This rank's eval batches of each split, the same at every evaluation (a pure function of the seed), made once
    and kept on the device in groups of eval_group(): [(split_id, ks, X, Y)], ks the batch numbers, X and Y the
    batches stacked. Under DDP rank r takes batches r, r + world, ... The groups are balanced (200 batches at most 8 a
    group: 25 of 8), a short last one is filled up with copies of its first batch whose losses are dropped, so that
    every group has one shape (one capture, one compile), and every rank has as many groups (each polls as often)."""
    B, T = cfg['batch_size'], cfg['block_size']
    most = -(-cfg['eval_iters'] // env.world)  # the most batches a rank has
    rounds = -(-most // min(eval_group(cfg, env, vocab_size), most))
    size = -(-most // rounds)
    groups = []
    for split_id, split in enumerate(data):
        mine = range(env.rank, cfg['eval_iters'], env.world)
        for i in range(rounds):
            ks = mine[i * size:(i + 1) * size]  # a range: losses[split_id, ks] is a slice, no index tensor
            if not ks:  # this rank has fewer batches than the others: it only polls
                groups.append((split_id, ks, None, None))
                continue
            xy = [get_batch(split, batch_rng(cfg['seed'], 1, split_id, k), B, T, env.device)
                  for k in list(ks) + [ks[0]] * (size - len(ks))]
            groups.append((split_id, ks, torch.cat([x for x, _ in xy]), torch.cat([y for _, y in xy])))
    return groups
