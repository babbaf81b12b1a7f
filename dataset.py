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


RESIDENT_MAX_TOKENS = 2 ** 27  # a token stream up to this long (512 MB as int32) is held on the GPU


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
