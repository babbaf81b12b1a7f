"""
Web text for GPT-2-scale runs, as nanoGPT's data/openwebtext: documents tokenised with GPT-2's BPE (tiktoken), an
end-of-text token after each, written as uint16 train.bin / val.bin, and meta.json (token counts, source, tokenizer).

$ python data/fineweb/prepare.py --input DIR                  # offline: the .txt, .jsonl(.gz) and .parquet under DIR
$ python data/fineweb/prepare.py --source fineweb-edu         # streamed from the Hugging Face hub (pip install datasets)
$ python data/fineweb/prepare.py --source openwebtext --max_tokens 2.5e9

A .txt file is one document; a .jsonl line and a .parquet row are one document each, their 'text' field (.parquet
needs pyarrow). Every --val_every-th document (default every 2000th, nanoGPT's share) goes to val.bin.

It streams: documents go to a pool of tokeniser processes in batches, at most a few batches ahead, and token ids go
to disk as they come back, in document order, so memory does not grow with the corpus (two bytes a token on disk,
a few hundred MB of RAM) and the output does not depend on --workers. Everything is written to .tmp files and
renamed at the end, meta.json last: a run stopped half-way leaves the dataset that was here before whole, and the
next run starts again.
"""
import argparse
import collections
import glob
import gzip
import json
import multiprocessing
import os
import signal
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCES = {  # --source: (hub dataset, its configuration); both are streamed, so nothing is downloaded in full
    'fineweb-edu': ('HuggingFaceFW/fineweb-edu', 'sample-10BT'),
    'openwebtext': ('Skylion007/openwebtext', None),
}
SUFFIXES = ('.txt', '.jsonl', '.jsonl.gz', '.parquet')


def input_files(folder):
    """The text files under folder, sorted, so that the output does not depend on the order the disk lists them."""
    if not os.path.isdir(folder):
        sys.exit(f"error: --input {folder}: no such folder")
    files = sorted(f for f in glob.glob(os.path.join(folder, '**', '*'), recursive=True)
                   if os.path.isfile(f) and f.endswith(SUFFIXES))
    if not files:
        sys.exit(f"error: --input {folder}: no {', '.join(SUFFIXES)} files in it or below it")
    return files


def file_documents(files):
    """Each file's documents, in order."""
    for path in files:
        if path.endswith('.txt'):
            with open(path, encoding='utf-8', errors='replace') as f:
                yield f.read()
        elif path.endswith('.parquet'):
            try:
                import pyarrow.parquet as pq
            except ImportError:
                sys.exit(f"error: {path}: reading .parquet needs pyarrow (pip install pyarrow)")
            for batch in pq.ParquetFile(path).iter_batches(columns=['text'], batch_size=1024):
                yield from batch.column(0).to_pylist()
        else:
            with (gzip.open if path.endswith('.gz') else open)(path, 'rt', encoding='utf-8') as f:
                for n, line in enumerate(f, 1):
                    if line.strip():
                        try:
                            yield json.loads(line)['text']
                        except (ValueError, KeyError, TypeError) as e:
                            sys.exit(f"error: {path}, line {n}: not a JSON object with a 'text' field ({e})")


def hub_documents(source):
    """The source's documents, streamed from the Hugging Face hub."""
    try:
        from datasets import load_dataset
    except ImportError:
        sys.exit("error: --source needs the datasets package (pip install datasets); or pass --input DIR")
    name, config = SOURCES[source]
    for row in load_dataset(name, config, split='train', streaming=True):
        yield row['text']


def get_encoding(name):
    """GPT-2's BPE (50,257 tokens, downloaded once by tiktoken and cached), or 'byte': UTF-8 bytes (256 tokens)
    plus end-of-text, a tokenizer that needs no download."""
    import tiktoken
    if name == 'byte':
        return tiktoken.Encoding('byte', pat_str=r"\S+|\s+", mergeable_ranks={bytes([i]): i for i in range(256)},
                                 special_tokens={'<|endoftext|>': 256})
    sys.path.insert(0, os.path.join(HERE, '..', '..'))
    from dataset import load_bpe  # tiktoken's encoding, or what its cache lacks
    try:
        return load_bpe(name)
    except ValueError as e:
        sys.exit(f"error: {e}. Nothing was written.")


_enc = None  # each tokeniser process's encoding


def _init_worker(enc):
    global _enc
    _enc = enc
    if multiprocessing.parent_process() is not None:  # a pool process: its parent handles Ctrl-C and SIGTERM
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


def encode_batch(docs):
    """Token ids of a batch of documents, each followed by end-of-text: one uint16 array per document."""
    return [np.array(_enc.encode_ordinary(d) + [_enc.eot_token], dtype=np.uint16) for d in docs]


def batches(docs, size):
    batch = []
    for d in docs:
        batch.append(d)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


def ordered_map(fn, items, workers, enc):
    """fn over items, results in order; with a pool, at most 2 * workers items in flight (Pool.imap reads its
    whole input ahead, which would hold the corpus in memory)."""
    if workers <= 1:
        _init_worker(enc)
        yield from map(fn, items)
        return
    with multiprocessing.Pool(workers, initializer=_init_worker, initargs=(enc,)) as pool:
        pending = collections.deque()
        for item in items:
            pending.append(pool.apply_async(fn, (item,)))
            if len(pending) >= 2 * workers:
                yield pending.popleft().get()
        while pending:
            yield pending.popleft().get()


def prepare(docs, enc, out_dir, source, val_every=2000, max_tokens=None, workers=1, progress_total=None):
    """Tokenise docs into out_dir/{train,val}.bin and meta.json (written last). Returns the meta dict."""
    from tqdm import tqdm
    if enc.max_token_value >= 2 ** 16:
        sys.exit(f"error: the {enc.name} encoding has token ids up to {enc.max_token_value:,}, which do not fit "
                 f"the uint16 .bin files (at most 65,535). Nothing was written.")
    os.makedirs(out_dir, exist_ok=True)
    paths = {s: os.path.join(out_dir, f'{s}.bin') for s in ('train', 'val')}
    files = {s: open(p + '.tmp', 'wb') for s, p in paths.items()}
    counts = dict(train=0, val=0, documents=0)
    try:
        bar = tqdm(total=progress_total, unit='tok', unit_scale=True, desc='tokenising', mininterval=2)
        for ids in ordered_map(encode_batch, batches(docs, 256), workers, enc):
            for a in ids:
                split = 'val' if counts['documents'] % val_every == val_every - 1 else 'train'
                a.tofile(files[split])
                counts[split] += len(a)
                counts['documents'] += 1
                bar.update(len(a))
                if max_tokens and counts['train'] + counts['val'] >= max_tokens:
                    break
            else:
                continue
            break  # the document that reached max_tokens
        bar.close()
        for f in files.values():
            f.close()
        if counts['val'] == 0 or counts['train'] == 0:
            sys.exit(f"error: {counts['documents']} document(s) made an empty "
                     f"{'val' if counts['val'] == 0 else 'train'} split; every {val_every}th document goes to val: "
                     f"lower --val_every, or add text. Nothing was replaced.")
        meta = dict(vocab_size=50304 if enc.name == 'gpt2' else -(-enc.n_vocab // 64) * 64,  # padded to 64
                    tokenizer=enc.name, eot_token=enc.eot_token, source=source, documents=counts['documents'],
                    train_tokens=counts['train'], val_tokens=counts['val'], val_every=val_every)
        meta_path = os.path.join(out_dir, 'meta.json')
        with open(meta_path + '.tmp', 'w') as f:
            json.dump(meta, f, indent=1)
        if os.path.exists(meta_path):
            os.remove(meta_path)  # no meta.json while the .bin files change: train.py waits for a whole dataset
        for s, p in paths.items():
            os.replace(p + '.tmp', p)
        os.replace(meta_path + '.tmp', meta_path)
        return meta
    finally:
        for s, p in paths.items():
            files[s].close()
            if os.path.exists(p + '.tmp'):
                os.remove(p + '.tmp')
        if os.path.exists(os.path.join(out_dir, 'meta.json.tmp')):
            os.remove(os.path.join(out_dir, 'meta.json.tmp'))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog='\n'.join(__doc__.strip().splitlines()[2:]))
    src = ap.add_mutually_exclusive_group()
    src.add_argument('--input', metavar='DIR', help='a folder of .txt, .jsonl(.gz) or .parquet files (offline)')
    src.add_argument('--source', choices=sorted(SOURCES), help='stream a corpus from the Hugging Face hub')
    ap.add_argument('--out_dir', default=HERE, help='where train.bin, val.bin and meta.json go (default: here)')
    ap.add_argument('--tokenizer', default='gpt2', help="a tiktoken encoding (default gpt2), or 'byte'")
    ap.add_argument('--max_tokens', type=float, help='stop after the document that reaches this many tokens')
    ap.add_argument('--val_every', type=int, default=2000, help='every Nth document goes to val (default 2000)')
    ap.add_argument('--workers', type=int, default=max(1, (os.cpu_count() or 2) - 1), help='tokeniser processes')
    args = ap.parse_args(argv)
    if not (args.input or args.source):  # as train.py runs it, for --dataset=fineweb: say what to give, not the usage
        sys.exit(f"error: data/fineweb needs its text first: python {os.path.relpath(__file__)} --input DIR (a folder "
                 f"of .txt, .jsonl(.gz) or .parquet files, offline) or --source {'|'.join(sorted(SOURCES))} (streams "
                 f"from the Hugging Face hub); then start the run again")
    if args.val_every < 2 or args.workers < 1 or (args.max_tokens is not None and args.max_tokens <= 0):
        ap.error('--val_every must be 2 or more, --workers 1 or more, --max_tokens positive')
    if args.input:
        files = input_files(args.input)
        docs, source = file_documents(files), f'{os.path.abspath(args.input)} ({len(files)} files)'
    else:
        docs, source = hub_documents(args.source), '%s/%s' % SOURCES[args.source]
    enc = get_encoding(args.tokenizer)

    def stop(signum, frame):
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, stop)  # a scheduler's stop: like Ctrl-C, the .tmp files go, nothing is replaced
    try:
        meta = prepare(docs, enc, args.out_dir, source, args.val_every, args.max_tokens and int(args.max_tokens),
                       args.workers, progress_total=args.max_tokens and int(args.max_tokens))
    except KeyboardInterrupt:
        sys.exit(f"stopped: nothing in {args.out_dir} was replaced; run the same command again to start over")
    print(f"{meta['documents']:,} documents: {meta['train_tokens']:,} train and {meta['val_tokens']:,} val tokens "
          f"({args.tokenizer}) in {args.out_dir}")


if __name__ == '__main__':
    main()
