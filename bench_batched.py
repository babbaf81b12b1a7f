"""
Several seeds of one model trained in one process as one batched model: issue #28's prototype, measured here
before it goes into train.py. On a GPU a 3-layer model's step is launch-bound (results/bench_gpu.md), so K seeds
in one step of K-times-wider kernels could cost little more than one.

$ python bench_batched.py --seeds 1 2 3 --steps 20                      # on the CPU: equivalence and step times
$ python bench_batched.py --seeds 1 2 3 4 5 6 --device cuda --dtype bfloat16 --steps 200 --warmup 20

How: the K models' weights are stacked along a new first axis (torch.func.stack_module_state) and one forward
runs under torch.vmap over it; q, k, v keep their 4-D shape inside, so SDPA is called as in one model. Each seed
draws its own batches, as train.py does: batch b of seed s at iteration i is get_batch(batch_rng(s, 0, i, 0)),
so seed s here sees exactly the batches of `train.py --seed=s`. AdamW is elementwise, so one AdamW over the
stacked weights is K AdamWs; weight decay follows each unstacked tensor's shape, as configure_optimizers does.
Gradient clipping is per seed: seed s's gradients are scaled by min(1, clip / ||g_s||), ||g_s|| over its own
tensors only. The learning rate is constant (one schedule is the same for every seed; train.py --decay_lr=False).

It reports, per seed, the training loss at every step (to compare with train.py's log.jsonl: tests/test_train.py
checks that they agree to 1e-5 in fp32), and the median ms per step of the batched step against K plain steps of
one model each, timed as one block (the eager step of train.py: one model, its own AdamW; not compiled, not
graphed, not K processes side by side, which are the other ways to fill a GPU). Dropout is 0: under vmap one
generator draws every seed's masks, so they would not be train.py's.
"""
import argparse
import json
import time

import torch
from torch.func import functional_call, grad_and_value, stack_module_state

from dataset import batch_rng, get_batch, load_meta, load_split
from hardware import autocast_context
from model import GPT, GPTConfig


def build(seeds, cfg, device):
    """The K models, initialised as train.py initialises seed s (torch.manual_seed(s), then GPT)."""
    models = []
    for s in seeds:
        torch.manual_seed(s)
        models.append(GPT(cfg).to(device))
    return models


def batched_optimizer(models, params, lr, weight_decay, betas):
    """One AdamW over the stacked weights; decay where the unstacked tensor is a matrix (configure_optimizers)."""
    dims = {n: p.dim() for n, p in models[0].named_parameters()}
    groups = [dict(params=[p for n, p in params.items() if dims[n] >= 2], weight_decay=weight_decay),
              dict(params=[p for n, p in params.items() if dims[n] < 2], weight_decay=0.0)]
    return torch.optim.AdamW(groups, lr=lr, betas=betas, fused=True)


def clip_per_seed(grads, max_norm):
    """Scale seed s's gradients by min(1, max_norm / (||g_s|| + 1e-6)), as clip_grad_norm_ does for one model."""
    K = next(iter(grads.values())).shape[0]
    sq = sum(g.float().pow(2).reshape(K, -1).sum(1) for g in grads.values())
    coef = (max_norm / (sq.sqrt() + 1e-6)).clamp(max=1.0)
    for g in grads.values():
        g.mul_(coef.view(-1, *[1] * (g.dim() - 1)).to(g.dtype))


def batched_trainer(models, args, ctx):
    """A step function for the stacked models: (X, Y) of shape (K, B, T) -> the K losses."""
    params, buffers = stack_module_state(models)
    base = models[0]  # its code, not its weights: functional_call swaps the stacked ones in
    opt = batched_optimizer(models, params, args.learning_rate, args.weight_decay, (args.beta1, args.beta2))

    def loss_fn(p, b, x, y):
        with ctx:
            return functional_call(base, (p, b), (x, y))[1]
    vg = torch.vmap(grad_and_value(loss_fn))

    def step(X, Y):
        grads, losses = vg(params, buffers, X, Y)
        if args.grad_clip:
            clip_per_seed(grads, args.grad_clip)
        for n, p in params.items():
            p.grad = grads[n].contiguous()  # vmap may return strided views; the fused AdamW needs dense
        opt.step()
        return losses.detach()
    return step


def plain_trainer(model, args, ctx):
    """train.py's eager step for one model: forward, backward, clip, AdamW."""
    opt = model.configure_optimizers(args.weight_decay, args.learning_rate, (args.beta1, args.beta2))

    def step(X, Y):
        with ctx:
            _, loss = model(X, Y)
        loss.backward()
        if args.grad_clip:
            torch.nn.utils.clip_grad_norm_(model.parameters(), args.grad_clip)
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss.detach()
    return step


def batches(data, seeds, it, args, device):
    xs, ys = zip(*(get_batch(data, batch_rng(s, 0, it, 0), args.batch_size, args.block_size, device) for s in seeds))
    return torch.stack(xs), torch.stack(ys)


def timed(fn, sync):
    sync()
    t = time.perf_counter()
    out = fn()
    sync()
    return out, time.perf_counter() - t


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    ap.add_argument('--seeds', nargs='+', type=int, default=[1, 2, 3])
    ap.add_argument('--dataset', default='shakespeare_char')
    for k, v in dict(n_layer=3, n_head=8, n_embd=256, block_size=256, batch_size=32, steps=20, warmup=3).items():
        ap.add_argument(f'--{k}', type=int, default=v)
    for k, v in dict(learning_rate=1e-3, weight_decay=0.1, beta1=0.9, beta2=0.99, grad_clip=1.0).items():
        ap.add_argument(f'--{k}', type=float, default=v)
    ap.add_argument('--attn', default='softmax')
    ap.add_argument('--symmetric', action='store_true')
    ap.add_argument('--device', default='cpu')
    ap.add_argument('--dtype', default='float32', choices=['float32', 'bfloat16'])
    ap.add_argument('--json', default=None, help='write the losses and timings here')
    args = ap.parse_args(argv)
    if args.steps <= args.warmup:
        ap.error(f'--steps ({args.steps}) must be more than --warmup ({args.warmup}): the timed steps come after it')
    meta = load_meta(args.dataset)
    data = load_split(args.dataset, 'train', meta)
    cfg = GPTConfig(block_size=args.block_size, vocab_size=meta.get('vocab_size', 50304), n_layer=args.n_layer,
                    n_head=args.n_head, n_embd=args.n_embd, dropout=0.0, bias=False, attn=args.attn,
                    symmetric=args.symmetric)
    ctx = autocast_context(args.dtype, args.device.split(':')[0])
    sync = torch.cuda.synchronize if args.device.startswith('cuda') else (lambda: None)
    K = len(args.seeds)

    step = batched_trainer(build(args.seeds, cfg, args.device), args, ctx)
    losses, t_batched = [], []
    for it in range(args.steps):
        X, Y = batches(data, args.seeds, it, args, args.device)
        out, dt = timed(lambda: step(X, Y), sync)
        losses.append(out.float().cpu().tolist())
        t_batched.append(dt)

    singles = [plain_trainer(m, args, ctx) for m in build(args.seeds, cfg, args.device)]
    plain_losses, t_plain = [], []
    for it in range(args.steps):
        X, Y = batches(data, args.seeds, it, args, args.device)
        # the K steps timed as one block, one sync at the end: the host queues model k + 1's kernels while the
        # device runs model k's, as K processes or a training loop (which syncs every log_interval) would
        outs, dt = timed(lambda: [single(X[k], Y[k]) for k, single in enumerate(singles)], sync)
        plain_losses.append([o.float().item() for o in outs])
        t_plain.append(dt)

    med = lambda ts: sorted(ts[args.warmup:])[len(ts[args.warmup:]) // 2] * 1000  # noqa: E731
    gap = max(abs(a - b) for ra, rb in zip(losses, plain_losses) for a, b in zip(ra, rb))
    result = dict(seeds=args.seeds, device=args.device, dtype=args.dtype, n_layer=args.n_layer, n_embd=args.n_embd,
                  batch_size=args.batch_size, block_size=args.block_size, attn=args.attn, symmetric=args.symmetric,
                  losses=losses, plain_losses=plain_losses, max_abs_loss_gap=gap,
                  ms_batched=med(t_batched), ms_plain_k=med(t_plain), torch=torch.__version__)
    print(f"{K} seeds, {args.steps} steps on {args.device} ({args.dtype}): largest |batched - plain| loss "
          f"{gap:.2e}; batched step {result['ms_batched']:.1f} ms, {K} plain steps {result['ms_plain_k']:.1f} ms "
          f"({result['ms_plain_k'] / result['ms_batched']:.2f}x)")
    if args.json:
        with open(args.json, 'w') as f:
            json.dump(result, f, indent=1)
    return result


if __name__ == '__main__':
    main()
