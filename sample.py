"""
Sample from a trained model.

$ python sample.py --out_dir=out/diff_sym_6L --start="ROMEO:" --num_samples=3 --max_new_tokens=300
$ python sample.py --ckpt=out/diff_sym_6L/best.pt --start=FILE:prompt.txt    # the weights of the best val loss
"""
import argparse
import os

import torch

from dataset import load_meta
from hardware import add_device_args, autocast_context, device_and_dtype
from model import load_checkpoint

ap = argparse.ArgumentParser(description='Sample text from a checkpoint written by train.py.')
ap.add_argument('--out_dir', default='out', help='run folder holding ckpt.pt')
ap.add_argument('--ckpt', default=None, help='checkpoint path (default: OUT_DIR/ckpt.pt, the last state; '
                'OUT_DIR/best.pt holds the weights of the best val loss)')
ap.add_argument('--start', default='\n', help='prompt text, or FILE:path to read it from a file')
ap.add_argument('--num_samples', type=int, default=3)
ap.add_argument('--max_new_tokens', type=int, default=500)
ap.add_argument('--temperature', type=float, default=0.8, help='< 1 sharpens, > 1 flattens the distribution')
ap.add_argument('--top_k', type=int, default=200, help='keep only the top_k most likely tokens (0: all)')
ap.add_argument('--seed', type=int, default=1337)
add_device_args(ap)
args = ap.parse_args()

device, device_type, dtype = device_and_dtype(args)
torch.manual_seed(args.seed)
torch.cuda.manual_seed(args.seed)
try:
    model, ckpt = load_checkpoint(args.ckpt or os.path.join(args.out_dir, 'ckpt.pt'), device)
except (FileNotFoundError, ValueError) as e:
    raise SystemExit(f'error: {e}')
model.eval()

# the tokenizer: the dataset's meta.json (characters) or GPT-2's BPE
meta = load_meta(ckpt['config']['dataset'])
if meta.get('tokenizer') == 'char':
    stoi = {ch: i for i, ch in enumerate(meta['itos'])}
    unknown = sorted({c for c in args.start if c not in stoi})
    encode = lambda s: [stoi[c] for c in s]  # noqa: E731
    decode = lambda ids: ''.join(meta['itos'][i] for i in ids)  # noqa: E731
else:
    import tiktoken
    enc = tiktoken.get_encoding('gpt2')
    unknown = []
    encode = lambda s: enc.encode(s, allowed_special={'<|endoftext|>'})  # noqa: E731
    decode = enc.decode

start = args.start
if start.startswith('FILE:'):
    with open(start[5:], encoding='utf-8') as f:
        start = f.read()
    unknown = sorted({c for c in start if meta.get('tokenizer') == 'char' and c not in stoi})
if unknown:
    raise SystemExit(f"error: the prompt has characters the model's vocabulary lacks: {unknown!r}")
x = torch.tensor(encode(start), dtype=torch.long, device=device)[None, ...]

with torch.no_grad(), autocast_context(dtype, device_type):
    for _ in range(args.num_samples):
        y = model.generate(x, args.max_new_tokens, temperature=args.temperature, top_k=args.top_k or None)
        print(decode(y[0].tolist()))
        print('---------------')
