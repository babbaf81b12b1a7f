"""
Reproductions of other people's causal-mask bugs: not the papers' attention, never a default.

GPTConfig.leak='...' builds the blocks with LeakyAttention instead of model.py's SelfAttention, to test which bug
could give the seed notes' losses (results/seed_table_explained.md). Every forward takes the naive path (the weights
written out), where each bug changes one step. None is a causal model: causality.check_causal refuses them, so a run
says causal=False (train.py refuses a leak otherwise).
"""
import torch
import torch.nn as nn

from model import SelfAttention, upcast


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

    def __init__(self, config, depth):
        super().__init__(config, depth)
        self.leak = config.leak
        if self.leak == 'time_norm':  # the same weight (and state_dict key, subln.weight), over time too
            self.subln = TimeNorm(self.subln.weight.numel(), self.subln.eps)

    def forward(self, x, return_weights=False):
        y, w = super().forward(x, return_weights=True)  # the naive path, where the bugs are
        return (y, w) if return_weights else y

    def weights(self, q, k):
        T, cosine = q.size(2), self.kind == 'cosine'
        # the causal mask, whatever `causal` says (a leak run has causal=False for the check's sake); off_by_one:
        # one key further
        mask = torch.ones(T, T, dtype=torch.bool, device=q.device).tril(1 if self.leak == 'off_by_one' else 0)
        s = self.scores(q, k)
        if self.leak == 'zero_future':
            s = s.masked_fill(~mask, 1.0 if cosine else 0.0)
        elif self.leak != 'after_norm':
            s = s.masked_fill(~mask, 0.0 if cosine else float('-inf'))
        w = self.normalise(s)
        return w.masked_fill(~mask, 0.0) if self.leak == 'after_norm' else w


class TimeNorm(nn.Module):
    """Each head of y (B, H, T, 2d) normalised over (T, 2d) together, (y - mean) / sqrt(var + eps) * weight, as
    nn.GroupNorm(H, H * 2d) gives on a (B, H * 2d, T) tensor."""

    def __init__(self, ndim, eps):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(ndim))

    def forward(self, y):
        yf = upcast(y)
        var, mean = torch.var_mean(yf, dim=(-2, -1), correction=0, keepdim=True)
        return ((yf - mean) * torch.rsqrt(var + self.eps) * self.weight.to(yf.dtype)).type_as(y)
