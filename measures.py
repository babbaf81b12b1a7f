"""
The outlier measures that train.py logs during a run (outlier_interval) and analyze.py reports of a checkpoint: each
block's output kurtosis at token 0 and at the rest, and its largest |activation| against the median (Kaul et al.;
Sun et al. 2024's massive activations), on one fixed validation batch. Both import them from here.
"""
import contextlib

import torch

from dataset import batch_rng, get_batch


def kurtosis(x):
    """Plain (not excess) kurtosis across the last axis, averaged over the other axes: 3 for a Gaussian."""
    x = x.cpu().double()  # on the CPU: MPS has no float64
    d = x - x.mean(-1, keepdim=True)
    var = d.pow(2).mean(-1)
    return (d.pow(4).mean(-1) / var.pow(2).clamp_min(1e-30)).mean().item()


@torch.no_grad()
def block_outputs(model, x):
    """Each block's output (B, T, C) for the batch x, from one plain forward (hooks on model.transformer.h)."""
    outs = []
    hooks = [blk.register_forward_hook(lambda m, inp, out: outs.append(out[0] if isinstance(out, tuple) else out))
             for blk in model.transformer.h]
    try:
        model(x)
    finally:
        for hk in hooks:
            hk.remove()
    return outs


def emergence_stats(hs):
    """Per layer, from block outputs hs (a list of (B, T, C)): the outlier measures of Kaul et al. and Sun et al.
      kurtosis_first = mean over the batch of E[(h - mean)^4] / E[(h - mean)^2]^2 across the C channels at token 0
                       (no -3: 3 for a Gaussian, C for a single channel carrying everything)
      kurtosis_rest  = the same at tokens 1..T-1
      max_activation = max |h|;  median_activation = median |h|;  massive_ratio = their quotient
                       (Sun et al. 2024's massive activations are ~1000x the median)
    -> list of dicts, one per layer."""
    rows = []
    for h in hs:
        a = h.float().abs()
        med = a.median().item()
        rows.append(dict(kurtosis_first=kurtosis(h[:, 0]), kurtosis_rest=kurtosis(h[:, 1:]),
                         max_activation=a.max().item(), median_activation=med,
                         massive_ratio=a.max().item() / max(med, 1e-30)))
    return rows


def outlier_record(model, x, autocast=contextlib.nullcontext()):
    """log.jsonl's flat record of emergence_stats on batch x: per layer L (1-based) outliers/L<L>/<measure>, and the
    largest over layers of each as outliers/max_<measure> (the emergence a claim's precondition reads). The model is
    put back in the mode it was in."""
    was = model.training
    model.eval()
    try:
        with autocast:
            rows = emergence_stats(block_outputs(model, x))
    finally:
        model.train(was)
    rec = {f'outliers/L{i + 1}/{k}': v for i, r in enumerate(rows) for k, v in r.items()}
    for k in ('kurtosis_first', 'kurtosis_rest', 'max_activation', 'massive_ratio'):
        rec[f'outliers/max_{k}'] = max(r[k] for r in rows)
    return rec


def outlier_batch(cfg, val, device, n=8):
    """The fixed batch outlier_record is measured on: n validation windows, a pure function of the run's seed (the
    same at every step and after a resume; stream 5, apart from the eval batches' streams)."""
    return get_batch(val, batch_rng(cfg['seed'], 5), n, cfg['block_size'], device)[0]


def outlier_curve(log):
    """The kind='outliers' records of a log.jsonl -> [(iter, {measure: the largest over layers})]."""
    keys = ('kurtosis_first', 'kurtosis_rest', 'max_activation', 'massive_ratio')
    return [(r['iter'], {k: r[f'outliers/max_{k}'] for k in keys}) for r in log if r.get('kind') == 'outliers']
