"""
How much noise each rule of Diff's attention dropout puts into one layer's output, measured.

  OMP_NUM_THREADS=1 python evidence/dropout_noise.py     # about a minute: prints the table, writes its JSON

It writes results/dropout_noise.json (every row, the commit, torch's version and the machine, hardware.machine's
record); evidence/pages.py renders results/dropout_noise.md from that file.

The two rules, on the maps A1, A2 (softmax rows, entries >= 0) of a differential head, p = 0.2:
  earlier (model.py before commit 8b66842, the naive path of every leak run): y = drop(A1 - lambda A2) V
  current (every path since 8b66842):                                         y = (drop(A1) - lambda drop(A2)) V
drop(M) keeps each entry with probability 1 - p and scales it by 1 / (1 - p), so per entry the variance over draws is
p / (1 - p) times the square of what it drops: (A1 - lambda A2)^2 for the earlier rule, A1^2 + lambda^2 A2^2 for the
current one. For lambda > 0 and A1, A2 >= 0, (A1 - lambda A2)^2 <= A1^2 + lambda^2 A2^2: the current rule is the
noisier one; only lambda < 0 turns it round. This script measures it on model.py's own layer (SelfAttention's
project, split_pairs, weights, subln and c_proj; the mask and the scale of the maps are the model's): the std of
the layer's output over dropout draws, per element, averaged over elements, earlier / current. Rows: Diff and
Diff+Sym (K = Q), the seed's 3-layer width (n_embd 256, 8 heads, block 256), each layer depth's lambda_init, at the initial weights
(lambda_full = lambda_init) and with the query/key weights scaled up (sharper maps), and at a forced lambda_full.
"""
import json
import os
import statistics
import subprocess
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import hardware  # noqa: E402
from model import GPTConfig, SelfAttention  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, 'results', 'dropout_noise.json')

P, DRAWS, T, BATCH = 0.2, 64, 256, 2


def drop(m, gen):
    """Inverted dropout of one tensor with its own mask."""
    keep = torch.rand(m.shape, generator=gen) >= P
    return m * keep / (1 - P)


def output_std(attn, x, rule, lam_override=None, seed=0):
    """The std over DRAWS dropout draws of the layer's output (after subln, (1 - lambda_init) and c_proj), per
    element, averaged over elements."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        q, k, v = attn.project(x)
        lam = attn.lambdas().lambda_full if lam_override is None else torch.tensor(lam_override)
        q1, q2, k1, k2 = attn.split_pairs(q, k)
        a1, a2 = attn.weights(q1, k1), attn.weights(q2, k2)
        outs = []
        for _ in range(DRAWS):
            if rule == 'earlier':
                y = drop(a1 - lam * a2, gen) @ v
            else:
                y = drop(a1, gen) @ v - lam * (drop(a2, gen) @ v)
            y = attn.subln(y) * (1 - attn.lambda_init)
            B, H, TT, D = y.shape
            outs.append(attn.c_proj(y.transpose(1, 2).reshape(B, TT, H * D)))
        return torch.stack(outs).std(0).mean().item(), float(lam)


def main():
    torch.manual_seed(1)
    rows = []
    for sym in (False, True):
        cfg = GPTConfig(block_size=T, vocab_size=65, n_layer=3, n_head=8, n_embd=256, dropout=P, bias=False,
                        attn='diff', symmetric=sym, lambda_init_depth_offset=1)
        for depth in range(3):
            attn = SelfAttention(cfg, depth).eval()  # eval: no module dropout; the rules above drop by hand
            x = torch.randn(BATCH, T, cfg.n_embd)
            cases = [('initial weights', None, 1.0)] + [('q/k weights x3', None, 3.0)] + \
                    [(f'lambda_full forced to {lam:+.1f}', lam, 1.0) for lam in (0.8, -0.5)]
            for what, lam, scale in cases:
                with torch.no_grad():
                    projs = [attn.q_proj] + ([] if sym else [attn.k_proj])
                    saved = [m.weight.clone() for m in projs]
                    for m in projs:
                        m.weight *= scale
                    old, lam_used = output_std(attn, x, 'earlier', lam)
                    new, _ = output_std(attn, x, 'current', lam)
                    for m, w in zip(projs, saved):
                        m.weight.copy_(w)
                rows.append((('Diff+Sym' if sym else 'Diff'), depth + 1, what, lam_used, old, new))
    print('| model | layer | weights | λ_full | std, earlier rule | std, current rule | earlier / current |')
    print('|---|---|---|---|---|---|---|')
    for model, layer, what, lam, old, new in rows:
        print(f'| {model} | {layer} | {what} | {lam:+.3f} | {old:.4f} | {new:.4f} | {old / new:.2f} |')
    pos = [o / n for _, _, _, lam, o, n in rows if lam > 0]
    neg = [o / n for _, _, _, lam, o, n in rows if lam < 0]
    print(f'\nearlier / current: {min(pos):.2f}-{max(pos):.2f} where λ_full > 0 (mean {statistics.mean(pos):.2f}); '
          f'{min(neg):.2f}-{max(neg):.2f} where λ_full < 0')
    git = lambda *a: subprocess.run(['git', *a], cwd=ROOT, capture_output=True, text=True).stdout.strip()  # noqa: E731
    record = dict(commit=git('rev-parse', 'HEAD'), model_py_changed=bool(git('status', '--porcelain', 'model.py')),
                  torch_version=torch.__version__, machine=hardware.machine('cpu'), p=P, draws=DRAWS, batch=BATCH,
                  block=T, rows=[dict(model=m, layer=layer, weights=what, lambda_full=lam, std_earlier=old,
                                      std_current=new) for m, layer, what, lam, old, new in rows])
    with open(OUT, 'w', encoding='utf-8') as f:
        json.dump(record, f, indent=1)
        f.write('\n')
    print(f'wrote {os.path.relpath(OUT, ROOT)}')


if __name__ == '__main__':
    main()
