"""
Dropout and attention-with-dropout on the CPU, written for speed; the model (model.py) calls them and means the same
formulas as torch's own kernels, which it uses everywhere else.

- dropout(x, p): y = x * m / (1 - p), m ~ Bernoulli(1 - p) per element. torch's bernoulli_ draws a random double per
  element, which on a CPU costs as much as a small model's matmuls; here each element gets 16 random bits (four masks
  per 64-bit draw; two per 32-bit draw under torch.compile). So p is rounded to a multiple of 2^-16, and 1 / (1 - p)
  uses the rounded p, so that E[y] = x exactly.
- Dropout(p): the model's dropout module, torch's kernel except on the CPU, where it is dropout(x, p).
- attention(q, k, v, ...): y = dropout(softmax(q k^T * scale + mask)) v, the math path SDPA takes on a CPU when
  dropout_p > 0 (it leaves its fused kernel and keeps every weight for the backward), blocked like a flash kernel
  and with the masks above (_Attend).
"""
import math

import torch
import torch.nn as nn
from torch.nn import functional as F


def mask(shape, p, device):
    """(drop, scale): a bool mask of `shape`, True where an element is dropped (probability p rounded to a multiple of
    2^-16), and 1 / (1 - rounded p)."""
    numel = math.prod(shape)
    n_drop = min(round(p * 65536), 65535)  # drop where the 16 bits, read as 0..65535, fall below n_drop
    if torch.compiler.is_compiling():
        # Dynamo cannot trace random_ (a graph break at every dropout) but traces randint; Inductor computes
        # high - low in int64, so 32-bit draws (two masks each) rather than 64-bit ones, which would overflow
        bits = torch.randint(-2 ** 31, 2 ** 31, (-(-numel // 2),), dtype=torch.int32, device=device)
    else:
        bits = torch.empty(-(-numel // 4), dtype=torch.int64, device=device).random_(-2 ** 63, None)
    drop = bits.view(torch.int16)[:numel].view(shape) < n_drop - 32768
    return drop, 65536 / (65536 - n_drop)


def dropout(x, p):
    """Inverted dropout of x with the 16-bit masks of mask()."""
    return _ScaleMasked.apply(x, *mask(x.shape, p, x.device))


class _ScaleMasked(torch.autograd.Function):
    """y = x * scale, zero where drop: a linear map, so the backward is the same map of the gradient."""

    @staticmethod
    def forward(ctx, x, drop, scale):
        ctx.save_for_backward(drop)
        ctx.scale = scale
        return (x * scale).masked_fill_(drop, 0.0)

    @staticmethod
    def backward(ctx, grad):
        drop, = ctx.saved_tensors
        return (grad * ctx.scale).masked_fill_(drop, 0.0), None, None


def attention(q, k, v, causal, keep, scale, dropout_p):
    """SDPA's y = dropout(softmax(q k^T * scale + mask)) v for q (B, H, Tq, d), k (B, H_kv, Tk, d), v (B, H_kv, Tk, dv)
    with dropout_p > 0: the causal mask aligned top-left as SDPA's, keep a (Tq, Tk) bool mask (True: may attend) or
    None, grouped-query heads repeated. Like SDPA's math path it computes in at least fp32 (autocast would run it in
    bf16), and it needs no zero padding for Diff's q, k of d channels against a v of 2d."""
    if k.size(1) != q.size(1):  # GQA: query head h uses kv head h // n_rep
        k, v = (t.repeat_interleave(q.size(1) // k.size(1), dim=1) for t in (k, v))
    dtype = v.dtype
    Tq, Tk = q.size(2), k.size(2)
    with torch.autocast('cpu', enabled=False):
        q, k, v = (t.to(torch.promote_types(t.dtype, torch.float32)) for t in (q, k, v))  # at least fp32
        # the masks as an additive bias: causal (aligned top-left, as SDPA's) and keep
        bias = torch.full((Tq, Tk), float('-inf') if causal else 0.0, dtype=q.dtype, device=q.device).triu(1)
        if keep is not None:
            bias = bias.masked_fill(~keep, float('-inf'))
        y = _Attend.apply(q.flatten(0, 1), k.flatten(0, 1), v.flatten(0, 1), bias, causal, scale,
                          _P(dropout_p) if dropout_p > 0 else None)
    return y.view(*q.shape[:-1], v.size(-1)).to(dtype)


class _P:
    """A dropout probability as _Attend takes it (anything with a .p, model.Dropout included)."""

    def __init__(self, p):
        self.p = p


class _Attend(torch.autograd.Function):
    """y = dropout(softmax(q k^T * scale + bias)) v for q (N, Tq, d), k (N, Tk, d), v (N, Tk, dv), in torch ops and
    blocked like a flash kernel: a block is up to `rows` query rows of as many maps as make about `weights` weights,
    so that it stays in cache, and under a causal mask (top-left, as SDPA's) rows j..e-1 see only keys 0..e-1. The
    backward recomputes each block's weights rather than keeping all N x Tq x Tk of them; only the dropout masks,
    one byte per weight, are kept. `dropout`: None, or anything with the probability as .p."""
    rows, weights = 64, 2 ** 17

    @staticmethod
    def blocks(N, Tq, Tk, causal):
        """(maps, rows, keys) slices of each block."""
        if torch.compiler.is_compiling():  # one block: Inductor fuses and tiles the written-out math itself
            yield slice(0, N), slice(0, Tq), slice(0, Tk)
            return
        rows = min(Tq, _Attend.rows)
        maps = max(1, _Attend.weights // (rows * Tk))
        for i in range(0, N, maps):
            for j in range(0, Tq, rows):
                e = min(j + rows, Tq)
                yield slice(i, i + maps), slice(j, e), slice(0, min(e, Tk) if causal else Tk)

    @staticmethod
    def forward(ctx, q, k, v, bias, causal, scale, dropout):
        y = torch.empty(*q.shape[:-1], v.size(-1), dtype=q.dtype, device=q.device)
        drops = None if dropout is None else torch.zeros(*q.shape[:-1], k.size(1), dtype=torch.bool, device=q.device)
        drop_scale = 1.0
        for m, r, c in _Attend.blocks(q.size(0), q.size(1), k.size(1), causal):
            p = torch.softmax(torch.baddbmm(bias[r, c], q[m, r], k[m, c].transpose(1, 2), alpha=scale), dim=-1)
            if dropout is not None:
                drop, drop_scale = mask(p.shape, dropout.p, p.device)
                drops[m, r, c] = drop
                p.masked_fill_(drop, 0.0)
            torch.bmm(p, v[m, c], out=y[m, r])
        y.mul_(drop_scale)  # dropout's 1 / (1 - p), on the (N, Tq, dv) output rather than on the weights
        ctx.save_for_backward(q, k, v, bias, y, drops)
        ctx.causal, ctx.scale, ctx.drop_scale = causal, scale, drop_scale
        return y

    @staticmethod
    def backward(ctx, gy):
        # P the weights, M the kept mask, s = 1 / (1 - p), so Y = s (P * M) V:
        #   dV = (P * M)^T (s dY),  dP = (s dY V^T) * M,
        #   dS = P * (dP - rowsum(dP * P)), softmax's backward, where rowsum(dP * P) = rowsum(dY * Y),
        #   dQ = scale dS K,  dK = scale dS^T Q
        q, k, v, bias, y, drops = ctx.saved_tensors
        with torch.autocast(q.device.type, enabled=False):
            gy = gy.to(y.dtype)
            delta = (gy * y).sum(-1, keepdim=True)
            gy = gy * ctx.drop_scale
            dq, dk, dv = torch.empty_like(q), torch.zeros_like(k), torch.zeros_like(v)
            for m, r, c in _Attend.blocks(q.size(0), q.size(1), k.size(1), ctx.causal):
                p = torch.softmax(torch.baddbmm(bias[r, c], q[m, r], k[m, c].transpose(1, 2), alpha=ctx.scale), -1)
                dp = torch.bmm(gy[m, r], v[m, c].transpose(1, 2))
                kept = p if drops is None else p.masked_fill(drops[m, r, c], 0.0)
                if drops is not None:
                    dp.masked_fill_(drops[m, r, c], 0.0)
                dv[m, c].baddbmm_(kept.transpose(1, 2), gy[m, r])
                ds = p.mul_(dp.sub_(delta[m, r]))
                torch.bmm(ds, k[m, c], out=dq[m, r])
                dk[m, c].baddbmm_(ds.transpose(1, 2), q[m, r])
            return dq.mul_(ctx.scale), dk.mul_(ctx.scale), dv, None, None, None, None


class Dropout(nn.Module):
    """Inverted dropout: y = x * m / (1 - p), m ~ Bernoulli(1 - p) per element. torch's kernel; on the CPU,
    dropout()'s, with 16 random bits an element (p rounded to a multiple of 2^-16, E[y] = x still)."""

    def __init__(self, p):
        super().__init__()
        self.p = p

    def forward(self, x):
        if not self.training or self.p == 0.0:
            return x
        return dropout(x, self.p) if x.device.type == 'cpu' else F.dropout(x, self.p, training=True)

    def extra_repr(self):
        return f"p={self.p}"
