"""
Tests for model.py against independent, naive references written from the specs.

The references below read only the module's *parameters* (q_proj, k_proj, v_proj, c_proj, gate_proj,
lambda_q1/k1/q2/k2, subln, lambda_proj, norms, MLP) and recompute everything from the formulas in float64
with explicit masks, explicit loops over heads, torch.softmax / explicit exp, explicit RMSNorm and an
explicit RoPE rotation. Nothing in model.py's own attention code (weights, sdpa, apply_rope, rope_cache,
lambdas, split_pairs, ...) is used to build an expected value.

Every comparison is paired, where it makes sense, with a deliberately wrong reference (no (1 - lambda_init),
the wrong GQA pairing, plain softmax instead of softmax-1, no gate, no RoPE, the other mask, ...) that must
NOT match, so a test that passes is one that could have failed.
"""

import dataclasses
import itertools
import math
import os
import sys

import pytest
import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import causality  # noqa: E402
import cpu_kernels  # noqa: E402
import leaks  # noqa: E402
import model as M  # noqa: E402
from checkpoint import load_checkpoint  # noqa: E402
from model import GPT, GPTConfig  # noqa: E402

pytestmark = pytest.mark.usefixtures('one_thread')  # conftest.py: torch on one thread, here and in subprocesses

# tiny dims: n_embd 64, 4 heads (diff: 4 differential heads of 2 x 8), T = 16
BASE = dict(block_size=32, vocab_size=61, n_layer=1, n_head=4, n_embd=64, dropout=0.0, bias=True)
T = 16
B = 2
F64 = torch.float64
ATOL = 1e-5   # float32 module vs float64 reference
TEETH = 1e-3  # a wrong reference must differ from the right one by more than this



# ----------------------------------------------------------------------------------------------------------
# helpers

def make(seed=0, **kw):
    cfg = GPTConfig(**{**BASE, **kw})
    torch.manual_seed(seed)
    m = GPT(cfg)
    m.eval()
    return m


def randomize(m, seed=1234, gain=1.6):
    """Re-draw every parameter so attention is far from uniform (logits of std ~ gain^2), lambdas and gates
    are far from their init, biases and norm gains are non-trivial: comparisons then have something to see."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in m.named_parameters():
            r = torch.randn(p.shape, generator=g, dtype=p.dtype)
            if p.dim() == 2 and ('wte' in name or 'wpe' in name):
                p.copy_(0.5 * r)
            elif p.dim() == 2:  # Linear weight (out, in)
                p.copy_(r * gain / math.sqrt(p.shape[1]))
            elif name.endswith('bias'):
                p.copy_(0.2 * r)
            elif 'lambda_' in name:
                p.copy_(0.3 * r)
            else:  # norm gains
                p.copy_(1 + 0.2 * r)
    return m


def rand_x(C, seed=7, b=B, t=T):
    return torch.randn(b, t, C, generator=torch.Generator().manual_seed(seed))


def rand_idx(V, seed=3, b=B, t=T):
    return torch.randint(V, (b, t), generator=torch.Generator().manual_seed(seed))


def dmax(a, b):
    return (a.double() - b.double()).abs().max().item()


def close(got, want, atol=ATOL, rtol=1e-5):
    torch.testing.assert_close(got.detach().double(), want.detach().double(), atol=atol, rtol=rtol)


def W(lin):
    return lin.weight.detach().double()


def linear(x, lin):
    y = x @ W(lin).T
    return y if lin.bias is None else y + lin.bias.detach().double()


def sigmoid(z):
    return 1.0 / (1.0 + torch.exp(-z))


def expected_lambda_init(cfg, depth):
    if cfg.lambda_init is not None:
        return float(cfg.lambda_init)
    return 0.8 - 0.6 * math.exp(-0.3 * (depth + cfg.lambda_init_depth_offset))


def expected_lambda_full(a, cfg, depth):
    lq1, lk1, lq2, lk2 = (getattr(a, n).detach().double() for n in ('lambda_q1', 'lambda_k1', 'lambda_q2', 'lambda_k2'))
    return math.exp((lq1 * lk1).sum().item()) - math.exp((lq2 * lk2).sum().item()) + expected_lambda_init(cfg, depth)


def rope_ref(v, theta):
    """Naive RoPE: v (B, T, heads, hd); pair (v[2i], v[2i+1]) at position t rotates by t * theta^(-2i/hd)."""
    hd, Tn = v.shape[-1], v.shape[1]
    out = torch.empty_like(v)
    for i in range(hd // 2):
        ang = torch.tensor([t * theta ** (-2.0 * i / hd) for t in range(Tn)], dtype=v.dtype)[None, :, None]
        c, s = torch.cos(ang), torch.sin(ang)
        x0, x1 = v[..., 2 * i], v[..., 2 * i + 1]
        out[..., 2 * i] = x0 * c - x1 * s
        out[..., 2 * i + 1] = x0 * s + x1 * c
    return out


def rms_ref(x, w, eps=1e-5):
    return x / torch.sqrt((x * x).mean(-1, keepdim=True) + eps) * w


def layernorm_ref(x, w, b, eps=1e-5):
    mu = x.mean(-1, keepdim=True)
    var = ((x - mu) ** 2).mean(-1, keepdim=True)
    y = (x - mu) / torch.sqrt(var + eps) * w
    return y if b is None else y + b


def dims(cfg):
    """(hd, n_q, n_k, v_dim) from the spec: diff has sub-heads of n_embd/n_head/2 and values of 2d;
    diffv2 doubles the query heads only; everything else is nanoGPT's."""
    C, H = cfg.n_embd, cfg.n_head
    KV = cfg.n_kv_head or H
    if cfg.attn == 'diff':
        d = C // H // 2
        return d, 2 * H, 2 * KV, 2 * d
    if cfg.attn == 'diffv2':
        return C // H, 2 * H, KV, C // H
    return C // H, H, KV, C // H


def ref_attention(a, x, cfg, depth=0, wrong=(), info=None):
    """One attention layer (output after c_proj) and its effective weights (B, n_head, T, T), in float64,
    from the module's parameters and the formulas of the spec. `wrong` switches in deliberate mistakes.
    `info` (a dict) receives 'min_pre_norm_rms' for diff: the smallest RMS of a head output before subln.
    Differentiable in x (the parameters are constants), for the backward tests."""
    wrong = set(wrong)
    info = {} if info is None else info
    info['min_pre_norm_rms'] = math.inf
    x = x.double()
    Bn, Tn, C = x.shape
    H = cfg.n_head
    KV = cfg.n_kv_head or H
    rep = H // KV
    hd, nq, nk, vd = dims(cfg)

    Q = linear(x, a.q_proj).view(Bn, Tn, nq, hd)
    K = Q if cfg.symmetric else linear(x, a.k_proj).view(Bn, Tn, nk, hd)
    V = linear(x, a.v_proj).view(Bn, Tn, KV, vd)
    if cfg.pos == 'rope' and 'no_rope' not in wrong:
        Q = rope_ref(Q, cfg.rope_theta)
        K = Q if cfg.symmetric else rope_ref(K, cfg.rope_theta)
    gate = None
    if cfg.gate != 'none' and 'no_gate' not in wrong:
        gate = sigmoid(linear(x, a.gate_proj))
        if cfg.gate_pos == 'value':  # G2: gate V, per kv head or per channel
            V = V * (gate.view(Bn, Tn, KV, vd) if cfg.gate == 'elementwise' else gate[..., None])
            gate = None

    causal = cfg.causal != ('acausal' in wrong)
    allowed = torch.ones(Tn, Tn, dtype=torch.bool)
    if causal:
        for i in range(Tn):
            for j in range(i + 1, Tn):
                allowed[i, j] = False
    if cfg.mask_self and 'keep_self' not in wrong:
        for i in range(Tn):  # Reformer: a query does not attend to itself, unless it has no other key
            if allowed[i].sum() > 1:
                allowed[i, i] = False

    def amap(q, k):  # q, k (B, T, hd) -> weights (B, T, T)
        if cfg.attn == 'cosine':
            qn = q / q.norm(dim=-1, keepdim=True)
            kn = k / k.norm(dim=-1, keepdim=True)
            w = torch.where(allowed, 1 + qn @ kn.transpose(-1, -2), torch.zeros((), dtype=F64))
            return w / w.sum(-1, keepdim=True)
        s = q @ k.transpose(-1, -2) / math.sqrt(hd)
        if cfg.softmax1 and 'softmax' not in wrong:
            e = torch.where(allowed, torch.exp(s), torch.zeros((), dtype=F64))
            return e / (1 + e.sum(-1, keepdim=True))
        return torch.softmax(s.masked_fill(~allowed, float('-inf')), dim=-1)

    if cfg.attn == 'diff':
        li = expected_lambda_init(cfg, depth)
        lam = expected_lambda_full(a, cfg, depth)
    if cfg.attn == 'diffv2':
        lam_tok = sigmoid(x @ W(a.lambda_proj).T)  # (B, T, H): one lambda per token and head

    outs, maps = [], []
    for h in range(H):
        g = h % KV if 'gqa_mod' in wrong else h // rep  # kv head of (differential) head h
        if cfg.attn == 'diff':
            k1, k2 = 2 * g, 2 * g + 1
            if 'pairing' in wrong:  # the unilm naive file: repeat K's sub-heads, sub-head 2h+s uses (2h+s)//rep
                k1, k2 = (2 * h) // rep, (2 * h + 1) // rep
            A = amap(Q[:, :, 2 * h], K[:, :, k1]) - lam * amap(Q[:, :, 2 * h + 1], K[:, :, k2])
            o = A @ V[:, :, g]
            info['min_pre_norm_rms'] = min(info['min_pre_norm_rms'], (o * o).mean(-1).sqrt().min().item())
            if 'no_subln' not in wrong:
                o = rms_ref(o, a.subln.weight.detach().double())
            if 'no_scale' not in wrong:
                o = o * (1 - li)
        elif cfg.attn == 'diffv2':
            i1, i2 = (h, h + H) if 'v2_layout' in wrong else (2 * h, 2 * h + 1)
            g1, g2 = ((2 * h) % KV, (2 * h + 1) % KV) if 'v2_split' in wrong else (g, g)
            A = amap(Q[:, :, i1], K[:, :, g1]) - lam_tok[:, :, h, None] * amap(Q[:, :, i2], K[:, :, g2])
            o = A @ V[:, :, g]
        else:
            A = amap(Q[:, :, h], K[:, :, g])
            o = A @ V[:, :, g]
        if gate is not None:  # G1: per head before c_proj (diff: after the norm and the scaling)
            o = o * (gate[:, :, h:h + 1] if cfg.gate == 'headwise' else gate[:, :, h * vd:(h + 1) * vd])
        outs.append(o)
        maps.append(A)
    return linear(torch.cat(outs, dim=-1), a.c_proj), torch.stack(maps, dim=1)


def ref_mlp(mlp, x, cfg):
    h = linear(x, mlp.c_fc)
    if cfg.mlp == 'swiglu':
        n = h.shape[-1] // 2
        a, b = h[..., :n], h[..., n:]
        h = a * sigmoid(a) * b
    else:
        h = 0.5 * h * (1 + torch.erf(h / math.sqrt(2)))  # exact GELU, as nn.GELU() in nanoGPT
    return linear(h, mlp.c_proj)


def ref_norm(norm, x, cfg):
    w = norm.weight.detach().double()
    if cfg.norm == 'rmsnorm':
        return rms_ref(x, w)
    return layernorm_ref(x, w, None if norm.bias is None else norm.bias.detach().double())


def ref_logits(m, idx):
    """The whole model: pre-norm blocks x + attn(norm(x)), x + mlp(norm(x)), final norm, tied head."""
    cfg, tr = m.config, m.transformer
    x = tr.wte.weight.detach().double()[idx]
    if cfg.pos == 'learned':
        x = x + tr.wpe.weight.detach().double()[:idx.shape[1]]
    for depth, blk in enumerate(tr.h):
        x = x + ref_attention(blk.attn, ref_norm(blk.ln_1, x, cfg), cfg, depth)[0]
        x = x + ref_mlp(blk.mlp, ref_norm(blk.ln_2, x, cfg), cfg)
    return ref_norm(tr.ln_f, x, cfg) @ W(m.lm_head).T


# ----------------------------------------------------------------------------------------------------------
# the grid of every valid composition

# every (gate, gate_pos) the model allows: G1 and G2 of each gate, and no gate
GATES = tuple((g, pos) for g in M.CHOICES['gate'] for pos in M.CHOICES['gate_pos'] if g != 'none' or pos == 'sdpa')
ATTN = M.CHOICES['attn']  # a new value of attn joins every grid below


def spec_valid(attn, symmetric, softmax1, n_kv_head):
    """Which combinations of the grid are meaningful, from the specs (not from model.py)."""
    if softmax1 and attn == 'cosine':
        return False  # cosine has no softmax
    if symmetric and n_kv_head is not None:
        return False  # K = Q has n_head key heads
    if symmetric and attn == 'diffv2':
        return False  # V2 has 2*n_head query heads but n_kv key heads
    return True


# the grid's factors: the attention's math (attn, symmetric, softmax1, causal) in every combination, and the flags that
# compose with it (the gate, GQA, the macro architecture, biases) so that every pair of values of two factors occurs
CORE = ('attn', 'symmetric', 'softmax1', 'causal')
FACTORS = dict(attn=ATTN, symmetric=(False, True), softmax1=(False, True), causal=(True, False), gate=GATES,
               n_kv_head=(None, 2), pos=M.CHOICES['pos'], bias=(True, False))


def as_kw(row):
    """A row of factor values -> GPTConfig keywords (RoPE runs the Diff paper's macro architecture)."""
    kw = {k: v for k, v in row.items() if k != 'gate'}
    kw['gate'], kw['gate_pos'] = row['gate']
    if kw['pos'] == 'rope':
        kw.update(norm='rmsnorm', mlp='swiglu')
    return kw


def pairs(row):
    return {((f, row[f]), (g, row[g])) for f, g in itertools.combinations(FACTORS, 2)}


def _grid():
    """(GRID, GRID_INVALID): every valid combination of CORE, then more rows, each the valid row that covers most
    pairs not yet covered, until every pair of factor values that a valid row holds occurs (all-pairs testing);
    GRID_INVALID: rows the specs reject."""
    rows = [dict(zip(FACTORS, values)) for values in itertools.product(*FACTORS.values())]
    valid = [r for r in rows if spec_valid(r['attn'], r['symmetric'], r['softmax1'], r['n_kv_head'])]
    invalid = [r for r in rows if r not in valid]
    todo = set().union(*map(pairs, valid))
    grid = []
    for core in dict.fromkeys(tuple(r[f] for f in CORE) for r in valid):
        best = max((r for r in valid if tuple(r[f] for f in CORE) == core), key=lambda r: len(pairs(r) & todo))
        grid.append(best)
        todo -= pairs(best)
    while todo:
        best = max(valid, key=lambda r: len(pairs(r) & todo))
        grid.append(best)
        todo -= pairs(best)
    return [as_kw(r) for r in grid], [as_kw(r) for r in invalid]


GRID, GRID_INVALID = _grid()


def _noself_grid():
    """mask_self with every valid (attn, symmetric, softmax1, causal); gates, GQA and RoPE rotate through it."""
    out = []
    for attn, sym, sm1, causal in itertools.product(ATTN, (False, True), (False, True), (True, False)):
        if not spec_valid(attn, sym, sm1, None):
            continue
        i = len(out)
        gate, gpos = GATES[i % len(GATES)]
        kw = dict(attn=attn, symmetric=sym, softmax1=sm1, causal=causal, mask_self=True, gate=gate, gate_pos=gpos,
                  n_kv_head=2 if not sym and i % 2 else None, pos='rope' if i % 3 == 0 else 'learned', bias=i % 4 < 2)
        if kw['pos'] == 'rope':
            kw.update(norm='rmsnorm', mlp='swiglu')
        out.append(kw)
    return out


NOSELF = _noself_grid()  # mask_self=True: 24 compositions


def gid(kw):
    kw = {**dict(attn='softmax', symmetric=False, gate='none', gate_pos='sdpa', softmax1=False, n_kv_head=None,
                 causal=True, pos='learned', bias=True), **kw}
    s = [kw['attn']]
    s += ['sym'] if kw['symmetric'] else []
    s += [f"{kw['gate'][:2]}-{kw['gate_pos']}"] if kw['gate'] != 'none' else []
    s += ['sm1'] if kw['softmax1'] else []
    s += [f"kv{kw['n_kv_head']}"] if kw['n_kv_head'] else []
    s += [] if kw['causal'] else ['bidir']
    s += ['noself'] if kw.get('mask_self') else []
    s += ['rope'] if kw['pos'] == 'rope' else []
    s += ['rms'] if kw.get('norm') == 'rmsnorm' else []
    s += ['swiglu'] if kw.get('mlp') == 'swiglu' else []
    s += [] if kw['bias'] else ['nobias']
    return '-'.join(s)


def teeth(cfg):
    """The deliberate mistakes that must change the answer for this configuration."""
    t = ['acausal']
    if cfg.attn == 'diff':
        t += ['no_scale', 'no_subln']
        if cfg.n_kv_head and cfg.n_kv_head < cfg.n_head:
            t += ['pairing']
    if cfg.attn == 'diffv2':
        t += ['v2_layout']
        if cfg.n_kv_head and cfg.n_kv_head < cfg.n_head:
            t += ['v2_split']
    if cfg.n_kv_head and cfg.n_kv_head < cfg.n_head:
        t += ['gqa_mod']
    if cfg.softmax1:
        t += ['softmax']
    if cfg.gate != 'none':
        t += ['no_gate']
    if cfg.pos == 'rope':
        t += ['no_rope']
    if cfg.mask_self:
        t += ['keep_self']
    return t


def test_grid_validity_agrees_with_spec():
    """The model builds every row of the grid and refuses the rows the specs reject; the grid holds every
    combination of the attention's math and every pair of values of two factors that a valid row holds."""
    rows = [dict(kw, gate=(kw['gate'], kw['gate_pos'])) for kw in GRID]
    assert {tuple(r[f] for f in CORE) for r in rows} == {
        c for c in itertools.product(*(FACTORS[f] for f in CORE)) if spec_valid(c[0], c[1], c[2], None)}
    valid = [dict(zip(FACTORS, v)) for v in itertools.product(*FACTORS.values())]
    valid = [r for r in valid if spec_valid(r['attn'], r['symmetric'], r['softmax1'], r['n_kv_head'])]
    assert set().union(*map(pairs, valid)) <= set().union(*map(pairs, rows))
    for kw in GRID:
        GPTConfig(**{**BASE, **kw})  # must construct
    for kw in GRID_INVALID:
        with pytest.raises(ValueError):
            GPTConfig(**{**BASE, **kw})


@pytest.mark.parametrize('kw', GRID + NOSELF, ids=[gid(k) for k in GRID + NOSELF])
def test_attention_matches_reference(kw):
    """Fast path (SDPA) and naive path of one layer equal the reference, weights included; wrong references differ."""
    m = make(**kw)
    cfg, a = m.config, m.transformer.h[0].attn
    x = rand_x(cfg.n_embd)
    for seed in range(1234, 1244):
        # diff: subln(o) is ill-conditioned where a head output o is ~0 (its RMS comparable to sqrt(eps)), e.g.
        # causal row 0 with softmax-1, where o = (p1 - lambda p2) v_0 and p1 ~ lambda p2: there float32 rounding
        # is amplified ~1/sqrt(eps) (the fully float64 module matches to 1e-14). Use a draw without such rows.
        info = {}
        randomize(m, seed)
        y_ref, w_ref = ref_attention(a, x, cfg, info=info)
        if info['min_pre_norm_rms'] > 0.03:
            break
    else:
        pytest.fail('no well-conditioned random draw')
    with torch.no_grad():
        y_fast = a(x)
        y_naive, w = a(x, return_weights=True)
    assert w.shape == (B, cfg.n_head, T, T)
    close(y_fast, y_ref)
    close(y_naive, y_ref)
    close(w, w_ref)
    for mistake in teeth(cfg):
        y_bad, _ = ref_attention(a, x, cfg, wrong=[mistake])
        assert dmax(y_bad, y_ref) > TEETH, f"the wrong reference {mistake!r} is indistinguishable"


@pytest.mark.parametrize('kw', GRID + NOSELF, ids=[gid(k) for k in GRID + NOSELF])
def test_causality(kw):
    """Causal: changing tokens after t changes no logit at <= t. Bidirectional: it does."""
    m = randomize(make(n_layer=2, **kw))
    V = m.config.vocab_size
    idx = rand_idx(V)
    g = torch.Generator().manual_seed(11)
    with torch.no_grad():
        base = m(idx, idx)[0]
        for t in (0, T // 2, T - 2):
            idx2 = idx.clone()
            idx2[:, t + 1:] = (idx[:, t + 1:] + torch.randint(1, V, idx[:, t + 1:].shape, generator=g)) % V
            out = m(idx2, idx2)[0]
            assert dmax(out[:, t + 1:], base[:, t + 1:]) > TEETH  # the change is visible downstream
            if kw['causal']:
                close(out[:, :t + 1], base[:, :t + 1], atol=1e-5, rtol=0)
            else:
                assert dmax(out[:, :t + 1], base[:, :t + 1]) > TEETH, "causal=False does not attend to the future"


# One composition per path with its own dtype handling under autocast: SDPA, softmax-1's padded key and dummy
# query, diff's zero-padded q/k and lambda, diffv2's per-token lambda, cosine's naive path, G1/G2 gates, GQA,
# mask_self (causal: split SDPA calls; bidirectional: a boolean mask), RoPE, RMSNorm, SwiGLU.
BF16 = [dict(attn='softmax'), dict(attn='softmax', softmax1=True, n_kv_head=2, gate='elementwise'),
        dict(attn='diff', gate='headwise', gate_pos='value'), dict(attn='diff', softmax1=True, causal=False),
        dict(attn='diff', symmetric=True, pos='rope', norm='rmsnorm', mlp='swiglu', bias=False),
        dict(attn='diffv2', n_kv_head=2, softmax1=True, causal=False), dict(attn='cosine', symmetric=True),
        dict(attn='cosine', n_kv_head=2, causal=False, mask_self=True), dict(symmetric=True, mask_self=True),
        dict(attn='diffv2', mask_self=True, causal=False, pos='rope', norm='rmsnorm', mlp='swiglu')]
BF16_EPS = 2.0 ** -8  # bf16 keeps 8 significant bits: one rounding is off by at most 2^-9 relative


@pytest.mark.parametrize('kw', BF16, ids=gid)
def test_bf16_autocast(kw):
    """Forward + backward under CPU bf16 autocast against fp32, in units of bf16's precision. A layer rounds a few
    times in sequence (norm, projections, attention, output), so logits and loss land within a few 2^-8 of fp32
    (measured: 1-2 x 2^-8) and the gradient, which rounds again on the way back, within ~3-6 x 2^-8. Tolerances
    allow ~2x that, so an error of a few percent fails. (Diff with softmax-1 under the causal mask is left out:
    there subln amplifies the rounding of a head output near 0 at row 0, up to ~12 x 2^-8.) The bf16 run must also
    differ from fp32, or autocast did not reach the matmuls."""
    m = randomize(make(**kw), gain=1.0)
    idx = rand_idx(m.config.vocab_size)
    logits32, loss32 = m(idx, idx)
    loss32.backward()
    grad32 = torch.cat([p.grad.flatten() for p in m.parameters()])
    m.zero_grad()
    with torch.autocast('cpu', dtype=torch.bfloat16):
        logits16, loss16 = m(idx, idx)
    loss16.backward()
    for n, p in m.named_parameters():
        assert p.grad is not None and torch.isfinite(p.grad).all(), n
    grad16 = torch.cat([p.grad.flatten() for p in m.parameters()])
    rel = lambda a, b: ((a.double() - b.double()).norm() / b.double().norm()).item()  # noqa: E731
    assert logits16.dtype == torch.bfloat16
    assert 2 ** -12 < rel(logits16, logits32) < 4 * BF16_EPS
    assert abs(loss16.item() - loss32.item()) < 4 * BF16_EPS * max(loss32.item(), 1.0)  # absolute below 1
    assert rel(grad16, grad32) < 16 * BF16_EPS


# ----------------------------------------------------------------------------------------------------------
# whole model and macro architecture

FULL = [dict(attn='softmax'), dict(attn='diff'), dict(attn='diffv2'), dict(attn='cosine', symmetric=True),
        dict(attn='diff', symmetric=True, softmax1=True), dict(attn='softmax', gate='elementwise', n_kv_head=2),
        dict(attn='diff', gate='headwise', gate_pos='value', n_kv_head=2, lambda_init_depth_offset=1),
        dict(attn='diffv2', softmax1=True, n_kv_head=1, gate='headwise')]
MACRO = dict(nanogpt=dict(), llama=dict(norm='rmsnorm', mlp='swiglu', pos='rope', bias=False))


@pytest.mark.parametrize('arch', list(MACRO))
@pytest.mark.parametrize('kw', FULL, ids=[gid(k) for k in FULL])
def test_full_model_matches_reference(kw, arch):
    """GPT logits equal a naive pre-norm transformer built from the same weights (3 layers, so the depth
    schedule of lambda_init matters too)."""
    m = randomize(make(n_layer=3, **kw, **MACRO[arch]))
    idx = rand_idx(m.config.vocab_size)
    with torch.no_grad():
        logits, loss = m(idx, idx)
        last, none = m(idx)
    ref = ref_logits(m, idx)
    close(logits, ref, atol=1e-4)
    close(last, logits[:, -1:], atol=1e-5)  # inference path = last position of the training path
    assert none is None
    close(loss, torch.nn.functional.cross_entropy(ref.view(-1, ref.size(-1)), idx.view(-1)), atol=1e-4)


def test_default_config_is_nanogpt():
    c = GPTConfig()
    assert (c.block_size, c.vocab_size, c.n_layer, c.n_head, c.n_embd, c.dropout, c.bias) == (1024, 50304, 12, 12, 768, 0.0, True)
    assert (c.attn, c.symmetric, c.gate, c.gate_pos, c.softmax1, c.n_kv_head, c.causal) == ('softmax', False, 'none', 'sdpa', False, None, True)
    assert (c.lambda_init, c.lambda_init_depth_offset, c.norm, c.mlp, c.pos) == (None, 0, 'layernorm', 'gelu', 'learned')
    assert c.mask_self is False

    L, C, V, Tb = 2, 64, 61, 32
    m = make(n_layer=L)
    tr = m.transformer
    assert m.lm_head.weight is tr.wte.weight  # tied
    assert tr.wpe.weight.shape == (Tb, C)
    for blk in tr.h:
        for ln in (blk.ln_1, blk.ln_2):
            assert isinstance(ln, torch.nn.LayerNorm) and ln.bias is not None and ln.eps == 1e-5
        assert blk.mlp.c_fc.out_features == 4 * C and blk.mlp.c_proj.in_features == 4 * C
        assert not hasattr(blk.attn, 'gate_proj') and not hasattr(blk.attn, 'lambda_q1')
        assert blk.attn.q_proj.out_features == blk.attn.k_proj.out_features == blk.attn.v_proj.out_features == C
    # nanoGPT's parameter count, with c_attn = [q; k; v]
    per_layer = 2 * C + (3 * C * C + 3 * C) + (C * C + C) + 2 * C + (4 * C * C + 4 * C) + (4 * C * C + C)
    total = V * C + Tb * C + L * per_layer + 2 * C
    assert sum(p.numel() for p in m.parameters()) == total
    assert m.get_num_params() == total - Tb * C
    # GPT-2 init: c_proj weights have std 0.02 / sqrt(2 L), other Linears 0.02
    for blk in tr.h:
        for lin in (blk.attn.c_proj, blk.mlp.c_proj):
            assert abs(lin.weight.std().item() - 0.02 / math.sqrt(2 * L)) < 0.15 * 0.02 / math.sqrt(2 * L)
        assert abs(blk.attn.q_proj.weight.std().item() - 0.02) < 0.003

    # nanoGPT's forward, written as nanoGPT writes it (c_attn split into q, k, v; masked softmax; GELU MLP)
    randomize(m)
    idx = rand_idx(V)
    x = tr.wte.weight.detach().double()[idx] + tr.wpe.weight.detach().double()[:T]
    for blk in tr.h:
        a = blk.attn
        h = layernorm_ref(x, blk.ln_1.weight.detach().double(), blk.ln_1.bias.detach().double())
        w_attn = torch.cat([W(a.q_proj), W(a.k_proj), W(a.v_proj)])
        b_attn = torch.cat([a.q_proj.bias, a.k_proj.bias, a.v_proj.bias]).detach().double()
        q, k, v = (h @ w_attn.T + b_attn).split(C, dim=2)
        q, k, v = (z.view(B, T, 4, C // 4).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(torch.tril(torch.ones(T, T)).view(1, 1, T, T) == 0, float('-inf'))
        y = (torch.softmax(att, dim=-1) @ v).transpose(1, 2).reshape(B, T, C)
        x = x + linear(y, a.c_proj)
        h = layernorm_ref(x, blk.ln_2.weight.detach().double(), blk.ln_2.bias.detach().double())
        x = x + ref_mlp(blk.mlp, h, m.config)
    x = layernorm_ref(x, tr.ln_f.weight.detach().double(), tr.ln_f.bias.detach().double())
    with torch.no_grad():
        close(m(idx, idx)[0], x @ tr.wte.weight.detach().double().T, atol=1e-4)


# ----------------------------------------------------------------------------------------------------------
# attention_maps and lambda

def captured_inputs(m, idx):
    """attention_maps(idx) plus the input each attention layer saw (via forward pre-hooks)."""
    seen = []
    hooks = [blk.attn.register_forward_pre_hook(lambda mod, args: seen.append(args[0].detach().clone()))
             for blk in m.transformer.h]
    try:
        maps = m.attention_maps(idx)
    finally:
        for h in hooks:
            h.remove()
    return maps, seen


MAPS = [dict(attn=a, softmax1=s, causal=c) for a in ('softmax', 'diff', 'diffv2', 'cosine') for s in (False, True)
        for c in (True, False) if not (a == 'cosine' and s)]
MAPS += [dict(attn='diff', symmetric=True, gate='elementwise', pos='rope'), dict(attn='diff', n_kv_head=2, gate='headwise'),
         dict(attn='diffv2', n_kv_head=2, gate='elementwise', gate_pos='value'), dict(attn='cosine', n_kv_head=1)]
MAPS += [dict(attn='softmax', symmetric=True, mask_self=True), dict(attn='diff', softmax1=True, mask_self=True),
         dict(attn='diffv2', softmax1=True, causal=False, mask_self=True),
         dict(attn='cosine', causal=False, mask_self=True)]


@pytest.mark.parametrize('kw', MAPS, ids=[gid(k) for k in MAPS])
def test_attention_maps_equal_reference(kw):
    m = randomize(make(n_layer=3, **kw))
    cfg = m.config
    maps, seen = captured_inputs(m, rand_idx(cfg.vocab_size))
    assert len(maps) == len(seen) == 3
    for depth, (w, x) in enumerate(zip(maps, seen)):
        assert w.shape == (B, cfg.n_head, T, T)
        close(w, ref_attention(m.transformer.h[depth].attn, x, cfg, depth)[1])


@pytest.mark.parametrize('kw', [dict(), dict(causal=False), dict(symmetric=True), dict(n_kv_head=2),
                                dict(lambda_init=0.5), dict(lambda_init_depth_offset=1, gate='headwise')])
def test_diff_row_sums_are_one_minus_lambda_full(kw):
    m = randomize(make(attn='diff', n_layer=3, **kw))
    with torch.no_grad():  # lambda vectors back to their init scale, so lambda_full stays near lambda_init >= 0.2
        for n, p in m.named_parameters():
            if 'lambda_' in n:
                p.div_(3)
    maps = m.attention_maps(rand_idx(61))
    for depth, (w, blk) in enumerate(zip(maps, m.transformer.h)):
        lam = expected_lambda_full(blk.attn, m.config, depth)
        assert abs(lam) > 0.05  # otherwise rows summing to 1 would pass too
        close(w.sum(-1), torch.full(w.shape[:-1], 1 - lam, dtype=F64), atol=1e-5)
        assert m.lambda_table()[depth]['lambda_full'] == pytest.approx(lam, abs=1e-6)


def test_diffv2_row_sums_are_one_minus_token_lambda():
    m = randomize(make(attn='diffv2', n_layer=2, n_kv_head=2))
    maps, seen = captured_inputs(m, rand_idx(61))
    for w, x, blk in zip(maps, seen, m.transformer.h):
        lam = sigmoid(x.double() @ W(blk.attn.lambda_proj).T).transpose(1, 2)  # (B, H, T)
        close(w.sum(-1), 1 - lam)
        assert (lam.max() - lam.min()).item() > 0.1  # lambda really varies per token and head


@pytest.mark.parametrize('attn', ['softmax', 'diff', 'diffv2'])
def test_softmax1_rows_and_position_zero(attn):
    """softmax-1 rows sum below 1; causal row 0 is exp(s00) / (1 + exp(s00)) (diff: A1 - lambda A2 of those)."""
    m = randomize(make(attn=attn, softmax1=True, n_layer=1))
    cfg, a = m.config, m.transformer.h[0].attn
    maps, (x,) = captured_inputs(m, rand_idx(61))
    w = maps[0]
    hd, nq, nk, vd = dims(cfg)
    xd = x.double()
    q = linear(xd, a.q_proj).view(B, T, nq, hd)[:, 0]
    k = linear(xd, a.k_proj).view(B, T, nk, hd)[:, 0]
    rep = nq // nk if attn != 'diff' else 1
    s00 = (q * k.repeat_interleave(rep, dim=1)).sum(-1) / math.sqrt(hd)  # (B, n_q): query head i with its key head
    p00 = torch.exp(s00) / (1 + torch.exp(s00))
    if attn == 'softmax':
        want = p00
        assert (w.sum(-1) < 1).all() and (w.sum(-1) > 0).all()
    elif attn == 'diff':
        want = p00[:, 0::2] - expected_lambda_full(a, cfg, 0) * p00[:, 1::2]
    else:
        want = p00[:, 0::2] - sigmoid(xd[:, 0] @ W(a.lambda_proj).T) * p00[:, 1::2]
    close(w[:, :, 0, 0], want)
    assert dmax(want, torch.ones_like(want)) > 0.01  # plain softmax would give 1 (or 1 - lambda) there


def test_softmax1_fast_path_large_logits():
    """Logits around +-80: the SDPA zero-key path stays finite and equals the naive definition (float64 and
    float32), including row 0 where a head with s00 = -80 attends to (almost) nothing."""
    m = randomize(make(attn='softmax', softmax1=True, bias=False))
    cfg, a = m.config, m.transformer.h[0].attn
    H, hd = cfg.n_head, cfg.n_embd // cfg.n_head
    x = rand_x(cfg.n_embd)
    x[:, 0] *= 4  # position 0 carries the largest |s00| of its head
    with torch.no_grad():
        sign = torch.tensor([1.0, -1.0] * (H // 2)).repeat_interleave(hd)[:, None]
        a.k_proj.weight.copy_(a.q_proj.weight * sign)  # s_ij = +-q_i.q_j: s00 = +-|q_0|^2 / sqrt(hd)
        q = (x.double() @ W(a.q_proj).T).view(B, T, H, hd).transpose(1, 2)
        smax = ((q @ q.transpose(-1, -2)).abs() / math.sqrt(hd)).amax(dim=(0, 2, 3))  # per head
        c = (80.0 / smax).sqrt().float().repeat_interleave(hd)[:, None]  # each head's largest |logit| is 80
        a.q_proj.weight.mul_(c)
        a.k_proj.weight.mul_(c)
    q = (x.double() @ W(a.q_proj).T).view(B, T, H, hd)
    k = (x.double() @ W(a.k_proj).T).view(B, T, H, hd)
    s = torch.einsum('bihd,bjhd->bhij', q, k) / math.sqrt(hd)
    assert s.abs().max().item() == pytest.approx(80.0, rel=1e-6)
    s00 = s[:, :, 0, 0]
    assert (s00[:, 0::2] > 40).all() and (s00[:, 1::2] < -40).all()  # the construction did what it says

    # float64 throughout: the module's fast path vs the naive definition
    md = make(attn='softmax', softmax1=True, bias=False).double()
    md.load_state_dict(m.state_dict())
    ad = md.transformer.h[0].attn
    with torch.no_grad():
        y64 = ad(x.double())
        y32 = a(x)
        y32_naive, w32 = a(x, return_weights=True)
    y_ref, w_ref = ref_attention(a, x, cfg)
    for t in (y64, y32, y32_naive, w32):
        assert torch.isfinite(t).all()
    close(y64, y_ref, atol=1e-9, rtol=1e-9)
    close(y32, y_ref, atol=2e-4, rtol=1e-4)
    close(y32_naive, y_ref, atol=2e-4, rtol=1e-4)
    close(w32, w_ref, atol=1e-5, rtol=1e-4)
    # row 0 by hand: weight exp(s00)/(1+exp(s00)) on v_0, zero key adds nothing
    p00 = torch.exp(s00) / (1 + torch.exp(s00))
    torch.testing.assert_close(w32[:, :, 0, 0].double(), p00, rtol=1e-3, atol=0)
    v0 = (x.double()[:, 0] @ W(a.v_proj).T).view(B, H, hd)
    y0 = (p00[..., None] * v0).reshape(B, -1) @ W(a.c_proj).T
    close(y64[:, 0], y0, atol=1e-9, rtol=1e-9)
    assert dmax(y0, v0.reshape(B, -1) @ W(a.c_proj).T) > 0.1  # plain softmax (weight 1) is far from it
    # gradients stay finite through the fast path
    loss = a(x).square().mean()
    loss.backward()
    assert all(torch.isfinite(p.grad).all() for p in a.parameters() if p.grad is not None)


# ----------------------------------------------------------------------------------------------------------
# mask_self: Reformer's shared-QK rule (Kitaev et al. 2020)

@pytest.mark.parametrize('kw', NOSELF, ids=[gid(k) for k in NOSELF])
def test_mask_self_paths_equal_reference_forward_backward(kw):
    """In float64 each path (SDPA, the CPU dropout math path, the naive weights) equals the reference written from the
    definition, output and input gradient, at T = 16 and at the edges T = 2 and T = 1 (one key: it is kept)."""
    m = randomize(make(**kw)).double()
    cfg, a = m.config, m.transformer.h[0].attn
    tol = ATOL if cfg.pos == 'rope' else 1e-10  # the RoPE angles are a float32 buffer
    for t in (T, 2, 1):
        x = rand_x(cfg.n_embd, t=t).double().requires_grad_()
        g = rand_x(cfg.n_embd, seed=8, t=t).double()
        y_ref, w_ref = ref_attention(a, x, cfg)
        gx_ref, = torch.autograd.grad((y_ref * g).sum(), x)
        for path in ('sdpa', 'math', 'naive'):
            a.train(path == 'math')
            a.dropout = 0.5 if path == 'math' else 0.0  # the branch switch; the Dropout modules keep p = 0
            y = a(x, return_weights=path == 'naive')
            if path == 'naive':
                y, w = y
                close(w, w_ref, atol=tol, rtol=tol)
            gx, = torch.autograd.grad((y * g).sum(), x)
            close(y, y_ref, atol=tol, rtol=tol)
            close(gx, gx_ref, atol=tol, rtol=tol)
        if t > 1:  # the rule changes the answer wherever a row has another key
            assert dmax(ref_attention(a, x, cfg, wrong=['keep_self'])[0], y_ref) > TEETH


@pytest.mark.parametrize('causal', [True, False])
def test_mask_self_diagonal_and_first_row(causal):
    """mask_self empties the diagonal of every map, except causal row 0, whose only key keeps weight 1; with K = Q
    and no mask_self the diagonal (q_t . q_t) is the largest weight of most rows."""
    idx = rand_idx(61)
    m = randomize(make(symmetric=True, causal=causal, mask_self=True, n_layer=2))
    for w in m.attention_maps(idx):
        d = w.diagonal(dim1=-2, dim2=-1)
        assert (d[..., 1:] == 0).all()
        assert (d[..., 0] == 1).all() if causal else (d[..., 0] == 0).all()
        close(w.sum(-1), torch.ones(w.shape[:-1]))
    assert (m.attention_maps(idx[:, :1])[0] == 1).all()  # T = 1: the only key stays
    other = randomize(make(symmetric=True, causal=causal, n_layer=2))
    w = other.attention_maps(idx)[0][..., 1:, :]
    on_diag = (w.argmax(-1) == torch.arange(1, T)).double().mean().item()
    assert on_diag > 0.5, on_diag


@pytest.mark.parametrize('kw', [dict(), dict(causal=False), dict(attn='diff', softmax1=True),
                                dict(attn='diffv2', softmax1=True, causal=False, n_kv_head=2)], ids=gid)
def test_mask_self_runs_on_fused_sdpa(kw, monkeypatch):
    """The training forward stays on SDPA. Causal: only is_causal=True calls without a mask (queries 1..T-1 over
    keys 0..T-2, query 0 over key 0; softmax-1 adds its zero key and dummy query), so fused causal kernels apply.
    Bidirectional: a boolean mask hiding exactly key i from query i (softmax-1: behind the zero key's column)."""
    calls = []
    sdpa = torch.nn.functional.scaled_dot_product_attention

    def spy(q, k, v, attn_mask=None, is_causal=False, **kwargs):
        calls.append((q.size(2), k.size(2), attn_mask, is_causal))
        return sdpa(q, k, v, attn_mask=attn_mask, is_causal=is_causal, **kwargs)

    def no_naive(*args, **kwargs):
        raise AssertionError('the naive T x T path ran in the training forward')

    monkeypatch.setattr(torch.nn.functional, 'scaled_dot_product_attention', spy)
    monkeypatch.setattr(M.SelfAttention, 'weights', no_naive)
    m = make(mask_self=True, **kw).train()
    idx = rand_idx(61)
    m(idx, idx)[1].backward()
    sm1 = int(kw.get('softmax1', False))
    if kw.get('causal', True):
        assert sorted((tq, tk) for tq, tk, _, _ in calls) == [(1 + sm1, 1 + sm1), (T - 1 + sm1, T - 1 + sm1)]
        assert all(mask is None and is_causal for _, _, mask, is_causal in calls)
    else:
        (tq, tk, mask, is_causal), = calls
        assert (tq, tk, is_causal) == (T, T + sm1, False)
        want = ~torch.eye(T, dtype=torch.bool)
        assert torch.equal(mask, torch.cat((torch.ones(T, sm1, dtype=torch.bool), want), dim=1))


def test_lambda_init_schedule():
    m = make(attn='diff', n_layer=6)
    got = [blk.attn.lambda_init for blk in m.transformer.h]
    assert got[0] == pytest.approx(0.2, abs=1e-12)
    assert got == pytest.approx([0.8 - 0.6 * math.exp(-0.3 * d) for d in range(6)], abs=1e-12)
    assert [r['lambda_init'] for r in m.lambda_table()] == pytest.approx(got, abs=1e-12)


def test_lambda_init_depth_offset_reproduces_seed_table():
    m = make(attn='diff', n_layer=6, lambda_init_depth_offset=1)
    got = [r['lambda_init'] for r in m.lambda_table()]
    assert got == pytest.approx([0.8 - 0.6 * math.exp(-0.3 * (d + 1)) for d in range(6)], abs=1e-12)
    assert [round(v, 2) for v in got] == [0.36, 0.47, 0.56, 0.62, 0.67, 0.70]


@pytest.mark.parametrize('const', [0.8, 0.5])
@pytest.mark.parametrize('offset', [0, 2])
def test_lambda_init_constant(const, offset):
    m = make(attn='diff', n_layer=4, lambda_init=const, lambda_init_depth_offset=offset)
    assert [blk.attn.lambda_init for blk in m.transformer.h] == [const] * 4
    assert [r['lambda_init'] for r in m.lambda_table()] == [const] * 4


@pytest.mark.parametrize('kw', [dict(), dict(lambda_init_depth_offset=1), dict(lambda_init=0.5)])
def test_lambda_init_used_in_forward_at_every_depth(kw):
    m = randomize(make(attn='diff', n_layer=3, **kw))
    x = rand_x(m.config.n_embd)
    for depth, blk in enumerate(m.transformer.h):
        with torch.no_grad():
            y = blk.attn(x)
        close(y, ref_attention(blk.attn, x, m.config, depth)[0])
        if m.config.lambda_init is None:  # the neighbouring depth's lambda_init must not match
            assert dmax(ref_attention(blk.attn, x, m.config, depth + 1)[0], y) > TEETH


def test_lambda_table():
    m = randomize(make(attn='diff', n_layer=3, lambda_init_depth_offset=1))
    rows = m.lambda_table()
    assert [r['layer'] for r in rows] == [1, 2, 3]
    for depth, (r, blk) in enumerate(zip(rows, m.transformer.h)):
        a = blk.attn
        assert set(r) == {'layer', 'lambda_1', 'lambda_2', 'lambda_init', 'lambda_full'}
        assert all(type(r[k]) is float for k in ('lambda_1', 'lambda_2', 'lambda_init', 'lambda_full'))
        assert type(r['layer']) is int
        l1 = math.exp((a.lambda_q1.double() * a.lambda_k1.double()).sum().item())
        l2 = math.exp((a.lambda_q2.double() * a.lambda_k2.double()).sum().item())
        assert r['lambda_1'] == pytest.approx(l1, rel=1e-6)
        assert r['lambda_2'] == pytest.approx(l2, rel=1e-6)
        assert r['lambda_init'] == pytest.approx(0.8 - 0.6 * math.exp(-0.3 * (depth + 1)), abs=1e-12)
        assert r['lambda_full'] == pytest.approx(l1 - l2 + r['lambda_init'], abs=1e-6)
    for attn in ('softmax', 'diffv2', 'cosine'):
        assert make(attn=attn, n_layer=2).lambda_table() == []


def test_lambdas_from_hand_set_vectors():
    """lambda_1 = exp(lambda_q1 . lambda_k1), lambda_2 = exp(lambda_q2 . lambda_k2), lambda_full = lambda_1 - lambda_2
    + lambda_init, on vectors whose dot products are known: ln 2 (lambda_1 = 2) and ln 3 - ln 2 spread over several
    coordinates (lambda_2 = 1.5); swapping a pair or dropping lambda_init gives another number."""
    m = make(attn='diff', n_layer=2, lambda_init_depth_offset=1)
    d = m.config.head_dim
    for depth, blk in enumerate(m.transformer.h):
        a = blk.attn
        e0 = torch.zeros(d)
        e0[0] = 1.0
        spread = torch.ones(d) / math.sqrt(d)  # unit vector over every coordinate
        with torch.no_grad():
            a.lambda_q1.copy_(e0 * math.sqrt(math.log(2)))
            a.lambda_k1.copy_(e0 * math.sqrt(math.log(2)))
            a.lambda_q2.copy_(spread * math.log(1.5))
            a.lambda_k2.copy_(spread)
        lam = a.lambdas()
        li = 0.8 - 0.6 * math.exp(-0.3 * (depth + 1))
        assert lam.lambda_1.item() == pytest.approx(2.0, rel=1e-6)
        assert lam.lambda_2.item() == pytest.approx(1.5, rel=1e-6)
        assert lam.lambda_full.item() == pytest.approx(0.5 + li, rel=1e-6)
        assert tuple(lam) == (lam.lambda_1, lam.lambda_2, lam.lambda_full)
        row = m.lambda_table()[depth]
        assert (row['lambda_1'], row['lambda_2'], row['lambda_full']) == pytest.approx((2.0, 1.5, 0.5 + li), rel=1e-6)


def test_lambda_vectors_init():
    m = make(attn='diff', n_layer=1, n_embd=256, n_head=2)  # d = 64
    a = m.transformer.h[0].attn
    vecs = [getattr(a, n) for n in ('lambda_q1', 'lambda_k1', 'lambda_q2', 'lambda_k2')]
    assert all(v.shape == (64,) for v in vecs)
    allv = torch.cat([v.detach() for v in vecs])
    assert abs(allv.std().item() - 0.1) < 0.02 and abs(allv.mean().item()) < 0.03
    assert a.subln.weight.shape == (128,)


# ----------------------------------------------------------------------------------------------------------
# GQA pairing

@pytest.mark.parametrize('n_kv', [2, 1])
@pytest.mark.parametrize('extra', [dict(), dict(softmax1=True, causal=False), dict(pos='rope', gate='headwise')])
def test_gqa_pairing_diff(n_kv, extra):
    """Head pair h uses K1, K2 of kv head h // (n_head / n_kv_head); the unilm naive file's (2h+s) // n_rep differs."""
    m = randomize(make(attn='diff', n_kv_head=n_kv, **extra))
    cfg, a = m.config, m.transformer.h[0].attn
    d = cfg.head_dim
    with torch.no_grad():  # make every kv sub-head clearly different: its own sharpness
        for j in range(2 * n_kv):
            a.k_proj.weight[j * d:(j + 1) * d] *= 0.5 + j
    x = rand_x(cfg.n_embd)
    y_ref, w_ref = ref_attention(a, x, cfg)
    with torch.no_grad():
        close(a(x), y_ref)
        y_n, w = a(x, return_weights=True)
    close(y_n, y_ref)
    close(w, w_ref)
    for mistake in ('pairing', 'gqa_mod') if n_kv > 1 else ('pairing',):
        y_bad, w_bad = ref_attention(a, x, cfg, wrong=[mistake])
        assert dmax(y_bad, y_ref) > 1e-2 and dmax(w_bad, w_ref) > 1e-2, mistake


@pytest.mark.parametrize('n_kv', [2, 1])
def test_gqa_pairing_diffv2(n_kv):
    """V2: out_h = A[2h] V - lambda A[2h+1] V with both maps on kv head h // (n_head / n_kv_head)."""
    m = randomize(make(attn='diffv2', n_kv_head=n_kv))
    cfg, a = m.config, m.transformer.h[0].attn
    hd = cfg.head_dim
    with torch.no_grad():
        for j in range(n_kv):
            a.k_proj.weight[j * hd:(j + 1) * hd] *= 0.5 + j
    x = rand_x(cfg.n_embd)
    y_ref, w_ref = ref_attention(a, x, cfg)
    with torch.no_grad():
        close(a(x), y_ref)
        close(a(x, return_weights=True)[1], w_ref)
    for mistake in ('v2_layout', 'v2_split', 'gqa_mod') if n_kv > 1 else ('v2_layout',):
        assert dmax(ref_attention(a, x, cfg, wrong=[mistake])[0], y_ref) > 1e-2, mistake


def test_gqa_softmax_and_cosine():
    for attn in ('softmax', 'cosine'):
        m = randomize(make(attn=attn, n_kv_head=2))
        a = m.transformer.h[0].attn
        x = rand_x(64)
        y_ref, _ = ref_attention(a, x, m.config)
        with torch.no_grad():
            close(a(x), y_ref)
        assert dmax(ref_attention(a, x, m.config, wrong=['gqa_mod'])[0], y_ref) > 1e-2


# ----------------------------------------------------------------------------------------------------------
# gradients

@pytest.mark.parametrize('kw,names', [
    (dict(attn='diff'), ['lambda_q1', 'lambda_k1', 'lambda_q2', 'lambda_k2', 'subln.weight']),
    (dict(attn='diff', softmax1=True, symmetric=True), ['lambda_q1', 'lambda_k1', 'lambda_q2', 'lambda_k2']),
    (dict(attn='diffv2'), ['lambda_proj.weight']),
    (dict(attn='diffv2', n_kv_head=2, gate='elementwise'), ['lambda_proj.weight', 'gate_proj.weight', 'gate_proj.bias']),
    (dict(attn='softmax', gate='headwise'), ['gate_proj.weight', 'gate_proj.bias']),
    (dict(attn='softmax', gate='elementwise', gate_pos='value'), ['gate_proj.weight', 'gate_proj.bias']),
    (dict(attn='diff', gate='headwise', gate_pos='value', n_kv_head=2), ['gate_proj.weight', 'lambda_q1', 'lambda_k2']),
    (dict(attn='diff', gate='elementwise'), ['gate_proj.weight', 'lambda_q2', 'lambda_k1']),
    (dict(attn='cosine', symmetric=True, gate='headwise'), ['gate_proj.weight']),
], ids=lambda v: gid(v) if isinstance(v, dict) else '')
def test_gradients_reach_lambda_and_gate(kw, names):
    m = randomize(make(n_layer=2, **kw))
    idx = rand_idx(61)
    _, loss = m(idx, idx)
    loss.backward()
    for blk in m.transformer.h:
        params = dict(blk.attn.named_parameters())
        for n in names:
            g = params[n].grad
            assert g is not None and torch.isfinite(g).all() and g.abs().sum() > 0, n


# ----------------------------------------------------------------------------------------------------------
# parameter counts

def n_params(**kw):
    m = make(n_layer=2, **kw)
    return sum(p.numel() for p in m.parameters())


@pytest.mark.parametrize('bias', [True, False])
def test_parameter_count_deltas(bias):
    L, C, H = 2, 64, 4
    hd, d = C // H, C // H // 2
    nb = 1 if bias else 0
    base = n_params(bias=bias)
    # diff: +6d per layer (4 lambda vectors of d, RMSNorm weight of 2d), also with GQA and symmetric
    assert n_params(attn='diff', bias=bias) - base == L * 6 * d
    assert n_params(attn='diff', n_kv_head=2, bias=bias) - n_params(n_kv_head=2, bias=bias) == L * 6 * d
    assert n_params(attn='diff', symmetric=True, bias=bias) - n_params(symmetric=True, bias=bias) == L * 6 * d
    # symmetric: no key projection
    for attn in ('softmax', 'diff', 'cosine'):
        assert n_params(attn=attn, bias=bias) - n_params(attn=attn, symmetric=True, bias=bias) == L * (C * C + nb * C)
    # gates: G1 headwise n_embd x n_head, elementwise n_embd x n_embd (+ bias)
    for attn in ('softmax', 'diff', 'diffv2', 'cosine'):
        b0 = n_params(attn=attn, bias=bias)
        assert n_params(attn=attn, gate='headwise', bias=bias) - b0 == L * (C * H + nb * H)
        assert n_params(attn=attn, gate='elementwise', bias=bias) - b0 == L * (C * C + nb * C)
    # G2 gates V: one score per kv head, or one per value channel
    KV = 2
    for attn, vd in (('softmax', hd), ('diff', 2 * d), ('diffv2', hd)):
        b0 = n_params(attn=attn, n_kv_head=KV, bias=bias)
        assert n_params(attn=attn, n_kv_head=KV, gate='headwise', gate_pos='value', bias=bias) - b0 == L * (C * KV + nb * KV)
        assert n_params(attn=attn, n_kv_head=KV, gate='elementwise', gate_pos='value', bias=bias) - b0 == L * (C * KV * vd + nb * KV * vd)
    # diffv2 (model.py: q_proj has 2*n_head heads of n_embd/n_head, lambda_proj n_embd x n_head without bias)
    assert n_params(attn='diffv2', bias=bias) - base == L * (C * C + nb * C + C * H)
    # GQA: k_proj and v_proj shrink to n_kv heads
    assert base - n_params(n_kv_head=KV, bias=bias) == L * 2 * (H - KV) * hd * (C + nb)
    # softmax-1, cosine and causal add nothing
    assert n_params(softmax1=True, bias=bias) == n_params(attn='cosine', bias=bias) == n_params(causal=False, bias=bias) == base


def test_parameter_count_macro_architecture():
    L, C, Tb = 2, 64, 32
    base = n_params()
    # RMSNorm has no bias: 2L + 1 norms lose their C-sized bias
    assert base - n_params(norm='rmsnorm') == (2 * L + 1) * C
    assert n_params(norm='rmsnorm', bias=False) == n_params(bias=False)
    # RoPE: no position embedding table
    assert base - n_params(pos='rope') == Tb * C
    # SwiGLU: hidden = 64 * ceil(8 C / 3 / 64), c_fc C -> 2 hidden, c_proj hidden -> C
    hid = 64 * math.ceil(8 * C / 3 / 64)
    swi = C * 2 * hid + 2 * hid + hid * C + C
    gelu = C * 4 * C + 4 * C + 4 * C * C + C
    assert n_params(mlp='swiglu') - base == L * (swi - gelu)
    assert not hasattr(make(pos='rope').transformer, 'wpe')


@pytest.mark.parametrize('C,hidden', [(64, 192), (96, 256), (128, 384), (384, 1024), (768, 2048)])
def test_swiglu_hidden_size(C, hidden):
    assert hidden == 64 * math.ceil(8 * C / 3 / 64)
    cfg = GPTConfig(**{**BASE, 'n_embd': C, 'n_head': 4, 'mlp': 'swiglu', 'bias': False})
    with torch.device('meta'):
        mlp = M.MLP(cfg)
    assert mlp.c_fc.out_features == 2 * hidden and mlp.c_proj.in_features == hidden
    if C == 768:  # LLaMA's point: 3 * C * (8C/3) = 8 C^2, the GELU MLP's count
        assert sum(p.numel() for p in mlp.parameters()) == 8 * C * C


# ----------------------------------------------------------------------------------------------------------
# RMSNorm, SwiGLU, RoPE against naive formulas

def test_rmsnorm_naive():
    g = torch.Generator().manual_seed(5)
    norm = M.RMSNorm(64)
    with torch.no_grad():
        norm.weight.copy_(1 + 0.3 * torch.randn(64, generator=g))
    x = torch.randn(3, 7, 64, generator=g) * 2 + 0.7
    want = rms_ref(x.double(), norm.weight.double(), eps=1e-5)
    with torch.no_grad():
        close(norm(x), want)
    assert dmax(layernorm_ref(x.double(), norm.weight.double(), None), want) > 0.1  # LayerNorm would differ
    m = make(norm='rmsnorm')
    for ln in (m.transformer.h[0].ln_1, m.transformer.h[0].ln_2, m.transformer.ln_f):
        assert isinstance(ln, M.RMSNorm) and [n for n, _ in ln.named_parameters()] == ['weight']
        assert ln.eps == 1e-5
    a = make(attn='diff').transformer.h[0].attn
    assert isinstance(a.subln, M.RMSNorm) and a.subln.eps == 1e-5


def test_swiglu_naive():
    m = randomize(make(mlp='swiglu'))
    mlp = m.transformer.h[0].mlp
    x = rand_x(64)
    h = linear(x.double(), mlp.c_fc)
    n = h.shape[-1] // 2
    assert n == 192
    a, b = h[..., :n], h[..., n:]
    want = linear(a / (1 + torch.exp(-a)) * b, mlp.c_proj)
    with torch.no_grad():
        close(mlp(x), want)
    swapped = linear(b / (1 + torch.exp(-b)) * a, mlp.c_proj)
    assert dmax(swapped, want) > 0.1
    gelu_m = randomize(make())
    with torch.no_grad():
        close(gelu_m.transformer.h[0].mlp(x), ref_mlp(gelu_m.transformer.h[0].mlp, x.double(), gelu_m.config))


@pytest.mark.parametrize('kw', [dict(attn='softmax'), dict(attn='diff'), dict(attn='diffv2', n_kv_head=2),
                                dict(attn='cosine', symmetric=True), dict(attn='diff', symmetric=True),
                                dict(attn='softmax', rope_theta=100.0)])
def test_rope_rotation_matches_naive(kw):
    """project() rotates every query and key (sub-)head by the naive rotation; position 0 is unchanged."""
    m = randomize(make(pos='rope', **kw))
    cfg, a = m.config, m.transformer.h[0].attn
    hd, nq, nk, vd = dims(cfg)
    x = rand_x(cfg.n_embd)
    with torch.no_grad():
        q, k, v = a.project(x)
    Q = linear(x.double(), a.q_proj).view(B, T, nq, hd)
    K = Q if cfg.symmetric else linear(x.double(), a.k_proj).view(B, T, nk, hd)
    close(q.transpose(1, 2), rope_ref(Q, cfg.rope_theta))
    close(k.transpose(1, 2), rope_ref(K, cfg.rope_theta))
    close(q[:, :, 0], Q[:, 0], atol=1e-6)  # position 0 unchanged
    close(k[:, :, 0], K[:, 0], atol=1e-6)
    close(q.norm(dim=-1), Q.norm(dim=-1).transpose(1, 2))  # a rotation
    assert dmax(q.transpose(1, 2)[:, 1:], Q[:, 1:]) > 0.1
    assert dmax(rope_ref(Q, cfg.rope_theta * 10), rope_ref(Q, cfg.rope_theta)) > 1e-3  # theta matters


@pytest.mark.parametrize('attn', ['softmax', 'diff', 'diffv2'])
def test_rope_relative_position_invariance(attn):
    """q at i and k at j give the same score as the same vectors at i+s and j+s; not at i+s and j+s+1."""
    m = randomize(make(attn=attn, pos='rope'))
    a = m.transformer.h[0].attn
    g = torch.Generator().manual_seed(9)
    u, w = torch.randn(64, generator=g), torch.randn(64, generator=g)
    i, j, s = 5, 2, 7

    def scores(pi, pj):
        x = torch.randn(1, T, 64, generator=g)
        x[0, pi], x[0, pj] = u, w
        with torch.no_grad():
            q, k, _ = a.project(x)
        kk = k.repeat_interleave(q.size(1) // k.size(1), dim=1)
        return (q[0, :, pi].double() * kk[0, :, pj].double()).sum(-1)

    s0 = scores(i, j)
    close(scores(i + s, j + s), s0, atol=1e-4)
    assert dmax(scores(i + s, j + s + 1), s0) > 1e-2


@pytest.mark.parametrize('attn', ['softmax', 'diff', 'cosine'])
def test_rope_keeps_symmetric_attention_symmetric(attn):
    """With K = Q and RoPE the keys are the *rotated* queries (not the raw ones, not rotated twice), so the
    score s_ij = q_i^T R(j-i) q_j is symmetric in i and j."""
    m = randomize(make(attn=attn, symmetric=True, pos='rope', causal=False))
    a, cfg = m.transformer.h[0].attn, m.config
    hd = cfg.head_dim
    x = rand_x(64)
    with torch.no_grad():
        q, k, _ = a.project(x)
    S = q.double() @ k.double().transpose(-1, -2)
    close(S, S.transpose(-1, -2), atol=1e-5)
    # the same score from the unrotated queries and one rotation by j - i
    Q = linear(x.double(), a.q_proj).view(B, T, -1, hd)
    for i, j in ((3, 11), (11, 3), (0, 15)):
        lo, hi = min(i, j), max(i, j)
        R_q_hi = rope_ref(torch.stack([Q[:, hi]] * (hi - lo + 1), dim=1), cfg.rope_theta)[:, hi - lo]  # R(hi-lo) q_hi
        close(S[:, :, i, j], (Q[:, lo] * R_q_hi).sum(-1), atol=1e-5)


def _log_ratio_defect(m):
    """For softmax maps A of symmetric scores, log A_ij - log A_ji = c_j - c_i (c_i = log of row i's normaliser).
    Returns how far the non-causal maps of layer 0 are from that form."""
    w = m.attention_maps(rand_idx(61))[0].double()
    D = w.log() - w.log().transpose(-1, -2)
    d = D[..., 0, :]  # D_0j = c_j - c_0
    return (D - (d[..., None, :] - d[..., :, None])).abs().max().item()


@pytest.mark.parametrize('softmax1', [False, True])
def test_rope_symmetric_attention_maps_have_symmetric_scores(softmax1):
    """Seen through attention_maps: symmetric + RoPE (non-causal) gives maps of symmetric scores; K != Q does not."""
    m = randomize(make(symmetric=True, pos='rope', causal=False, softmax1=softmax1))
    assert _log_ratio_defect(m) < 1e-4
    other = randomize(make(symmetric=False, pos='rope', causal=False, softmax1=softmax1))
    assert _log_ratio_defect(other) > 1e-2  # the check has teeth


# ----------------------------------------------------------------------------------------------------------
# invalid combinations

@pytest.mark.parametrize('kw,words', [
    (dict(attn='cosine', softmax1=True), ['softmax1', 'cosine']),
    (dict(n_head=4, n_kv_head=3), ['n_kv_head']),
    (dict(n_head=4, n_kv_head=8), ['n_kv_head']),
    (dict(attn='diff', n_embd=36, n_head=4), ['n_embd', 'n_head']),
    (dict(attn='diff', n_embd=36, n_head=4, n_kv_head=2), ['n_embd']),
    (dict(n_embd=30, n_head=4), ['n_embd', 'n_head']),
    (dict(symmetric=True, n_kv_head=2), ['symmetric', 'n_kv_head']),
    (dict(attn='diff', symmetric=True, n_kv_head=1), ['symmetric', 'n_kv_head']),
    (dict(gate='none', gate_pos='value'), ['gate_pos', 'gate']),
    (dict(pos='rope', n_embd=12, n_head=4), ['rope']),
    (dict(attn='diff', pos='rope', n_embd=24, n_head=4), ['rope']),
    (dict(attn='diffv2', symmetric=True), ['symmetric', 'diffv2']),
    (dict(attn='softmax', lambda_init=0.5), ['lambda_init']),
    (dict(attn='diffv2', lambda_init_depth_offset=1), ['lambda_init_depth_offset']),
    (dict(attn='flash'), ['attn']),
    (dict(gate='channel'), ['gate']),
    (dict(norm='batchnorm'), ['norm']),
    (dict(mlp='relu'), ['mlp']),
    (dict(pos='alibi'), ['pos']),
])
def test_invalid_config_raises_and_names_flag(kw, words):
    with pytest.raises(ValueError) as e:
        GPTConfig(**{**BASE, **kw})
    for w in words:
        assert w in str(e.value), (w, str(e.value))


def test_valid_neighbours_of_invalid_configs():
    """The error tests above are about the flag, not about everything failing."""
    for kw in (dict(attn='cosine'), dict(softmax1=True), dict(n_head=4, n_kv_head=2), dict(n_embd=36, n_head=4),
               dict(attn='diff', n_embd=40, n_head=4), dict(symmetric=True), dict(symmetric=True, n_kv_head=4),
               dict(gate='headwise', gate_pos='value'), dict(pos='rope', n_embd=16, n_head=4),
               dict(attn='diff', lambda_init=0.5), dict(attn='diffv2', n_kv_head=1)):
        GPTConfig(**{**BASE, **kw})


def test_optimizer_groups():
    """AdamW decays matrices only: lambda vectors, norm gains and biases are not decayed; every parameter once."""
    m = make(attn='diff', n_layer=2, gate='headwise')
    opt = m.configure_optimizers(weight_decay=0.1, learning_rate=1e-3, betas=(0.9, 0.95))
    decay, no_decay = ({id(p) for p in g['params']} for g in opt.param_groups)
    assert [g['weight_decay'] for g in opt.param_groups] == [0.1, 0.0]
    named = dict(m.named_parameters())
    assert decay | no_decay == {id(p) for p in named.values()} and not decay & no_decay
    for n, p in named.items():
        small = n.endswith('bias') or 'lambda_' in n or 'ln_' in n or 'subln' in n
        assert (id(p) in no_decay) == small, n
    with pytest.raises(ValueError, match="optimizer='cpu'"):  # e.g. a device passed where the optimizer goes
        m.configure_optimizers(0.1, 1e-3, (0.9, 0.95), 'cpu')


# ----------------------------------------------------------------------------------------------------------
# checkpoints: parameter names are the checkpoint format

_TOP = ['lm_head.weight', 'transformer.wte.weight', 'transformer.ln_f.weight']
_LN = ['ln_1.weight', 'ln_2.weight']
_QKVO = ['attn.q_proj.weight', 'attn.k_proj.weight', 'attn.v_proj.weight', 'attn.c_proj.weight']
_MLP = ['mlp.c_fc.weight', 'mlp.c_proj.weight']
_BIASES = ['attn.q_proj.bias', 'attn.k_proj.bias', 'attn.v_proj.bias', 'attn.c_proj.bias', 'mlp.c_fc.bias',
           'mlp.c_proj.bias', 'ln_1.bias', 'ln_2.bias']
# model.py's state_dict keys (top level; then those of layer 0) as checkpoints have stored them since the first
# checkpoint format, before the norms became nn.LayerNorm and the attention class was renamed
STATE_KEYS = [
    (dict(bias=True), _TOP + ['transformer.ln_f.bias', 'transformer.wpe.weight'], _LN + _QKVO + _MLP + _BIASES),
    (dict(bias=False, attn='diff', gate='headwise'), _TOP + ['transformer.wpe.weight'],
     _LN + _QKVO + _MLP + ['attn.gate_proj.weight', 'attn.lambda_q1', 'attn.lambda_k1', 'attn.lambda_q2',
                           'attn.lambda_k2', 'attn.subln.weight']),
    (dict(bias=False, norm='rmsnorm', mlp='swiglu', pos='rope', symmetric=True), _TOP,
     _LN + ['attn.q_proj.weight', 'attn.v_proj.weight', 'attn.c_proj.weight'] + _MLP),
    (dict(bias=True, attn='diffv2', n_kv_head=2), _TOP + ['transformer.ln_f.bias', 'transformer.wpe.weight'],
     _LN + _QKVO + _MLP + _BIASES + ['attn.lambda_proj.weight']),
]


@pytest.mark.parametrize('kw,top,layer', STATE_KEYS, ids=[gid(k[0]) for k in STATE_KEYS])
def test_state_dict_keys_are_those_of_earlier_checkpoints(kw, top, layer):
    m = make(n_layer=1, **kw)
    assert sorted(m.state_dict()) == sorted(top + ['transformer.h.0.' + k for k in layer])


PRE_RENAME_COMMIT = '74e8480'  # model.py with its own LayerNorm class and CausalSelfAttention


@pytest.mark.parametrize('kw', [k for k, _, _ in STATE_KEYS], ids=[gid(k[0]) for k in STATE_KEYS])
def test_checkpoint_written_before_the_renames_loads(kw, tmp_path):
    """A checkpoint saved by model.py as of PRE_RENAME_COMMIT (read from git history; skipped without it) loads with
    load_checkpoint and gives the same logits. A row's flag newer than that model.py (a variant added since, with
    its STATE_KEYS row) is left out of the old model, whose checkpoint then lacks it: it loads at the flag's
    default, which is the model the old code built."""
    import importlib.util
    import subprocess
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    p = subprocess.run(['git', 'show', f'{PRE_RENAME_COMMIT}:model.py'], cwd=root, capture_output=True, text=True)
    if p.returncode != 0:
        pytest.skip(f'model.py at {PRE_RENAME_COMMIT} is not in this checkout\'s git history')
    (tmp_path / 'model_old.py').write_text(p.stdout)
    spec = importlib.util.spec_from_file_location('model_old', tmp_path / 'model_old.py')
    old = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(old)
    assert hasattr(old, 'LayerNorm') and hasattr(old, 'CausalSelfAttention')  # the version before the change
    known = {f.name for f in dataclasses.fields(old.GPTConfig)}
    args = {k: v for k, v in {**BASE, 'n_layer': 2, **kw}.items() if k in known}
    torch.manual_seed(0)
    m_old = randomize(old.GPT(old.GPTConfig(**args)).eval())
    path = tmp_path / 'ckpt.pt'
    torch.save(dict(format=old.CHECKPOINT_FORMAT, model=m_old.state_dict(), model_args=args), path)
    m_new, _ = load_checkpoint(str(path))
    assert all(getattr(m_new.config, k) == f.default for f in dataclasses.fields(M.GPTConfig)
               if (k := f.name) not in known)  # the newer flags at their defaults
    idx = rand_idx(BASE['vocab_size'])
    with torch.no_grad():
        assert torch.equal(m_new.eval()(idx, idx)[0], m_old(idx, idx)[0])


def test_sequence_longer_than_block_size_raises():
    m = make()
    with pytest.raises(ValueError, match='block_size'):
        m(torch.zeros(1, m.config.block_size + 1, dtype=torch.long))


@pytest.mark.parametrize('kw', [dict(attn='softmax'), dict(attn='softmax', softmax1=True, n_kv_head=2),
                                dict(attn='diff'), dict(attn='diff', softmax1=True, causal=False, n_kv_head=2),
                                dict(attn='diffv2', n_kv_head=2), dict(attn='diffv2', softmax1=True, symmetric=False)])
def test_softmax_family_runs_through_sdpa(kw, monkeypatch):
    """The training forward of every softmax-family variant calls F.scaled_dot_product_attention and never the
    naive T x T path (only cosine and attention_maps may build the weights)."""
    calls = []
    sdpa = torch.nn.functional.scaled_dot_product_attention

    def counting_sdpa(*args, **kwargs):
        calls.append(1)
        return sdpa(*args, **kwargs)

    def no_naive(*args, **kwargs):
        raise AssertionError('the naive T x T path ran in the training forward')

    monkeypatch.setattr(torch.nn.functional, 'scaled_dot_product_attention', counting_sdpa)
    monkeypatch.setattr(M.SelfAttention, 'weights', no_naive)
    m = make(n_layer=2, **kw)
    m.train()
    idx = rand_idx(61)
    _, loss = m(idx, idx)
    loss.backward()
    assert len(calls) >= 2


# ----------------------------------------------------------------------------------------------------------
# dropout: the CPU masks (16 random bits per element) and the CPU math path that SDPA with dropout_p > 0 becomes

@pytest.mark.parametrize('p', [0.1, 0.2, 0.5, 0.9])
def test_cpu_dropout_rate_scale_and_independence(p):
    """Each element is dropped with probability p (rounded to a multiple of 2^-16) independently: overall, in each
    of the four 16-bit lanes of a 64-bit draw, and in adjacent pairs; kept elements are x / (1 - p); E[y] = x."""
    d = M.Dropout(p).train()
    n = 1 << 22
    torch.manual_seed(0)
    y = d(torch.ones(n))
    p_eff = round(p * 65536) / 65536
    dropped = y == 0
    kept = y[~dropped]
    assert torch.equal(kept, torch.full_like(kept, 1 / (1 - p_eff)))

    def near(frac, want, count):  # within 6 standard errors of a binomial proportion
        assert abs(frac - want) < 6 * math.sqrt(want * (1 - want) / count), (frac, want)

    near(dropped.double().mean().item(), p_eff, n)
    for lane in range(4):
        near(dropped[lane::4].double().mean().item(), p_eff, n // 4)
    near((dropped[:-1] & dropped[1:]).double().mean().item(), p_eff ** 2, n - 1)
    near((dropped[:-4] & dropped[4:]).double().mean().item(), p_eff ** 2, n - 4)
    assert abs(y.double().mean().item() - 1) < 6 * math.sqrt(p_eff / (1 - p_eff) / n)


def test_cpu_dropout_identity_shapes_and_seeding():
    x = torch.randn(3, 5, 7)  # 105 elements: not a multiple of the 4 lanes
    assert M.Dropout(0.3).eval()(x) is x
    assert M.Dropout(0.0).train()(x) is x
    d = M.Dropout(0.3).train()
    torch.manual_seed(1)
    a = d(x)
    torch.manual_seed(1)
    b = d(x)
    c = d(x)
    assert a.shape == x.shape and torch.equal(a, b) and not torch.equal(a, c)
    assert 0 < (a == 0).sum() < x.numel()
    for dtype in (torch.float64, torch.bfloat16):
        assert d(x.to(dtype)).dtype == dtype


def test_cpu_dropout_backward_is_the_same_mask():
    d = M.Dropout(0.4).train()
    x = torch.randn(1000, dtype=F64, requires_grad=True)
    g = torch.randn(1000, dtype=F64)
    torch.manual_seed(2)
    y = d(x)
    y.backward(g)
    keep = y.detach() != 0
    torch.testing.assert_close(x.grad, torch.where(keep, g / (1 - round(0.4 * 65536) / 65536), 0.0))

    def seeded(x):
        torch.manual_seed(3)
        return d(x)

    assert torch.autograd.gradcheck(seeded, (torch.randn(40, dtype=F64, requires_grad=True),))


def test_cpu_dropout_under_compile_keeps_its_masks():
    """Compiled (one graph: fullgraph=True), the CPU masks keep p rounded to 2^-16, the 1 / (1 - p) of the rounded p,
    independent 16-bit lanes, and the same mask in the backward."""
    torch._dynamo.reset()
    d = torch.compile(M.Dropout(0.2).train(), backend='aot_eager', fullgraph=True)
    n = 1 << 20
    x = torch.ones(n, requires_grad=True)
    torch.manual_seed(0)
    y = d(x)
    y.backward(torch.full((n,), 3.0))
    torch._dynamo.reset()
    p_eff = round(0.2 * 65536) / 65536
    dropped = y.detach() == 0
    assert torch.equal(y[~dropped], torch.full_like(y[~dropped], 1 / (1 - p_eff)))
    torch.testing.assert_close(x.grad, torch.where(dropped, 0.0, 3 / (1 - p_eff)))
    for frac, want, count in [(dropped.double().mean(), p_eff, n), (dropped[0::2].double().mean(), p_eff, n // 2),
                              (dropped[1::2].double().mean(), p_eff, n // 2),
                              ((dropped[:-1] & dropped[1:]).double().mean(), p_eff ** 2, n - 1)]:
        assert abs(frac.item() - want) < 6 * math.sqrt(want * (1 - want) / count), (frac, want)


SOFTMAX_GRID = [kw for kw in GRID + NOSELF if kw['attn'] not in M.NAIVE_ONLY]  # the ones a fused kernel computes


@pytest.mark.parametrize('kw', SOFTMAX_GRID, ids=[gid(k) for k in SOFTMAX_GRID])
def test_cpu_dropout_math_path_equals_sdpa(kw, monkeypatch):
    """Training with dropout on CPU takes the math path inside sdpa() (never SDPA, never the naive weights());
    with its masks keeping everything it equals SDPA, forward and backward: causal mask, softmax-1's zero key,
    diff's unequal head sizes and GQA all carried over."""
    # float64: diff's subln amplifies float32 rounding where a head's output is ~0 (see above); not at issue here
    m = randomize(make(**kw), gain=1.0).double()
    a = m.transformer.h[0].attn
    x = rand_x(m.config.n_embd).double().requires_grad_()
    g = rand_x(m.config.n_embd, seed=8).double()

    def run():
        x.grad = None
        a.zero_grad(set_to_none=True)
        y = a(x)
        (y * g).sum().backward()
        return y.detach(), x.grad.clone(), a.q_proj.weight.grad.clone(), a.v_proj.weight.grad.clone()

    want = run()  # eval: SDPA
    a.dropout = 0.5  # the branch switch; attn_dropout and resid_dropout keep p = 0, so nothing is dropped

    def no_call(*args, **kwargs):
        raise AssertionError('SDPA or the naive path ran')

    monkeypatch.setattr(torch.nn.functional, 'scaled_dot_product_attention', no_call)
    monkeypatch.setattr(M.SelfAttention, 'weights', no_call)
    a.train()
    for got, w in zip(run(), want):
        close(got, w, atol=1e-10, rtol=1e-10)


def attend_inputs(causal, N=5, Tq=10, d=4, dv=6, seed=0):
    """fp64 q, k, v for _Attend and its additive mask: causal (top-left) or, without it, a zero key in front (as
    softmax-1 adds) and query i not seeing key i + 1 (mask_self's diagonal behind it), so Tk = Tq + 1."""
    g = torch.Generator().manual_seed(seed)
    Tk = Tq if causal else Tq + 1
    q, k = (torch.randn(N, T_, d, generator=g, dtype=torch.float64, requires_grad=True) for T_ in (Tq, Tk))
    v = torch.randn(N, Tk, dv, generator=g, dtype=torch.float64, requires_grad=True)
    bias = torch.zeros(Tq, Tk, dtype=torch.float64)
    if causal:
        bias = bias.masked_fill(torch.ones(Tq, Tk, dtype=torch.bool).triu(1), float('-inf'))
    else:
        bias[torch.arange(Tq), torch.arange(Tq) + 1] = float('-inf')
    return q, k, v, bias


@pytest.mark.parametrize('causal', [True, False])
@pytest.mark.parametrize('rows,weights', [(64, 2 ** 17), (4, 88), (3, 1)],
                         ids=['one block', '4 rows x 2 maps', '3 rows x 1 map'])
def test_attend_in_blocks_equals_the_formula(causal, rows, weights, monkeypatch):
    """_Attend, in one block or in many (partial last blocks of rows and of maps, causal blocks seeing only the keys
    up to their last row), equals softmax(q k^T * scale + bias) v written out, forward and backward, in fp64."""
    monkeypatch.setattr(cpu_kernels._Attend, 'rows', rows)
    monkeypatch.setattr(cpu_kernels._Attend, 'weights', weights)
    q, k, v, bias = attend_inputs(causal)
    gy = torch.randn(q.size(0), q.size(1), v.size(-1), dtype=torch.float64)
    cover = torch.zeros(q.size(0), q.size(1), dtype=torch.int64)  # blocks partition the (map, row) pairs
    for m, r, _ in cpu_kernels._Attend.blocks(q.size(0), q.size(1), k.size(1), causal):
        cover[m, r] += 1
    assert (cover == 1).all() and (rows == 64) == (len(list(cpu_kernels._Attend.blocks(5, 10, 11, causal))) == 1)

    def grads(y):
        q.grad = k.grad = v.grad = None
        y.backward(gy)
        return y.detach(), q.grad.clone(), k.grad.clone(), v.grad.clone()

    want = grads(torch.softmax(q @ k.transpose(1, 2) * 0.7 + bias, dim=-1) @ v)
    for got, w in zip(grads(cpu_kernels._Attend.apply(q, k, v, bias, causal, 0.7, None)), want):
        close(got, w, atol=1e-12, rtol=1e-12)


@pytest.mark.parametrize('causal', [True, False])
def test_attend_with_dropout_backward_uses_the_forwards_masks(causal, monkeypatch):
    """gradcheck of _Attend with dropout 0.3, in blocks, the RNG seeded before every call so that each call draws the
    same masks: the analytic backward (the masks kept by the forward) agrees with finite differences of the forward.
    The dropout is real: the output differs from the one without it."""
    monkeypatch.setattr(cpu_kernels._Attend, 'rows', 3)
    monkeypatch.setattr(cpu_kernels._Attend, 'weights', 20)
    q, k, v, bias = attend_inputs(causal, N=3, Tq=7, d=3, dv=4)
    drop = M.Dropout(0.3).train()

    def f(q, k, v):
        torch.manual_seed(0)
        return cpu_kernels._Attend.apply(q, k, v, bias, causal, 0.5, drop)

    assert dmax(f(q, k, v), cpu_kernels._Attend.apply(q, k, v, bias, causal, 0.5, None)) > TEETH
    assert torch.autograd.gradcheck(f, (q, k, v))


@pytest.mark.parametrize('kw', [dict(attn='softmax'), dict(attn='diff', softmax1=True, n_kv_head=2)], ids=gid)
def test_cpu_dropout_math_path_keeps_fp32_under_bf16_autocast(kw):
    """Under CPU bf16 autocast SDPA computes attention in fp32 from the bf16 q, k, v; so must the math path
    (autocast would otherwise run its matmuls and softmax in bf16, about twice SDPA's error)."""
    m = randomize(make(**kw), gain=2.0)
    a = m.transformer.h[0].attn
    with torch.no_grad():
        q, k, v = (t.to(torch.bfloat16) for t in a.project(rand_x(m.config.n_embd, t=32)))
        if a.kind == 'diff':
            q, _, k, _ = a.split_pairs(q, k)
        ref = a.sdpa(q.double(), k.double(), v.double())
        with torch.autocast('cpu', dtype=torch.bfloat16):
            fused = a.sdpa(q, k, v)
            a.dropout = 0.5  # the math path, masks keeping everything
            a.train()
            math_path = a.sdpa(q, k, v)
    assert math_path.dtype == fused.dtype == torch.bfloat16
    err = lambda y: ((y.double() - ref).norm() / ref.norm()).item()  # noqa: E731
    assert err(math_path) <= 1.2 * err(fused) + 1e-4, (err(math_path), err(fused))


@pytest.mark.parametrize('kw', [dict(attn='softmax'), dict(attn='softmax', softmax1=True, n_kv_head=2),
                                dict(attn='diff', causal=False), dict(attn='diffv2', n_kv_head=2)], ids=gid)
def test_cpu_attention_dropout_is_applied_and_unbiased(kw):
    """sdpa() with attention dropout 0.5 (CPU, training): single outputs are far from the eval output, and their
    mean over 400 draws is within 6 standard errors of it everywhere. (Tested on sdpa() itself: diff's subln after
    it is nonlinear, so the layer's output is not unbiased, in any implementation.)"""
    m = randomize(make(**kw), gain=1.0)
    a = m.transformer.h[0].attn
    with torch.no_grad():
        q, k, v = a.project(rand_x(m.config.n_embd, b=1, t=8))
        if a.kind == 'diff':  # the first map of each pair: q, k of d channels against v of 2d
            q, _, k, _ = a.split_pairs(q, k)
        want = a.sdpa(q, k, v)
        a.dropout, a.attn_dropout.p = 0.5, 0.5
        a.train()
        torch.manual_seed(0)
        draws = torch.stack([a.sdpa(q, k, v) for _ in range(400)]).double()
    assert dmax(draws[0], want) > TEETH
    se = draws.std(0) / math.sqrt(len(draws))
    assert ((draws.mean(0) - want.double()).abs() <= 6 * se + 1e-6).all()


@pytest.mark.parametrize('kw', [dict(attn='softmax'), dict(attn='diff', softmax1=True, n_kv_head=2),
                                dict(attn='diffv2', gate='elementwise'), dict(attn='cosine', symmetric=True)],
                         ids=gid)
def test_cpu_dropout_training_step_under_bf16_autocast(kw):
    m = randomize(make(n_layer=2, dropout=0.2, **kw), gain=1.0).train()
    idx = rand_idx(m.config.vocab_size)
    with torch.autocast('cpu', dtype=torch.bfloat16):
        _, loss = m(idx, idx)
    loss.backward()
    assert torch.isfinite(loss)
    for n, p in m.named_parameters():
        assert p.grad is not None and torch.isfinite(p.grad).all(), n


# ----------------------------------------------------------------------------------------------------------
# torch.compile: one graph per training forward

FAMILIES = [dict(attn='softmax'), dict(attn='diff'), dict(attn='diffv2'), dict(attn='cosine'), dict(softmax1=True),
            dict(gate='elementwise'), dict(symmetric=True), dict(mask_self=True),
            dict(attn='diff', softmax1=True, mask_self=True, causal=False, n_kv_head=2, gate='headwise',
                 gate_pos='value', pos='rope', norm='rmsnorm', mlp='swiglu')]


# softmax-1 and the elementwise gate alone: in the last family, where their code is the same (one compile each is a
# second of a CI core); dropout off: other paths
COMPILED = ([(kw, 0.1) for kw in FAMILIES if kw not in (dict(softmax1=True), dict(gate='elementwise'))]
            + [(FAMILIES[0], 0.0), (FAMILIES[-1], 0.0)])


@pytest.mark.parametrize('kw,dropout', COMPILED, ids=[f'{gid(kw)}-p{p}' for kw, p in COMPILED])
def test_compile_has_no_graph_breaks_in_training(kw, dropout):
    """Dynamo traces the whole training forward of every attention family into one graph, dropout on (on CPU the
    cheap masks' random_ would break the graph at every dropout), and with dropout off, where no kernel draws."""
    torch._dynamo.reset()
    m = make(dropout=dropout, **kw).train()
    idx = rand_idx(61)
    e = torch._dynamo.explain(m)(idx, idx)
    torch._dynamo.reset()
    assert (e.graph_count, e.graph_break_count) == (1, 0), [str(r.reason)[:200] for r in e.break_reasons]



# --- leak: reproductions of causal-mask bugs (commit f44a4c4 on, 2026-11-24), never a default

def _leak_weights(leak, attn='softmax', symmetric=False, T=6):
    torch.manual_seed(0)
    m = GPT(GPTConfig(n_layer=1, n_head=2, n_embd=16, block_size=T, vocab_size=11, attn=attn, symmetric=symmetric,
                      causal=False, leak=leak)).eval()
    x = torch.randint(11, (1, T))
    att = m.transformer.h[0].attn
    q, k, _ = att.project(m.transformer.h[0].ln_1(m.transformer.wte(x) + m.transformer.wpe(torch.arange(T))))
    return att, q, k, m.attention_maps(x)[0][0]


def test_zero_future_gives_every_future_key_the_logit_0():
    """softmax over [q k_j / sqrt(d) for j <= t] + [0 for j > t]: the future keeps weight exp(0) / Z."""
    att, q, k, w = _leak_weights('zero_future')
    s = (q @ k.transpose(-2, -1)) * q.size(-1) ** -0.5
    future = torch.ones(6, 6, dtype=torch.bool).triu(1)
    expected = torch.softmax(s.masked_fill(future, 0.0), dim=-1)[0]
    torch.testing.assert_close(w, expected)
    assert (w[:, future] > 0).all()
    # cosine: 1 + cos(q_t, k_j) for j <= t, and 1 + 0 for every future key, divided by the row sum
    _, q, k, wc = _leak_weights('zero_future', attn='cosine', symmetric=True)
    raw = 1 + torch.nn.functional.normalize(q, dim=-1) @ torch.nn.functional.normalize(k, dim=-1).transpose(-2, -1)
    raw = raw.masked_fill(future, 1.0)[0]
    torch.testing.assert_close(wc, raw / raw.sum(-1, keepdim=True))


def test_off_by_one_shows_exactly_the_next_key():
    _, _, _, w = _leak_weights('off_by_one')
    for t in range(6):
        assert (w[:, t, :min(t + 2, 6)] > 0).all() and (w[:, t, t + 2:] == 0).all()


@pytest.mark.parametrize('attn', ['softmax', 'cosine'])
def test_after_norm_normalises_over_every_key_then_zeroes_the_future(attn):
    """softmax (or the cosine row sum) over all T keys, then the future's weights set to 0: the past keeps its
    share of a row that the future also took part in, so a row sums to less than 1 wherever the future is."""
    att, q, k, w = _leak_weights('after_norm', attn=attn, symmetric=attn == 'cosine')
    future = torch.ones(6, 6, dtype=torch.bool).triu(1)
    if attn == 'softmax':
        full = torch.softmax((q @ k.transpose(-2, -1)) * q.size(-1) ** -0.5, dim=-1)[0]
    else:
        raw = 1 + torch.nn.functional.normalize(q, dim=-1) @ torch.nn.functional.normalize(k, dim=-1).transpose(-2, -1)
        full = (raw / raw.sum(-1, keepdim=True))[0]
    torch.testing.assert_close(w, full.masked_fill(future, 0.0))
    rows = w.sum(-1)
    assert (rows[:, :-1] < 1 - 1e-4).all() and torch.allclose(rows[:, -1], torch.ones(2))  # the last row: no future


def test_time_norm_is_a_group_norm_over_time_of_each_head():
    """leak='time_norm' equals nn.GroupNorm(H, H * 2d) on the heads laid out as (B, H * 2d, T), the subln's weight
    repeated per head; a position's output then moves when only a later position's value changes."""
    torch.manual_seed(0)
    att = GPT(GPTConfig(n_layer=1, n_head=3, n_embd=24, block_size=8, vocab_size=11, attn='diff', causal=False,
                        leak='time_norm')).transformer.h[0].attn
    with torch.no_grad():
        att.subln.weight.uniform_(0.5, 1.5)
    B, H, T, D = 2, 3, 8, 8
    y = torch.randn(B, H, T, D) * 3 + 1
    assert isinstance(att.subln, leaks.TimeNorm)
    got = att.subln(y)
    gn = torch.nn.functional.group_norm(y.permute(0, 1, 3, 2).reshape(B, H * D, T), H,
                                        weight=att.subln.weight.repeat(H), eps=att.subln.eps)
    torch.testing.assert_close(got, gn.view(B, H, D, T).permute(0, 1, 3, 2))
    later = y.clone()
    later[:, :, -1] += 1.0  # change only the last position
    assert (att.subln(later)[:, :, 0] - got[:, :, 0]).abs().max() > 1e-3  # position 0 sees it
    paper = M.RMSNorm(D)  # the paper's subln does not
    torch.testing.assert_close(paper(later)[:, :, 0], paper(y)[:, :, 0])


@pytest.mark.parametrize('leak', ['zero_future', 'off_by_one', 'after_norm', 'time_norm'])
def test_the_causality_check_refuses_a_leak_in_a_causal_model(leak):
    attn = 'diff' if leak == 'time_norm' else 'softmax'
    m = GPT(GPTConfig(n_layer=2, n_head=2, n_embd=16, block_size=16, vocab_size=11, leak=leak, attn=attn))
    with pytest.raises(causality.CausalityError):
        causality.check_causal(m, 11, 16, 'cpu')


def test_leak_is_validated():
    with pytest.raises(ValueError, match="leak='sideways'.*'zero_future'"):
        GPTConfig(leak='sideways')
    with pytest.raises(ValueError, match='mask_self'):
        GPTConfig(leak='zero_future', mask_self=True, causal=False)
    with pytest.raises(ValueError, match="subln"):
        GPTConfig(leak='time_norm', causal=False)  # nanogpt has no per-head norm to take over time
    assert GPTConfig().leak == 'none'


def test_rope_theta_without_rope_is_an_error():
    """A key that does nothing in this combination is refused (README's "Attention variants": a combination without meaning is an error)."""
    with pytest.raises(ValueError, match=r"rope_theta\b.*pos='rope'"):
        GPTConfig(rope_theta=500.0)
    assert GPTConfig(pos='rope', rope_theta=500.0).rope_theta == 500.0


@pytest.mark.parametrize('kw', [dict(attn='diff'), dict(attn='diffv2', n_kv_head=2)], ids=gid)
def test_diff_attention_dropout_is_one_rule_on_every_path(kw):
    """(drop(A1) - lambda drop(A2)) V on the fast path (the two maps stacked in one call) and on the naive path
    (LeakyAttention's, attention_maps'): a layer's output varies as much over dropout draws on either. Dropping
    A1 - lambda A2 once, as the naive path did, gives a different spread (about 1.5x the std at p = 0.2)."""
    m = randomize(make(**kw, dropout=0.3), gain=1.0)
    a = m.transformer.h[0].attn
    a.resid_dropout.p = 0.0  # only the attention maps are dropped
    a.train()
    x = rand_x(m.config.n_embd)

    def spread(naive):
        torch.manual_seed(0)
        with torch.no_grad():
            ys = torch.stack([a(x, return_weights=True)[0] if naive else a(x) for _ in range(300)])
        return ys.var(0).mean().item()

    fast, naive = spread(False), spread(True)
    assert fast > 0 and abs(naive / fast - 1) < 0.1, (naive, fast)
