"""
The seed notes' claims as data, one verdict rule, and the two pages rendered from them and the committed runs:
results/claims.md (whole) and README's "What we found" (between its findings markers).

  python evidence/claims.py          # renders both from the runs under results/
  python evidence/claims.py --check  # exit 1, naming the file, where either differs from its render (as the tests)

A claim is tested by rows of TESTS: which runs it reads (a results folder, reference A and variant B as sweep.py
names them, a depth), what it measures (METRICS), which sign of B - A it predicts, and the precondition (NEEDS) that
makes the phenomenon present in a seed, checked on A's run of that seed (or against another variant's run of it:
AGAINST): a seed without it is dropped, not counted.
Pointing a row at a rerun is a change of its folder. A folder or a cell not committed renders as not measured, with
the ablate.sh command that makes its runs (FILLS).
"""
import argparse
import math
import os
import re
import statistics
import sys
from dataclasses import dataclass, replace

from scipy import stats

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the repository's root
import report  # noqa: E402
from output import pyplot, save_figure  # noqa: E402
from report import NAMES, compare, finished, load_runs, paired_groups, provenance, run_file  # noqa: E402
from profiles import PROFILES  # noqa: E402
from variants import SEED_VARIANTS  # noqa: E402

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the repository's root
CLAIMS_MD = os.path.join(HERE, 'results', 'claims.md')
README_MD = os.path.join(HERE, 'README.md')
START, END = '<!-- findings:start -->', '<!-- findings:end -->'

# ----------------------------------------------------------------------------- the claims

# the seed notes' claims (docs/seed_notes.md): number -> (the statement, the seed's own number, published elsewhere,
# from docs/anchors.md)
CLAIMS = {
    1: ('Diff does not help the asymmetric baseline (001)', '3L 0.69 vs 0.69; 6L 0.08 vs 0.09; 8L 0.11 vs 0.08',
        'Diff paper 1.4B: 3.087 → 3.062; diff-mlx 30M, 4 paired seeds: −0.016 ± 0.023'),
    2: ('Diff rescues Sym (001)', '3L Sym 0.84 → Diff+Sym 0.69; 6L 0.22 → 0.10',
        'none found for K = Q in a causal LM'),
    3: ('Norm+Sym is the worst (001)', '3L 1.1; 6L 0.77 (others 0.08-0.22)', '—'),
    4: ("Diff+Sym's λ_full is closer to 1 than Diff's (001)",
        '6L Diff 0.30-0.78; Diff+Sym 0.53-0.95', 'microsoft/unilm 1699: most layers ≈ 0.8, first layers 0.2-0.4'),
    5: ('Softmax-1 (and OrthoAdam) remove the first-token sink and the outliers (002)',
        'first-token attention 65% → 3.3%; kurtosis 1657 → 3.1', 'Kaul et al. 2025 (GPT-2, Llama-2 sizes)'),
    6: ('The gate removes the sink (004)', 'first-token attention 46.7% → 4.8%',
        'Qiu et al. 2025 (third-party summary)'),
    7: ('Diff retrieves needles better, with less attention noise (000, 003)', 'qualitative',
        'Diff paper: multi-needle gains at 4K-64K context'),
    8: ("Diff matches the baseline's loss with about 65% of its model size (000)", '65% of the model size',
        'Diff paper: 65% of the model size or training tokens'),
    9: ('Diff has fewer activation outliers (000)', 'qualitative', 'Diff paper'),
    10: ('The gate lets training take a higher learning rate, with fewer loss spikes (004)', 'qualitative',
         'Qiu et al. 2025 (third-party summary)'),
    11: ('Symmetric attention is low rank, and the softmax breaks the low rank (001)',
         'rank of Q Qᵀ at most d; 128 → about 300 after the softmax', '—'),
}

# the measures: name -> (what it is, the run file it reads, how, format)
LAYER = lambda i: lambda a: a['layers'][i]['first_token_attention']  # noqa: E731
METRICS = dict(
    val=('final val loss', 'summary.json', lambda s: s['final_val_loss'], '{:.3f}'),
    lambda_dist=('mean over layers of \\|1 − λ_full\\|', 'summary.json',
                 lambda s: statistics.mean(abs(1 - x['lambda_full']) for x in s['lambda_table']), '{:.3f}'),
    first_token=('first-token attention', 'analysis.json', lambda a: a['overall']['first_token_attention'],
                 '{:.3f}'),
    first_token_L1=('first-token attention, layer 1', 'analysis.json', LAYER(0), '{:.3f}'),
    first_token_L2=('first-token attention, layer 2', 'analysis.json', LAYER(1), '{:.3f}'),
    kurtosis=('kurtosis of the hidden states', 'analysis.json', lambda a: a['overall']['kurtosis_rest'], '{:.2f}'),
    kurtosis_first=('token-0 kurtosis, the largest over layers', 'analysis.json',
                    lambda a: max(x['kurtosis_first'] for x in a['layers']), '{:.1f}'),
    massive=('largest activation over the median', 'analysis.json', lambda a: a['overall']['massive_ratio'], '{:.0f}'),
    w8a8=('W8A8 loss penalty (per-tensor int8 weights and inputs)', 'analysis.json',
          lambda a: a.get('w8a8', {}).get('loss_penalty_w8a8'), '{:+.4f}'),
    needle_acc=('first-query accuracy, mean over needle counts', 'needle_eval.json',
                lambda f: statistics.mean(c['accuracy'] for c in f['by_needles'].values()), '{:.3f}'),
    unrelated_share=("share of \\|w\\| on tokens that do not hold the key", 'needle_eval.json',
                     lambda f: statistics.mean(c.get('unrelated_share', 1 - c['answer_share'])  # no distractors
                                               for c in f['by_needles'].values()), '{:.3f}'),
    erank_attn=('effective rank of the attention maps (T = 256, mean over heads and layers)', 'analysis.json',
                lambda a: statistics.mean(x['erank_attention'] for x in a['layers']), '{:.1f}'),
    erank_qk=('effective rank of the scores Q Kᵀ (T = 256, mean over heads and layers)', 'analysis.json',
              lambda a: statistics.mean(x['erank_qk'] for x in a['layers']), '{:.1f}'),
    spikes=('loss spikes (SPIKE_RATIO, SPIKE_WINDOW)', 'summary.json', lambda s: spikes(s['_log']), '{:.1f}'),
    stable_lr=('the highest learning rate trained without diverging in every seed', '', None, '{}'),
)

# Preconditions, on A's run of a seed: name -> (the phenomenon, the file, the test). A sink is Gu et al.'s: a head
# whose mean attention to position 0 exceeds 0.3 (docs/anchors.md); the models read here have one head a layer.
# Outliers are Sun et al.'s massive activations, taken at their lenient end: the largest activation >= 100x the median.
SINK, MASSIVE = 0.3, 100
# The outlier rows on Python code (data/pycode), fixed before their runs: token-0 kurtosis above 50 (a Gaussian's is 3,
# Kaul et al.'s baselines' 1657) in some block, and its largest activation above 100x the median. Both, because the
# claim is that softmax-1 and OrthoAdam remove the first-token outlier and the massive activations together, and
# Vlassis et al. 2025 found kurtosis alone did not predict the quantization loss. analyze.py's gate uses the same
# numbers (OUTLIER_KURTOSIS, OUTLIER_RATIO there; tests/test_outliers.py checks they agree).
OUTLIER_KURTOSIS, OUTLIER_RATIO = 50, 100
NEEDS = dict(
    sink=(f'a sink (first-token attention > {SINK} in a layer)', 'analysis.json',
          lambda a: max(x['first_token_attention'] for x in a['layers']) > SINK),
    sink_L1=('a sink in layer 1', 'analysis.json', lambda a: a['layers'][0]['first_token_attention'] > SINK),
    sink_L2=('a sink in layer 2', 'analysis.json', lambda a: a['layers'][1]['first_token_attention'] > SINK),
    outliers=(f'outliers (largest activation ≥ {MASSIVE}× the median)', 'analysis.json',
              lambda a: a['overall']['massive_ratio'] >= MASSIVE),
    outliers_pc=(f'outliers (token-0 kurtosis > {OUTLIER_KURTOSIS} in a layer and largest activation > '
                 f'{OUTLIER_RATIO}× the median)', 'analysis.json',
                 lambda a: max(x['kurtosis_first'] for x in a['layers']) > OUTLIER_KURTOSIS
                 and a['overall']['massive_ratio'] > OUTLIER_RATIO),
    spikes=('loss spikes (`spikes()` above 0)', 'summary.json', lambda s: spikes(s['_log']) > 0),
    low_rank=("scores of lower rank than the baseline's (`erank_qk` below nanogpt's)", 'analysis.json',
              lambda a, base: METRICS['erank_qk'][2](a) < METRICS['erank_qk'][2](base)),
)
# A precondition that compares A's run with another variant's run of the same seed, folder and depth: its test takes
# both files (A's, then that variant's); a seed without that run is dropped, and that run is one of the row's, kept
# out as its runs are (provenance.excluded)
AGAINST = dict(low_rank='nanogpt')


# The gate and the learning rate (004), fixed on 2026-12-02 at 00:50 UTC, after its runs had started
# (a sweep at a570e70, started at 00:46 UTC) and before any of their losses was read. Setting: PROFILE=cpu_long's
# 3-layer Shakespeare model, nanogpt against gated (G1 elementwise), seeds 1-3; only --learning_rate changes (the
# profile's 1e-3, then 3e-3, 1e-2, 3e-2), with the profile's warmup (50 steps), min_lr (1e-4) and clipping (1.0):
# the gated paper raised the maximum learning rate alone. The measures:
# - DIVERGED: a run diverged where its loss went non-finite (train.py then stops with "non-finite training loss" in
#   its train.log and leaves FAILED, no summary.json), or where its final val loss is above its own iteration-0 val
#   loss (it ended worse than where it started). Why: the note's "the baseline stopped converging".
# - SPIKE: a logged training loss (every log_interval = 10 steps) above SPIKE_RATIO times the median of the
#   SPIKE_WINDOW logged losses before it (the previous 50 steps), counted from the first log step that has a full
#   window. Why: the note's "nearly eliminates loss spikes"; a median of the recent window ignores the descent's
#   slope, and 1.5x is far above the step-to-step noise of a 32 x 256 batch.
# - the claim's rows: gated - nanogpt final val loss at each of the two highest rates, paired by seed; the highest
#   rate at which each variant trains without diverging in every seed; the spike count, gated - nanogpt, paired by
#   seed at each rate. Their Holm family is the claim's own rows, named in the rows' list.
LR_RATES = ('1e-3', '3e-3', '1e-2', '3e-2')
# The highest stable rate's phenomenon, fixed after the runs at 3e-2 (POSTHOC): a baseline that diverges at the
# highest rate; one that trains there leaves the gate no higher rate to take
PRECONDITION_LR = 'not shown (precondition absent: the baseline trains at every rate)'
SPIKE_RATIO, SPIKE_WINDOW = 1.5, 5


def spikes(log):
    """SPIKE's count on log.jsonl's records: logged training losses above SPIKE_RATIO x the median of the
    SPIKE_WINDOW logged losses before it, from the first with a full window."""
    xs = [e['loss'] for e in log if e.get('kind') == 'train' and e.get('loss') is not None]
    return sum(x > SPIKE_RATIO * statistics.median(xs[i - SPIKE_WINDOW:i])
               for i, x in enumerate(xs) if i >= SPIKE_WINDOW)


def diverged(s):
    """DIVERGED, of a finished run: its final val loss above its own iteration-0 val loss (a run whose loss went
    non-finite left FAILED and no summary.json: load_runs' 'failed')."""
    first = next((e['val_loss'] for e in s['_log'] if e.get('kind') == 'eval' and e.get('val_loss') is not None),
                 None)
    return first is not None and s['final_val_loss'] > first

# What each selecting measure and precondition selects, and why: fixed here, before any further run. These were
# chosen after Bigram-Backcopy's seeds 1-5 had been seen (results/sink_cpu.md), so each row that selects a layer or
# drops seeds by a precondition is shown beside its unselected twin: the same comparison over all layers (TWIN: a
# per-layer measure's all-layers one) and every seed.
TWIN = dict(first_token_L1='first_token', first_token_L2='first_token')
WHY = dict(
    spikes="the claim is that the gate removes the baseline's spikes (POSTHOC)",
    first_token_L1="layer 1 holds Bigram-Backcopy's copying head, at rest on the first token when not copying; a "
                   "gate can close it",
    first_token_L2="layer 2 holds the dormant head, on the first token at every query; softmax-1 lets a head attend "
                   "to nothing",
    sink="Gu et al.'s sink head (docs/anchors.md): removing a sink needs a baseline with one",
    sink_L1='the same, on the head read',
    sink_L2='the same, on the head read',
    outliers="Sun et al.'s massive activations, at their lenient end",
    outliers_pc="both, as the claim names both (kurtosis alone did not predict the quantization loss: Vlassis et al. "
                "2025)",
    low_rank="Q Kᵀ has rank at most d_head as Q Qᵀ has: the softmax breaks only a low rank Sym has beyond the "
             "baseline's (POSTHOC)",
)

# Parity claims ('=') are tested for equivalence: two one-sided tests of |B − A| < m. The margin for the val loss is
# one unit of the last digit of the seed's own table, 0.01: it printed its losses to two decimals (0.69 against
# 0.69), so "no gain" there means a difference below 0.01. Fixed from that table, not from any run here.
MARGIN = dict(val=0.01)


@dataclass(frozen=True)
class Test:
    claim: int        # CLAIMS' number; 0: a control the claims do not predict
    folder: object    # results/<sweep>: a one-line change points the row at a rerun; a tuple: folders pooled by seed
    depth: str
    a: str            # reference A and variant B (sweep.py's names): the row measures B - A, paired by seed
    b: str
    metric: str       # METRICS (B's measure, and A's unless metric_a names another)
    predicts: str     # the sign of B - A the claim predicts: '<0', '>0', or '=' (parity: no gain, no loss, tested
                      # for equivalence within ±MARGIN); '' for a control
    needs: str = ''   # NEEDS: A's seeds without it are dropped
    halves: bool = False  # also count the seeds where B <= A / 2 (a claim of "halves")
    worst: bool = False   # also count the seeds where B is the highest of the seed's five variants
    of: int = 0           # a control's claim (claim 0): README's "What we found" names it in that claim's row
    removes: str = ''     # a claim of "removes": the NEEDS B's run must lack, by the test that selects A's seeds,
                          # in every kept seed (a decrease alone is "reduced, not removed")
    part: str = ''        # a claim of two parts (the sink, the outliers): which one the row tests
    depth_b: str = ''     # B's depth where it differs from A's (a smaller model against a larger one)
    metric_a: str = ''    # A's measure where it differs from B's (two measures of one run: a = b)


CPU, GPU = 'results/shakespeare_cpu_long', 'results/shakespeare_full'
ZF, ZF2 = 'results/shakespeare_cpu_long_leak_zero_future', 'results/shakespeare_cpu_long_leak_zero_future_dropout0.2'
OBO, OBO2 = 'results/shakespeare_cpu_long_leak_off_by_one', 'results/shakespeare_cpu_long_leak_off_by_one_dropout0.2'
AN, AN2 = 'results/shakespeare_cpu_long_leak_after_norm', 'results/shakespeare_cpu_long_leak_after_norm_dropout0.2'
TN, TN2 = 'results/shakespeare_cpu_long_leak_time_norm', 'results/shakespeare_cpu_long_leak_time_norm_dropout0.2'
NC, NC2 = 'results/shakespeare_cpu_long_noncausal', 'results/shakespeare_cpu_long_noncausal_dropout0.2'
DROP = 'results/shakespeare_cpu_long_dropout0.2'
# Bigram-Backcopy: seeds 1-5, and seeds 6-10 in a sweep of their own (another machine), pooled by seed
BB = ('results/bigram_backcopy_sink', 'results/bigram_backcopy_sink_seeds6-10')
ND = 'results/needle_distractors_retrieval'
NEEDLE = ('results/needle_cpu', 'results/needle_cpu_seeds6-10')  # the needles without distractors, pooled by seed
# Python code (data/pycode): the CPU gate's baseline alone, 6 layers, one thread (its emergence.md); the 12-layer
# variants (configs/pc_*_12L.py) on a GPU get the same three rows at '12L' (PC_GPU)
PC_CPU = 'results/pycode_gate_cpu'
# Folders no run is committed in yet, each filled by the ablate.sh line FILLS gives: the CPU sweeps at dropout 0.2
# again on one GPU, three seeds under one rule; the seed's schedule under zero_future; the seed author's loop;
# Bigram-Backcopy's ten seeds on one GPU; Python code at 12 layers; the gate's learning rates (LR).
GPU_DROP = {k: f'results/shakespeare_cpu_long{k}_dropout0.2_gpu'
            for k in ('', '_noncausal', '_leak_zero_future', '_leak_off_by_one', '_leak_after_norm', '_leak_time_norm')}
ZF_FULL, PIPE = 'results/shakespeare_full_leak_zero_future', 'results/shakespeare_seed_pipeline'
BB_GPU, PC_GPU = 'results/bigram_backcopy_sink_gpu', 'results/pycode_outliers_gpu'
LR = {rate: f'results/shakespeare_cpu_long_lr{rate}' for rate in LR_RATES}
TESTS = [
    # claim 1: Diff against the baseline
    Test(1, CPU, '3L', 'nanogpt', 'diff', 'val', '='),
    Test(1, GPU, '3L', 'nanogpt', 'diff', 'val', '='),
    Test(1, GPU, '6L', 'nanogpt', 'diff', 'val', '='),
    Test(1, GPU, '8L', 'nanogpt', 'diff', 'val', '='),
    Test(1, DROP, '3L', 'nanogpt', 'diff', 'val', '='),
    Test(1, GPU_DROP[''], '3L', 'nanogpt', 'diff', 'val', '='),
    Test(1, PIPE, '3L', 'nanogpt', 'diff', 'val', '='),
    # claim 2: Diff on top of Sym
    Test(2, CPU, '3L', 'sym', 'diff_sym', 'val', '<0'),
    Test(2, GPU, '3L', 'sym', 'diff_sym', 'val', '<0'),
    Test(2, GPU, '6L', 'sym', 'diff_sym', 'val', '<0'),
    Test(2, GPU, '8L', 'sym', 'diff_sym', 'val', '<0'),
    Test(2, DROP, '3L', 'sym', 'diff_sym', 'val', '<0'),
    Test(2, GPU_DROP[''], '3L', 'sym', 'diff_sym', 'val', '<0'),
    Test(2, PIPE, '3L', 'sym', 'diff_sym', 'val', '<0'),
    Test(2, ND, '2L', 'nd_sym', 'nd_diff_sym', 'needle_acc', '>0'),
    # claim 2 under the masking bugs (not causal language models: the seed's table as a leak would give it)
    Test(2, ZF, '3L', 'sym', 'diff_sym', 'val', '<0'),
    Test(2, ZF2, '3L', 'sym', 'diff_sym', 'val', '<0'),
    Test(2, OBO, '3L', 'sym', 'diff_sym', 'val', '<0'),
    Test(2, OBO2, '3L', 'sym', 'diff_sym', 'val', '<0'),
    Test(2, AN, '3L', 'sym', 'diff_sym', 'val', '<0'),
    Test(2, AN2, '3L', 'sym', 'diff_sym', 'val', '<0'),
    Test(2, NC, '3L', 'sym', 'diff_sym', 'val', '<0'),
    Test(2, NC2, '3L', 'sym', 'diff_sym', 'val', '<0'),
    *(Test(2, GPU_DROP[k], '3L', 'sym', 'diff_sym', 'val', '<0')
      for k in ('_leak_zero_future', '_leak_off_by_one', '_leak_after_norm', '_noncausal')),
    Test(2, ZF_FULL, '3L', 'sym', 'diff_sym', 'val', '<0'),
    # claim 3: Norm+Sym against Sym, and whether it is the highest of the seed's five in each seed
    Test(3, CPU, '3L', 'sym', 'norm_sym', 'val', '>0', worst=True),
    Test(3, GPU, '3L', 'sym', 'norm_sym', 'val', '>0', worst=True),
    Test(3, GPU, '6L', 'sym', 'norm_sym', 'val', '>0', worst=True),
    Test(3, GPU, '8L', 'sym', 'norm_sym', 'val', '>0', worst=True),
    Test(3, DROP, '3L', 'sym', 'norm_sym', 'val', '>0', worst=True),
    Test(3, GPU_DROP[''], '3L', 'sym', 'norm_sym', 'val', '>0', worst=True),
    Test(3, PIPE, '3L', 'sym', 'norm_sym', 'val', '>0', worst=True),
    Test(3, ZF, '3L', 'sym', 'norm_sym', 'val', '>0', worst=True),
    Test(3, ZF2, '3L', 'sym', 'norm_sym', 'val', '>0', worst=True),
    Test(3, OBO2, '3L', 'sym', 'norm_sym', 'val', '>0', worst=True),
    *(Test(3, GPU_DROP[k], '3L', 'sym', 'norm_sym', 'val', '>0', worst=True)
      for k in ('_leak_zero_future', '_leak_off_by_one')),
    Test(3, ZF_FULL, '3L', 'sym', 'norm_sym', 'val', '>0', worst=True),
    # claim 4: the distance of lambda_full from 1, Diff+Sym against Diff
    Test(4, CPU, '3L', 'diff', 'diff_sym', 'lambda_dist', '<0'),
    Test(4, GPU, '3L', 'diff', 'diff_sym', 'lambda_dist', '<0'),
    Test(4, GPU, '6L', 'diff', 'diff_sym', 'lambda_dist', '<0'),
    Test(4, GPU, '8L', 'diff', 'diff_sym', 'lambda_dist', '<0'),
    Test(4, PIPE, '3L', 'diff', 'diff_sym', 'lambda_dist', '<0'),
    Test(4, ZF, '3L', 'diff', 'diff_sym', 'lambda_dist', '<0'),
    Test(4, ZF2, '3L', 'diff', 'diff_sym', 'lambda_dist', '<0'),
    Test(4, OBO2, '3L', 'diff', 'diff_sym', 'lambda_dist', '<0'),
    Test(4, AN2, '3L', 'diff', 'diff_sym', 'lambda_dist', '<0'),
    Test(4, TN2, '3L', 'diff', 'diff_sym', 'lambda_dist', '<0'),
    Test(4, NC, '3L', 'diff', 'diff_sym', 'lambda_dist', '<0'),
    *(Test(4, GPU_DROP[k], '3L', 'diff', 'diff_sym', 'lambda_dist', '<0')
      for k in ('_leak_zero_future', '_leak_off_by_one', '_leak_after_norm', '_leak_time_norm')),
    Test(4, ZF_FULL, '3L', 'diff', 'diff_sym', 'lambda_dist', '<0'),
    # claim 5, its sink part: softmax-1 (with OrthoAdam), where the baseline has a sink (Bigram-Backcopy) and where not
    *(Test(5, bb, '2L', 'bb_nanogpt', b, metric, '<0', needs, halves=halves, removes=needs, part='sink')
      for bb in (BB, BB_GPU)
      for b, metric, needs, halves in (('bb_softmax1', 'first_token', 'sink', True),
                                       ('bb_softmax1', 'first_token_L2', 'sink_L2', True),
                                       ('bb_softmax1_orthoadam', 'first_token', 'sink', False))),
    Test(5, CPU, '3L', 'nanogpt', 'softmax1', 'first_token', '<0', 'sink', removes='sink', part='sink'),
    # claim 5, its outlier part: where a baseline can have outliers (Python code), and on Bigram-Backcopy
    Test(5, BB, '2L', 'bb_nanogpt', 'bb_softmax1_orthoadam', 'kurtosis', '<0', 'outliers', removes='outliers',
         part='outliers'),
    Test(5, BB_GPU, '2L', 'bb_nanogpt', 'bb_softmax1_orthoadam', 'kurtosis', '<0', 'outliers', removes='outliers',
         part='outliers'),
    *(Test(5, folder, depth, 'pc_nanogpt', 'pc_softmax1_orthoadam', m, '<0', 'outliers_pc', removes='outliers_pc',
           part='outliers') for folder, depth in ((PC_CPU, '6L'), (PC_GPU, '12L'))
      for m in ('kurtosis_first', 'massive', 'w8a8')),
    # claim 6: the gates and the sink; OrthoAdam alone as a control on the same head
    Test(6, BB, '2L', 'bb_nanogpt', 'bb_gated', 'first_token_L1', '<0', 'sink_L1', halves=True, removes='sink_L1'),
    Test(6, BB, '2L', 'bb_nanogpt', 'bb_gated', 'first_token', '<0', 'sink', removes='sink'),
    Test(6, BB, '2L', 'bb_nanogpt', 'bb_gated_headwise', 'first_token_L1', '<0', 'sink_L1', halves=True,
         removes='sink_L1'),
    Test(6, BB_GPU, '2L', 'bb_nanogpt', 'bb_gated', 'first_token_L1', '<0', 'sink_L1', halves=True,
         removes='sink_L1'),
    Test(6, BB_GPU, '2L', 'bb_nanogpt', 'bb_gated', 'first_token', '<0', 'sink', removes='sink'),
    Test(6, BB_GPU, '2L', 'bb_nanogpt', 'bb_gated_headwise', 'first_token_L1', '<0', 'sink_L1', halves=True,
         removes='sink_L1'),
    Test(6, CPU, '3L', 'nanogpt', 'gated', 'first_token', '<0', 'sink', removes='sink'),
    *(Test(0, bb, '2L', 'bb_nanogpt', 'bb_orthoadam', 'first_token_L1', '', 'sink_L1', halves=True, of=6,
           removes='sink_L1') for bb in (BB, BB_GPU)),
    # claim 7: retrieval with distractors, and the share of attention on the tokens that do not hold the key; then the
    # same on the task without distractors (NEEDLE, POSTHOC). Not the plain sum of the weights off the answer: a Diff
    # row's weights are signed and sum to 1 - λ, so that sum is no share of attention (docs/details.md, needle_eval.py)
    Test(7, ND, '2L', 'nd_nanogpt', 'nd_diff', 'needle_acc', '>0', part='retrieval'),
    Test(7, ND, '2L', 'nd_nanogpt', 'nd_diff', 'unrelated_share', '<0', part='noise'),
    Test(7, NEEDLE, '2L', 'nanogpt', 'diff', 'needle_acc', '>0', part='retrieval'),
    Test(7, NEEDLE, '2L', 'nanogpt', 'diff', 'unrelated_share', '<0', part='noise'),
    # claim 8: Diff at 6 layers against the baseline at 8 (three quarters of its layers, the pair the seed's table
    # holds nearest the claim's model size), at the seed's schedule: a parity claim ("matches the loss")
    Test(8, GPU, '8L', 'nanogpt', 'diff', 'val', '=', depth_b='6L'),
    # claim 9: Diff's outliers, in claim 5's outlier measures on Python code at 12 layers (configs/pc_diff_12L.py)
    *(Test(9, PC_GPU, '12L', 'pc_nanogpt', 'pc_diff', m, '<0', 'outliers_pc') for m in ('kurtosis_first', 'massive',
                                                                                         'w8a8')),
    # claim 10: the gate and the learning rate (LR_RATES' comment): val at the two highest rates, the highest rate
    # trained without diverging (one row over every rate), spikes at each rate
    *(Test(10, LR[rate], '3L', 'nanogpt', 'gated', 'val', '<0', part='learning rate') for rate in LR_RATES[-2:]),
    Test(10, tuple(LR.values()), '3L', 'nanogpt', 'gated', 'stable_lr', '>0', part='learning rate'),
    *(Test(10, LR[rate], '3L', 'nanogpt', 'gated', 'spikes', '<0', needs='spikes', part='spikes') for rate in LR_RATES),
    # claim 11: the effective rank (analyze.py) at T = 256 of Sym's maps against its scores (the softmax raises it),
    # where Sym's scores are lower rank than the baseline's (NEEDS['low_rank']), and of Sym's maps against the
    # baseline's (symmetric attention is lower rank)
    Test(11, CPU, '3L', 'sym', 'sym', 'erank_attn', '>0', 'low_rank', metric_a='erank_qk'),
    Test(11, CPU, '3L', 'nanogpt', 'sym', 'erank_attn', '<0'),
]

# Each row's id, from its place in TESTS (claim.k), fixed by the code, not by the runs
ID = {}
for _t in TESTS:
    ID[_t] = f'{_t.claim}.{sum(u.claim == _t.claim for u in ID) + 1}' if _t.claim else \
        f'control {_t.of}.{sum(u.of == _t.of and not u.claim for u in ID) + 1}'

# Holm's families, named here before the runs are read: a row is corrected over the rows of its family (m is the
# family's size, fixed: a row with no p yet counts as p = 1), so a row added to TESTS moves no verdict until it is
# named in a family, and a row in one family moves nothing in another. Each claim's rows in causal language models
# are one family; its rows under the masking bugs (not causal language models) another; the controls one. A row in no
# family (a twin, the learning rates' highest stable rate, which has no p) is not corrected.
FAMILIES = {
    '1': ('1.1', '1.2', '1.3', '1.4', '1.5', '1.6', '1.7'),
    '2': ('2.1', '2.2', '2.3', '2.4', '2.5', '2.6', '2.7', '2.8'),
    '2, masking bugs': tuple(f'2.{k}' for k in range(9, 22)),
    '3': ('3.1', '3.2', '3.3', '3.4', '3.5', '3.6', '3.7'),
    '3, masking bugs': ('3.8', '3.9', '3.10', '3.11', '3.12', '3.13'),
    '4': ('4.1', '4.2', '4.3', '4.4', '4.5'),
    '4, masking bugs': tuple(f'4.{k}' for k in range(6, 17)),
    '5, the sink': ('5.1', '5.2', '5.3', '5.4', '5.5', '5.6', '5.7'),
    '5, the outliers': ('5.8', '5.9', '5.10', '5.11', '5.12', '5.13', '5.14', '5.15'),
    '6': ('6.1', '6.2', '6.3', '6.4', '6.5', '6.6', '6.7'),
    'controls': ('control 6.1', 'control 6.2'),
    '7': ('7.1', '7.2', '7.3', '7.4'),
    '8': ('8.1',),
    '9': ('9.1', '9.2', '9.3'),
    '10': ('10.1', '10.2', '10.4', '10.5', '10.6', '10.7'),
    '11': ('11.1', '11.2'),
}
FAMILY_OF = {i: name for name, ids in FAMILIES.items() for i in ids}
_unknown = sorted(set(FAMILY_OF) - set(ID.values()))
if _unknown or len(FAMILY_OF) != sum(map(len, FAMILIES.values())):
    raise SystemExit(f"claims.py: FAMILIES names rows TESTS does not have, or one row twice: {_unknown}: name each "
                     f"row of ID once")

# Choices made after some runs had been seen (from git log), said on the page beside the rows they select
POSTHOC = [
    ("the sink's threshold and the layers read (`SINK`, `first_token_L1`, `first_token_L2`)", "8751064, 2026-11-27",
     "Bigram-Backcopy's seeds 1-5 (2d7f180, 2026-11-24)"),
    ("the TOST margin (`MARGIN`)", "bc86724, 2026-11-28", "claim 1's runs in `shakespeare_cpu_long` (11ff383) and "
     "`shakespeare_full` (c68a3df), 2026-11-23"),
    ("the learning-rate rules (`LR_RATES`, `SPIKE_RATIO`, `SPIKE_WINDOW`)", "647b1d6, 2026-12-02",
     "its runs had started (00:46 UTC), none of their losses read"),
    ("the spike rows' precondition (`NEEDS['spikes']`)", "2026-12-02", "the runs at 3e-2, where none spiked"),
    ("the highest stable rate's precondition (`PRECONDITION_LR`)", "2026-12-02", "the runs at 3e-2, where none "
     "diverged"),
    ('"removed" only for a supported decrease, naming a control removed too (`controls`)', "2026-12-02",
     "Bigram-Backcopy's seeds 1-7, where row 5.2 was called removed within noise"),
    ("claim 7's rows without distractors (7.3, 7.4, in its family) and its parts", "2026-12-02",
     "`needle_cpu`'s runs"),
    ("claim 11's precondition (`NEEDS['low_rank']`)", "2026-12-02", "its runs"),
]

# The ablate.sh line that fills a folder with no committed run (or a committed folder short of seeds), run where
# its last field says: (profile, env, extra flags, seeds, 'GPU' / 'CPU'); report.ablate_line renders it with the row's
# variants and depth. The learning rates' one line makes all four folders (the sweeps' LRS flag).
ON_GPU = ('--device=cuda', '--cuda_graph=True', '--compile=False')
EAGER = ('--device=cuda', '--cuda_graph=False', '--compile=False')  # OrthoAdam's step is not captured
FILLS = {
    **{GPU_DROP[k]: ('cpu_long', [e for e in [('LEAK=' + k[6:]) if k.startswith('_leak') else
                                             'CAUSAL=0' if k else ''] if e], ('--dropout=0.2',) + ON_GPU,
                     (1, 2, 3), 'GPU') for k in GPU_DROP},
    GPU: ('full', [], ON_GPU, (3, 4, 5), 'GPU'),  # seeds 1-2 are the H100's: three more of one GPU
    ZF_FULL: ('full', ['LEAK=zero_future'], ON_GPU, (1, 2, 3), 'GPU'),
    PIPE: ('seed_pipeline', [], ON_GPU, (1, 2, 3), 'GPU'),
    BB_GPU: ('sink', [], EAGER, tuple(range(1, 11)), 'GPU'),
    PC_GPU: ('gpt2', [], EAGER, (1, 2, 3), 'GPU'),
    **{f: 'LRS="' + ' '.join(LR_RATES) + '" PROFILE=cpu_long VARIANTS="nanogpt gated" SEEDS="1 2 3" ./ablate.sh'
       for f in LR.values()},
}


# ----------------------------------------------------------------------------- the verdict rule

MIN_SEEDS = report.MIN_SEEDS  # report.py's tables call a difference by the same count
ALPHA = 0.05
RULE = f"""\
`verdict()`, in this order:

1. **not measured**: the folder or cell is not committed, its runs are excluded (`provenance.excluded`: no commit,
   uncommitted changes, another corpus or other sweep settings than the row's other runs), or they predate a commit
   that changed their numerics (`provenance.NUMERICS`).
2. **not shown (precondition absent)**: the seeds whose baseline lacks the phenomenon (`NEEDS`) are dropped, and none
   is left; so is the row's unselected twin.
3. **too few seeds**: under {MIN_SEEDS} paired seeds, or (*mixed*) in every homogeneous group; **groups disagree**:
   the groups' differences differ in sign.
4. **not called**: an unselected twin (a row that reads one layer or drops seeds is followed by the same over all
   layers and seeds), or a row in no Holm family.
5. The paired t test of B − A, Holm-corrected over the row's family (`FAMILIES`, fixed before the runs; a row
   without a p counts as 1), called where the adjusted p < {ALPHA}: **supported**, **contradicted**, else **within
   noise**; a control: **B lower** / **B higher**. "Removes": a supported decrease is **removed** where B lacks the
   phenomenon (`NEEDS`' test) in every kept seed, else **reduced, not removed**; **not specific to B** where a
   control on the same runs and head is removed too.
6. A parity claim: TOST within `MARGIN` ({'; '.join(f'{k}: ±{v}' for k, v in MARGIN.items())}, a unit of the seed
   table's last digit): **equivalent within ±m**, else **worse** / **better**, else **inconclusive**.

*mixed*: runs are alike only in processor, number format, code era, execution path and CPU threads; a run with an
unknown is alike to no other. *inferred*: from the pages' text (`evidence/backfill_provenance.py`). README's
findings: a claim's weakest part; a part's row by the claim's own dataset (note 001's: Shakespeare), then a
decision on {MIN_SEEDS} seeds of one group, the seed's setting (`profiles.py`'s `full`), more seeds, no selection, the
order of `TESTS`, and among its decided rows the weakest."""


def holm(ps):
    """Holm's step-down adjustment of p values, returned in their order: sorted ascending, the i-th (1-based) of m
    becomes max over j <= i of min(1, (m - j + 1) p_(j)) (Holm 1979). Rejecting where it is below alpha keeps the
    family-wise error at alpha whatever the tests' dependence."""
    order = sorted(range(len(ps)), key=lambda i: ps[i])
    out, running = [0.0] * len(ps), 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (len(ps) - rank) * ps[i]))
        out[i] = running
    return out


def tost(st, m):
    """The p of two one-sided tests of |B - A| < m on a paired t (report.paired_t: diff d, sd, n): se = sd / sqrt(n),
    p = max(P(T > (d + m) / se), P(T < (d - m) / se)) with n - 1 degrees of freedom (Schuirmann 1987). Identical
    differences (se = 0): 0 inside the margin, 1 outside."""
    d, se, df = st['diff'], st['sd'] / math.sqrt(st['n']), st['n'] - 1
    if se == 0:
        return 0.0 if abs(d) < m else 1.0
    return max(float(stats.t.sf((d + m) / se, df)), float(stats.t.cdf((d - m) / se, df)))


UNDECIDED = ('not measured', 'not shown', 'not called', 'too few seeds', 'groups disagree')


def biggest_group(r):
    """The most seeds in one homogeneous group of the row (paired_groups), 0 without one."""
    return max([len(g['seeds']) for g in r['groups'] if g['homogeneous']] or [0])


def undecided(r):
    """The rule's steps 1-4 (no test): the verdict of a row that does not reach the interval, else None."""
    if r.get('fixed'):
        return r['fixed']
    if r['missing']:
        why = sorted({w for _, w in r.get('excluded', [])})
        return 'not measured' + (f" (runs excluded: {'; '.join(why)})" if why else '')
    if r['superseded']:
        return f"not measured under the current code (runs before {', '.join(r['superseded'])})"
    if r.get('twin_of') is not None:
        return 'not shown (precondition absent)' if not r['twin_of']['seeds'] else 'not called (the unselected twin)'
    if not r['seeds']:
        return 'not shown (precondition absent)'
    if len(r['seeds']) < MIN_SEEDS:
        return 'too few seeds'
    if len(r['groups']) > 1 and biggest_group(r) < MIN_SEEDS:
        return 'too few seeds (mixed)'
    if disagree(r):
        return 'groups disagree'
    if r.get('id') not in FAMILY_OF:
        return 'not called (in no Holm family)'
    return None


def decided(r):
    """Whether the row reaches the interval (step 5 of the rule): its p enters its family's correction."""
    return undecided(r) is None and r.get('stat', {}).get('test') == 'paired'


def disagree(r):
    """Whether a row's homogeneous groups differ in the sign of B − A (report.groups_disagree): no pooled verdict."""
    return report.groups_disagree(r['groups'])


def correct(results):
    """Holm over each of FAMILIES, in place: r['adj'] = {'p': adjusted difference p, 'eq': adjusted equivalence p
    (parity rows), 'raw': the uncorrected p of what the verdict reads, 'm': the family's size, 'family': its name}.
    The family's size is fixed by its list: a row of it that does not reach the test (or is not in results) counts
    with p = 1, which can only raise the others' adjusted p."""
    by_id = {r.get('id'): r for r in results}
    for name, ids in FAMILIES.items():
        rows = [by_id.get(i) for i in ids]
        live = [r is not None and decided(r) for r in rows]
        ps = holm([r['stat']['p'] if ok else 1.0 for r, ok in zip(rows, live)])
        for r, ok, p in zip(rows, live, ps):
            if ok:
                r['adj'] = dict(p=p, m=len(ids), raw=r['stat']['p'], family=name)
        parity = [(r, ok) for r, ok in zip(rows, live) if r is not None and r['test'].predicts == '=']
        eqs = [tost(r['stat'], MARGIN[r['test'].metric]) if ok else 1.0 for r, ok in parity]
        for (r, ok), p, raw in zip(parity, holm(eqs), eqs):
            if ok:
                r['adj'].update(eq=p, raw_eq=raw)


def adjusted(r):
    """r['adj'] of correct(); a row measured alone is corrected over its family as if the others had no p."""
    if 'adj' not in r:
        alone = dict(r)
        correct([alone])
        return alone['adj']
    return r['adj']


def verdict(r):
    """The rule above, on one measured row (measure(), then correct() over all rows)."""
    early = undecided(r)
    if early:
        return early
    adj, d, t = adjusted(r), r['stat']['diff'], r['test']
    if t.predicts == '=':
        if adj['eq'] < ALPHA:
            return f"equivalent within ±{MARGIN[t.metric]}"
        return ('worse' if d > 0 else 'better') if adj['p'] < ALPHA else 'inconclusive'
    if adj['p'] >= ALPHA:
        return 'within noise'
    if t.predicts == '':
        return 'removed' if t.removes and d < 0 and r.get('removed') else f'B {"lower" if d < 0 else "higher"}'
    if (d < 0) != (t.predicts == '<0'):
        return 'contradicted'
    if not t.removes:
        return 'supported'
    if not r.get('removed'):
        return 'reduced, not removed'
    also = [c['id'] for c in r.get('controls', []) if verdict(c) == 'removed']
    return f"removed, not specific to B ({', '.join(also)} removes it too)" if also else 'removed'


def method(r):
    """What the verdict used, where it used the interval: Holm's family and its size, and the uncorrected call
    where it differs."""
    adj, v = r.get('adj'), verdict(r)
    if not adj or any(v.startswith(u) for u in UNDECIDED):
        return ''
    raw = dict(r, adj=dict(adj, p=adj['raw'], eq=adj.get('raw_eq')))
    note = '' if verdict(raw) == v else f'; uncorrected: {verdict(raw)}'
    tost_m = f"TOST within ±{MARGIN[r['test'].metric]}, " if r['test'].predicts == '=' else ''
    return f"{tost_m}Holm, m = {adj['m']}" + note


# ----------------------------------------------------------------------------- measuring

_RUNS = {}


def runs_of(folder):
    """report.load_runs of a committed folder, once; None where it is not there. A tuple of folders: the runs of
    those committed, pooled by seed (a sweep continued in a folder of its own); a seed of a cell in two of them is an
    error, since it would count one seed twice."""
    if isinstance(folder, tuple):
        pooled = {}
        for part in filter(None, map(runs_of, folder)):
            for key, cell in part.items():
                into = pooled.setdefault(key, {k: [] for k in cell})
                twice = {s['_seed'] for s in into['ok']} & {s['_seed'] for s in cell['ok']}
                if twice:
                    raise SystemExit(f"claims.py: seed {min(twice)} of {key[0]} {key[1]} is in two of {folder}: "
                                     f"pooled folders must hold different seeds")
                for k in into:
                    into[k] += cell[k]
        return pooled or None
    path = os.path.join(HERE, folder)
    if folder not in _RUNS:
        _RUNS[folder] = load_runs(path) if os.path.isdir(path) else None
    return _RUNS[folder]


def folders(t):
    """The folders a row reads."""
    return t.folder if isinstance(t.folder, tuple) else (t.folder,)


def read(s, file, fn):
    f = s if file == 'summary.json' else run_file(s, file)
    return None if f is None else fn(f)


def has(t, runs, s):
    """Whether A's run s has the row's precondition (NEEDS), against the same seed's run of AGAINST's variant where
    the precondition compares the two (a seed whose run there is missing or excluded has it not)."""
    _, file, test = NEEDS[t.needs]
    if t.needs not in AGAINST:
        return bool(read(s, file, test))
    cell = finished(runs.get((AGAINST[t.needs], t.depth), dict(ok=[])))
    ref = [x for x in cell if x['_seed'] == s['_seed'] and not report.excluded(x, cell + [s])]  # as cells_of keeps
    files = [x if file == 'summary.json' else run_file(x, file) for x in [s] + ref[:1]]
    return len(files) == 2 and None not in files and bool(test(*files))


def worst_count(t, runs, kept):
    """'highest of the seed's five in k of n' over the kept seeds whose five variants all finished, with every run it
    reads checked as the row's are: superseded numerics are not counted; a seed whose five runs are not one
    homogeneous group is not counted (which variant is highest would compare computations, not variants), and seeds
    of different groups are counted by group."""
    five = SEED_VARIANTS
    per = {x: {v: s for v in five for s in finished(runs.get((v, t.depth), dict(ok=[]))) if s['_seed'] == x}
           for x in kept}
    full = {x: p for x, p in per.items() if len(p) == len(five)}
    if not full:
        return None
    old = sorted({c for p in full.values() for s in p.values() for c in provenance(s)['superseded']})
    if old:
        return f"highest of the seed's five: not counted (runs before {', '.join(old)})"
    by, mixed = {}, {}  # {computed_on: [seeds]} of seeds whose five are one group; {seed: its groups} of the rest
    for x, p in full.items():
        groups = report.homogeneous(list(p.values()))
        if len(groups) == 1:
            by.setdefault(next(iter(groups)), []).append(x)
        else:
            mixed[x] = groups
    skipped = f"{seed_list(sorted(mixed))} not counted (five runs *mixed*)" if mixed else ''
    if not by:
        return f"highest of the seed's five: {skipped}"
    top = {x: max(p, key=lambda v: p[v]['final_val_loss']) == t.b for x, p in full.items()}
    if len(by) == 1:
        xs = next(iter(by.values()))
        counted = f"highest of the seed's five in {sum(top[x] for x in xs)} of {len(xs)}"
    else:
        counted = "highest of the seed's five (*mixed*): " + '; '.join(
            f"{sum(top[x] for x in xs)} of {len(xs)} on {report.group_label([s for x in xs for s in full[x].values()])}"
            for xs in by.values())
    return counted + (f'; {skipped}' if skipped else '')


def cells_of(t, runs):
    """A's and B's finished runs, and [(run, why)] of those provenance.excluded keeps out of the row."""
    cells = [finished(runs.get((v, d), dict(ok=[]))) if runs else []
             for v, d in ((t.a, t.depth), (t.b, t.depth_b or t.depth))]
    among = cells[0] + [s for s in cells[1] if s not in cells[0]]
    out = [(s['_name'], why) for s in among if (why := report.excluded(s, among))]
    gone = {name for name, _ in out}
    return [[s for s in cell if s['_name'] not in gone] for cell in cells], out


def measure(t):
    """One row of TESTS against its runs: {'test', 'missing', 'a', 'b' ({seed: value}), 'dropped' (seeds without
    the precondition), 'seeds' (kept and shared), 'stat' (report.compare), 'groups' (paired_groups), 'superseded',
    'on' (what the runs were computed on), 'counts' (per-seed statements), 'excluded' ([(run, why)]), 'command'
    (report.command of both arms)}."""
    if t.metric == 'stable_lr':
        return measure_stable(t)
    r = dict(test=t, missing=True, superseded=[], seeds=[], dropped=[], counts=[], on=[], groups=[], command=None)
    runs = runs_of(t.folder)
    cells, r['excluded'] = cells_of(t, runs)
    vals = [{s['_seed']: x for s in cell if (x := read(s, METRICS[m][1], METRICS[m][2])) is not None}
            for cell, m in zip(cells, (t.metric_a or t.metric, t.metric))]
    if not vals[0]:
        return r
    if not vals[1]:
        return baseline_only(t, r, vals[0], cells[0], runs)
    by_seed = [{s['_seed']: s for s in cell} for cell in cells]
    shared = sorted(set(vals[0]) & set(vals[1]))
    if t.needs in AGAINST:  # the other variant's runs the precondition reads are the row's too, kept out as its own
        cell = finished(runs.get((AGAINST[t.needs], t.depth), dict(ok=[])))
        out = [(x['_name'], why) for x in cell if (why := report.excluded(x, cell + cells[0]))]
        r['excluded'] += out
        shared = [x for x in shared if x not in {s['_seed'] for s in cell if s['_name'] in dict(out)}]
    if t.needs:
        r['dropped'] = [x for x in shared if not has(t, runs, by_seed[0][x])]
    kept = [x for x in shared if x not in r['dropped']]
    used = list({id(s): s for s in [by_seed[i][x] for i in (0, 1) for x in kept]
                 or [s for cell in cells for s in cell]}.values())
    r.update(missing=False, a=vals[0], b=vals[1], seeds=kept,
             superseded=sorted({c for s in used for c in provenance(s)['superseded']}),
             on=[report.group_label(g) for g in report.homogeneous(used).values()],
             command=report.command(used, os.path.basename(folders(t)[0])), used=used)
    a, b = ({x: v[x] for x in kept} for v in vals)
    if len(kept) >= 2:
        r['stat'] = compare(a, b)
    elif kept:
        r['stat'] = dict(test='single', diff=b[kept[0]] - a[kept[0]])
    if kept:
        r['groups'] = paired_groups(*by_seed, a, b)
    r['counts'] = per_seed(t, r, runs, a, b, by_seed, kept)
    return r


def per_seed(t, r, runs, a, b, by_seed, kept):
    """The row's per-seed statements over the kept seeds: the predicted sign, B <= A/2, B without the phenomenon
    (a claim of "removes": r['removed'] where in every seed), the highest of the seed's five."""
    counts = []
    if len(kept) < MIN_SEEDS:  # no verdict reads them: a count of one or two says nothing the difference does not
        return counts
    if kept and t.predicts:
        m = MARGIN.get(t.metric)
        sign = {'<0': lambda d: d < 0, '>0': lambda d: d > 0, '=': lambda d: abs(d) < m}[t.predicts]
        what = f'\\|B − A\\| < {m}' if t.predicts == '=' else f"B {t.predicts[0]} A"
        counts.append(f"{what}: {sum(sign(b[x] - a[x]) for x in kept)}/{len(kept)}")
    if kept and t.halves:
        counts.append(f"B ≤ A/2: {sum(b[x] <= a[x] / 2 for x in kept)}/{len(kept)}")
    if kept and t.removes:
        what, file, test = NEEDS[t.removes]
        gone = sum(not read(by_seed[1][x], file, test) for x in kept)
        r['removed'] = gone == len(kept)
        counts.append(f"B without {what.split(' (')[0]}: {gone}/{len(kept)}")
    if t.worst:
        counts += [c for c in [worst_count(t, runs, kept)] if c]
    return counts


def measure_stable(t):
    """The learning rates' row (claim 10): per variant, the highest of LR_RATES at which every seed trained without
    diverging (DIVERGED: FAILED, or a final val above its iteration-0 val). Its phenomenon (PRECONDITION_LR) is a
    baseline that diverges at the highest rate: where its runs there all train, the row is not shown, whatever the
    other rates give. Else a verdict where every rate's folder holds at least MIN_SEEDS seeds of both variants:
    supported where B's rate is higher, contradicted where lower, 'no difference' where equal. Not a t test: in no
    Holm family."""
    r = dict(test=t, missing=True, superseded=[], seeds=[], dropped=[], counts=[], on=[], groups=[], command=None,
             excluded=[])
    top, short, used, gone, absent = {}, [], [], {t.a: [], t.b: []}, []
    for rate, folder in zip(LR_RATES, folders(t)):
        runs = runs_of(folder)
        if runs is None:
            absent.append(rate)
        for v in (t.a, t.b):
            cell = (runs or {}).get((v, t.depth), dict(ok=[], failed=[]))
            ok = finished(cell)
            used += ok
            if len(ok) + len(cell['failed']) < MIN_SEEDS:
                short.append(f'{label(v)} at {rate}')
            if not cell['failed'] and ok and not any(diverged(s) for s in ok):
                top[v] = rate
            gone[v].append(f"{len(cell['failed']) + sum(map(diverged, ok))}/{len(ok) + len(cell['failed'])}"
                           if runs else '—')
    # the baseline's runs all trained at the highest rate, and at every rate committed
    trains = top.get(t.a) == LR_RATES[-1] and all(x == '—' or x.startswith('0/') for x in gone[t.a])
    if absent and not trains:
        return dict(r, fixed='not measured')
    r['counts'] = ['diverged, by rate (' + ', '.join(LR_RATES) + '): ' + '; '.join(
        f"{label(v)} {' '.join(x)}" for v, x in gone.items())]
    r.update(missing=False, used=used, on=[report.group_label(g) for g in report.homogeneous(used).values()],
             command=FILLS[folders(t)[0]], stable={v: top.get(v, 'none') for v in (t.a, t.b)})
    rank = [LR_RATES.index(top[v]) if v in top else -1 for v in (t.a, t.b)]
    r['fixed'] = PRECONDITION_LR if trains else 'too few seeds' if short else (
        'supported' if rank[1] > rank[0] else 'contradicted' if rank[1] < rank[0] else 'no difference')
    return r


def baseline_only(t, r, a, cell, runs):
    """A row whose B runs are not there yet (a baseline trained first, as a gate): A's values are shown. Where the
    row has a precondition and none of A's seeds has it, the row is not shown (precondition absent), as it would be
    whatever B gave; otherwise it stays not measured."""
    r['a'] = a
    if t.needs:
        by = {s['_seed']: s for s in cell}
        dropped = [x for x in sorted(a) if not has(t, runs, by[x])]
        if len(dropped) == len(a):
            used = [by[x] for x in dropped]
            r.update(missing=False, b={}, dropped=dropped, used=used,
                     superseded=sorted({c for s in used for c in provenance(s)['superseded']}),
                     on=[report.group_label(g) for g in report.homogeneous(used).values()],
                     command=report.command(used, os.path.basename(folders(t)[0])))
    return r


def twin(t, r):
    """The unselected twin of a row that selects (a layer, or seeds dropped by a precondition): the same comparison
    over all layers and every seed; None where the row selects nothing."""
    if t.metric not in TWIN and not r['dropped']:
        return None
    return replace(t, metric=TWIN.get(t.metric, t.metric), needs='', removes='')


def measure_all():
    """Every row of TESTS, each selecting row followed by its twin, with Holm's correction over each claim's family.
    A twin is left out where another row already compares the same runs in the same measure over the same seeds (a
    row of TESTS, or another row's twin): the selecting row then names that row as its twin ('twin_is'). A row not
    measured has no twin (it would be as unmeasured). Each row gets its 'id' (ID: 5.1, 5.2, ...; a twin: '5.2,
    unselected')."""
    def same(r):
        t = r['test']
        return (t.folder, t.depth, t.a, t.b, t.metric, tuple(r['seeds']), r['missing'])
    rows = [measure(t) for t in TESTS]
    seen, results = {same(r): r for r in rows}, []
    for r in rows:
        results.append(r)
        tw = None if r['missing'] else twin(r['test'], r)
        rt = None if tw is None else measure(tw)
        if rt is None or rt['missing']:
            continue
        if same(rt) in seen:
            r['twin_is'] = seen[same(rt)]
        else:
            rt.update(twin_of=r, phenomenon=bool(r['seeds']))
            seen[same(rt)] = rt
            results.append(rt)
    for r in results:
        r['id'] = ID[r['test']] if r['test'] in ID else f"{r['twin_of']['id']}, unselected"
    for r in results:  # a claim of "removes" beside its controls on the same runs, head and threshold
        r['controls'] = [c for c in results if r['test'].removes and r['test'].claim and controls(r['test'], c['test'])]
    correct(results)
    return results


def controls(t, c):
    """Whether row c is a control of claim row t: a row of claim 0 for t's claim, on the same folder, depth,
    baseline and measure, with the same threshold of "removes"."""
    return not c.claim and c.of == t.claim and c.removes == t.removes and \
        (c.folder, c.depth, c.a, c.metric) == (t.folder, t.depth, t.a, t.metric)


# ----------------------------------------------------------------------------- rendering

def setting(t):
    """What the row's runs are, from their configs: the folder, depth (A's, then B's where it differs), steps and
    dropout."""
    runs = runs_of(t.folder)
    name = ' + '.join(f'`{os.path.basename(f)}`' for f in folders(t)) if t.metric != 'stable_lr' else \
        '`shakespeare_cpu_long_lr*`'
    name += f' {t.depth}' + (
        f' (B: {t.depth_b})' if t.depth_b else '')
    ok = [s for v, d in ((t.a, t.depth), (t.b, t.depth_b or t.depth))
          for s in finished((runs or {}).get((v, d), dict(ok=[])))]
    if not ok:
        return name
    return (f"{name}, {report.joined(report.values(ok, 'max_iters'))} steps, dropout "
            f"{report.joined(report.values(ok, 'dropout'))}")


def gap(r, fmt):
    """'B − A [lo, hi]' (paired), the one difference, or '—'."""
    st = r.get('stat')
    if r.get('stable'):
        return '; '.join(f'{label(v)}: {x}' for v, x in r['stable'].items())
    if st is None:
        return '—'
    f = fmt.replace('{:', '{:+')
    if st['test'] == 'single':
        return f.format(st['diff']) + ' (one seed)'
    if st['test'] != 'paired':
        return f.format(st['diff']) + ' (unpaired)'
    return (f"{f.format(st['diff'])} [{f.format(st['lo'])}, {f.format(st['hi'])}]")


def seed_ranges(xs, shortest):
    """xs sorted, a run of at least `shortest` consecutive seeds as a range: '1-5', '1-4, 6, 7', '2, 6'."""
    parts = []
    for x in sorted(xs):
        if parts and x == parts[-1][-1] + 1:
            parts[-1].append(x)
        else:
            parts.append([x])
    return ', '.join(f'{p[0]}-{p[-1]}' if len(p) >= shortest else ', '.join(map(str, p)) for p in parts)


def seed_list(xs):
    """'seed 2', 'seeds 2, 6', 'seeds 1-5' (a run of four or more consecutive seeds as a range)."""
    return ('seed ' if len(xs) == 1 else 'seeds ') + seed_ranges(xs, 4)


def letter(label, names):
    """A *mixed* group's letter in a table's legend `names` ((a), (b), ...), appended where new. A pair of sides
    alike in words ('A x; B x': runs each alike to no other) is x's letter; 'each run alike to no other' is left to
    the rule, which says it of every run with an unknown."""
    label = label.replace(', each run alike to no other', '')
    label = (re.fullmatch(r'A (.+); B \1', label) or [label, label])[1]
    if label not in names:
        names.append(label)
    return f'({chr(ord("a") + names.index(label))})'


def legend(names):
    return 'Computed on: ' + '; '.join(f'{letter(n, names)} {n}' for n in names) + '.'


def grouped_gap(r, fmt, names):
    """gap(), then where the row is mixed each homogeneous group's own, lettered as in names (filled here); groups
    of one label (runs alike to no other) together."""
    text = gap(r, fmt)
    if len(r.get('groups', [])) > 1 and disagree(r):  # no pooled value stands for groups of opposite signs
        text = 'no pooled value (groups disagree)'
    if len(r.get('groups', [])) > 1:
        by = {}
        for g in r['groups']:
            by.setdefault(g['label'], []).append(g)
        text += ''.join(f"; {letter(k, names)} " + ', '.join(gap(g, fmt).replace(' (one seed)', '') for g in gs)
                        + (' (one seed each)' if len(gs) > 1 and all(len(g['seeds']) == 1 for g in gs) else
                           ' (one seed)' if len(gs) == 1 and len(gs[0]['seeds']) == 1 else '')
                        for k, gs in by.items())
    return text


def computed_cell(r, names):
    """What the row's runs were computed on: one group, or *mixed* with each group's letter and seeds."""
    if len(r['groups']) > 1:
        by = {}
        for g in r['groups']:
            by.setdefault(g['label'], []).extend(g['seeds'])
        return '*mixed*: ' + '; '.join(f"{letter(k, names)} {seed_list(sorted(x))}" for k, x in by.items())
    on = list(dict.fromkeys(letter(o, names) for o in r['on']))
    return on[0] if len(r['on']) == 1 else '*mixed*: ' + '; '.join(on)


def p_cell(r):
    """The uncorrected p and Holm's, of the difference and, for a parity claim, of the equivalence (TOST)."""
    adj = r.get('adj')
    if not adj:
        return report.fmt_p(r['stat']['p']) if r.get('stat', {}).get('test') == 'paired' else '—'
    text = f"{report.fmt_p(adj['raw'])}; Holm {report.fmt_p(adj['p'])}"
    if 'eq' in adj:
        text = f"TOST {report.fmt_p(adj['raw_eq'])}; Holm {report.fmt_p(adj['eq'])}. B ≠ A: " + text
    return text


def verdict_cell(r):
    """The verdict and what it used (method); the runs a row waits on are named by the list of runs to come."""
    how = method(r)
    return f"**{verdict(r)}**" + (f' ({how})' if how else '')


def label(v):
    return NAMES.get(v, v)


def cell_text(vals, seeds, fmt):
    xs = [vals[x] for x in seeds] or list(vals.values())
    return report.mean_std(xs, fmt) if xs else '—'


def seeds_cell(r):
    t = r['test']
    out = f"{len(r['seeds'])}" + (f"; dropped: {seed_list(r['dropped'])}, without "
                                  f"{NEEDS[t.needs][0].split(' (')[0]}" if r['dropped'] else '')
    left = {}
    for name, why in r.get('excluded', []):
        left.setdefault(why.split(' (')[0], []).append(name)
    return out + ''.join(f"; excluded ({why}): {len(ns)} run{'s' * (len(ns) > 1)}" for why, ns in left.items())


def waits(r):
    """Whether a row waits on runs FILLS makes: not measured, or too few seeds, in a folder FILLS names."""
    return folders(r['test'])[0] in FILLS and verdict(r).startswith(('not measured', 'too few seeds'))


def plan(results):
    """The runs to come: {folder: (key, the ablate.sh line, [row ids])}, a line per folder of FILLS with its rows'
    variants and depths (report.ablate_line), keyed 'GPU 1', 'CPU 1', ... in the order of the rows."""
    rows = {}
    for r in results:
        if waits(r):
            rows.setdefault(folders(r['test'])[0], []).append(r)
    out = {}
    for folder, rs in rows.items():
        fill = FILLS[folder]
        if isinstance(fill, str):
            where, cmd = 'CPU', fill
        else:
            profile, env, extra, seeds, where = fill
            prefix = PROFILES[profile].prefix
            variants = list(dict.fromkeys(v[len(prefix):] for r in rs for v in (r['test'].a, r['test'].b)))
            depths = sorted({d for r in rs for d in (r['test'].depth, r['test'].depth_b or r['test'].depth)},
                            key=report.depth_key)
            analyze = any(METRICS[r['test'].metric][1] != 'summary.json' for r in rs)
            cmd = report.ablate_line(profile, env, variants, depths, seeds, extra, os.path.basename(folder), analyze)
        if any(c == cmd for _, c, _ in out.values()):  # one line fills several folders (the learning rates)
            key = next(k for k, c, _ in out.values() if c == cmd)
        else:
            key = f"{where} {sum(k.startswith(where) for k, _, _ in out.values()) + 1}"
        out[folder] = (key, cmd, [r['id'] for r in rs])
    return out


def fill_command(r, fills=None):
    """The ablate.sh line that fills a row waiting on runs, None where none does."""
    return (fills or plan([r])).get(folders(r['test'])[0], (None, None))[1] if waits(r) else None


def fill_key(r, fills):
    """The row's entry in the runs to come (plan), '' where none."""
    return fills[folders(r['test'])[0]][0] if fills and waits(r) else ''


def row_cells(r, names):
    """The columns every row shares: A, B, seeds, B − A, p, per seed, computed on, verdict."""
    fmt = METRICS[r['test'].metric][3]
    if r['missing']:  # A's values where its runs are there (B's are not)
        return [cell_text(r.get('a') or {}, [], fmt), '—', seeds_cell(r) if r.get('excluded') else '0', '—', '—',
                '', '', verdict_cell(r)]
    if r.get('stable'):
        return ['', '', '', gap(r, fmt), '—', '; '.join(r['counts']), computed_cell(r, names), verdict_cell(r)]
    return [cell_text(r['a'], r['seeds'], fmt), cell_text(r['b'], r['seeds'], fmt), seeds_cell(r),
            grouped_gap(r, fmt, names), p_cell(r), '; '.join(r['counts']), computed_cell(r, names),
            verdict_cell(r)]


def number(r):
    """The row's id (ID; a twin: 'k, unselected'), and the row that is its twin already where one is."""
    return r['id'] + (f" (its unselected twin: {r['twin_is']['id']})" if r.get('twin_is') else '')


def claims_table(results, names, fills):
    """One table of the measured rows (their ids name their claims); then, in a line, the rows not measured yet and
    why (those the runs to come fill are named in that list)."""
    out = ['| # | runs | measure | A → B | n | B − A [95%] | p | per seed | on | verdict |', '|' + '---|' * 10]
    for r in (r for r in results if not r['missing']):
        t = r['test']
        runs = ' + '.join(f'`{os.path.basename(f)}`' for f in folders(t)) if t.metric != 'stable_lr' else \
            '`shakespeare_cpu_long_lr*`'
        depth = t.depth + (f' (B: {t.depth_b})' if t.depth_b else '')
        measure_name = f'`{t.metric}`' + (f' (A: `{t.metric_a}`)' if t.metric_a else '')
        out.append(f"| {number(r)} | {runs} {depth} | {measure_name} | `{t.a}` → `{t.b}` | "
                   + ' | '.join(row_cells(r, names)[2:]) + ' |')
    by, missing = {}, [r for r in results if r['missing']]
    for r in (r for r in missing if not fill_key(r, fills)):
        by.setdefault(verdict(r)[len('not measured ('):-1] if '(' in verdict(r) else 'not committed', []).append(r['id'])
    why = [f"{', '.join(ids)} ({w})" for w, ids in by.items()]
    why += ['the rows of the runs to come'] if any(fill_key(r, fills) for r in missing) else []
    return '\n'.join(out + ['', 'Not measured: ' + '; '.join(why) + '.'] if why else out)


def posthoc():
    """POSTHOC in a line; the choices fixed on a date with no commit named, under that date once."""
    parts, dated = [], {}
    for what, when, seen in POSTHOC:
        if ',' in when:  # a commit and its date
            parts.append(f'{what}, fixed in {when}, after {seen}')
        else:
            dated.setdefault(when, []).append(f'{what}, after {seen}')
    parts += [f"fixed on {when}: {'; '.join(xs)}" for when, xs in dated.items()]
    return 'Choices made after some runs had been seen: ' + '; '.join(parts) + '.'


def claims_md(results):
    claims = ['| # | claim (seed note) | the seed\'s number |', '|---|---|---|']
    claims += [f'| {n} | {c} | {s} |' for n, (c, s, _) in CLAIMS.items()] + [
        '', 'What was published elsewhere on each: `docs/anchors.md`.']
    names, fills = [], plan(results)
    table = claims_table(results, names, fills)
    plot = lr_plot()
    return '\n'.join([
        "# The seeds' claims, tested",
        '',
        "Rendered by `python evidence/claims.py` from its `TESTS` and the committed runs. Each row: B − A of one "
        'measure in one results folder (+: folders pooled), paired by seed (the same batches for both arms).',
        '',
        '## The claims',
        '',
    ] + claims + [
        '',
        '## The verdict rule',
        '',
        RULE,
        '',
        'Preconditions on the baseline\'s run (`NEEDS`), and why (`WHY`): ' + '; '.join(
            f'`{k}`: {w}: {WHY[k]}' for k, (w, _, _) in NEEDS.items()) + '. The layers read: ' + '; '.join(
            f'`{k}`: {w}' for k, w in WHY.items() if k not in NEEDS) + '.',
        '',
        posthoc(),
        '',
        '## What the runs say',
        '',
        'Measures (`METRICS`, but the layers read above): ' + '; '.join(f'`{k}`: {m[0]}' for k, m in METRICS.items()
                                                                if k not in TWIN) + '.',
        '',
        table,
        '',
        legend(names) if names else '',
        '',
        '## Runs to come',
        '',
        'Each command, and the rows it fills (GPU: on a GPU):',
        '',
    ] + [f"- {key}: `{cmd}`; rows " + '; '.join(
        (f"of `{os.path.basename(f)}`: " if sum(k == key for k, _, _ in fills.values()) > 1 else '') + ', '.join(ids)
        for f, (k, _, ids) in fills.items() if k == key)
         for key, cmd in dict((k, c) for k, c, _ in fills.values()).items()] + ([
        '',
        '## The gate and the learning rate',
        '',
        f'![val loss against the learning rate]({plot}): each variant\'s mean final val loss over its finished '
        'seeds, shaded over their range.',
    ] if plot else []) + [
        '',
        'Each folder\'s `results.md` (`python report.py <folder>`) has its tables, commands, commits and machines.',
        ''])


SEED_SETTING = dict(report.flags(PROFILES['full'].schedule), dataset='shakespeare_char')


def distance(r):
    """(another dataset, how many of SEED_SETTING's keys the row's runs differ in)."""
    ok = r.get('used') or []
    differ = [k for k, v in SEED_SETTING.items() if k not in report.FREE_KEYS
              and not report.same(report.common(ok, k) or '', v)]
    return ('dataset' in differ, len(differ))


# The claims of note 001, the seed's Shakespeare setup (docs/seed_notes.md): their own dataset is SEED_SETTING's
OWN_DATASET = {c for c, (what, _, _) in CLAIMS.items() if '(001)' in what}


def readme_key(r, i):
    """The rule's order, smallest first: a row of TESTS (not a twin); on the claim's own dataset (OWN_DATASET);
    decided on one homogeneous group of MIN_SEEDS seeds; closest to the seed's setting; most seeds in one homogeneous
    group; selecting nothing; the order of the rows."""
    called = not any(verdict(r).startswith(u) for u in UNDECIDED)
    biggest = biggest_group(r)
    selects = r['test'].metric in TWIN or bool(r['dropped'])
    return (r.get('twin_of') is not None, r['test'].claim in OWN_DATASET and distance(r)[0],
            not (called and biggest >= MIN_SEEDS), not called, distance(r), -biggest, selects, i)


# What a verdict says of the claim, in words a reader needs no key for: (how strongly it holds, lowest first: the
# weaker part of a two-part claim is the higher; the words)
PLAIN = {
    'supported': (0, 'holds'), 'removed': (0, 'holds: removed in every seed'),
    'removed, not specific': (1, 'holds, not specific to {b}: {c} removes it too'),
    'equivalent': (0, 'holds: no difference beyond the margin'),
    'reduced, not removed': (1, 'does not hold as stated: reduced, not removed'),
    'within noise': (2, 'not shown: the difference is within noise'),
    'inconclusive': (2, 'not shown: neither equal nor different'),
    'no difference': (2, 'not shown: both train at the same highest rate'),
    'too few seeds (mixed)': (3, 'undecided: too few seeds on one kind of machine'),
    'too few seeds': (3, 'undecided: too few seeds'), 'groups disagree': (3, 'undecided: the machines disagree'),
    'not measured': (3, 'undecided: not measured yet'), 'not called': (3, 'undecided'),
    'not shown': (3, 'untestable here: the baseline lacks the phenomenon'),
    'contradicted': (4, 'does not hold: the opposite'), 'worse': (4, 'does not hold: {b} is worse than {a}'),
    'better': (4, 'does not hold: {b} is better than {a}'),
}


def plain(r):
    """(strength, words) of a row's verdict, PLAIN's."""
    v, t = verdict(r), r['test']
    key = next(k for k in sorted(PLAIN, key=len, reverse=True) if v.startswith(k))
    n, words = PLAIN[key]
    adj = r.get('adj') or {}
    if key == 'within noise' and adj.get('raw', 1) < ALPHA:  # its own interval excludes 0; the family's does not
        words += f" once corrected for the {adj['m']} tests of its family"
    also = [label(c['test'].b) for c in r.get('controls', []) if verdict(c) == 'removed']
    return n, words.format(a=label(t.a), b=label(t.b), c=' and '.join(also))


def part_pick(rows):
    """readme_key's first row of a part's [(i, row)]; where it is decided and the part's other decided rows of its
    tier (twin, dataset) differ from it, the weakest of them (the first by readme_key among equals)."""
    ranked = sorted(rows, key=lambda ir: readme_key(ir[1], ir[0]))
    tier = readme_key(ranked[0][1], ranked[0][0])[:3]
    peers = [r for i, r in ranked if readme_key(r, i)[:3] == tier] if not tier[2] else [ranked[0][1]]
    return max(peers, key=lambda r: plain(r)[0])


def readme_row(claim, results):
    """(strength, the claim's row): the row readme_key picks, or for a claim of two parts each part's, the weaker
    given (its words name the other part's)."""
    mine = [(i, r) for i, r in enumerate(results) if r['test'].claim == claim]
    parts = sorted({r['test'].part for _, r in mine})
    picks = [part_pick([(i, r) for i, r in mine if r['test'].part == p]) for p in parts]
    r = max(picks, key=lambda x: plain(x)[0])
    n, words = plain(r)
    others = [f"the {o['test'].part} part: {plain(o)[1]}" for o in picks if o is not r]
    if others and all(plain(o)[1] == words for o in picks):
        words += ' (both parts)' if len(picks) == 2 else ' (every part)'
    elif others:
        words = f"{words} (the {r['test'].part} part; {'; '.join(others)})"
    t = r['test']
    n_seeds = len(r['seeds']) if r['seeds'] and not r.get('stable') else '—'
    effect = gap(r, METRICS[t.metric][3]) + (' (*mixed*, pooled)' if len(r['groups']) > 1 else '')
    fill = FILLS.get(folders(t)[0])
    command = fill if isinstance(fill, str) else fill_command(r) or r['command']
    what = (f"{METRICS[t.metric][0]} − {METRICS[t.metric_a][0].split(' (')[0]}, {label(t.b)}" if t.metric_a else
            f"{METRICS[t.metric][0]}, {label(t.b)} − {label(t.a)}")
    return n, (f"| {CLAIMS[claim][0]} | **{words}** | {effect}, n = {n_seeds} | {setting(t)}; {what} | "
               + (f'`{command}`' if command else '—') + ' |')


def findings(results):
    """README's "What we found": the block between the markers, a row a claim, those decided against the claim
    first (the most striking: a claim of the seed notes the runs contradict), then those that hold, then the rest."""
    rows = [readme_row(c, results) for c in sorted({r['test'].claim for r in results} - {0})]
    order = {4: 0, 1: 1, 0: 2, 2: 3, 3: 4}
    rows = [row for _, row in sorted(rows, key=lambda nr: order[nr[0]])]
    return '\n'.join([
        START,
        '',
        'Rendered by `python evidence/claims.py` (do not edit between the markers): a row a claim of the seed notes, '
        'chosen by a rule; `results/claims.md` has the rule, every row, the p values and the machines. Effect: B − A, '
        'the mean over paired seeds with its 95% interval.',
        '',
        '| claim | does it hold? | effect [95% interval], n | setting; measure | both arms |',
        '|---|---|---|---|---|',
    ] + rows + [
        '',
        END,
    ])


def lr_plot(write=False):
    """results/lr_gate.png: final val loss against the learning rate (log axis), a line per variant of claim 10, the
    mean over its finished seeds shaded from the lowest to the highest; written where matplotlib is here and some
    rate's folder is committed (write: only then is it drawn). -> its name relative to results/, or None where no
    rate is committed."""
    points = {}
    for rate in LR_RATES:
        runs = runs_of(LR[rate]) or {}
        for v in ('nanogpt', 'gated'):
            xs = [s['final_val_loss'] for s in finished(runs.get((v, '3L'), dict(ok=[])))]
            if xs:
                points.setdefault(v, []).append((float(rate), statistics.mean(xs), min(xs), max(xs)))
    if not points:
        return None
    plt = pyplot() if write else None
    if plt is not None:
        fig, ax = plt.subplots(figsize=(5, 3.6))
        for v, pts in points.items():
            x, m, lo, hi = zip(*pts)
            line, = ax.plot(x, m, marker='o', label=label(v))
            ax.fill_between(x, lo, hi, color=line.get_color(), alpha=0.2, linewidth=0)
        ax.set(xscale='log', xlabel='learning rate', ylabel='final val loss')
        ax.legend(fontsize=7)
        save_figure(fig, os.path.join(HERE, 'results', 'lr_gate.png'))
    return 'lr_gate.png'


def render():
    """(claims.md's text, README's "What we found" rendered between the markers)."""
    results = measure_all()
    with open(README_MD) as f:
        readme = f.read()
    if START not in readme or END not in readme:
        raise SystemExit(f"claims.py: README's \"What we found\" has no {START} ... {END} block to render into")
    head, rest = readme.split(START, 1)
    readme = head + findings(results) + rest.split(END, 1)[1]
    return claims_md(results), readme


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0].strip())
    ap.add_argument('--check', action='store_true', help='write nothing; exit 1 where a page differs from its render')
    args = ap.parse_args()
    pages = dict(zip((CLAIMS_MD, README_MD), render()))
    stale = []
    for path, text in pages.items():
        with open(path) as f:
            if f.read() != text:
                stale.append(os.path.relpath(path, HERE))
                if not args.check:
                    report.write_text(path, text)
    if not args.check:
        lr_plot(write=True)
    if args.check and stale:
        print(f"claims.py: {', '.join(stale)} differ from the render: run python evidence/claims.py", file=sys.stderr)
        sys.exit(1)
    print(('rendered: ' + ', '.join(stale)) if stale else 'up to date')


if __name__ == '__main__':
    main()
