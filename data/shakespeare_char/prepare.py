"""
Tiny Shakespeare, character level (as nanoGPT's shakespeare_char): 65 symbols, the first 90% for training
(1,003,854 tokens) and the rest for validation (111,540 tokens), as uint16 train.bin / val.bin, and
meta.json with the vocabulary (JSON, not pickle).

$ python data/shakespeare_char/prepare.py                   # downloads input.txt if it is not here yet
$ python data/shakespeare_char/prepare.py --input FILE      # or use a local copy of the text
"""
import argparse
import json
import os
import shutil
import sys
import urllib.request

import numpy as np

URL = 'https://raw.githubusercontent.com/karpathy/char-rnn/master/data/tinyshakespeare/input.txt'
HERE = os.path.dirname(os.path.abspath(__file__))


def fetch_text(src):
    """Return the text, copying --input or downloading into input.txt (atomically) when needed."""
    path = os.path.join(HERE, 'input.txt')
    if src is not None:
        if not os.path.isfile(src):
            sys.exit(f"error: --input {src}: no such file")
        if os.path.abspath(src) != path:
            shutil.copyfile(src, path + '.tmp')
            os.replace(path + '.tmp', path)
    elif not os.path.exists(path):
        print(f"downloading {URL}")
        try:
            with urllib.request.urlopen(URL, timeout=30) as r:
                data = r.read()
        except Exception as e:
            sys.exit(f"error: could not download tiny Shakespeare ({type(e).__name__}: {e}).\n"
                     f"Pass a local copy instead: python {os.path.relpath(__file__)} --input /path/to/input.txt")
        with open(path + '.tmp', 'wb') as f:
            f.write(data)
        os.replace(path + '.tmp', path)
    with open(path, encoding='utf-8') as f:
        return f.read()


def write_split(name, ids, dtype=np.uint16):
    out = os.path.join(HERE, name)
    np.array(ids, dtype=dtype).tofile(out + '.tmp')
    os.replace(out + '.tmp', out)


if __name__ == '__main__':
    ap = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    ap.add_argument('--input', help='a local copy of tiny Shakespeare (input.txt)')
    data = fetch_text(ap.parse_args().input)
    chars = sorted(set(data))
    stoi = {ch: i for i, ch in enumerate(chars)}
    n = len(data)
    ids = [stoi[c] for c in data]
    write_split('train.bin', ids[:int(n * 0.9)])
    write_split('val.bin', ids[int(n * 0.9):])
    meta = dict(vocab_size=len(chars), itos=chars, tokenizer='char')
    with open(os.path.join(HERE, 'meta.json.tmp'), 'w') as f:
        json.dump(meta, f)
    os.replace(os.path.join(HERE, 'meta.json.tmp'), os.path.join(HERE, 'meta.json'))
    print(f"{n:,} characters, {len(chars)} symbols: {int(n * 0.9):,} train and {n - int(n * 0.9):,} val tokens")
