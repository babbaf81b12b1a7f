"""
The seed notes' claims as data, one verdict rule, and the two pages rendered from them and the committed runs:
results/claims.md (whole) and README's "What we found" (between its findings markers).

  python evidence/claims.py          # renders both from the runs under results/
  python evidence/claims.py --check  # exit 1, naming the file, where either differs from its render (as the tests)

A claim is tested by rows of TESTS: which runs it reads (a results folder, reference A and variant B as sweep.py
names them, a depth), what it measures (METRICS), which sign of B - A it predicts, and the precondition (NEEDS) that
makes the phenomenon present in a seed, checked on A's run of that seed: a seed without it is dropped, not counted.
Pointing a row at a rerun is a change of its folder. A folder or a cell not committed renders as not measured, naming
the GPU job (evidence/gpu_queue.py) that makes its runs where one does.
"""
import argparse
import math
import os
import statistics
import sys
from dataclasses import dataclass, replace

from scipy import stats

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the repository's root
import gpu_queue  # noqa: E402  (evidence/: the GPU jobs whose runs a row waits on)
import report  # noqa: E402
from report import (NAMES, NUMERICS, compare, finished, group_number, legend, load_runs, paired_groups,  # noqa: E402
                    provenance, run_file)
from sweep import PROFILES, VARIANTS  # noqa: E402

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
                     lambda f: statistics.mean(c['unrelated_share'] for c in f['by_needles'].values()), '{:.3f}'),
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
)


# The gate and the learning rate (004; issue 65), fixed on 2026-12-02 at 00:50 UTC, after its runs had started
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
SPIKE_RATIO, SPIKE_WINDOW = 1.5, 5

# What each selecting measure and precondition selects, and why: fixed here, before any further run. These were
# chosen after Bigram-Backcopy's seeds 1-5 had been seen (results/sink_cpu.md), so each row that selects a layer or
# drops seeds by a precondition is shown beside its unselected twin: the same comparison over all layers (TWIN: a
# per-layer measure's all-layers one) and every seed.
TWIN = dict(first_token_L1='first_token', first_token_L2='first_token')
WHY = dict(
    first_token_L1="layer 1 holds Bigram-Backcopy's copying head, which rests on the first token where it is not "
                   "copying; a gate can close a head's output, so the gate's claim is read on that head",
    first_token_L2="layer 2 holds the dormant head, which attends to the first token at every query; softmax-1 lets "
                   "a head attend to nothing, so its claim is read on that head",
    sink="Gu et al.'s sink head: mean attention to position 0 above 0.3 (docs/anchors.md); the claims are about "
         "removing a sink, which a baseline without one cannot show",
    sink_L1='the same threshold, on the head the measure reads (layer 1)',
    sink_L2='the same threshold, on the head the measure reads (layer 2)',
    outliers="Sun et al.'s massive activations at their lenient end, 100× the median; the claim is about removing "
             "them",
    outliers_pc="a first-token outlier and massive activations together, the two the claim says softmax-1 with "
                "OrthoAdam removes (kurtosis alone did not predict the quantization loss: Vlassis et al. 2025)",
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
    metric: str       # METRICS
    predicts: str     # the sign of B - A the claim predicts: '<0', '>0', or '=' (parity: no gain, no loss, tested
                      # for equivalence within ±MARGIN); '' for a control
    needs: str = ''   # NEEDS: A's seeds without it are dropped
    halves: bool = False  # also count the seeds where B <= A / 2 (a claim of "halves")
    worst: bool = False   # also count the seeds where B is the highest of the seed's five variants
    of: int = 0           # a control's claim (claim 0): README's "What we found" names it in that claim's row


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
# Python code (data/pycode): the CPU gate's baseline alone, 6 layers, one thread (its emergence.md); the GPU job's
# five 12-layer variants (gpu_queue.py's pycode_outliers_12L) get the same three rows at '12L' (PC_GPU)
PC_CPU = 'results/pycode_gate_cpu'
# The GPU queue's folders (evidence/gpu_queue.py; `collect DIR` writes them): the CPU sweeps at dropout 0.2 again on one
# GPU, three seeds under one rule (leak_cells_dropout0.2); the seed's schedule under zero_future (zero_future_full_3L);
# the seed author's loop (seed_pipeline_s*); Bigram-Backcopy's ten seeds (sink_10_seeds); Python code at 12 layers
# (pycode_outliers_12L). Their rows are those of the folders they repeat; until collected they render as not measured,
# naming the job.
GPU_DROP = {k: f'results/shakespeare_cpu_long{k}_dropout0.2_gpu'
            for k in ('', '_noncausal', '_leak_zero_future', '_leak_off_by_one', '_leak_after_norm', '_leak_time_norm')}
ZF_FULL, PIPE = 'results/shakespeare_full_leak_zero_future', 'results/shakespeare_seed_pipeline'
BB_GPU, PC_GPU = 'results/bigram_backcopy_sink_gpu', 'results/pycode_outliers_gpu'
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
    Test(2, ZF, '3L', 'sym', 'diff_sym', 'val', '<0'),
    Test(2, ZF2, '3L', 'sym', 'diff_sym', 'val', '<0'),
    Test(2, OBO, '3L', 'sym', 'diff_sym', 'val', '<0'),
    Test(2, OBO2, '3L', 'sym', 'diff_sym', 'val', '<0'),
    Test(2, AN, '3L', 'sym', 'diff_sym', 'val', '<0'),
    Test(2, AN2, '3L', 'sym', 'diff_sym', 'val', '<0'),
    Test(2, NC, '3L', 'sym', 'diff_sym', 'val', '<0'),
    Test(2, NC2, '3L', 'sym', 'diff_sym', 'val', '<0'),
    *(Test(2, GPU_DROP[k], '3L', 'sym', 'diff_sym', 'val', '<0')
      for k in ('', '_leak_zero_future', '_leak_off_by_one', '_leak_after_norm', '_noncausal')),
    Test(2, ZF_FULL, '3L', 'sym', 'diff_sym', 'val', '<0'),
    Test(2, PIPE, '3L', 'sym', 'diff_sym', 'val', '<0'),
    Test(2, ND, '2L', 'nd_sym', 'nd_diff_sym', 'needle_acc', '>0'),
    # claim 3: Norm+Sym against Sym, and whether it is the highest of the seed's five in each seed
    Test(3, CPU, '3L', 'sym', 'norm_sym', 'val', '>0', worst=True),
    Test(3, GPU, '3L', 'sym', 'norm_sym', 'val', '>0', worst=True),
    Test(3, GPU, '6L', 'sym', 'norm_sym', 'val', '>0', worst=True),
    Test(3, GPU, '8L', 'sym', 'norm_sym', 'val', '>0', worst=True),
    Test(3, DROP, '3L', 'sym', 'norm_sym', 'val', '>0', worst=True),
    Test(3, ZF, '3L', 'sym', 'norm_sym', 'val', '>0', worst=True),
    Test(3, ZF2, '3L', 'sym', 'norm_sym', 'val', '>0', worst=True),
    Test(3, OBO2, '3L', 'sym', 'norm_sym', 'val', '>0', worst=True),
    *(Test(3, GPU_DROP[k], '3L', 'sym', 'norm_sym', 'val', '>0', worst=True)
      for k in ('', '_leak_zero_future', '_leak_off_by_one')),
    Test(3, ZF_FULL, '3L', 'sym', 'norm_sym', 'val', '>0', worst=True),
    Test(3, PIPE, '3L', 'sym', 'norm_sym', 'val', '>0', worst=True),
    # claim 4: the distance of lambda_full from 1, Diff+Sym against Diff
    Test(4, CPU, '3L', 'diff', 'diff_sym', 'lambda_dist', '<0'),
    Test(4, GPU, '3L', 'diff', 'diff_sym', 'lambda_dist', '<0'),
    Test(4, GPU, '6L', 'diff', 'diff_sym', 'lambda_dist', '<0'),
    Test(4, GPU, '8L', 'diff', 'diff_sym', 'lambda_dist', '<0'),
    Test(4, ZF, '3L', 'diff', 'diff_sym', 'lambda_dist', '<0'),
    Test(4, ZF2, '3L', 'diff', 'diff_sym', 'lambda_dist', '<0'),
    Test(4, OBO2, '3L', 'diff', 'diff_sym', 'lambda_dist', '<0'),
    Test(4, AN2, '3L', 'diff', 'diff_sym', 'lambda_dist', '<0'),
    Test(4, TN2, '3L', 'diff', 'diff_sym', 'lambda_dist', '<0'),
    Test(4, NC, '3L', 'diff', 'diff_sym', 'lambda_dist', '<0'),
    *(Test(4, GPU_DROP[k], '3L', 'diff', 'diff_sym', 'lambda_dist', '<0')
      for k in ('_leak_zero_future', '_leak_off_by_one', '_leak_after_norm', '_leak_time_norm')),
    Test(4, ZF_FULL, '3L', 'diff', 'diff_sym', 'lambda_dist', '<0'),
    Test(4, PIPE, '3L', 'diff', 'diff_sym', 'lambda_dist', '<0'),
    # claim 5: softmax-1 (with OrthoAdam) and the sink, where the baseline has one (Bigram-Backcopy) and where not
    Test(5, BB, '2L', 'bb_nanogpt', 'bb_softmax1', 'first_token', '<0', 'sink', halves=True),
    Test(5, BB, '2L', 'bb_nanogpt', 'bb_softmax1', 'first_token_L2', '<0', 'sink_L2', halves=True),
    Test(5, BB, '2L', 'bb_nanogpt', 'bb_softmax1_orthoadam', 'first_token', '<0', 'sink'),
    Test(5, BB, '2L', 'bb_nanogpt', 'bb_softmax1_orthoadam', 'kurtosis', '<0', 'outliers'),
    Test(5, BB_GPU, '2L', 'bb_nanogpt', 'bb_softmax1', 'first_token', '<0', 'sink', halves=True),
    Test(5, BB_GPU, '2L', 'bb_nanogpt', 'bb_softmax1', 'first_token_L2', '<0', 'sink_L2', halves=True),
    Test(5, BB_GPU, '2L', 'bb_nanogpt', 'bb_softmax1_orthoadam', 'first_token', '<0', 'sink'),
    Test(5, BB_GPU, '2L', 'bb_nanogpt', 'bb_softmax1_orthoadam', 'kurtosis', '<0', 'outliers'),
    Test(5, CPU, '3L', 'nanogpt', 'softmax1', 'first_token', '<0', 'sink'),
    # claim 5's outlier half, where a baseline can have outliers: Python code
    Test(5, PC_CPU, '6L', 'pc_nanogpt', 'pc_softmax1_orthoadam', 'kurtosis_first', '<0', 'outliers_pc'),
    Test(5, PC_CPU, '6L', 'pc_nanogpt', 'pc_softmax1_orthoadam', 'massive', '<0', 'outliers_pc'),
    Test(5, PC_CPU, '6L', 'pc_nanogpt', 'pc_softmax1_orthoadam', 'w8a8', '<0', 'outliers_pc'),
    *(Test(5, PC_GPU, '12L', 'pc_nanogpt', 'pc_softmax1_orthoadam', m, '<0', 'outliers_pc')
      for m in ('kurtosis_first', 'massive', 'w8a8')),
    # claim 6: the gates and the sink; OrthoAdam alone as a control on the same head
    Test(6, BB, '2L', 'bb_nanogpt', 'bb_gated', 'first_token_L1', '<0', 'sink_L1', halves=True),
    Test(6, BB, '2L', 'bb_nanogpt', 'bb_gated', 'first_token', '<0', 'sink'),
    Test(6, BB, '2L', 'bb_nanogpt', 'bb_gated_headwise', 'first_token_L1', '<0', 'sink_L1', halves=True),
    Test(0, BB, '2L', 'bb_nanogpt', 'bb_orthoadam', 'first_token_L1', '', 'sink_L1', halves=True, of=6),
    Test(6, BB_GPU, '2L', 'bb_nanogpt', 'bb_gated', 'first_token_L1', '<0', 'sink_L1', halves=True),
    Test(6, BB_GPU, '2L', 'bb_nanogpt', 'bb_gated', 'first_token', '<0', 'sink'),
    Test(6, BB_GPU, '2L', 'bb_nanogpt', 'bb_gated_headwise', 'first_token_L1', '<0', 'sink_L1', halves=True),
    Test(0, BB_GPU, '2L', 'bb_nanogpt', 'bb_orthoadam', 'first_token_L1', '', 'sink_L1', halves=True, of=6),
    Test(6, CPU, '3L', 'nanogpt', 'gated', 'first_token', '<0', 'sink'),
    # claim 7: retrieval with distractors, and attention on the tokens that do not hold the key
    Test(7, ND, '2L', 'nd_nanogpt', 'nd_diff', 'needle_acc', '>0'),
    Test(7, ND, '2L', 'nd_nanogpt', 'nd_diff', 'unrelated_share', '<0'),
]

# README's "What we found", its variant table: the causal sweeps it reads (folder, depth, what the column is)
VARIANT_SWEEPS = [(CPU, '3L'), (GPU, '3L')]

# ----------------------------------------------------------------------------- the verdict rule

MIN_SEEDS = report.MIN_SEEDS  # report.py's tables call a difference by the same count
ALPHA = 0.05
RULE = f"""\
One rule, `claims.py`'s `verdict()`, in this order:

1. **not measured under the current code**: the folder or the cell is not committed, or a run it reads was trained
   before a commit that changed its model's numerics (`report.NUMERICS`: {', '.join(f'`{c}`' for c, *_ in NUMERICS)});
   the numbers are shown, no verdict.
2. **not shown (precondition absent)**: the claim is about a phenomenon the baseline must have (a sink, outliers);
   seeds whose baseline run lacks it are dropped, not counted, and none is left. A row whose B runs are not there yet
   shows A's values, and is this where none of A's seeds has the phenomenon (else not measured).
3. **too few seeds**: fewer than {MIN_SEEDS} paired seeds remain. With 2 the 95% interval has one degree of freedom
   (t = 12.7) and rests on a single estimate of the spread, so it is shown but not called. A sweep's own tables
   (`report.py`) call a difference by the same count.
4. **groups disagree**: the row's runs are *mixed* (below) and its homogeneous groups' mean differences do not all
   have one sign: each group's interval is shown, and no pooled verdict.
5. Otherwise the paired t test of B − A over the remaining seeds (`report.paired_t`) decides, with Holm's correction
   over the claim's family: every row of the claim (its twins included) that reaches this step or step 4. With the
   family's m two-sided p values sorted, p_(1) ≤ … ≤ p_(m), Holm's adjusted p_(i) = max over j ≤ i of
   min(1, (m − j + 1) p_(j)); a row is called where its adjusted p < {ALPHA}, which keeps the chance of any false call
   in the family at most {ALPHA}. **supported** where B − A is on the side the claim predicts, **contradicted** where
   on the other, **within noise** where the adjusted p is {ALPHA} or more. The 95% interval shown is the row's own
   (uncorrected), its p beside Holm's; the verdict names the test (TOST for a parity claim) and the correction, and
   says where the uncorrected p alone would have called it.
   A control's family is the controls; it renders **B lower** / **B higher**.
6. A parity claim ("does not help": no gain, no loss) is tested for equivalence by two one-sided tests (Schuirmann):
   against B − A ≤ −m, t = (d + m)/se, and against B − A ≥ m, t = (d − m)/se, its p the larger of the two one-sided
   p values; it is below {ALPHA} exactly where the 90% interval lies inside (−m, m). The margin m is fixed in
   `claims.py` (`MARGIN`; {'; '.join(f'{k}: ±{v}' for k, v in MARGIN.items())}) from the seed's own table, one unit
   of its last printed digit, not from any run here. With Holm over the family's equivalence p values, and then over its difference p
   values: **equivalent within ±m**, else **worse** / **better** (B's loss above / below A's), else **inconclusive**.

*mixed*: the row's runs are not one homogeneous group. Two runs are alike only where they share processor (one label
a processor, `report.CPU_NAMES`), number format, code era (the `report.NUMERICS` commits a run predates),
execution path (eager, compiled, CUDA-graphed: summary.json's `compile` and `cuda_graph`) and, on a CPU, thread
count (summary.json's `machine`; where a run does not record it, "unknown" is a value of its own). A seed whose A
and B runs differ is a group of its own kind. A mixed row shows each group's interval (its own paired t; the one
difference where a group has one seed) beside the pooled one (no pooled value where they disagree in sign), and is
called only where the groups agree in sign (step 4). The variant tables pool by the same code (`report.grouped`,
`report.paired_groups`): a *mixed* cell shows each group's mean beside the pooled one. *inferred*: the processor of
a run whose provenance was backfilled without a commit (`evidence/backfill_provenance.py`, `trained_at` null) is taken
from the pages' text, not recorded.

Per-seed statements ("in k of n seeds", "halves", "the highest of the seed's five") are counted from the runs, over
the seeds the precondition keeps; every run they read passes the same checks as the row's: superseded numerics are
not counted, a seed whose five runs are not one homogeneous group is not counted (its highest would compare
computations), and seeds of different groups are counted by group.

Selections: a row that reads one layer, or drops seeds by a precondition, is followed by its unselected twin (all
layers, every seed: "5.3, twin of 5.2"), or names the row that is that comparison already ("5.2, twin: 5.1"); the
selections and their reasons are fixed in `claims.py` (`WHY`, below).

Runs to come: a row whose cells wait on runs of the GPU queue (`evidence/gpu_queue.py`) names the job that makes them
and its seeds; `python evidence/gpu_queue.py collect DIR` writes them into the row's folder, and the next render
reads them (a folder not there yet is step 1).

README's "What we found" shows one row per claim, chosen by this rule, in this order: a row where the claim's phenomenon
is there (not the twin of a row whose precondition kept no seed: it shows what the all-seeds comparison gives, but a
claim about removing a sink cannot be tested where there is none); then a row decided by the interval (step 5 or 6)
on one homogeneous group of at least {MIN_SEEDS} seeds; then the row closest to the seed's setting (first the
same data, then the fewest settings of the seed's schedule, `sweep.py`'s `full` profile, that differ); then the most
seeds in one homogeneous group; then a row that selects nothing before one that does; then the order of `TESTS`."""


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


UNDECIDED = ('not measured', 'not shown', 'too few seeds', 'groups disagree')


def decided(r):
    """Whether the row reaches the interval (steps 4-6 of the rule): current numerics, a precondition kept, enough
    seeds. These rows form the claim's family for Holm."""
    return not r['missing'] and not r['superseded'] and len(r['seeds']) >= MIN_SEEDS


def disagree(r):
    """Whether a row's homogeneous groups differ in the sign of B − A (report.groups_disagree): no pooled verdict."""
    return report.groups_disagree(r['groups'])


def correct(results):
    """Holm over each claim's family (controls: their own), in place: r['adj'] = {'p': adjusted difference p, 'eq':
    adjusted equivalence p (parity rows), 'raw': the uncorrected p of what the verdict reads, 'm': the family's
    size}."""
    families = {}
    for r in results:
        if decided(r):
            families.setdefault(r['test'].claim, []).append(r)
    for family in families.values():
        for r, p in zip(family, holm([r['stat']['p'] for r in family])):
            r['adj'] = dict(p=p, m=len(family), raw=r['stat']['p'])
        parity = [r for r in family if r['test'].predicts == '=']
        for r, p in zip(parity, holm([tost(r['stat'], MARGIN[r['test'].metric]) for r in parity])):
            r['adj'].update(eq=p, raw_eq=tost(r['stat'], MARGIN[r['test'].metric]))


def adjusted(r):
    """r['adj'] of correct(); a row never corrected (measured alone) is a family of one."""
    if 'adj' not in r:
        alone = dict(r)
        correct([alone])
        return alone['adj']
    return r['adj']


def verdict(r):
    """The rule above, on one measured row (measure(), then correct() over all rows)."""
    if r['missing']:
        return 'not measured under the current code'
    if r['superseded']:
        return f"not measured under the current code (runs before {', '.join(r['superseded'])})"
    if not r['seeds']:
        return 'not shown (precondition absent)'
    if len(r['seeds']) < MIN_SEEDS:
        return 'too few seeds'
    if disagree(r):
        return 'groups disagree'
    adj, d, want = adjusted(r), r['stat']['diff'], r['test'].predicts
    if want == '=':
        if adj['eq'] < ALPHA:
            return f"equivalent within ±{MARGIN[r['test'].metric]}"
        return ('worse' if d > 0 else 'better') if adj['p'] < ALPHA else 'inconclusive'
    if adj['p'] >= ALPHA:
        return 'within noise'
    if want == '':
        return f'B {"lower" if d < 0 else "higher"}'
    return 'supported' if (d < 0) == (want == '<0') else 'contradicted'


def method(r):
    """What the verdict used, where it used the interval: Holm's family size, and the uncorrected call where it
    differs."""
    adj = r.get('adj')
    if not adj or any(verdict(r).startswith(u) for u in UNDECIDED):
        return ''
    raw = dict(r, adj=dict(adj, p=adj['raw'], eq=adj.get('raw_eq')))
    note = '' if verdict(raw) == verdict(r) else f'; uncorrected: {verdict(raw)}'
    tost_m = f"TOST within ±{MARGIN[r['test'].metric]}, " if r['test'].predicts == '=' else ''
    return f"{tost_m}Holm over {adj['m']} row{'s' * (adj['m'] > 1)}" + note


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


_JOB_RUNS = []


def job_runs():
    """[(job, 'sweep/run')] of every run the GPU queue makes (evidence/gpu_queue.py's QUEUE, named as ablate.sh names
    them), once."""
    if not _JOB_RUNS:
        for job in gpu_queue.QUEUE:
            _JOB_RUNS.extend((job.name, os.path.relpath(d, 'runs')) for launch in job.launches
                             for d in gpu_queue.runs_of(launch, 'runs'))
    return _JOB_RUNS


def pending_jobs(t):
    """{job: [seeds]} of the GPU queue's jobs that make a run of the row's cells (A or B at its depth, in one of its
    folders) that results/ does not hold yet: collecting one (`python evidence/gpu_queue.py collect DIR`) changes the
    row, so the row names it."""
    cells = {f'{os.path.basename(f)}/{v}_{t.depth}' for f in folders(t) for v in (t.a, t.b)}
    out = {}
    for job, run in job_runs():
        cell, seed = run.rsplit('_s', 1)
        if cell in cells and not os.path.exists(os.path.join(HERE, 'results', run, 'summary.json')):
            seeds = out.setdefault(job, [])
            seeds += [] if int(seed) in seeds else [int(seed)]
    return out


def jobs_note(t):
    """' (GPU job `name` runs seeds 1, 2, 3; ...)' of pending_jobs, '' where none."""
    jobs = pending_jobs(t)
    return f" (GPU job {'; '.join(f'`{j}` runs {seed_list(sorted(x))}' for j, x in jobs.items())})" if jobs else ''


def read(s, file, fn):
    f = s if file == 'summary.json' else run_file(s, file)
    return None if f is None else fn(f)


def worst_count(t, runs, kept):
    """'highest of the seed's five in k of n' over the kept seeds whose five variants all finished, with every run it
    reads checked as the row's are: superseded numerics are not counted; a seed whose five runs are not one
    homogeneous group is not counted (which variant is highest would compare computations, not variants), and seeds
    of different groups are counted by group."""
    five = [name for name, _, seed in VARIANTS if seed]
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
    skipped = '; '.join(f"{seed_list([x])} not counted, its five runs *mixed*: " + ' / '.join(
        f"{', '.join(label(s['_variant']) for s in g)}: {report.group_label(g)}" for g in groups.values())
        for x, groups in mixed.items())
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


def measure(t):
    """One row of TESTS against its runs: {'test', 'missing', 'a', 'b' ({seed: value}), 'dropped' (seeds without
    the precondition), 'seeds' (kept and shared), 'stat' (report.compare), 'groups' (paired_groups), 'superseded',
    'on' (what the runs were computed on), 'counts' (per-seed statements), 'command' (report.command of both arms)}."""
    r = dict(test=t, missing=True, superseded=[], seeds=[], dropped=[], counts=[], on=[], groups=[], command=None)
    runs = runs_of(t.folder)
    cells = [finished(runs.get((v, t.depth), dict(ok=[]))) if runs else [] for v in (t.a, t.b)]
    _, file, fn, _ = METRICS[t.metric]
    vals = [{s['_seed']: x for s in cell if (x := read(s, file, fn)) is not None} for cell in cells]
    if not vals[0]:
        return r
    if not vals[1]:
        return baseline_only(t, r, vals[0], cells[0])
    by_seed = [{s['_seed']: s for s in cell} for cell in cells]
    shared = sorted(set(vals[0]) & set(vals[1]))
    if t.needs:
        what, nfile, test = NEEDS[t.needs]
        r['dropped'] = [x for x in shared if not read(by_seed[0][x], nfile, test)]
    kept = [x for x in shared if x not in r['dropped']]
    used = [by_seed[i][x] for i in (0, 1) for x in kept] or [s for cell in cells for s in cell]
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
    if kept and t.predicts:
        m = MARGIN.get(t.metric)
        sign = {'<0': lambda d: d < 0, '>0': lambda d: d > 0, '=': lambda d: abs(d) < m}[t.predicts]
        what = f'\\|B − A\\| < {m}' if t.predicts == '=' else f"B − A {t.predicts.replace('<0', '< 0')}".replace(
            '>0', '> 0')
        r['counts'].append(f"{what} in {sum(sign(b[x] - a[x]) for x in kept)} of {len(kept)}")
    if kept and t.halves:
        r['counts'].append(f"B ≤ A/2 in {sum(b[x] <= a[x] / 2 for x in kept)} of {len(kept)}")
    if t.worst:
        r['counts'] += [c for c in [worst_count(t, runs, kept)] if c]
    return r


def baseline_only(t, r, a, cell):
    """A row whose B runs are not there yet (a baseline trained first, as a gate): A's values are shown. Where the
    row has a precondition and none of A's seeds has it, the row is not shown (precondition absent), as it would be
    whatever B gave; otherwise it stays not measured."""
    r['a'] = a
    if t.needs:
        by = {s['_seed']: s for s in cell}
        dropped = [x for x in sorted(a) if not read(by[x], NEEDS[t.needs][1], NEEDS[t.needs][2])]
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
    return replace(t, metric=TWIN.get(t.metric, t.metric), needs='')


def measure_all():
    """Every row of TESTS, each selecting row followed by its twin, with Holm's correction over each claim's family.
    A twin is left out where another row already compares the same runs in the same measure over the same seeds (a
    row of TESTS, or another row's twin): the selecting row then names that row as its twin ('twin_is'). A row not
    measured has no twin (it would be as unmeasured). Each row gets its 'id' in its claim: 5.1, 5.2, ..."""
    def same(r):
        t = r['test']
        return (t.folder, t.depth, t.a, t.b, t.metric, tuple(r['seeds']), r['missing'])
    rows = [measure(t) for t in TESTS]
    seen, results = {same(r): r for r in rows}, []
    for r in rows:
        results.append(r)
        tw = None if r['missing'] else twin(r['test'], r)
        if tw is None:
            continue
        rt = measure(tw)
        if same(rt) in seen:
            r['twin_is'] = seen[same(rt)]
        else:
            rt.update(twin_of=r, phenomenon=bool(r['seeds']))
            seen[same(rt)] = rt
            results.append(rt)
    count = {}
    for r in results:
        t = r['test']
        count[t.claim, t.of] = k = count.get((t.claim, t.of), 0) + 1
        r['id'] = f'{t.claim}.{k}' if t.claim else f'control {t.of}.{k}' if t.of else f'control {k}'
    correct(results)
    return results


# ----------------------------------------------------------------------------- rendering

def setting(t):
    """What the row's runs are, from their configs: the folder, depth, steps and dropout."""
    runs = runs_of(t.folder)
    name = ' + '.join(f'`{os.path.basename(f)}`' for f in folders(t)) + f' {t.depth}'
    ok = [s for v in (t.a, t.b) for s in finished((runs or {}).get((v, t.depth), dict(ok=[])))]
    if not ok:
        return name
    return (f"{name}, {report.joined(report.values(ok, 'max_iters'))} steps, dropout "
            f"{report.joined(report.values(ok, 'dropout'))}")


def gap(r, fmt):
    """'B − A [lo, hi]' (paired), the one difference, or '—'."""
    st = r.get('stat')
    if st is None:
        return '—'
    f = fmt.replace('{:', '{:+')
    if st['test'] == 'single':
        return f.format(st['diff']) + ' (one seed)'
    if st['test'] != 'paired':
        return f.format(st['diff']) + ' (unpaired)'
    return (f"{f.format(st['diff'])} [{f.format(st['lo'])}, {f.format(st['hi'])}]")


def seed_list(xs):
    return ('seed ' if len(xs) == 1 else 'seeds ') + ', '.join(map(str, xs))


def grouped_gap(r, fmt, names=None):
    """gap(), then where the row is mixed each homogeneous group's own: G1, G2, ... as computed_cell names them, or,
    given names (a legend shared by a table, filled here), as numbered there."""
    text = gap(r, fmt)
    if len(r.get('groups', [])) > 1 and disagree(r):  # no pooled value stands for groups of opposite signs
        text = 'no pooled value (groups disagree)'
    if len(r.get('groups', [])) > 1:
        text += ''.join(f"; G{group_number(g['label'], names) if names is not None else i} {gap(g, fmt)}"
                        for i, g in enumerate(r['groups'], 1))
    return text


def computed_cell(r):
    """What the row's runs were computed on: one group, or *mixed* with each group (G1, G2, ...) and its seeds."""
    if len(r['groups']) > 1:
        return '*mixed*: ' + '; '.join(f"G{i} = {g['label']} ({seed_list(g['seeds'])})"
                                       for i, g in enumerate(r['groups'], 1))
    return r['on'][0] if len(r['on']) == 1 else '*mixed*: ' + '; '.join(r['on'])


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
    how = method(r)
    return (f"**{verdict(r)}**" + (f' ({how})' if how else '') + (' (*mixed*)' if len(r['on']) > 1 else '')
            + jobs_note(r['test']))


def label(v):
    return NAMES.get(v, v)


def cell_text(vals, seeds, fmt):
    xs = [vals[x] for x in seeds] or list(vals.values())
    return report.mean_std(xs, fmt) if xs else '—'


def seeds_cell(r):
    t = r['test']
    return f"{len(r['seeds'])}" + (f"; dropped: {seed_list(r['dropped'])}, without "
                                   f"{NEEDS[t.needs][0].split(' (')[0]}" if r['dropped'] else '')


def row_cells(r):
    """The columns every table shares: A, B, seeds, B − A, p, per seed, computed on, verdict."""
    fmt = METRICS[r['test'].metric][3]
    if r['missing']:  # A's values where its runs are there (B's are not)
        return [cell_text(r.get('a') or {}, [], fmt), '—', '0', '—', '—', '', '',
                verdict(r) + jobs_note(r['test'])]
    return [cell_text(r['a'], r['seeds'], fmt), cell_text(r['b'], r['seeds'], fmt), seeds_cell(r),
            grouped_gap(r, fmt), p_cell(r), '; '.join(r['counts']), computed_cell(r), verdict_cell(r)]


def number(r):
    """The row's id (measure_all), and its twin's: 'twin of' the selecting row it follows, or the row that is the
    selecting row's twin already."""
    own = r.get('id', str(r['test'].claim))
    if r.get('twin_of'):
        return f"{own}, twin of {r['twin_of'].get('id', '')}"
    return own + (f", twin: {r['twin_is']['id']}" if r.get('twin_is') else '')


def claims_table(results):
    lines = ['| # | runs | measure | A | B | A: mean ± std | B: mean ± std | seeds | B − A [95% interval] '
             '| p | per seed | computed on | verdict | reproduce (both arms) |', '|' + '---|' * 14]
    for r in results:
        t = r['test']
        lines.append(f"| {number(r)} | {setting(t)} | {METRICS[t.metric][0]} | {label(t.a)} | "
                     f"{label(t.b)} | " + ' | '.join(row_cells(r)) + ' | '
                     + (f"`{r['command']}`" if r['command'] else '—') + ' |')
    return '\n'.join(lines)


def claims_md(results):
    claims = ['| # | claim (seed note) | the seed\'s number | published elsewhere (`docs/anchors.md`) |', '|---|---|---|---|']
    claims += [f'| {n} | {c} | {s} | {a} |' for n, (c, s, a) in CLAIMS.items()]
    commands = sorted({f for t in TESTS for f in folders(t)})
    return '\n'.join([
        "# The seeds' claims, tested",
        '',
        "Rendered by `python evidence/claims.py` from the claims as data (`evidence/claims.py`'s `TESTS`) and the committed runs; do "
        'not edit by hand (`tests/test_report.py` re-renders it and compares). Each row reads one results folder '
        '(or several joined by +, whose seeds are pooled: a sweep continued in a folder of its own): '
        'B − A of one measure, paired by seed (seed s gives both variants the same batches in the same order). How '
        'each folder was run, and its tables: its `results.md`; what the seed notes were and how their table can '
        'have come about: `seed_table_explained.md`.',
        '',
        '## The claims',
        '',
    ] + claims + [
        '',
        '## The verdict rule',
        '',
        RULE,
        '',
        'Preconditions: ' + '; '.join(f'`{k}`: the baseline has {w}' for k, (w, _, _) in NEEDS.items()) + '.',
        '',
        'Why each selection (`WHY`): ' + '; '.join(f'`{k}`: {w}' for k, w in WHY.items()) + '.',
        '',
        '## What the runs say',
        '',
        claims_table(results),
        '',
        "## The seed's causal setting, variant by variant",
        '',
        variant_table(VARIANT_SWEEPS, names := []),
        '',
        legend(names) if names else '',
        '',
        '## Commands',
        '',
        'Each folder: `python report.py <folder>` renders its tables; its `results.md` names its command, commits and '
        'machines. The folders read, and the command that makes each one\'s runs again:',
        '',
    ] + [f'- `{f}`' + (' (not committed)' if runs_of(f) is None else f": `{folder_command(f)}`" if folder_command(f)
                        else ": no ablate.sh profile runs it; its pages say how it was run")
         for f in commands] + [
        '',
        "Provenance: each run's `summary.json` (`machine`, `dtype`, `code`, `compile`, `cuda_graph`), or for older "
        "runs its folder's `provenance.json`, backfilled by `evidence/backfill_provenance.py`.",
        '',
    ])


def folder_command(folder):
    runs = runs_of(folder)
    return report.command([s for c in runs.values() for s in finished(c)], os.path.basename(folder))


def val_n(ss):
    """'mean ± std (n=k)' of runs' final val loss."""
    return report.mean_std([s['final_val_loss'] for s in ss], '{:.3f}') + f' (n={len(ss)})'


def lambda_means(ss):
    """'a / b / c': λ_full of each layer, mean over runs."""
    return ' / '.join(f"{statistics.mean(s['lambda_table'][i]['lambda_full'] for s in ss):.2f}"
                      for i in range(len(ss[0]['lambda_table'])))


def variant_table(sweeps, names, lam=True):
    """A row per variant of the causal sweeps: val loss (mean ± std, n) and B − nanogpt [95%] in each, by the rule of
    the claims (report.grouped, paired_groups): where the runs of a cell or a gap are not one homogeneous group,
    *mixed*, and each group's value or interval beside the pooled one (no pooled interval where the groups disagree
    in sign), G1, G2, ... numbered in names, a legend the caller prints; λ_full by layer for the Differential ones
    (first sweep, with lam); under the table, each sweep's command."""
    head = ['variant']
    for folder, depth in sweeps:
        head += [f'`{os.path.basename(folder)}` {depth}: val', '− nanogpt [95%]']
    head += [f'λ_full by layer (`{os.path.basename(sweeps[0][0])}`)'] if lam else []
    lines = ['| ' + ' | '.join(head) + ' |', '|' + '---|' * len(head)]
    loaded = [(runs_of(f) or {}, d) for f, d in sweeps]
    for name, _, _ in VARIANTS:
        if not any((name, d) in runs for runs, d in loaded):
            continue
        cells = [f'`{name}`' + (f' ({label(name)})' if label(name) != name else '')]
        for runs, d in loaded:
            mine = {s['_seed']: s for s in finished(runs.get((name, d), dict(ok=[])))}
            base = {s['_seed']: s for s in finished(runs.get(('nanogpt', d), dict(ok=[])))}
            cells.append(report.grouped(list(mine.values()), val_n, names) if mine else '—')
            shared = sorted(set(mine) & set(base))
            if name == 'nanogpt' or not shared:
                cells.append('—')
                continue
            a, b = ({x: r[x]['final_val_loss'] for x in shared} for r in (base, mine))
            r = dict(stat=compare(a, b), groups=paired_groups(base, mine, a, b))
            cells.append(grouped_gap(r, '{:.3f}', names) + (' *mixed*' if len(r['groups']) > 1 else ''))
        ok = [s for s in finished(loaded[0][0].get((name, loaded[0][1]), dict(ok=[]))) if s.get('lambda_table')]
        cells += [report.grouped(ok, lambda_means, names) if ok else '—'] if lam else []
        lines.append('| ' + ' | '.join(cells) + ' |')
    return '\n'.join(lines + ['', 'Reproduce: ' + '; '.join(f"`{os.path.basename(f)}`: `{folder_command(f)}`"
                                                           for f, _ in sweeps) + '.'])


# README's "What we found": a row per claim, by the rule at the end of RULE: the seed's setting is sweep.py's `full` profile on its
# data (the seed notes' schedule as this repository reads it)
SEED_SETTING = dict(report.flags(PROFILES['full'].schedule), dataset='shakespeare_char')


def distance(r):
    """(another dataset, how many of SEED_SETTING's keys the row's runs differ in)."""
    ok = r.get('used') or []
    differ = [k for k, v in SEED_SETTING.items() if k not in report.FREE_KEYS
              and not report.same(report.common(ok, k) or '', v)]
    return ('dataset' in differ, len(differ))


def readme_key(r, i):
    """The rule's order, smallest first: the claim's phenomenon present (not the twin of a row whose precondition
    kept no seed); decided on one homogeneous group of MIN_SEEDS seeds; closest to the seed's setting; most seeds in
    one homogeneous group; selecting nothing; the order of the rows."""
    called = not r['missing'] and not any(verdict(r).startswith(u) for u in UNDECIDED)
    biggest = max([len(g['seeds']) for g in r['groups'] if g['homogeneous']] or [0])
    selects = r['test'].metric in TWIN or bool(r['dropped'])
    return (r.get('phenomenon') is False, not (called and biggest >= MIN_SEEDS), not called, distance(r), -biggest,
            selects, i)


def short(v):
    """A verdict without its particulars: 'not measured' for 'not measured under the current code (runs before ...)'."""
    return v.split(' (')[0].replace(' under the current code', '')


def readme_rows(results, names):
    """One row per claim (and per control), chosen by readme_key; each names the count of the claim's other rows by
    verdict and the command that makes both arms' runs again. names: the legend of *mixed* groups, filled here."""
    rows = []
    for claim in sorted({r['test'].claim for r in results}, key=lambda c: (c == 0, c)):
        mine = [(i, r) for i, r in enumerate(results) if r['test'].claim == claim]
        i, r = min(mine, key=lambda ir: readme_key(ir[1], ir[0]))
        t = r['test']
        others = {}
        for _, o in mine:
            if o is not r:
                others[short(verdict(o))] = others.get(short(verdict(o)), 0) + 1
        what = CLAIMS[claim][0] if claim else f'control for claim {t.of}: {label(t.b)} alone'
        rows.append(f"| {what} | {setting(t)}; {METRICS[t.metric][0]}, {label(t.b)} − {label(t.a)} | "
                    f"{seeds_cell(r)} | {grouped_gap(r, METRICS[t.metric][3], names)} | {verdict_cell(r)} | "
                    + (', '.join(f'{n} {v}' for v, n in others.items()) or '—')
                    + ' | ' + (f"`{r['command']}`" if r['command'] else '—') + ' |')
    return rows


def findings(results):
    """README's "What we found": the block between the markers."""
    names = []
    variants = variant_table(VARIANT_SWEEPS, names, lam=False)
    rows = readme_rows(results, names)
    return '\n'.join([
        START,
        '',
        'Rendered by `python evidence/claims.py` (do not edit between the markers). Each variant in the seed\'s causal '
        'setting: val loss, mean ± std over seeds, and its paired gap to nanogpt (negative: lower):',
        '',
        variants,
        '',
        'Each claim of the seed notes by one of its rows, chosen by a rule; `results/claims.md` has the rule and '
        'every row, with p values, per-seed counts and machines:',
        '',
        '| claim | row | n | B − A [95% interval] | verdict | the claim\'s other rows | reproduce (both arms) |',
        '|---|---|---|---|---|---|---|',
    ] + rows + [
        '',
        'Key: *mixed*: the runs differ in processor, number format, code era, execution path or threads; each '
        'group\'s value follows the pooled one, and a verdict (or a pooled interval) needs the groups to agree in '
        'sign. '
        + (legend(names) + ' ' if names else '') + '*inferred*: the processor is taken from the pages, not '
        'recorded. Holm: corrected for the claim\'s several rows. equivalent within ±m: the test of "no gain" (two '
        'one-sided tests, TOST).',
        '',
        END,
    ])


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
    if args.check and stale:
        print(f"claims.py: {', '.join(stale)} differ from the render: run python evidence/claims.py", file=sys.stderr)
        sys.exit(1)
    print(('rendered: ' + ', '.join(stale)) if stale else 'up to date')


if __name__ == '__main__':
    main()
