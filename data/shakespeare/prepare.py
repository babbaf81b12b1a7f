"""
Tiny Shakespeare with GPT-2's BPE (tiktoken), 90/10 split, as uint16 train.bin / val.bin and meta.json.

$ python data/shakespeare/prepare.py                   # downloads input.txt if it is not here yet
$ python data/shakespeare/prepare.py --input FILE      # or use a local copy of the text

tiktoken downloads the GPT-2 encoding once (then caches it, see TIKTOKEN_CACHE_DIR); offline and without a
cached copy this names the file its cache lacks, says how to supply it, and writes nothing.
"""
import argparse
import json
import os
import sys


sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'shakespeare_char'))
sys.path.insert(1, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..'))
import prepare as char_prep  # noqa: E402  the text download and atomic writes are the same
from dataset import load_bpe  # noqa: E402  tiktoken's encoding, or what its cache lacks

HERE = os.path.dirname(os.path.abspath(__file__))

if __name__ == '__main__':
    ap = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    ap.add_argument('--input', help='a local copy of tiny Shakespeare (input.txt)')
    args = ap.parse_args()
    try:
        enc = load_bpe('gpt2')
    except ValueError as e:
        sys.exit(f"error: {e}. Nothing was written.")
    char_prep.HERE = HERE  # write input.txt, the .bin files and meta.json into data/shakespeare/
    data = char_prep.fetch_text(args.input)
    n = len(data)
    train_ids = enc.encode_ordinary(data[:int(n * 0.9)])
    val_ids = enc.encode_ordinary(data[int(n * 0.9):])
    char_prep.write_split('train.bin', train_ids)
    char_prep.write_split('val.bin', val_ids)
    with open(os.path.join(HERE, 'meta.json.tmp'), 'w') as f:
        json.dump(dict(vocab_size=50304, tokenizer='gpt2'), f)  # 50257 padded to a multiple of 64
    os.replace(os.path.join(HERE, 'meta.json.tmp'), os.path.join(HERE, 'meta.json'))
    print(f"{len(train_ids):,} train and {len(val_ids):,} val tokens")
