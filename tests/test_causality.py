"""
Tests for causality.py's check_causal, the black-box guard train.py runs before training a causal model: it passes
every causal variant, in training and evaluation, under bf16 autocast and torch.compile, and it names the first
leaking position of every kind of planted leak, however small, without mistaking run-to-run noise for one.
"""
import os
import re
import sys

import pytest
import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import causality  # noqa: E402
from test_model import B, BASE, gid, make, rand_idx, randomize  # noqa: E402

pytestmark = pytest.mark.usefixtures('one_thread')  # conftest.py: torch on one thread




GUARDED = [dict(), dict(attn='diff'), dict(attn='diffv2', n_kv_head=2), dict(attn='cosine', symmetric=True),
           dict(attn='cosine', n_kv_head=1), dict(symmetric=True), dict(gate='headwise'),
           dict(attn='diff', gate='elementwise', gate_pos='value'), dict(softmax1=True, n_kv_head=2),
           dict(pos='rope', norm='rmsnorm', mlp='swiglu'), dict(mask_self=True),
           dict(attn='diff', symmetric=True, softmax1=True, mask_self=True, pos='rope')]
TB = BASE['block_size']  # the guard checks whole blocks: t in (1, 16, 31)


def leak_seen(model, T=TB, **kwargs):
    """(t, i): the changed position and the first leaking one that check_causal's refusal names, in that order."""
    with pytest.raises(causality.CausalityError) as e:
        causality.check_causal(model, 61, T, 'cpu', **kwargs)
    return tuple(int(n) for n in re.findall(r'position (\d+)', str(e.value))[:2])


@pytest.mark.parametrize('dropout', [0.0, 0.2])
@pytest.mark.parametrize('kw', GUARDED, ids=[gid(k) for k in GUARDED])
def test_check_causal_passes_causal_models(kw, dropout):
    """Every variant passes, with dropout in training mode too (the same seed before each forward, so the same
    masks); the guard leaves the RNG state and the model's eval mode as they were."""
    m = randomize(make(n_layer=2, dropout=dropout, **kw))
    rng = torch.get_rng_state()
    assert causality.check_causal(m, 61, TB, 'cpu', batch_size=2) is None
    assert not m.training
    assert torch.equal(torch.get_rng_state(), rng)


@pytest.mark.parametrize('kw', [dict(attn='diff', mask_self=True), dict(attn='cosine', symmetric=True)], ids=gid)
def test_check_causal_under_bf16_autocast(kw):
    m = make(n_layer=2, dropout=0.1, **kw).train()
    causality.check_causal(m, 61, TB, 'cpu', autocast_ctx=torch.autocast('cpu', dtype=torch.bfloat16))
    assert m.training


@pytest.mark.parametrize('kw,t,i', [(dict(), 1, 0), (dict(attn='diff'), 1, 0), (dict(softmax1=True), 1, 0),
                                    (dict(attn='diffv2', n_kv_head=2), 1, 0), (dict(mask_self=True), TB // 2, 1)],
                         ids=lambda v: gid(v) if isinstance(v, dict) else str(v))
def test_check_causal_catches_dropped_is_causal(kw, t, i, monkeypatch):
    """SDPA without is_causal in every layer of a model at its GPT init. mask_self computes query 0 alone (over key
    0), so there the leak starts at query 1 and only the check at t = T // 2 sees it."""
    sdpa = torch.nn.functional.scaled_dot_product_attention

    def no_causal(*args, **kwargs):
        return sdpa(*args, **{**kwargs, 'is_causal': False})

    monkeypatch.setattr(torch.nn.functional, 'scaled_dot_product_attention', no_causal)
    m = make(n_layer=2, **kw)
    assert leak_seen(m) == (t, i)


def test_check_causal_in_eval_mode_sees_a_leak_only_evaluation_has(monkeypatch):
    """On CPU with dropout, training runs the written-out math path and evaluation runs SDPA: a leak in SDPA alone
    passes the training-mode check and is caught by training=False (eval mode, no gradients), which leaves the
    model in the mode it found it."""
    sdpa = torch.nn.functional.scaled_dot_product_attention
    monkeypatch.setattr(torch.nn.functional, 'scaled_dot_product_attention',
                        lambda *a, **k: sdpa(*a, **{**k, 'is_causal': False}))
    m = make(n_layer=2, dropout=0.1).train()
    causality.check_causal(m, 61, TB, 'cpu')
    assert leak_seen(m, training=False) == (1, 0)
    assert m.training


@pytest.mark.parametrize('kw', [dict(), dict(dropout=0.1), dict(attn='diff', dropout=0.1), dict(attn='cosine'),
                                dict(attn='cosine', symmetric=True, dropout=0.1)], ids=gid)
def test_check_causal_catches_one_layer_without_mask(kw):
    """The second layer of three loses its causal mask: on SDPA, on the CPU dropout math path (training) and on the
    naive path of cosine attention."""
    m = make(n_layer=3, **kw)
    m.transformer.h[1].attn.causal = False
    assert leak_seen(m) == (1, 0)


def _tril(T):
    return torch.ones(T, T, dtype=torch.bool).tril()


def _hole(mask, i, j):
    mask[i, j] = True
    return mask


PLANTED = {  # a causal mask with one kind of hole, the position t whose check sees it, the first leaking position
    'rows 5 and later see everything': (lambda T: _tril(T) | (torch.arange(T)[:, None] >= 5), TB // 2, 5),
    'every query sees the last key': (lambda T: _tril(T) | (torch.arange(T) == T - 1), TB - 1, 0),
    'query 0 also sees key 1': (lambda T: _hole(_tril(T), 0, 1), 1, 0),
}


@pytest.mark.parametrize('name', list(PLANTED))
def test_check_causal_names_the_first_leaking_position(name, monkeypatch):
    """Leaks that only one of the three checks (t = 1, T // 2, T - 1) sees, each in a model at its GPT init. One
    layer: with more, a hole also passes on what the key it exposes has seen of earlier positions."""
    allowed, t, i = PLANTED[name]
    sdpa = torch.nn.functional.scaled_dot_product_attention

    def planted(q, k, v, attn_mask=None, is_causal=False, **kwargs):
        return sdpa(q, k, v, attn_mask=allowed(q.size(2)), **kwargs)

    monkeypatch.setattr(torch.nn.functional, 'scaled_dot_product_attention', planted)
    m = make(n_layer=1)
    assert leak_seen(m) == (t, i)


def test_check_causal_catches_a_one_head_leak_at_init(monkeypatch):
    """A small leak: one head of one layer of a model at its GPT init, block 256, sees the future. It moves the earlier
    logits by ~5e-4 of the change at the perturbed position, far above the guard's 1e-6."""
    sdpa = torch.nn.functional.scaled_dot_product_attention
    n_calls = []

    def one_head(q, k, v, **kwargs):
        n_calls.append(1)
        y = sdpa(q, k, v, **kwargs)
        if len(n_calls) % 2 == 1:  # the first of the two layers: head 0 without the causal mask
            y = torch.cat((sdpa(q[:, :1], k[:, :1], v[:, :1], **{**kwargs, 'is_causal': False}), y[:, 1:]), dim=1)
        return y

    monkeypatch.setattr(torch.nn.functional, 'scaled_dot_product_attention', one_head)
    m = make(n_layer=2, block_size=256)
    assert leak_seen(m, 256) == (1, 0)


class _Jitter(torch.nn.Module):
    """A model whose logits carry noise that torch.manual_seed does not control, like a nondeterministic kernel."""

    def __init__(self, m, rel):
        super().__init__()
        self.m, self.rel, self.g = m, rel, torch.Generator().manual_seed(0)

    def forward(self, idx, targets=None):
        logits, loss = self.m(idx, targets)
        return logits * (1 + self.rel * torch.randn(logits.shape, generator=self.g)), loss


def test_check_causal_tolerates_run_to_run_noise():
    """Noise of 1e-5 relative (tens of float32 roundings) in every logit is not a leak; a real leak on top is one;
    noise large enough to hide leaks is reported."""
    m = randomize(make(n_layer=2))
    causality.check_causal(_Jitter(m, 1e-5), 61, TB, 'cpu', batch_size=2)
    m.transformer.h[0].attn.causal = False
    with pytest.raises(causality.CausalityError):
        causality.check_causal(_Jitter(m, 1e-5), 61, TB, 'cpu', batch_size=2)
    m.transformer.h[0].attn.causal = True
    with pytest.warns(UserWarning):  # noise large enough to hide a leak
        causality.check_causal(_Jitter(m, 1e-3), 61, TB, 'cpu')


def test_check_causal_on_a_compiled_model():
    """A leak (one layer of two without its mask) is seen through torch.compile, Dynamo and AOTAutograd (the backend
    does not change what is traced), with dropout. That a causal compiled model passes, its training graph compiled
    once: the test below."""
    torch._dynamo.reset()
    m = make(n_layer=2, dropout=0.1, attn='diff', mask_self=True)
    m.transformer.h[1].attn.causal = False
    assert leak_seen(torch.compile(m, backend='aot_eager'), batch_size=2) == (1, 0)
    torch._dynamo.reset()


def test_check_causal_compiles_the_training_graph():
    """A causal compiled model with dropout passes, and with autograd on and the training shape the guard's graph is
    the one the training step then reuses: no second compilation (a no_grad guard would compile an inference graph of
    its own)."""
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    torch._dynamo.reset()
    m = make(n_layer=1, dropout=0.1)
    compiled = torch.compile(m, backend=backend)
    causality.check_causal(compiled, 61, TB, 'cpu', batch_size=B)
    assert len(graphs) == 1
    compiled.train()
    idx = rand_idx(61, t=TB)
    compiled(idx, idx)[1].backward()
    torch._dynamo.reset()
    assert len(graphs) == 1
