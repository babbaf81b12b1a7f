"""
A GPT language model whose attention is chosen by config flag. Start from nanoGPT's GPT (learned positions,
pre-LayerNorm, GELU MLP, tied embeddings): with default flags the model *is* nanoGPT's. The flags swap in:

  attn='softmax'   nanoGPT's causal self-attention
  attn='diff'      Differential attention, V1 (Ye et al. 2024, arXiv 2410.05258)
  attn='diffv2'    Differential attention, V2 (microsoft/unilm Diff-Transformer-V2)
  attn='cosine'    the seeds' "Norm" attention: w_ij = 1 + cos(q_i, k_j), row-normalised
  symmetric=True   keys are the queries (K = Q): no key projection at all
  gate=...         sigmoid output gate (Qiu et al. 2025), G1 after SDPA or G2 on V
  softmax1=True    softmax-1, exp(x_i) / (1 + sum_j exp(x_j)) (Kaul et al. 2025)
  n_kv_head=...    grouped-query attention
  mask_self=True   a query does not attend to its own position (Reformer's shared-QK rule)
  norm/mlp/pos     the Diff paper's macro architecture: RMSNorm, SwiGLU, RoPE

They compose; GPTConfig rejects combinations that mean nothing. Each idea of the attention is a helper named as its
paper names it. Softmax attention runs through a fused kernel (F.scaled_dot_product_attention; on the CPU when
training with dropout, the same math in cpu_kernels.py); a naive path writes the T x T weights out (cosine attention,
attention_maps(), the tests). Beside this file: causality.py (the causality check), checkpoint.py (load_checkpoint),
leaks.py (causal-mask bugs reproduced, config.leak: never a default).
"""

import math
from dataclasses import dataclass
from typing import NamedTuple, Optional

import torch
import torch.nn as nn
from torch.nn import functional as F

import cpu_kernels
from cpu_kernels import Dropout


# the values of GPTConfig's flags that name a choice, the default first; then the attn kinds no fused kernel computes
CHOICES = dict(attn=('softmax', 'diff', 'diffv2', 'cosine'), gate=('none', 'headwise', 'elementwise'),
               gate_pos=('sdpa', 'value'), leak=('none', 'zero_future', 'off_by_one', 'after_norm', 'time_norm'),
               norm=('layernorm', 'rmsnorm'), mlp=('gelu', 'swiglu'), pos=('learned', 'rope'))
NAIVE_ONLY = ('cosine',)


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
    attn: str = 'softmax'     # the attention (the list above); each flag with choices takes CHOICES' values
    symmetric: bool = False   # K = Q
    gate: str = 'none'        # Qiu et al.'s sigmoid gate, one score per head or per channel
    gate_pos: str = 'sdpa'    # 'sdpa' (G1, gate the attention output) | 'value' (G2, gate V)
    softmax1: bool = False    # every softmax in the layer becomes softmax-1
    n_kv_head: Optional[int] = None  # grouped-query attention; None = n_head
    causal: bool = True
    mask_self: bool = False   # no query attends to its own key, unless it has no other (Kitaev et al. 2020)
    # a causal-mask bug reproduced (leaks.py): not a causal model, never a default; a run with a leak says causal=False
    leak: str = 'none'
    lambda_init: Optional[float] = None  # diff: a constant lambda_init instead of the depth schedule
    lambda_init_depth_offset: int = 0    # diff: schedule depth = layer index (0-based) + offset
    norm: str = 'layernorm'   # the macro architecture: the norms (RMSNorm),
    mlp: str = 'gelu'         # the MLP (SwiGLU),
    pos: str = 'learned'      # the positions (RoPE)
    rope_theta: float = 10000.0

    def __post_init__(self):
        def bad(msg):
            raise ValueError(f"GPTConfig: {msg}")
        for k, allowed in CHOICES.items():
            if getattr(self, k) not in allowed:
                bad(f"{k}={getattr(self, k)!r} is not one of {allowed}")
        for k in ('block_size', 'vocab_size', 'n_layer', 'n_head', 'n_embd'):
            if getattr(self, k) < 1:
                bad(f"{k}={getattr(self, k)} must be a positive integer")
        if not 0.0 <= self.dropout < 1.0:
            bad(f"dropout={self.dropout} must be in [0, 1)")
        per_head = 2 * self.n_head if self.attn == 'diff' else self.n_head
        if self.n_embd % per_head:
            bad(f"n_embd={self.n_embd} must be divisible by " + ("2*n_head (each differential head has two sub-heads "
                "of size n_embd/n_head/2)" if self.attn == 'diff' else "n_head"))
        if self.n_kv_head is not None and self.n_kv_head < 1:
            bad(f"n_kv_head={self.n_kv_head} must be a positive integer, or None (as many as n_head)")
        kv = self.n_head if self.n_kv_head is None else self.n_kv_head
        if self.n_head % kv:
            bad(f"n_head={self.n_head} must be divisible by n_kv_head={self.n_kv_head}")
        if self.symmetric and kv != self.n_head:
            bad("symmetric=True uses the queries as keys, so keys have n_head heads; leave n_kv_head=None")
        if self.symmetric and self.attn == 'diffv2':
            bad("symmetric=True with attn='diffv2': V2 has 2*n_head query heads but n_kv_head key heads, so K = Q is "
                "undefined")
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


def make_norm(config, dim):
    # nn.LayerNorm's parameters, weight and bias (none with bias=False), keep earlier checkpoints' keys
    return nn.LayerNorm(dim, eps=1e-5, bias=config.bias) if config.norm == 'layernorm' else RMSNorm(dim)


def rope_cache(T, dim, theta):
    """RoPE (Su et al.): cos, sin of shape (T, dim/2); pair i of a head rotates by angle t * theta^(-2i/dim)."""
    inv_freq = theta ** (-torch.arange(0, dim, 2, dtype=torch.float32) / dim)
    ang = torch.outer(torch.arange(T, dtype=torch.float32), inv_freq)
    return ang.cos(), ang.sin()


def apply_rope(x, cos, sin):
    """Rotate consecutive pairs (x[2i], x[2i+1]) of x (B, T, heads, dim), as RoFormer and the Diff reference do."""
    x1, x2 = upcast(x)[..., 0::2], upcast(x)[..., 1::2]
    cos, sin = cos[:, None, :], sin[:, None, :]
    return torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1).flatten(-2).type_as(x)


# --- softmax-1 (Kaul et al. 2025): softmax_1(s)_j = exp(s_j) / (1 + sum_k exp(s_k)), a row may attend to nothing

def softmax1(s):
    """softmax-1 over the last dim, shifted by m = max(max_k s_k, 0): exp(s_j - m) / (exp(-m) + sum_k exp(s_k - m))."""
    m = s.amax(-1, keepdim=True).clamp_min(0)
    e = torch.exp(s - m)
    return e / (torch.exp(-m) + e.sum(-1, keepdim=True))


def zero_key(q, k, v, causal):
    """softmax-1 through a softmax kernel: one extra key of zeros with a value of zeros. Its logit q . 0 = 0 adds
    exp(0) = 1 to every row's denominator and nothing to the output. A causal kernel aligns its mask top-left, so a
    dummy query is prepended too: row t + 1 then sees the zero key and keys 0..t (drop row 0 of the output)."""
    k, v = F.pad(k, (0, 0, 1, 0)), F.pad(v, (0, 0, 1, 0))
    return (F.pad(q, (0, 0, 1, 0)) if causal else q), k, v


# --- Differential attention (Ye et al. 2024): lambda_init, lambda_full, the two maps, subln

def lambda_init_fn(depth):
    """Diff's schedule, depth = l - 1 for layer l: lambda_init = 0.8 - 0.6 exp(-0.3 depth), 0.2 at layer 1 to 0.8."""
    return 0.8 - 0.6 * math.exp(-0.3 * depth)


class Lambdas(NamedTuple):
    """Differential attention's lambda: lambda_full = lambda_1 - lambda_2 + lambda_init."""
    lambda_1: torch.Tensor  # exp(lambda_q1 . lambda_k1)
    lambda_2: torch.Tensor  # exp(lambda_q2 . lambda_k2)
    lambda_full: torch.Tensor


class SelfAttention(nn.Module):
    """One module for every attention variant, causal or not; each idea is a few lines below."""

    def __init__(self, config, depth):
        super().__init__()
        C, H = config.n_embd, config.n_head
        self.n_head, self.n_kv_head = H, config.n_kv_head or H
        self.kind = config.attn  # one of CHOICES['attn']
        self.symmetric, self.softmax1, self.causal = config.symmetric, config.softmax1, config.causal
        self.mask_self, self.gate, self.gate_pos, self.dropout = (config.mask_self, config.gate, config.gate_pos,
                                                                  config.dropout)
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
        if config.attn in ('diff', 'diffv2'):
            self.init_lambda(config, depth)
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

    def forward(self, x, return_weights=False):
        """x (B, T, C) -> y (B, T, C); return_weights: (y, the attention weights (B, n_head, T, T)), through the
        naive path, which NAIVE_ONLY's kinds always take."""
        B, T, C = x.size()
        q, k, v = self.project(x)
        naive = return_weights or self.kind in NAIVE_ONLY
        if self.kind in ('diff', 'diffv2'):
            y, w = self.differential(q, k, v, x, naive)
        elif naive:
            w = self.weights(q, k)
            y = self.attn_dropout(w).to(v.dtype) @ v.repeat_interleave(self.n_head // self.n_kv_head, dim=1)  # GQA
        else:
            y, w = self.sdpa(q, k, v), None
        y = y.transpose(1, 2)  # (B, T, H, v_dim)
        if self.gate != 'none' and self.gate_pos == 'sdpa':  # G1
            y = self.sigmoid_gate(y, x)
        y = self.resid_dropout(self.c_proj(y.reshape(B, T, -1)))
        return (y, w) if return_weights else y

    def project(self, x):
        """x (B, T, C) -> q (B, n_q, T, hd), k (B, n_k, T, hd), v (B, n_kv, T, v_dim), heads first; RoPE on q and k."""
        B, T, _ = x.shape
        q = self.q_proj(x).view(B, T, -1, self.head_dim)
        k = q if self.symmetric else self.k_proj(x).view(B, T, -1, self.head_dim)
        v = self.v_proj(x).view(B, T, self.n_kv_head, self.v_dim)
        if self.rope_cos is not None:
            cos, sin = self.rope_cos[:T], self.rope_sin[:T]
            q = apply_rope(q, cos, sin)
            k = q if self.symmetric else apply_rope(k, cos, sin)
        if self.gate != 'none' and self.gate_pos == 'value':  # G2
            v = self.sigmoid_gate(v, x)
        return q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)

    def sigmoid_gate(self, y, x):
        """The gate (Qiu et al.): y (B, T, heads, dim) * sigmoid(x W_g), a score per head (headwise) or channel."""
        g = torch.sigmoid(self.gate_proj(x))
        return y * (g.unsqueeze(-1) if self.gate == 'headwise' else g.view_as(y))

    # --- Differential attention: y = (A1 - lambda A2) V, then (V1) subln(y) * (1 - lambda_init)

    def init_lambda(self, config, depth):
        """V1: lambda_full = exp(lambda_q1 . lambda_k1) - exp(lambda_q2 . lambda_k2) + lambda_init, and subln (an
        RMSNorm over each head's 2d channels, weight shared by the heads). V2: lambda = sigmoid(x W_lambda)."""
        if config.attn == 'diffv2':
            self.lambda_proj = nn.Linear(config.n_embd, config.n_head, bias=False)
            return
        d, hd = depth + config.lambda_init_depth_offset, self.head_dim
        self.lambda_init = lambda_init_fn(d) if config.lambda_init is None else config.lambda_init
        self.lambda_q1 = nn.Parameter(torch.empty(hd).normal_(0, 0.1))
        self.lambda_k1 = nn.Parameter(torch.empty(hd).normal_(0, 0.1))
        self.lambda_q2 = nn.Parameter(torch.empty(hd).normal_(0, 0.1))
        self.lambda_k2 = nn.Parameter(torch.empty(hd).normal_(0, 0.1))
        self.subln = RMSNorm(2 * hd, eps=1e-5)

    def lambdas(self):
        """Lambdas(lambda_1, lambda_2, lambda_full) for attn='diff', in at least fp32 as the reference computes them."""
        l1 = torch.exp(torch.dot(upcast(self.lambda_q1), upcast(self.lambda_k1)))
        l2 = torch.exp(torch.dot(upcast(self.lambda_q2), upcast(self.lambda_k2)))
        return Lambdas(l1, l2, l1 - l2 + self.lambda_init)

    def split_pairs(self, q, k):
        """Differential heads: query pair (q1, q2) and key pair (k1, k2); k1 = k2 in V2 (one K per group)."""
        q1, q2 = q[:, 0::2], q[:, 1::2]
        if self.kind == 'diffv2':
            return q1, q2, k, k
        return q1, q2, k[:, 0::2], k[:, 1::2]

    def differential(self, q, k, v, x, naive):
        """-> (y (B, H, T, v_dim), the weights A1 - lambda A2 on the naive path). Dropout drops each map on its own
        on every path, (drop(A1) - lambda drop(A2)) V, as a fused kernel does to the two maps stacked along the batch
        (dropping A1 - lambda A2 once would need the T x T map, which the fused kernels never build)."""
        if self.kind == 'diff':  # one lambda_full a layer
            lam = self.lambdas().lambda_full.to(q.dtype)
        else:  # V2: one a token and head, (B, H, T, 1)
            lam = torch.sigmoid(self.lambda_proj(x)).transpose(1, 2).unsqueeze(-1).to(q.dtype)
        q1, q2, k1, k2 = self.split_pairs(q, k)
        if naive:
            a1, a2 = self.weights(q1, k1), self.weights(q2, k2)
            v = v.repeat_interleave(self.n_head // self.n_kv_head, dim=1)  # GQA
            y1, y2 = self.attn_dropout(a1).to(v.dtype) @ v, self.attn_dropout(a2).to(v.dtype) @ v
            y, w = y1 - lam * y2, a1 - lam * a2
        else:  # A1 V - lambda A2 V: both maps in one kernel call, stacked along the batch
            y1, y2 = self.sdpa(torch.cat((q1, q2)), torch.cat((k1, k2)), torch.cat((v, v))).chunk(2)
            y, w = y1 - lam * y2, None
        if self.kind == 'diff':
            y = self.subln(y) * (1 - self.lambda_init)
        return y, w

    # --- the fused path: softmax(q k^T / sqrt(d)) v by a kernel, with mask_self and softmax-1

    def sdpa(self, q, k, v):
        """mask_self (Kitaev et al.): no query attends to its own key unless it has no other. Causal: queries 1..T-1
        over keys 0..T-2 in one causal call (its mask is aligned top-left), and query 0 keeps key 0."""
        T = q.size(2)
        if not self.mask_self or T == 1:  # T = 1: the only key is the query's own, and it keeps it
            return self.attend(q, k, v)
        if not self.causal:
            return self.attend(q, k, v, no_diag=True)  # every row has other keys
        y0 = self.attend(q[:, :, :1], k[:, :, :1], v[:, :, :1])
        return torch.cat((y0, self.attend(q[:, :, 1:], k[:, :, :-1], v[:, :, :-1])), dim=2)

    def attend(self, q, k, v, no_diag=False):
        """One kernel call over the keys the causal mask allows; no_diag (non-causal only) hides key i from query i."""
        scale, causal = q.size(-1) ** -0.5, self.causal
        if self.softmax1:
            q, k, v = zero_key(q, k, v, causal)
        Tq, Tk = q.size(2), k.size(2)
        keep = None  # the kernel's boolean mask, True where query i may attend to key j
        if no_diag:  # query i loses key i (softmax-1: key i + 1, after the zero key)
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

    # --- the naive path: the weights written out from the formulas

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

    def scores(self, q, k):
        """(B, heads, T, T): cosine, 1 + cos(q_i, k_j); else the logits q_i . k_j / sqrt(d)."""
        k = k.repeat_interleave(q.size(1) // k.size(1), dim=1)  # GQA: query head h uses kv head h // n_rep
        if self.kind == 'cosine':
            return 1 + F.normalize(upcast(q), dim=-1) @ F.normalize(upcast(k), dim=-1).transpose(-2, -1)
        return (upcast(q) @ upcast(k).transpose(-2, -1)) * q.size(-1) ** -0.5

    def normalise(self, s):
        """Scores to weights, row by row: cosine divides by the row sum, else softmax (or softmax-1)."""
        if self.kind == 'cosine':
            return s / s.sum(-1, keepdim=True).clamp_min(1e-6)
        return softmax1(s) if self.softmax1 else torch.softmax(s, dim=-1)

    def weights(self, q, k):
        """One attention map (B, heads, T, T); a key the mask forbids gets weight 0 (score -inf, cosine weight 0)."""
        mask = self.allowed(q.size(2), q.device)
        return self.normalise(self.scores(q, k).masked_fill(~mask, 0.0 if self.kind == 'cosine' else float('-inf')))


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
        return self.dropout(self.c_proj(F.silu(a) * b if self.swiglu else F.gelu(h)))


class Block(nn.Module):

    def __init__(self, config, depth):
        super().__init__()
        self.ln_1 = make_norm(config, config.n_embd)
        if config.leak == 'none':
            self.attn = SelfAttention(config, depth)
        else:  # a causal-mask bug reproduced, fenced off in leaks.py: not the papers' attention
            from leaks import LeakyAttention
            self.attn = LeakyAttention(config, depth)
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
            logits, loss = self.lm_head(x[:, [-1], :]), None  # inference: only the last position is needed
        return logits, loss

    @torch.no_grad()
    def attention_maps(self, idx):
        """Per layer, the effective attention weights (B, n_head, T, T) from the naive path: diff gives A1 -
        lambda_full * A2, softmax-1 rows may sum below 1, gated models give the weights before the gate."""
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
        """AdamW (or OrthoAdam), weight decay on matrices only (not lambda vectors, norms, biases or gains).
        capturable: for a CUDA graph, AdamW's step and learning rate (a tensor the caller fills) stay on the device."""
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
        try:  # the fused kernel: CUDA's, and the CPU's in recent PyTorch; else foreach
            return torch.optim.AdamW(groups, lr=learning_rate, betas=betas, fused=True)
        except (RuntimeError, TypeError):
            return torch.optim.AdamW(groups, lr=learning_rate, betas=betas)

    def flops_per_token(self, T):
        """Training FLOPs per token (forward + backward): 6N for the weights, plus attention matmuls (PaLM appendix
        B, as nanoGPT). Diff computes two maps, each against a 2d-wide value."""
        cfg, maps = self.config, 2 if self.config.attn in ('diff', 'diffv2') else 1
        qk, av = cfg.n_head * cfg.head_dim * maps, cfg.n_embd * maps  # q.k and a.v widths summed over the maps
        return 6 * self.get_num_params() + 6 * cfg.n_layer * T * (qk + av)

    @torch.no_grad()
    def generate(self, idx, max_new_tokens, temperature=1.0, top_k=None, bos=None):
        """Sample max_new_tokens tokens after idx (B, T), the context cropped to block_size. bos: the token a bos=True
        model saw at position 0 of every window; idx starts with it, every cropped context keeps it, it is never
        sampled."""
        T = self.config.block_size
        for _ in range(max_new_tokens):
            idx_cond = idx if idx.size(1) <= T else (
                idx[:, -T:] if bos is None else torch.cat((idx[:, :1], idx[:, 1 - T:]), dim=1))
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
