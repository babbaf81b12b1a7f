"""
The causality check: a black-box test, for train.py to run before training, that a causal model's logits at a
position do not depend on later tokens. It compares logits only, so it covers every layer and every variant of
model.py, including ones added later.
"""
import contextlib
import warnings

import torch


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
