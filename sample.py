"""
Sample from a trained model.

$ python sample.py --out_dir=out/diff_sym_6L --start="ROMEO:" --num_samples=3 --max_new_tokens=300
$ python sample.py --ckpt=out/diff_sym_6L/best.pt --start=FILE:prompt.txt    # the weights of the best val loss
"""
import argparse
import glob
import os
import sys

import torch

from checkpoint import load_checkpoint
from dataset import load_meta
from hardware import add_device_args, autocast_context, device_and_dtype


def find_runs(roots=('out', 'runs')):
    """Run folders that hold a ckpt.pt, under out/ and runs/ (train.py's and ablate.sh's defaults)."""
    found = [os.path.dirname(p) for r in roots for p in glob.glob(os.path.join(r, '**', 'ckpt.pt'), recursive=True)]
    return sorted(found)


def missing_hint(path):
    """What to pass instead of a checkpoint path that does not exist: the other checkpoints of its own folder, else
    the run folders with a ckpt.pt (never the folder given, which has no such file)."""
    folder = os.path.dirname(path) or '.'
    beside = sorted(p for p in glob.glob(os.path.join(folder, '*.pt')) if os.path.abspath(p) != os.path.abspath(path))
    if beside:
        return f"{folder} holds " + ', '.join(beside) + ': pass one with --ckpt'
    runs = [r for r in find_runs() if os.path.abspath(r) != os.path.abspath(folder)]
    if runs:
        return ('run folders with a checkpoint: ' + ', '.join(runs[:8]) + (' ...' if len(runs) > 8 else '') +
                '; pass one with --out_dir')
    return 'train one first: python train.py configs/diff_sym_6L.py'


def describe(path, ckpt):
    """One line on what was loaded: the file, what it holds, its iteration and val loss."""
    what = 'the weights of the lowest val loss' if os.path.basename(path) == 'best.pt' else 'the last saved state'
    val = (ckpt.get('last_eval') or {}).get('val_loss')
    if os.path.basename(path) == 'best.pt' or val is None:
        val = ckpt.get('best_val_loss')
    val = f", val loss {val:.4f}" if isinstance(val, float) and val < float('inf') else ', not yet evaluated'
    return f"sampling {path} ({what}): iteration {ckpt.get('iter_num', '?')}{val}"


def tokenizer(ckpt):
    """(encode, decode, unknown): how this model's tokens map to text. Checkpoints carry it (train.py stores the
    dataset's meta.json part that decodes); older ones fall back to the dataset's meta.json, here."""
    meta = ckpt.get('tokenizer') or load_meta(ckpt['config']['dataset'])
    vocab = ckpt['model_args']['vocab_size']
    kind = meta.get('tokenizer')
    if kind == 'char':
        itos = meta['itos']
        stoi = {ch: i for i, ch in enumerate(itos)}
        return (lambda s: [stoi[c] for c in s]), (lambda ids: ''.join(itos[i] for i in ids)), \
            (lambda s: sorted({c for c in s if c not in stoi}))
    if kind == 'byte':  # data/fineweb/prepare.py --tokenizer=byte: UTF-8 bytes, 256 ends a document
        def decode(ids):  # ids past 256 (the vocabulary is padded to 64) are not text: shown as U+FFFD
            return b''.join(bytes([i]) if i < 256 else b'<|endoftext|>' if i == 256 else '\ufffd'.encode()
                            for i in ids).decode('utf-8', errors='replace')
        return (lambda s: list(s.encode('utf-8'))), decode, (lambda s: [])
    if kind == 'gpt2' or (kind is None and vocab >= 50257):
        import tiktoken
        enc = tiktoken.get_encoding('gpt2')
        return (lambda s: enc.encode(s, allowed_special={'<|endoftext|>'})), enc.decode, (lambda s: [])
    raise SystemExit(f"error: cannot decode this model's {vocab} tokens: sample.py knows the tokenizers char, gpt2 "
                     f"and byte, and this checkpoint's is {kind or 'not named, nor in its dataset'} (dataset "
                     f"{ckpt['config']['dataset']}). Sample from a checkpoint of a text dataset")


def main():
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
    ap.add_argument('--allow_noncausal', action='store_true', help='sample from a causal=False model anyway (it was '
                    'trained to read the next token, not predict it, so its text is noise)')
    add_device_args(ap)
    args = ap.parse_args()
    for bad, why in ((not args.temperature > 0, f"--temperature must be > 0, not {args.temperature:g} (greedy "
                                                "decoding is top_k=1)"),
                     (args.top_k < 0, f"--top_k must be >= 0 (0: every token), not {args.top_k}"),
                     (args.num_samples < 1, f"--num_samples must be >= 1, not {args.num_samples}"),
                     (args.max_new_tokens < 0, f"--max_new_tokens must be >= 0, not {args.max_new_tokens}")):
        if bad:
            ap.error(why)  # the one bound that failed

    path = args.ckpt or os.path.join(args.out_dir, 'ckpt.pt')
    if not os.path.isfile(path):
        raise SystemExit(f"error: no checkpoint at {path}; {missing_hint(path)}")
    try:
        device, device_type, dtype = device_and_dtype(args)
        model, ckpt = load_checkpoint(path, device)
        print(f"number of parameters: {model.get_num_params() / 1e6:.2f}M", file=sys.stderr)  # stderr: not a sample
    except (FileNotFoundError, ValueError) as e:
        raise SystemExit(f'error: {e}')
    if not ckpt['model_args'].get('causal', True) and not args.allow_noncausal:
        raise SystemExit(f"error: {path} is a causal=False model: its attention saw the next token in training, so "
                         f"it never learned to predict one, and sampling it gives noise. Pass --allow_noncausal to "
                         f"see that anyway")
    print(describe(path, ckpt), file=sys.stderr)  # stderr: stdout is the samples alone
    model.eval()
    torch.manual_seed(args.seed)
    encode, decode, unknown_of = tokenizer(ckpt)

    start = args.start
    if start.startswith('FILE:'):
        try:
            with open(start[5:], encoding='utf-8') as f:
                start = f.read()
        except (OSError, UnicodeDecodeError) as e:
            raise SystemExit(f"error: --start={args.start}: cannot read the prompt's file ({e})")
    unknown = unknown_of(start)
    if unknown:
        raise SystemExit(f"error: the prompt has characters the model's vocabulary lacks: {unknown!r}")
    bos = (ckpt.get('tokenizer') or {}).get('bos')  # a bos=True model saw it at position 0 of every window
    if not start and bos is None:
        raise SystemExit("error: the prompt is empty, and this model has no BOS token to start from: give at least "
                         "one character (the default --start is a newline)")
    x = torch.tensor(([bos] if bos is not None else []) + encode(start), dtype=torch.long, device=device)[None, ...]

    with torch.no_grad(), autocast_context(dtype, device_type):
        for _ in range(args.num_samples):
            y = model.generate(x, args.max_new_tokens, temperature=args.temperature, top_k=args.top_k or None,
                               bos=bos)
            print(decode(y[0, int(bos is not None):].tolist()))
            print('---------------')


if __name__ == '__main__':
    sys.exit(main())
