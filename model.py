"""
A GPT language model whose attention is chosen by config flag, in one file.

Start from nanoGPT's GPT (learned positions, pre-LayerNorm, GELU MLP, tied
embeddings). With default flags the model *is* nanoGPT's. The flags swap in:

  attn='softmax'   nanoGPT's causal self-attention
  attn='diff'      Differential attention, V1 (Ye et al. 2024, arXiv 2410.05258)
  attn='diffv2'    Differential attention, V2 (microsoft/unilm Diff-Transformer-V2)
  attn='cosine'    the seeds' "Norm" attention: w_ij = 1 + cos(q_i, k_j), row-normalised
  symmetric=True   keys are the queries (K = Q): no key projection at all
  gate=...         sigmoid output gate (Qiu et al. 2025), G1 after SDPA or G2 on V
  softmax1=True    softmax-1, exp(x_i) / (1 + sum_j exp(x_j)) (Kaul et al. 2025)
  n_kv_head=...    grouped-query attention
  mask_self=True   a query does not attend to its own position (Reformer's shared-QK rule)
  leak=...         a causal-mask bug reproduced (LeakyAttention, fenced at the end of the file); never a default
  norm/mlp/pos     the Diff paper's macro architecture: RMSNorm, SwiGLU, RoPE

They compose; GPTConfig.__post_init__ rejects combinations that mean nothing.
The fast path runs every softmax-family variant through F.scaled_dot_product_attention (on the CPU, when training
with dropout, through the same math written out in cpu_kernels.py); a naive path that builds the T x T weights
(cosine attention, attention_maps(), the tests) sits next to it. check_causal() is a black-box test that a causal
model's logits do not depend on later tokens, for train.py to run before training.
"""

import contextlib
import math
import os
import sys
import warnings
from dataclasses import dataclass, fields
from typing import NamedTuple, Optional

import torch
import torch.nn as nn
from torch.nn import functional as F

import cpu_kernels


@dataclass
class GPTConfig:
    block_size: int = 1024
    vocab_size: int = 50304
    n_layer: int = 12
    n_head: int = 12          # for attn='diff': the number of differential heads (each has two sub-heads)
    n_embd: int = 768
    dropout: float = 0.0
    bias: bool = True         # biases in Linears and LayerNorms, like GPT-2
    # --- attention ---
    attn: str = 'softmax'     # 'softmax' | 'diff' | 'diffv2' | 'cosine'
    symmetric: bool = False   # K = Q
    gate: str = 'none'        # 'none' | 'headwise' | 'elementwise'
    gate_pos: str = 'sdpa'    # 'sdpa' (G1, gate the attention output) | 'value' (G2, gate V)
    softmax1: bool = False    # every softmax in the layer becomes softmax-1
    n_kv_head: Optional[int] = None  # grouped-query attention; None = n_head
    causal: bool = True
    mask_self: bool = False   # no query attends to its own key, unless it has no other (Kitaev et al. 2020)
    # a causal mask applied wrongly, to test which bug gives the seed notes' losses (results/seed_table_explained.md):
    # 'zero_future' (future scores 0 instead of -inf) | 'off_by_one' (key t + 1 visible) | 'after_norm' (the row
    # normalised over every key, then the future's weights zeroed) | 'time_norm' (attn='diff' only: the per-head
    # subln taken over (T, 2d), a GroupNorm over time). Not a causal model: the causality check refuses it, so a
    # run with a leak says causal=False
    leak: str = 'none'
    lambda_init: Optional[float] = None  # diff: a constant lambda_init instead of the depth schedule
    lambda_init_depth_offset: int = 0    # diff: schedule depth = layer index (0-based) + offset
    # --- macro architecture ---
    norm: str = 'layernorm'   # 'layernorm' | 'rmsnorm'
    mlp: str = 'gelu'         # 'gelu' | 'swiglu'
    pos: str = 'learned'      # 'learned' | 'rope'
    rope_theta: float = 10000.0

    def __post_init__(self):
        def bad(msg):
            raise ValueError(f"GPTConfig: {msg}")
        choices = dict(attn=('softmax', 'diff', 'diffv2', 'cosine'), gate=('none', 'headwise', 'elementwise'),
                       leak=('none', 'zero_future', 'off_by_one', 'after_norm', 'time_norm'),
                       gate_pos=('sdpa', 'value'), norm=('layernorm', 'rmsnorm'), mlp=('gelu', 'swiglu'),
                       pos=('learned', 'rope'))
        for k, allowed in choices.items():
            if getattr(self, k) not in allowed:
                bad(f"{k}={getattr(self, k)!r} is not one of {allowed}")
        for k in ('block_size', 'vocab_size', 'n_layer', 'n_head', 'n_embd'):
            if getattr(self, k) < 1:
                bad(f"{k}={getattr(self, k)} must be a positive integer")
        if not 0.0 <= self.dropout < 1.0:
            bad(f"dropout={self.dropout} must be in [0, 1)")
        per_head = 2 * self.n_head if self.attn == 'diff' else self.n_head
        if self.n_embd % per_head:
            why = "2*n_head (each differential head has two sub-heads of size n_embd/n_head/2)" if self.attn == 'diff' else "n_head"
            bad(f"n_embd={self.n_embd} must be divisible by {why}")
        if self.n_kv_head is not None and self.n_kv_head < 1:
            bad(f"n_kv_head={self.n_kv_head} must be a positive integer, or None (as many as n_head)")
        kv = self.n_head if self.n_kv_head is None else self.n_kv_head
        if self.n_head % kv:
            bad(f"n_head={self.n_head} must be divisible by n_kv_head={self.n_kv_head}")
        if self.symmetric and kv != self.n_head:
            bad("symmetric=True uses the queries as keys, so keys have n_head heads; leave n_kv_head=None")
        if self.symmetric and self.attn == 'diffv2':
            bad("symmetric=True with attn='diffv2': V2 has 2*n_head query heads but n_kv_head key heads, so K = Q is undefined")
        if self.softmax1 and self.attn == 'cosine':
            bad("softmax1=True with attn='cosine': cosine attention has no softmax to replace")
        if self.gate == 'none' and self.gate_pos != 'sdpa':
            bad(f"gate_pos={self.gate_pos!r} needs a gate; set gate='headwise' or 'elementwise'")
        if self.lambda_init is not None and not 0 <= self.lambda_init < 1:  # the output is scaled by 1 - lambda_init
            bad(f"lambda_init={self.lambda_init} must be in [0, 1) (the Diff paper's schedule gives 0.2 to 0.8)")
        if self.lambda_init_depth_offset < 0:  # lambda_init of layer l is lambda_init_fn(l - 1 + offset)
            bad(f"lambda_init_depth_offset={self.lambda_init_depth_offset} must be >= 0")
        if self.attn != 'diff' and (self.lambda_init is not None or self.lambda_init_depth_offset != 0):
            bad("lambda_init and lambda_init_depth_offset only apply to attn='diff'")
        if self.leak == 'time_norm' and self.attn != 'diff':
            bad(f"leak='time_norm' with attn={self.attn!r}: the bug is in Differential attention's per-head norm "
                "(subln), which only attn='diff' has")
        if self.leak != 'none' and self.mask_self:
            bad(f"leak={self.leak!r} with mask_self=True: the leak reproduces a plain causal mask's bug")
        if not self.rope_theta > 0:  # the base of the rotation frequencies theta^(-2i/d): a power of a positive number
            bad(f"rope_theta={self.rope_theta} must be positive (RoPE's base; 10000 in RoFormer and LLaMA)")
        if self.pos != 'rope' and self.rope_theta != 10000.0:
            bad(f"rope_theta={self.rope_theta} with pos={self.pos!r}: rope_theta only applies to pos='rope'")
        if self.pos == 'rope' and self.head_dim % 2:
            bad(f"pos='rope' needs an even head size, got {self.head_dim}")

    @property
    def head_dim(self):
        """Size of one query/key (sub-)head."""
        return self.n_embd // self.n_head // (2 if self.attn == 'diff' else 1)


def lambda_init_fn(depth):
    """Diff Transformer's schedule, depth = l - 1 for layer l: 0.2 at the first layer, towards 0.8."""
    return 0.8 - 0.6 * math.exp(-0.3 * depth)


def upcast(x):
    """At least fp32 (bf16/fp16 -> fp32; fp64 stays fp64) for numerically sensitive steps."""
    return x.to(torch.promote_types(x.dtype, torch.float32))


class RMSNorm(nn.Module):
    """RMSNorm(x) = x / sqrt(mean(x^2) + eps) * weight, computed in fp32 like LayerNorm under autocast."""

    def __init__(self, ndim, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(ndim))

    def forward(self, x):
        return F.rms_norm(upcast(x), self.weight.shape, self.weight.to(upcast(x).dtype), self.eps).type_as(x)


class Dropout(nn.Module):
    """Inverted dropout: y = x * m / (1 - p), m ~ Bernoulli(1 - p) per element. torch's kernel, except on the CPU,
    where cpu_kernels.dropout draws 16 random bits an element rather than a double (p rounded to a multiple of 2^-16,
    1 / (1 - p) of the rounded p, so that E[y] = x still)."""

    def __init__(self, p):
        super().__init__()
        self.p = p

    def forward(self, x):
        if not self.training or self.p == 0.0:
            return x
        return cpu_kernels.dropout(x, self.p) if x.device.type == 'cpu' else F.dropout(x, self.p, training=True)

    def extra_repr(self):
        return f"p={self.p}"


def make_norm(config, dim):
    # nn.LayerNorm's parameters, weight and bias (none with bias=False), keep earlier checkpoints' keys
    return nn.LayerNorm(dim, eps=1e-5, bias=config.bias) if config.norm == 'layernorm' else RMSNorm(dim)


def rope_cache(T, dim, theta):
    """cos, sin of shape (T, dim/2): pair i of a head rotates by angle t * theta^(-2i/dim)."""
    inv_freq = theta ** (-torch.arange(0, dim, 2, dtype=torch.float32) / dim)
    ang = torch.outer(torch.arange(T, dtype=torch.float32), inv_freq)
    return ang.cos(), ang.sin()


def apply_rope(x, cos, sin):
    """Rotate consecutive pairs (x[2i], x[2i+1]) of x (B, T, heads, dim), as RoFormer and the Diff reference do."""
    x1, x2 = upcast(x)[..., 0::2], upcast(x)[..., 1::2]
    cos, sin = cos[:, None, :], sin[:, None, :]
    return torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1).flatten(-2).type_as(x)


class Lambdas(NamedTuple):
    """Differential attention's lambda: lambda_full = lambda_1 - lambda_2 + lambda_init."""
    lambda_1: torch.Tensor  # exp(lambda_q1 . lambda_k1)
    lambda_2: torch.Tensor  # exp(lambda_q2 . lambda_k2)
    lambda_full: torch.Tensor


class SelfAttention(nn.Module):
    """One module for every attention variant, causal or not; each idea is a few lines below."""
    naive_only = False  # True: every forward through the naive path (weights()), as LeakyAttention's do

    def __init__(self, config, depth):
        super().__init__()
        C, H = config.n_embd, config.n_head
        self.n_head, self.n_kv_head = H, config.n_kv_head or H
        self.kind = config.attn  # 'softmax' | 'diff' | 'diffv2' | 'cosine'
        self.symmetric, self.softmax1, self.causal = config.symmetric, config.softmax1, config.causal
        self.mask_self = config.mask_self
        self.gate, self.gate_pos, self.dropout = config.gate, config.gate_pos, config.dropout
        self.head_dim = hd = config.head_dim
        # query heads and key heads of size hd, value heads of size v_dim:
        #   diff:   Q -> 2H sub-heads [q_h1, q_h2], K -> 2*n_kv sub-heads, V -> n_kv heads of 2d
        #   diffv2: Q -> 2H heads (pairs 2h, 2h+1), K, V -> n_kv heads of n_embd/H
        #   else:   Q -> H heads, K, V -> n_kv heads
        n_q = 2 * H if config.attn in ('diff', 'diffv2') else H
        n_k = 2 * self.n_kv_head if config.attn == 'diff' else self.n_kv_head
        self.v_dim = 2 * hd if config.attn == 'diff' else hd
        self.q_proj = nn.Linear(C, n_q * hd, bias=config.bias)
        if not config.symmetric:  # K = Q has no key projection at all
            self.k_proj = nn.Linear(C, n_k * hd, bias=config.bias)
        self.v_proj = nn.Linear(C, self.n_kv_head * self.v_dim, bias=config.bias)
        self.c_proj = nn.Linear(H * self.v_dim, C, bias=config.bias)
        self.attn_dropout = Dropout(config.dropout)
        self.resid_dropout = Dropout(config.dropout)
        if config.attn == 'diff':
            # lambda_full = exp(lambda_q1 . lambda_k1) - exp(lambda_q2 . lambda_k2) + lambda_init
            d = depth + config.lambda_init_depth_offset
            self.lambda_init = lambda_init_fn(d) if config.lambda_init is None else config.lambda_init
            self.lambda_q1 = nn.Parameter(torch.empty(hd).normal_(0, 0.1))
            self.lambda_k1 = nn.Parameter(torch.empty(hd).normal_(0, 0.1))
            self.lambda_q2 = nn.Parameter(torch.empty(hd).normal_(0, 0.1))
            self.lambda_k2 = nn.Parameter(torch.empty(hd).normal_(0, 0.1))
            self.subln = RMSNorm(2 * hd, eps=1e-5)  # per-head norm over 2d, weight shared by the heads
        if config.attn == 'diffv2':
            self.lambda_proj = nn.Linear(C, H, bias=False)  # lambda = sigmoid(x W_lambda), per token and head
        if config.gate != 'none':
            # Qiu et al.: Y' = Y * sigmoid(X W_g), X the same normalised input that feeds q_proj
            n_heads, dim = (H, C) if config.gate_pos == 'sdpa' else (self.n_kv_head, self.n_kv_head * self.v_dim)
            self.gate_proj = nn.Linear(C, n_heads if config.gate == 'headwise' else dim, bias=config.bias)
        if config.pos == 'rope':
            cos, sin = rope_cache(config.block_size, hd, config.rope_theta)
            self.register_buffer('rope_cos', cos, persistent=False)
            self.register_buffer('rope_sin', sin, persistent=False)
        else:
            self.rope_cos = None

    def lambdas(self):
        """Lambdas(lambda_1, lambda_2, lambda_full) for attn='diff', in at least fp32 as the reference computes them."""
        l1 = torch.exp(torch.dot(upcast(self.lambda_q1), upcast(self.lambda_k1)))
        l2 = torch.exp(torch.dot(upcast(self.lambda_q2), upcast(self.lambda_k2)))
        return Lambdas(l1, l2, l1 - l2 + self.lambda_init)

    def _gate(self, y, x):
        """y (B, T, heads, dim) times sigmoid(x W_g): one score per head (headwise) or per channel."""
        g = torch.sigmoid(self.gate_proj(x))
        return y * (g.unsqueeze(-1) if self.gate == 'headwise' else g.view_as(y))

    def project(self, x):
        """x (B, T, C) -> q (B, n_q, T, hd), k (B, n_k, T, hd), v (B, n_kv, T, v_dim), heads first."""
        B, T, _ = x.shape
        q = self.q_proj(x).view(B, T, -1, self.head_dim)
        k = q if self.symmetric else self.k_proj(x).view(B, T, -1, self.head_dim)
        v = self.v_proj(x).view(B, T, self.n_kv_head, self.v_dim)
        if self.rope_cos is not None:
            cos, sin = self.rope_cos[:T], self.rope_sin[:T]
            q = apply_rope(q, cos, sin)
            k = q if self.symmetric else apply_rope(k, cos, sin)
        if self.gate != 'none' and self.gate_pos == 'value':  # G2
            v = self._gate(v, x)
        return q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)

    def split_pairs(self, q, k):
        """Differential heads: query pair (q1, q2) and key pair (k1, k2); k1 = k2 in V2 (one K per group)."""
        q1, q2 = q[:, 0::2], q[:, 1::2]
        if self.kind == 'diffv2':
            return q1, q2, k, k
        return q1, q2, k[:, 0::2], k[:, 1::2]

    def sdpa(self, q, k, v):
        """softmax(q k^T / sqrt(hd)) v through the fused kernel (when training with dropout on CPU, through _Attend),
        with softmax-1, mask_self and unequal value size handled."""
        T = q.size(2)
        if not self.mask_self or T == 1:  # T = 1: the only key is the query's own, and it keeps it
            return self._sdpa(q, k, v)
        if not self.causal:
            return self._sdpa(q, k, v, no_diag=True)  # every row has other keys
        # mask_self under a causal mask: query t >= 1 sees keys 0..t-1, which is a causal SDPA of queries 1..T-1 over
        # keys 0..T-2 (the mask is aligned top-left); query 0 has no other key and keeps key 0.
        y0 = self._sdpa(q[:, :, :1], k[:, :, :1], v[:, :, :1])
        return torch.cat((y0, self._sdpa(q[:, :, 1:], k[:, :, :-1], v[:, :, :-1])), dim=2)

    def _sdpa(self, q, k, v, no_diag=False):
        """sdpa() over the keys the causal mask allows; no_diag (non-causal only) hides key i from query i."""
        scale = q.size(-1) ** -0.5
        causal = self.causal
        if self.softmax1:
            # softmax-1 = softmax over the keys plus one zero key with a zero value: its logit is 0, so it adds
            # exp(0) = 1 to the denominator and nothing to the output. SDPA aligns a causal mask top-left, so a
            # dummy query is prepended too: row t+1 then sees the zero key and keys 0..t; row 0 is dropped.
            k, v = F.pad(k, (0, 0, 1, 0)), F.pad(v, (0, 0, 1, 0))
            if causal:
                q = F.pad(q, (0, 0, 1, 0))
        Tq, Tk = q.size(2), k.size(2)
        keep = None  # SDPA's boolean mask, True where query i may attend to key j
        if no_diag:  # mask_self without a causal mask: query i loses key i (softmax-1: key i + 1, after the zero key)
            keep = torch.arange(Tk, device=q.device) != torch.arange(Tq, device=q.device)[:, None] + (Tk - Tq)
        if self.training and self.dropout > 0 and q.device.type == 'cpu':
            # SDPA with dropout_p > 0 leaves its fused CPU kernel for a math path that draws a random double per weight
            # and keeps every weight for the backward: cpu_kernels.attention is that math, blocked, with cheaper masks
            y = cpu_kernels.attention(q, k, v, causal, keep, scale, self.attn_dropout.p)
        else:
            if q.size(-1) != v.size(-1):
                # diff: q, k have d channels, v has 2d. Kernels want equal head sizes; zero channels add 0 to q.k.
                q, k = F.pad(q, (0, v.size(-1) - q.size(-1))), F.pad(k, (0, v.size(-1) - k.size(-1)))
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=keep, is_causal=causal, scale=scale,
                                               dropout_p=self.dropout if self.training else 0.0,
                                               enable_gqa=k.size(1) != q.size(1))
        return y[:, :, 1:] if self.softmax1 and causal else y

    def allowed(self, T, device):
        """(T, T) bool, True where query i may attend to key j: j <= i if causal; with mask_self not j = i,
        unless key i is the only key of row i (causal row 0, or T = 1)."""
        ok = torch.ones(T, T, dtype=torch.bool, device=device)
        if self.causal:
            ok = ok.tril()
        if self.mask_self:
            eye = torch.eye(T, dtype=torch.bool, device=device)
            others = ok & ~eye
            ok = others | (eye & ~others.any(-1, keepdim=True))
        return ok

    # three hooks of the naive path, each the paper's step here, each a bug in LeakyAttention at the end of the file
    def mask_scores(self, s, mask, fill):
        """Before normalising a row: the keys `mask` forbids get `fill`, a score of -inf (softmax: weight 0) or a
        cosine weight of 0."""
        return s.masked_fill(~mask, fill)

    def mask_weights(self, w, mask):
        """After normalising a row: nothing left to mask."""
        return w

    def norm_heads(self, y):
        """Diff's per-head norm of y (B, H, T, 2d): subln, an RMSNorm over each head's 2d channels, position by
        position."""
        return self.subln(y)

    def weights(self, q, k):
        """The naive path: the attention maps (B, H, T, T) written out from the formulas, (A,), or (A1, A2) for the
        two maps of a differential head."""
        mask = self.allowed(q.size(2), q.device)

        def one_map(q, k):
            k = k.repeat_interleave(q.size(1) // k.size(1), dim=1)  # GQA: query head h uses kv head h // n_rep
            if self.kind == 'cosine':  # w_ij = 1 + cos(q_i, k_j), divided by the row sum
                w = 1 + F.normalize(upcast(q), dim=-1) @ F.normalize(upcast(k), dim=-1).transpose(-2, -1)
                w = self.mask_scores(w, mask, 0.0)
                w = w / w.sum(-1, keepdim=True).clamp_min(1e-6)
            else:
                s = self.mask_scores((upcast(q) @ upcast(k).transpose(-2, -1)) * q.size(-1) ** -0.5, mask,
                                     float('-inf'))
                if not self.softmax1:
                    w = torch.softmax(s, dim=-1)
                else:  # exp(s_j) / (1 + sum exp(s)), shifted by max(m, 0): the zero logit is exp(-m)
                    m = s.amax(-1, keepdim=True).clamp_min(0)
                    e = torch.exp(s - m)
                    w = e / (torch.exp(-m) + e.sum(-1, keepdim=True))
            return self.mask_weights(w, mask)

        if self.kind in ('diff', 'diffv2'):
            q1, q2, k1, k2 = self.split_pairs(q, k)
            return one_map(q1, k1), one_map(q2, k2)
        return (one_map(q, k),)

    def forward(self, x, return_weights=False):
        B, T, C = x.size()
        q, k, v = self.project(x)
        lam = None
        if self.kind == 'diff':
            lam = self.lambdas().lambda_full.to(q.dtype)
        elif self.kind == 'diffv2':
            lam = torch.sigmoid(self.lambda_proj(x)).transpose(1, 2).unsqueeze(-1).to(q.dtype)  # (B, H, T, 1)
        w = None
        # Attention dropout drops each softmax map on its own, on every path: Diff's output is
        #   (drop(A1) - lambda drop(A2)) V,
        # which is what a fused kernel with dropout_p does to the two maps stacked along the batch (the fast path),
        # and what the naive path does below. Dropping the difference A1 - lambda A2 once would need the T x T map,
        # which the fused kernels never build.
        if return_weights or self.kind == 'cosine' or self.naive_only:
            maps = self.weights(q, k)
            v = v.repeat_interleave(self.n_head // self.n_kv_head, dim=1)
            y1, *y2 = (self.attn_dropout(a).to(v.dtype) @ v for a in maps)
            y, w = (y1, maps[0]) if not y2 else (y1 - lam * y2[0], maps[0] - lam * maps[1])
        elif self.kind in ('diff', 'diffv2'):
            # (A1 - lambda A2) V = A1 V - lambda A2 V: both maps in one SDPA call, stacked along the batch
            q1, q2, k1, k2 = self.split_pairs(q, k)
            y1, y2 = self.sdpa(torch.cat((q1, q2)), torch.cat((k1, k2)), torch.cat((v, v))).chunk(2)
            y = y1 - lam * y2
        else:
            y = self.sdpa(q, k, v)
        if self.kind == 'diff':
            y = self.norm_heads(y) * (1 - self.lambda_init)
        y = y.transpose(1, 2)  # (B, T, H, v_dim)
        if self.gate != 'none' and self.gate_pos == 'sdpa':  # G1
            y = self._gate(y, x)
        y = self.resid_dropout(self.c_proj(y.reshape(B, T, -1)))
        return (y, w) if return_weights else y


class MLP(nn.Module):
    """GELU: c_proj(gelu(c_fc x)), hidden 4C. SwiGLU: c_proj(silu(a) * b) with [a, b] = c_fc x, hidden
    8C/3 rounded up to a multiple of 64, so it has about as many parameters as the GELU MLP (LLaMA's choice)."""

    def __init__(self, config):
        super().__init__()
        self.swiglu = config.mlp == 'swiglu'
        hidden = 64 * math.ceil(8 * config.n_embd / 3 / 64) if self.swiglu else 4 * config.n_embd
        self.c_fc = nn.Linear(config.n_embd, (2 if self.swiglu else 1) * hidden, bias=config.bias)
        self.c_proj = nn.Linear(hidden, config.n_embd, bias=config.bias)
        self.dropout = Dropout(config.dropout)

    def forward(self, x):
        h = self.c_fc(x)
        if self.swiglu:
            a, b = h.chunk(2, dim=-1)
            h = F.silu(a) * b
        else:
            h = F.gelu(h)
        return self.dropout(self.c_proj(h))


class Block(nn.Module):

    def __init__(self, config, depth):
        super().__init__()
        self.ln_1 = make_norm(config, config.n_embd)
        self.attn = (SelfAttention if config.leak == 'none' else LeakyAttention)(config, depth)
        self.ln_2 = make_norm(config, config.n_embd)
        self.mlp = MLP(config)

    def forward(self, x, return_weights=False):
        a = self.attn(self.ln_1(x), return_weights)
        a, w = a if return_weights else (a, None)
        x = x + a
        x = x + self.mlp(self.ln_2(x))
        return (x, w) if return_weights else x


class GPT(nn.Module):

    def __init__(self, config):
        super().__init__()
        self.config = config
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(config.vocab_size, config.n_embd),
            drop=Dropout(config.dropout),
            h=nn.ModuleList([Block(config, depth) for depth in range(config.n_layer)]),
            ln_f=make_norm(config, config.n_embd),
        ))
        if config.pos == 'learned':
            self.transformer.wpe = nn.Embedding(config.block_size, config.n_embd)
        self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)
        self.transformer.wte.weight = self.lm_head.weight  # weight tying
        self.apply(self._init_weights)
        for pn, p in self.named_parameters():
            if pn.endswith('c_proj.weight'):  # GPT-2's scaled init of the residual projections
                torch.nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * config.n_layer))
        # stderr: a note, so that sample.py's stdout is only the samples (python sample.py > samples.txt); once a
        # job, not once a DDP rank (torchrun sets RANK)
        if int(os.environ.get('RANK', 0)) == 0:
            print("number of parameters: %.2fM" % (self.get_num_params() / 1e6,), file=sys.stderr)

    def get_num_params(self, non_embedding=True):
        """Parameter count; position embeddings are left out by default (the token embedding is tied to lm_head)."""
        n = sum(p.numel() for p in self.parameters())
        if non_embedding and self.config.pos == 'learned':
            n -= self.transformer.wpe.weight.numel()
        return n

    def _init_weights(self, module):
        if isinstance(module, nn.Linear):
            torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)
            if module.bias is not None:
                torch.nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)

    def _embed(self, idx):
        T = idx.size(1)
        if T > self.config.block_size:
            raise ValueError(f"sequence of length {T} is longer than block_size={self.config.block_size}")
        x = self.transformer.wte(idx)
        if self.config.pos == 'learned':
            x = x + self.transformer.wpe(torch.arange(T, dtype=torch.long, device=idx.device))
        return self.transformer.drop(x)

    def forward(self, idx, targets=None, reduction='mean'):
        x = self._embed(idx)
        for block in self.transformer.h:
            x = block(x)
        x = self.transformer.ln_f(x)
        if targets is not None:
            logits = self.lm_head(x)
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)).float(), targets.view(-1), ignore_index=-1,
                                   reduction=reduction)  # 'none': each token's loss (evaluation's per-batch means)
        else:
            logits = self.lm_head(x[:, [-1], :])  # inference: only the last position is needed
            loss = None
        return logits, loss

    @torch.no_grad()
    def attention_maps(self, idx):
        """Per layer, the effective attention weights (B, n_head, T, T) from the naive path:
        diff gives A1 - lambda_full * A2, softmax-1 rows may sum below 1, gated models give the
        weights before the gate. The forward pass itself runs on the same naive weights."""
        x, maps = self._embed(idx), []
        for block in self.transformer.h:
            x, w = block(x, return_weights=True)
            maps.append(w)
        return maps

    @torch.no_grad()
    def lambda_table(self):
        """One dict per attn='diff' layer, as Python floats; [] for models without such layers."""
        rows = []
        for i, block in enumerate(self.transformer.h):
            a = block.attn
            if a.kind == 'diff':
                lam = a.lambdas()
                rows.append(dict(layer=i + 1, lambda_1=lam.lambda_1.item(), lambda_2=lam.lambda_2.item(),
                                 lambda_init=float(a.lambda_init), lambda_full=lam.lambda_full.item()))
        return rows

    def configure_optimizers(self, weight_decay, learning_rate, betas, optimizer='adamw', orthoadam_max_dim=1024,
                             seed=0, capturable=False):
        """AdamW (or OrthoAdam) with weight decay on matrices only: no decay on lambda vectors, norms, biases
        or gains. capturable: AdamW for a CUDA graph (train.py's cuda_graph): its step count, and its learning
        rate as a tensor the caller fills in place, stay on the device, so a replay reads them without a sync."""
        if optimizer not in ('adamw', 'orthoadam'):
            raise ValueError(f"optimizer={optimizer!r} is not one of ('adamw', 'orthoadam')")
        params = [p for p in self.parameters() if p.requires_grad]
        groups = [dict(params=[p for p in params if p.dim() >= 2], weight_decay=weight_decay),
                  dict(params=[p for p in params if p.dim() < 2], weight_decay=0.0)]
        if optimizer == 'orthoadam':
            from orthoadam import OrthoAdam
            return OrthoAdam(groups, lr=learning_rate, betas=betas, max_dim=orthoadam_max_dim, seed=seed)
        if capturable:
            device = params[0].device
            return torch.optim.AdamW(groups, lr=torch.tensor(learning_rate, device=device), betas=betas,
                                     fused=True, capturable=device.type == 'cuda')
        # the fused kernel exists for CUDA and, in recent PyTorch, for CPU; fall back to foreach otherwise
        try:
            return torch.optim.AdamW(groups, lr=learning_rate, betas=betas, fused=True)
        except (RuntimeError, TypeError):
            return torch.optim.AdamW(groups, lr=learning_rate, betas=betas)

    def flops_per_token(self, T):
        """Training FLOPs per token (forward + backward): 6N for the weights, plus attention matmuls
        (PaLM appendix B, as nanoGPT). Diff computes two maps, each against a 2d-wide value."""
        cfg = self.config
        N = self.get_num_params()
        qk = cfg.n_head * cfg.head_dim * (2 if cfg.attn in ('diff', 'diffv2') else 1)  # q.k width summed over maps
        av = cfg.n_embd * (2 if cfg.attn in ('diff', 'diffv2') else 1)                 # a.v width summed over maps
        return 6 * N + 6 * cfg.n_layer * T * (qk + av)

    @torch.no_grad()
    def generate(self, idx, max_new_tokens, temperature=1.0, top_k=None, bos=None):
        """Sample max_new_tokens tokens after idx (B, T); the context is cropped to block_size. bos: the token a
        bos=True model saw at position 0 of every window; idx starts with it, every cropped context keeps it
        there, and it is never sampled."""
        T = self.config.block_size
        for _ in range(max_new_tokens):
            if idx.size(1) <= T:
                idx_cond = idx
            else:
                idx_cond = idx[:, -T:] if bos is None else torch.cat((idx[:, :1], idx[:, 1 - T:]), dim=1)
            logits, _ = self(idx_cond)
            logits = logits[:, -1, :] / temperature
            if bos is not None:
                logits[:, bos] = -float('Inf')
            if top_k is not None:
                v, _ = torch.topk(logits, min(top_k, logits.size(-1)))
                logits[logits < v[:, [-1]]] = -float('Inf')
            probs = F.softmax(logits.float(), dim=-1)
            idx = torch.cat((idx, torch.multinomial(probs, num_samples=1)), dim=1)
        return idx


class CausalityError(ValueError):
    """A causal model whose logits at some position depend on a later token."""


def check_causal(model, vocab_size, block_size, device, autocast_ctx=contextlib.nullcontext(), seed=0, batch_size=1,
                 training=True):
    """Raise CausalityError if the logits at some position depend on a later token. Black-box: it compares logits
    only, so it covers every layer and every variant, including ones added later.

    It runs the forward pass that training runs: `model` as given (torch.compile'd or not), in training mode, under
    `autocast_ctx`, with autograd on (under torch.compile grad mode selects the graph: this is training's graph, not
    an inference one), torch.manual_seed(seed) before every forward so that dropout draws the same masks each time.
    training=False checks evaluation's forward instead: eval mode, no gradients.
    Input: `batch_size` random sequences of length T = block_size (pass the training shape, so that a compiled model
    is not compiled for a second one). Each check changes the token at one position t in every sequence: t = T // 2
    tests half the positions against a token up to half a context away, t = T - 1 every position against the last
    key, t = 1 position 0, which softmax-1 (its dummy query) and mask_self (the kept self key) treat specially.

    Rule. With the causal mask a later key gets weight exp(-inf) = 0 exactly, and every other step acts per
    position, so the logits at positions i < t are equal, bit for bit, with deterministic kernels. Position i < t
    leaks if, maxima over the batch and the vocabulary,
        max |dlogits_i| > 1e-6 * max_{j >= t} |dlogits_j| + 8 * noise,
    noise = max |difference| of two forwards of the same input. The change at j >= t (position t's own logits
    always change; it is of the size of the logits) scales the threshold to the model: 1e-6 of it is ~15 float32
    roundings (2^-24) of the largest logit, far below what even one leaking head moves (docs/details.md's
    "Attention"). noise is 0 with deterministic kernels; with nondeterministic ones it is their reduction-order noise,
    which the second term keeps from tripping the check (and a warning says when it is large enough to hide leaks).
    The RNG state and the model's train/eval mode are restored afterwards.
    Cost: five forwards, and two (batch_size, T, vocab_size) float32 tensors of logits held at once. A DDP-wrapped
    model works too; then every rank must call it (its forward is collective), and all reach the same verdict."""
    T, dev = block_size, torch.device(device)
    if T < 2 or vocab_size < 2:
        return  # no earlier position, or no other token to put there
    g = torch.Generator().manual_seed(seed)
    idx = torch.randint(vocab_size, (batch_size, T), generator=g)
    shift = torch.randint(1, vocab_size, (batch_size,), generator=g)  # a different token in every sequence

    def logits(x):
        torch.manual_seed(seed)
        with autocast_ctx, torch.set_grad_enabled(training):
            out, _ = model(x.to(dev), x.to(dev))  # with targets: the logits at every position
        return out.detach().float().clone()  # a copy: a CUDA-graph output (compile_mode='reduce-overhead') is reused

    was_training = model.training
    model.train(training)
    index = dev.index if dev.index is not None else getattr(torch.get_device_module(dev.type), 'current_device', int)()
    try:
        with torch.random.fork_rng(devices=[] if dev.type == 'cpu' else [index], device_type=dev.type):
            base = logits(idx)
            noise = (logits(idx) - base).abs_().max().item()
            if noise > 1e-4 * base.abs().max().item():
                warnings.warn(f"check_causal: two forwards of the same input differ by {noise:.3g}, so smaller "
                              f"leaks go unnoticed (nondeterministic kernels, or randomness torch.manual_seed misses?)")
            for t in sorted({1, T // 2, T - 1}):
                perturbed = idx.clone()
                perturbed[:, t] = (idx[:, t] + shift) % vocab_size
                change = logits(perturbed).sub_(base).abs_().amax(dim=(0, 2)).cpu()  # per position
                ref = change[t:].max().item()
                tol = 1e-6 * ref + 8 * noise
                leaks = (change[:t] > tol).nonzero()
                if len(leaks):
                    i = leaks[0].item()
                    raise CausalityError(
                        f"the model is not causal: changing only the token at position {t} changed the logits at "
                        f"position {i} by {change[i].item():.3g} (tolerance {tol:.3g}; at positions >= {t}: "
                        f"{ref:.3g}). Check that every attention call keeps its causal mask (is_causal=True, or the "
                        f"mask of a naive path; an attn_mask replaces is_causal) and that no layer mixes positions "
                        f"(a norm or pooling over the sequence, a shift in the wrong direction).")
    finally:
        model.train(was_training)


CHECKPOINT_FORMAT = 'attn-gpt-ckpt-1'  # written by train.py into every checkpoint


class UnreadableCheckpoint(ValueError):
    """A checkpoint file torch.load cannot read (truncated, damaged, not a torch file): `what` says so, the message
    adds what to do (train.py's resume says it its own way)."""

    def __init__(self, path, error):
        self.what = (f"{path} is not a readable checkpoint (truncated, damaged or not a torch file: torch.load raised "
                     f"{type(error).__name__})")
        other = ("the run's ckpt.pt (its last state)" if os.path.basename(path) == 'best.pt' else
                 "the run's best.pt (the weights of its best eval)")
        super().__init__(f"{self.what}; use another copy of it, or {other}")


def load_checkpoint(path, device='cpu'):
    """-> (GPT with the checkpoint's weights, the checkpoint dict). Loads with weights_only=True (no pickled code
    runs) and says plainly what is wrong with a missing, truncated or foreign file."""
    if not os.path.isfile(path):
        raise FileNotFoundError(f"no checkpoint at {path} (train.py writes out_dir/ckpt.pt)")
    try:
        ckpt = torch.load(path, map_location=device, weights_only=True)
    except Exception as e:  # torch's own text would advise weights_only=False, which runs a file's code, and
        # cannot mend a damaged file
        raise UnreadableCheckpoint(path, e) from None
    if not isinstance(ckpt, dict) or ckpt.get('format') != CHECKPOINT_FORMAT:
        raise ValueError(f"{path} is not a checkpoint written by this repository's train.py "
                         f"(no format={CHECKPOINT_FORMAT!r} entry)")
    # a field this model.py lacks (a checkpoint of newer code) is named; one the checkpoint lacks (older code) takes
    # its default, which is the model that code built
    unknown = sorted(set(ckpt['model_args']) - {f.name for f in fields(GPTConfig)})
    if unknown:
        raise ValueError(f"{path}'s model has {', '.join(unknown)}, which this model.py's GPTConfig lacks (a checkpoint "
                         f"of newer code): load it with the code that wrote it")
    model = GPT(GPTConfig(**ckpt['model_args']))
    missing, unexpected = model.load_state_dict(ckpt['model'], strict=False)
    if missing or unexpected:
        raise ValueError(f"{path}'s weights do not fit this model.py's GPT of the same config: "
                         + '; '.join(f"{what} {', '.join(names[:4])}{' ...' if len(names) > 4 else ''}"
                                     for what, names in (('unknown', unexpected), ('missing', missing)) if names)
                         + " (a checkpoint of other code: load it with the code that wrote it)")
    return model.to(device), ckpt


# ===========================================================================================================
# Reproductions of other people's causal-mask bugs, not the papers' attention: GPTConfig.leak='...' builds the blocks
# with LeakyAttention instead of SelfAttention, to test which bug could give the seed notes' losses
# (results/seed_table_explained.md). Each bug overrides one hook of SelfAttention's naive path, and every forward
# takes that path. None is a causal model: check_causal refuses them, so a run says causal=False (train.py refuses a
# leak otherwise). Never a default.

class LeakyAttention(SelfAttention):
    """SelfAttention with one bug in how it applies the causal mask (config.leak):
    zero_future  future scores 0 instead of -inf (`att * tril`, `masked_fill(mask == 0, 0)`, an additive mask of
                 zeros where -inf was meant): a future key keeps weight exp(0) (a cosine's 1 + cos = 1), so the
                 future is seen as an average, never one chosen key;
    off_by_one   query t also sees key t + 1;
    after_norm   the row normalised over every key, the future's weights zeroed afterwards
                 (`softmax(att).masked_fill(future, 0)`): how much of the row the future took, a function of the
                 future keys, scales what the past contributes;
    time_norm    (attn='diff') the per-head subln taken over (T, 2d), a GroupNorm over time: every position's shift
                 and scale come from statistics over the whole window, later positions included."""
    naive_only = True

    def __init__(self, config, depth):
        super().__init__(config, depth)
        self.leak = config.leak

    def allowed(self, T, device):
        """The causal mask, whatever `causal` says (a leak run has causal=False for the check's sake); off_by_one:
        one key further."""
        return torch.ones(T, T, dtype=torch.bool, device=device).tril(1 if self.leak == 'off_by_one' else 0)

    def mask_scores(self, s, mask, fill):
        if self.leak == 'after_norm':
            return s
        if self.leak == 'zero_future':
            return s.masked_fill(~mask, 0.0 if fill == float('-inf') else 1.0)
        return super().mask_scores(s, mask, fill)

    def mask_weights(self, w, mask):
        return w.masked_fill(~mask, 0.0) if self.leak == 'after_norm' else w

    def norm_heads(self, y):
        return self.subln_time(y) if self.leak == 'time_norm' else super().norm_heads(y)

    def subln_time(self, y):
        """Each head of y (B, H, T, 2d) normalised over (T, 2d) together, (y - mean) / sqrt(var + eps) * weight, as
        nn.GroupNorm(H, H * 2d) gives on a (B, H * 2d, T) tensor."""
        yf = upcast(y)
        var, mean = torch.var_mean(yf, dim=(-2, -1), correction=0, keepdim=True)
        return ((yf - mean) * torch.rsqrt(var + self.subln.eps) * self.subln.weight.to(yf.dtype)).type_as(y)
