"""
Diagnostics from the seed papers, measured on any checkpoint train.py writes.

$ python analyze.py --out_dir=out/diff_6L                  # or --ckpt=out/diff_6L/best.pt (the best val loss)
$ python analyze.py --out_dir=out/gated_6L --eval_iters=20 --batch_size=8 --device=cuda --dtype=bfloat16
$ python analyze.py --trajectory_page results/shakespeare_full_cpu  # a page rendered from a folder's files
                                    # (and --emergence_page DIR); with --check: exit 1 where the page differs

Per layer and overall, on `eval_iters` validation batches:
  - first-token attention: the mean weight queries at positions >= 1 give to position 0, and the fraction of
    heads whose most-attended key (weights averaged over queries >= 1) is position 0 ("98% of heads", Kaul et al.),
    and Gu et al.'s (2024) sink metric: the fraction of heads whose mean weight on position 0 exceeds 0.3
  - hidden states of each block's output: kurtosis across channels (3 for a Gaussian) for the first token and for
    the rest, the largest absolute activation, and its ratio to the median absolute activation (Sun et al. 2024's
    massive activations are ~1000x the median)
  - attention logits: top-1 and median absolute q.k/sqrt(d) (for diff: both maps)
  - gate scores (gated models): mean, fraction below 0.1, and the std across query positions (query dependence)
  - effective rank (exp of the entropy of the normalised singular values, Roy & Vetterli 2007) of the attention
    maps and of the pre-softmax score matrix Q K^T, averaged over heads: the seeds' low-rank question
  - quantization penalty: val loss and perplexity in full precision and with every Linear weight rounded to int8
    and to int4 (symmetric, per output channel, absmax scale, round to nearest), and W8A8: every Linear's weight
    and input in int8, per tensor, round to nearest, the input ranges from --calib_iters calibration batches; and the
    differences (penalties)
  - emergence (outlier_record, also logged during training with outlier_interval): per block output, kurtosis at
    token 0 and at the rest, max |activation| and max / median
Writes analysis.json in the run folder, prints a markdown report, and with matplotlib writes
attention_maps.png (every layer's head-averaged map for one sample); of another checkpoint than ckpt.pt
(--ckpt=RUN/best.pt), analysis_best.json and attention_maps_best.png beside them.
"""
import argparse
import copy
import json
import math
import os

import numpy as np
import torch

from checkpoint import load_checkpoint
from dataset import batch_rng, get_batch, load_meta, load_split
from hardware import add_device_args, autocast_context, device_and_dtype
from measures import kurtosis, outlier_curve
from measures import emergence_stats, outlier_record  # noqa: F401: tests/test_outliers.py reads them here
from output import pyplot, save_figure, write_json, write_text

HERE = os.path.dirname(os.path.abspath(__file__))


# --- the metrics, each on plain tensors so the tests can check them on constructed inputs

def first_token_attention(w):
    """w (B, H, T, T) -> (mean weight on key 0 over queries >= 1, (H, T) weight per key averaged over queries)."""
    q = w[:, :, 1:, :]                       # queries at positions >= 1
    return q[..., 0].mean().item(), q.mean(dim=(0, 2))


def uniform_first_token(allowed):
    """The first-token attention uniform weights over the keys each query may see would give: the reference for a
    sink. allowed (T, T) bool, as Attention.allowed. Under the causal mask query t gives 1/(t+1) to token 0, so
    early keys get more than 1/T even with no sink (0.020 at T = 256, 0.024 with mask_self; without the mask 1/T).
    It assumes rows that sum to 1: a softmax-1 row sums to less and a Diff row to 1 - lambda, so compare those
    with the baseline's measure rather than with this."""
    a = allowed[1:].double()
    return (a[:, 0] / a.sum(-1)).mean().item()


def first_token_heads(per_head):
    """Fraction of heads whose most-attended key, weights averaged over queries, is position 0."""
    return (per_head.argmax(-1) == 0).float().mean().item()


def sink_heads(per_head, eps=0.3):
    """Gu et al. 2024's sink metric: the fraction of heads whose weight on position 0, averaged over queries >= 1,
    exceeds eps (they use 0.3; a model has a sink when 20% or more of its heads do)."""
    return (per_head[:, 0] > eps).float().mean().item()


def effective_rank(m):
    """exp(entropy of the normalised singular values) of each matrix in m (..., n, n), averaged."""
    s = torch.linalg.svdvals(m.cpu().double())
    p = s / s.sum(-1, keepdim=True).clamp_min(1e-30)
    ent = -(p * torch.log(p.clamp_min(1e-30))).sum(-1)
    return torch.exp(ent).mean().item()


def quantize_weight(w, bits):
    """Round-to-nearest symmetric per-output-channel quantization: w ~ scale * round(w / scale), |q| <= 2^(b-1)-1."""
    qmax = 2 ** (bits - 1) - 1
    scale = w.abs().amax(dim=1, keepdim=True).clamp_min(1e-12) / qmax
    return (w / scale).round().clamp(-qmax, qmax) * scale


def quantized_copy(model, bits):
    m = copy.deepcopy(model)
    with torch.no_grad():
        for mod in m.modules():
            if isinstance(mod, torch.nn.Linear):
                mod.weight.copy_(quantize_weight(mod.weight, bits))
    return m


def quantize_tensor(x, absmax, bits=8):
    """Per-tensor symmetric round-to-nearest: x ~ s * round(x / s), s = absmax / (2^(b-1) - 1), |q| <= 2^(b-1) - 1
    (values beyond absmax clip). One scale for the whole tensor, so a single outlier channel coarsens every other."""
    qmax = 2 ** (bits - 1) - 1
    scale = max(float(absmax), 1e-12) / qmax
    return ((x.float() / scale).round().clamp(-qmax, qmax) * scale).to(x.dtype)


@torch.no_grad()
def activation_ranges(model, batches):
    """{Linear module name: the largest |input| it sees over the calibration batches} (the static ranges of W8A8)."""
    ranges, hooks = {}, []
    for name, mod in model.named_modules():
        if isinstance(mod, torch.nn.Linear):
            def note(m, inp, name=name):
                ranges[name] = max(ranges.get(name, 0.0), inp[0].detach().abs().max().item())
            hooks.append(mod.register_forward_pre_hook(note))
    model.eval()
    try:
        for x, y in batches:
            model(x, y)  # with targets: lm_head then sees every position, not only the last
    finally:
        for hk in hooks:
            hk.remove()
    return ranges


def w8a8_copy(model, calibration, bits=8):
    """A copy of the model whose every Linear computes in int8 on both sides, simulated: its weight rounded per tensor
    (one scale, absmax / 127) and its input fake-quantized per tensor with the static range activation_ranges
    measured on the calibration batches (kept apart from the batches the loss is measured on). Per tensor on both
    sides is the outlier-sensitive setting (Bondarenko et al. 2023; He et al. 2024: OPT-125m 16.00 -> 63.4 ppl);
    per-channel weights alone (quantize_weight) hide what an outlier activation channel costs."""
    ranges = activation_ranges(model, calibration)
    m = copy.deepcopy(model)
    with torch.no_grad():
        for name, mod in m.named_modules():
            if isinstance(mod, torch.nn.Linear) and name in ranges:  # not in ranges: never called by a forward
                mod.weight.copy_(quantize_tensor(mod.weight, mod.weight.abs().max(), bits))
                mod.register_forward_pre_hook(lambda mm, inp, r=ranges[name]: (quantize_tensor(inp[0], r, bits),))
    return m


# --- the CPU gate's page (results/pycode_gate_cpu/emergence.md): rendered from the run's files, never typed

# Claim 5's outlier precondition, fixed before any run here (evidence/claims.py's NEEDS['outliers_pc'] reads the same
# numbers): a baseline has outliers when some block's token-0 kurtosis exceeds 50 and its largest |activation| is
# over 100x the median. 50: far past a Gaussian's 3, a fifth of the most d = 256 channels can have (one channel
# carrying everything: (d^2 - 3d + 3) / (d - 1) = 254), where Kaul et al.'s wider baselines sit at 1657; 100x: the
# lenient end of Sun et al.'s massive activations (~1000x).
OUTLIER_KURTOSIS, OUTLIER_RATIO = 50, 100
# "clearly rising", the gate's reading of a curve: the mean of its last fifth of points at least RISING times the mean
# of its first fifth. Written after the first 400 steps of an earlier attempt of the gate had been seen (max/median
# 6 -> 12): a doubling over the run, not a drift within noise.
RISING = 2.0


def trend(values):
    """(mean of the first fifth, mean of the last fifth) of a curve's values, at least one point each."""
    n = max(1, len(values) // 5)
    return float(np.mean(values[:n])), float(np.mean(values[-n:]))


def gate_outcome(curve, tokens):
    """The gate's verdict on a curve, by the rules above: 'emerged' (the precondition holds at the last point),
    'rising' (both token-0 kurtosis and max/median at least RISING-fold from the first fifth to the last), else
    'below emergence at N tokens'."""
    last = curve[-1][1]
    if last['kurtosis_first'] > OUTLIER_KURTOSIS and last['massive_ratio'] > OUTLIER_RATIO:
        return f'emerged by {tokens:,} tokens'
    rises = [trend([c[k] for _, c in curve]) for k in ('kurtosis_first', 'massive_ratio')]
    if all(b >= RISING * a for a, b in rises):
        return f'rising at {tokens:,} tokens, below the precondition'
    return f'below emergence at {tokens:,} tokens'


def gate_run(folder):
    """The one run folder (<variant>_<depth>_s<seed>) under folder that holds a summary.json."""
    runs = sorted(d for d in os.listdir(folder) if os.path.exists(os.path.join(folder, d, 'summary.json')))
    if len(runs) != 1:
        raise ValueError(f"{folder}: the gate's page reads one finished run (a folder with summary.json), found "
                         f"{len(runs)}: {', '.join(runs) or 'none'}")
    return os.path.join(folder, runs[0])


def config_of(cfg):
    """The config file a run was trained from, as its out_dir names it (configs/<name>.py sets out/<name>), where
    that file exists; else its out_dir."""
    path = os.path.join('configs', os.path.basename(cfg['out_dir']) + '.py')
    return path if os.path.exists(os.path.join(HERE, path)) else f"--out_dir={cfg['out_dir']} (no config file of it)"


def gate_files(folder):
    """(run folder, summary.json, log.jsonl's records, analysis.json or None, tokens a step, the outlier curve)."""
    from output import read_log_lines
    run = gate_run(folder)
    with open(os.path.join(run, 'summary.json')) as f:
        s = json.load(f)
    log = [rec for _, rec in read_log_lines(os.path.join(run, 'log.jsonl'))]
    path = os.path.join(run, 'analysis.json')
    a = None
    if os.path.exists(path):
        with open(path) as f:
            a = json.load(f)
    cfg = s['config']
    curve = outlier_curve(log)
    if not curve:
        raise ValueError(f"{run}/log.jsonl has no outlier records: train it with --outlier_interval=N")
    return run, s, log, a, cfg['batch_size'] * cfg['block_size'] * cfg['gradient_accumulation_steps'], curve


def emergence_page(folder):
    """emergence.md's text: a pure function of the run's summary.json, log.jsonl and analysis.json."""
    from report import machine_label
    run, s, log, a, per_step, curve = gate_files(folder)
    cfg = s['config']
    tokens = s['iter'] * per_step
    evals = {r['iter']: r['val_loss'] for r in log if r.get('kind') == 'eval'}
    cpu = (s.get('machine') or {}).get('cpu') or {}
    where = (f"{machine_label(s['machine'])}, {s['dtype']}, {cpu.get('threads', '?')} thread"
             f"{'s' if cpu.get('threads') != 1 else ''}" if s.get('machine') else f"{s['device']}, {s['dtype']}")
    code = s.get('code') or {}
    outcome = gate_outcome(curve, tokens)
    (k0a, k0b), (ra, rb) = (trend([c[k] for _, c in curve]) for k in ('kurtosis_first', 'massive_ratio'))
    lines = [
        f"# The CPU gate: {os.path.basename(run)} ({outcome})",
        '',
        f"Rendered by `python analyze.py --emergence_page {os.path.relpath(folder, HERE)}` from the run's "
        f"`summary.json`, `log.jsonl` and `analysis.json`; do not edit by hand (`tests/test_outliers.py` re-renders it "
        f"and compares).",
        '',
        f"- run: `python train.py {config_of(cfg)}` ({cfg['n_layer']} layers, d {cfg['n_embd']}, {cfg['n_head']} heads, block {cfg['block_size']}, "
        f"batch {cfg['batch_size']}, {cfg['optimizer']} lr {cfg['learning_rate']:g} → {cfg['min_lr']:g}, weight "
        f"decay {cfg['weight_decay']:g}, bos {cfg['bos']}, seed {cfg['seed']})",
        f"- trained: {s['iter']:,} steps × {per_step:,} tokens = **{tokens:,} tokens**, final val loss "
        f"{s['final_val_loss']:.4f} (bytes: {s['final_val_loss'] / math.log(2):.3f} bits a byte)",
        f"- data: `{cfg['dataset']}`, corpus sha256 `{s.get('corpus_sha256')}`",
        f"- computed on: {where}; {s['tokens_per_sec']:,.0f} tokens/s, {s['wall_time_s'] / 60:.1f} min of "
        f"training; code `{code.get('commit')}`{' (uncommitted changes)' if code.get('dirty') else ''}",
        '',
        f"**Outcome: {outcome}.** The rule, fixed in `analyze.py`: emerged where the last point has token-0 kurtosis "
        f"> {OUTLIER_KURTOSIS} and max/median > {OUTLIER_RATIO} (claim 5's precondition); rising where both curves' "
        f"last fifth averages at least {RISING:g}× their first fifth; else below emergence. Token-0 kurtosis went "
        f"{k0a:.2f} → {k0b:.2f} ({k0b / k0a:.2f}×), max/median {ra:.1f} → {rb:.1f} ({rb / ra:.2f}×), first fifth "
        f"→ last fifth of {len(curve)} points; from the first point (step {curve[0][0]}) to the last, token-0 "
        f"kurtosis {curve[0][1]['kurtosis_first']:.2f} → {curve[-1][1]['kurtosis_first']:.2f} and max/median "
        f"{curve[0][1]['massive_ratio']:.1f} → {curve[-1][1]['massive_ratio']:.1f}.",
        '',
        f"## The curves (`log.jsonl`, every {cfg['outlier_interval']} steps; each the largest over the "
        f"{cfg['n_layer']} blocks' outputs, on one fixed batch of 8 validation windows, in the run's {s['dtype']})",
        '',
        '| step | tokens | token-0 kurtosis | rest kurtosis | max \\|act\\| | max / median | val loss |',
        '|---|---|---|---|---|---|---|',
    ]
    lines += [f"| {it} | {it * per_step:,} | {c['kurtosis_first']:.2f} | {c['kurtosis_rest']:.2f} | "
              f"{c['max_activation']:.1f} | {c['massive_ratio']:.1f} | "
              f"{f'{evals[it]:.4f}' if it in evals else ''} |" for it, c in curve]
    if a is not None:
        lines += ['', f"## The final model (`analysis.json`: `python analyze.py --out_dir=RUN --dtype={a['dtype']}`, "
                  f"{a['eval_iters']} batches of {a['batch_size']}, W8A8 calibrated on {a.get('calib_iters', '?')} "
                  f"others)", '', markdown(a, os.path.basename(run)).split('\n', 2)[2]]
    return '\n'.join(lines) + '\n'


def emergence_plot(folder, path):
    """The curves of emergence_page as a PNG (log scale), where matplotlib is installed."""
    plt = pyplot()
    if plt is None:
        return False
    run, _, _, _, per_step, curve = gate_files(folder)
    tok = [it * per_step / 1e6 for it, _ in curve]
    fig, ax = plt.subplots(figsize=(6, 3.5))
    for k, label in (('kurtosis_first', 'token-0 kurtosis'), ('kurtosis_rest', 'rest kurtosis'),
                     ('massive_ratio', 'max / median |act|')):
        ax.plot(tok, [c[k] for _, c in curve], label=label)
    ax.axhline(OUTLIER_KURTOSIS, ls=':', c='C0')
    ax.axhline(OUTLIER_RATIO, ls=':', c='C2')
    ax.set(xlabel='tokens (M)', yscale='log', title=os.path.basename(run))
    ax.legend(fontsize=8)
    save_figure(fig, path)
    return True


# --- the sink trajectory (results/shakespeare_full_cpu/sink_trajectory.md): analyze.py on snapshots over training

def trajectory_runs(folder):
    """{run: [analysis of each snapshot, by step]} from folder/sink_trajectory/<run>_iter<step>.json, the analysis.json
    this file wrote on each checkpoint a run left at an eval."""
    snaps = os.path.join(folder, 'sink_trajectory')
    runs = {}
    for name in sorted(os.listdir(snaps)):
        if name.endswith('.json') and '_iter' in name:
            with open(os.path.join(snaps, name)) as f:
                runs.setdefault(name.rsplit('_iter', 1)[0], []).append(json.load(f))
    if not runs:
        raise ValueError(f"{snaps} holds no <run>_iter<step>.json: write analyze.py's analysis.json of each snapshot "
                         f"there under that name")
    return {run: sorted(snaps, key=lambda a: a['iter']) for run, snaps in runs.items()}


def only(values, what):
    """The one value every snapshot has for what; a page that pooled snapshots measured differently would mislead."""
    values = set(values)
    if len(values) != 1:
        raise ValueError(f"the snapshots differ in {what} ({sorted(values, key=str)}): measure them alike")
    return values.pop()


def trajectory_table(run, snaps, uniform):
    """One run's rows: first-token attention per layer and overall, heads on token 0, kurtosis, max |act|, int4."""
    layers = only((len(a['layers']) for a in snaps), 'number of layers')
    head = ' | '.join(f'layer {i + 1}' for i in range(layers))
    lines = [f"{run}: first-token attention per layer (uniform weights would give {uniform:.3f}), overall; heads "
             f"whose most-attended key is token 0; kurtosis (tokens >= 1, mean of layers); largest |activation|; int4 "
             f"penalty",
             '', f'| step | {head} | overall | heads on token 0 | kurtosis | max abs act | int4 penalty |',
             '|' + '---|' * (layers + 6)]
    for a in snaps:
        o = a['overall']
        lines.append(f"| {a['iter']} | " + ' | '.join(f"{l['first_token_attention']:.4f}" for l in a['layers'])
                     + f" | {o['first_token_attention']:.4f} | {o['first_token_heads']:.2f} | {o['kurtosis_rest']:.2f}"
                     f" | {o['max_activation']:.2f} | {a['quantization']['loss_penalty_int4']:+.4f} |")
    return '\n'.join(lines)


# How an unfinished run of the trajectory ended: a record of what was done, not a measurement
STOPPED = {'softmax1_3L_s1': 'It was stopped on 2026-11-23 (commit `bdaa912`) and not resumed since; its checkpoint '
                             'was kept, uncommitted, in the checkout it ran in.'}


def trajectory_page(folder):
    """sink_trajectory.md's text: a pure function of the snapshots' analysis files (trajectory_runs) and the finished
    run's summary.json beside them. What it types is how the runs were made (commands, commits, dates, the machine)."""
    runs = trajectory_runs(folder)
    done = [r for r in runs if os.path.exists(os.path.join(folder, r, 'summary.json'))]
    if len(done) != 1:
        raise ValueError(f"{folder}: the trajectory page reads one finished run's summary.json, found {len(done)} "
                         f"among {', '.join(runs)}")
    with open(os.path.join(folder, done[0], 'summary.json')) as f:
        s = json.load(f)
    with open(os.path.join(folder, 'provenance.json')) as f:  # the machine and commit (evidence/backfill_provenance.py)
        prov = json.load(f)[done[0]]
    cfg = s['config']
    snaps = [a for r in runs for a in runs[r]]
    uniform = only((a['overall']['first_token_uniform'] for a in snaps), 'the uniform reference')
    n, bs, dtype = (only((a[k] for a in snaps), k) for k in ('eval_iters', 'batch_size', 'dtype'))
    T = only((a['model_args']['block_size'] for a in snaps), 'block_size')
    last = {r: runs[r][-1]['iter'] for r in runs}
    unfinished = [r for r in runs if r not in done]
    rel = os.path.relpath(folder, HERE)
    own = ''  # the finished run's last snapshot, where it is the run folder's analysis.json itself
    if os.path.exists(os.path.join(folder, done[0], 'analysis.json')):
        with open(os.path.join(folder, done[0], 'analysis.json')) as f:
            if json.load(f) == runs[done[0]][-1]:
                own = f"; {done[0]}'s last snapshot is the run folder's own `analysis.json`"
    lines = [
        "# Does a sink grow at the seed's schedule? analyze.py over training, on a CPU",
        '',
        f"Rendered by `python analyze.py --trajectory_page {rel}` from the snapshots' analysis files in "
        f"`sink_trajectory/` and `{done[0]}/summary.json`; do not edit by hand (`tests/test_findings_pages.py` "
        f"re-renders it and compares).",
        '',
        f"The seed's schedule (`PROFILE=full`: {cfg['max_iters']} steps, lr {cfg['learning_rate']:g}, dropout "
        f"{cfg['dropout']:g}, {cfg['n_layer']} layers), seed {cfg['seed']}, causal, on 2 cores of an "
        f"{prov['machine']}" + (' (*inferred*)' if prov['trained_at'] is None else '') + f", `dtype={cfg['dtype']}` "
        f"= {s['dtype']}, torch {s['torch_version']}, from a checkout of `{prov['trained_at'] or 'unknown'}` (the "
        f"folder's `provenance.json`). Evals of {cfg['eval_iters']} batches every "
        f"{cfg['eval_interval']} steps (`--eval_iters={cfg['eval_iters']}`; the batches are the first "
        f"{cfg['eval_iters']} of the profile's 200), so the evals cost little on a CPU. nanogpt ran its first "
        f"iterations on 2 threads and was then stopped (SIGTERM, checkpoint) and resumed on 1 thread pinned to core 0 "
        f"beside softmax-1 on core 1 (the step it stopped at is in `git show d3e4fed:{rel}/sink_trajectory.md`; the "
        f"committed log does not record it); the thread count changes the summation order, not the data, the dropout "
        f"masks or the schedule:",
        '',
        '```sh',
        'PROFILE=full SEEDS=1 DEPTHS=3L VARIANTS=nanogpt ./ablate.sh --eval_iters=20      # then, after the stop:',
        'OMP_NUM_THREADS=1 taskset -c 0 env PROFILE=full SEEDS=1 DEPTHS=3L VARIANTS=nanogpt '
        './ablate.sh --eval_iters=20',
        'OMP_NUM_THREADS=1 taskset -c 1 env PROFILE=full SEEDS=1 DEPTHS=3L VARIANTS=softmax1 '
        './ablate.sh --eval_iters=20',
        '```',
        '',
        f"Every ckpt.pt the runs wrote (one per eval) was hard-linked aside as it appeared, and `analyze.py` (main "
        f"between `a949fc3` and `0319c07`: the same measures; {dtype}, {n} validation batches of {bs} x {T}) ran on "
        f"the checkpoints of the steps below, `python analyze.py --out_dir=<folder of one snapshot> --eval_iters={n} "
        f"--batch_size={bs}`{own}. Its val loss on the profile's eval batches, for the comparison with the GPU run of "
        f"the same seed (`claims.md`), came from the command below; its output is not committed (`git show "
        f"c727f7d:{rel}/sink_trajectory.md` quotes it):",
        '',
        '```sh',
        'python train.py configs/nanogpt_3L.py --init_from=resume --out_dir=runs/shakespeare_full/nanogpt_3L_s1 \\',
        '    --eval_only=True --eval_iters=200 --seed=1 --device=cpu --max_iters=5000 --lr_decay_iters=5000 \\',
        '    --warmup_iters=100 --dropout=0.2',
        '```',
        '',
        f"The files are in `sink_trajectory/`. Uniform weights over the keys each query may see would give token 0 "
        f"**{uniform:.3f}** (queries 1-{T - 1} under the causal mask; a softmax-1 row sums to less than 1, so compare "
        f"it with nanogpt, not with {uniform:.3f}). Under the causal mask, uniform weights also make token 0 the "
        f"most-attended key of every head (\"heads on token 0\" = 1.0), as seed note 002 itself explains (token 0 is "
        f"the only key every query sees).",
    ]
    for r in unfinished:
        lines += ['', f"The {r} run is unfinished: its snapshots end at step {last[r]} of {cfg['max_iters']}."
                  + (f' {STOPPED[r]}' if r in STOPPED else '')]
    for r in runs:
        lines += ['', trajectory_table(r, runs[r], uniform)]
    return '\n'.join(lines) + '\n'


# the pages rendered from a folder's runs: --flag -> (the page it writes in DIR, its render)
RUN_PAGES = {'emergence_page': ('emergence.md', emergence_page),
             'trajectory_page': ('sink_trajectory.md', trajectory_page)}


def write_page(flag, folder, check):
    """Render a page of RUN_PAGES into folder; with check, write nothing and exit 1 where the file differs."""
    name, render = RUN_PAGES[flag]
    path = os.path.join(folder, name)
    try:
        text = render(folder)
    except (OSError, ValueError) as e:
        raise SystemExit(f'error: {e}')
    if check:
        with open(path, encoding='utf-8') as f:
            if f.read() != text:
                raise SystemExit(f"{path} differs from its render: run python analyze.py --{flag} {folder}")
        print(f'{path}: up to date')
        return
    write_text(path, text)
    if flag == 'emergence_page':
        emergence_plot(folder, os.path.join(folder, 'emergence.png'))
    print(text)


# --- collection

@torch.no_grad()
def val_loss(model, batches):
    return float(np.mean([model(x, y)[1].item() for x, y in batches]))


@torch.no_grad()
def analyze(model, batches):
    """All metrics on the given (x, y) batches. Returns a dict with 'layers' (one dict per layer) and overall keys."""
    model.eval()
    blocks = model.transformer.h
    L = len(blocks)
    acc = [dict(first=[], heads=[], kurt_first=[], kurt_rest=[], max_act=0.0, act_median=[], logit_max=0.0, logits=[],
                gate_mean=[], gate_low=[], gate_qstd=[], rank_attn=[], rank_qk=[]) for _ in range(L)]
    captured = {}
    hooks = []
    for i, blk in enumerate(blocks):
        # attention_maps() runs blocks with return_weights=True: a block's output is then (x, weights)
        hooks.append(blk.register_forward_hook(lambda m, inp, out, i=i: captured.__setitem__(('out', i), out[0])))
        hooks.append(blk.attn.register_forward_pre_hook(lambda m, inp, i=i: captured.__setitem__(('in', i), inp[0])))
    try:
        for x, _ in batches:
            maps = model.attention_maps(x)  # the naive forward: hooks see every block's input and output
            for i, (blk, w) in enumerate(zip(blocks, maps)):
                a = acc[i]
                f, per_head = first_token_attention(w.float())
                a['first'].append(f)
                a['heads'].append(per_head)
                h = captured[('out', i)]
                a['kurt_first'].append(kurtosis(h[:, 0]))
                a['kurt_rest'].append(kurtosis(h[:, 1:]))
                a['max_act'] = max(a['max_act'], h.abs().max().item())
                a['act_median'].append(h.abs().float().median().item())
                xin = captured[('in', i)]
                att = blk.attn
                q, k, _ = att.project(xin)
                if att.kind in ('diff', 'diffv2'):
                    q1, q2, k1, k2 = att.split_pairs(q, k)
                    score_maps = [(q1, k1), (q2, k2)]
                else:
                    score_maps = [(q, k)]
                for qq, kk in score_maps:
                    kk = kk.repeat_interleave(qq.size(1) // kk.size(1), dim=1)
                    s = (qq.float() @ kk.float().transpose(-2, -1)) / math.sqrt(qq.size(-1))
                    vals = s[..., att.allowed(s.size(-1), s.device)].abs()  # the scores the model can use
                    a['logit_max'] = max(a['logit_max'], vals.max().item())
                    a['logits'].append(vals.median().item())
                    a['rank_qk'].append(effective_rank(s[:1]))
                a['rank_attn'].append(effective_rank(w[:1].float()))
                if att.gate != 'none':
                    g = torch.sigmoid(att.gate_proj(xin).float())  # (B, T, heads or channels)
                    a['gate_mean'].append(g.mean().item())
                    a['gate_low'].append((g < 0.1).float().mean().item())
                    a['gate_qstd'].append(g.std(dim=1).mean().item())  # across query positions
    finally:
        for hk in hooks:
            hk.remove()
    layers = []
    for i, a in enumerate(acc):
        a['per_head'] = torch.stack(a['heads']).mean(0)  # (H, T) over all batches
        row = dict(layer=i + 1, first_token_attention=float(np.mean(a['first'])),
                   first_token_uniform=uniform_first_token(blocks[i].attn.allowed(a['per_head'].size(-1), 'cpu')),
                   first_token_heads=first_token_heads(a['per_head']), sink_heads=sink_heads(a['per_head']),
                   kurtosis_first=float(np.mean(a['kurt_first'])), kurtosis_rest=float(np.mean(a['kurt_rest'])),
                   max_activation=a['max_act'], massive_ratio=a['max_act'] / float(np.median(a['act_median'])),
                   logit_top1=a['logit_max'], logit_median=float(np.median(a['logits'])),
                   erank_attention=float(np.mean(a['rank_attn'])), erank_qk=float(np.mean(a['rank_qk'])))
        if a['gate_mean']:
            row.update(gate_mean=float(np.mean(a['gate_mean'])), gate_below_0_1=float(np.mean(a['gate_low'])),
                       gate_std_over_queries=float(np.mean(a['gate_qstd'])))
        layers.append(row)
    per_head = torch.cat([a['per_head'] for a in acc])  # every head of every layer
    overall = dict(first_token_attention=float(np.mean([r['first_token_attention'] for r in layers])),
                   first_token_uniform=float(np.mean([r['first_token_uniform'] for r in layers])),
                   first_token_heads=first_token_heads(per_head), sink_heads=sink_heads(per_head),
                   max_activation=max(r['max_activation'] for r in layers),
                   massive_ratio=max(r['massive_ratio'] for r in layers),
                   logit_top1=max(r['logit_top1'] for r in layers),
                   kurtosis_rest=float(np.mean([r['kurtosis_rest'] for r in layers])))
    return dict(layers=layers, overall=overall)


def quantization(model, batches):
    out = dict(fp=val_loss(model, batches))
    for bits in (8, 4):
        out[f'int{bits}'] = val_loss(quantized_copy(model, bits), batches)
    res = {}
    for k, v in out.items():
        res[f'loss_{k}'] = v
        res[f'ppl_{k}'] = math.exp(v)
    for bits in (8, 4):
        res[f'loss_penalty_int{bits}'] = out[f'int{bits}'] - out['fp']
        res[f'ppl_penalty_int{bits}'] = math.exp(out[f'int{bits}']) - math.exp(out['fp'])
    return res


def w8a8_penalty(model, batches, calibration, loss_fp=None):
    """W8A8 (w8a8_copy, ranges from the calibration batches) against full precision on the same batches: its val
    loss and perplexity and their penalties, loss_w8a8 - loss_fp and exp(loss_w8a8) - exp(loss_fp). analysis.json
    keeps it under 'w8a8', beside 'quantization' (the weight-only int8 and int4)."""
    fp = val_loss(model, batches) if loss_fp is None else loss_fp
    q = val_loss(w8a8_copy(model, calibration), batches)
    return dict(loss_fp=fp, loss_w8a8=q, ppl_w8a8=math.exp(q), loss_penalty_w8a8=q - fp,
                ppl_penalty_w8a8=math.exp(q) - math.exp(fp), calibration_batches=len(calibration))


def markdown(res, name):
    lines = [f'## {name}', '', '| layer | first-token attn (uniform) | heads on token 0 / > 0.3 (Gu) '
             '| kurtosis (tok 0 / rest) | max abs act (/ median) | top-1 / median abs logit | erank attn / QK '
             '| gate mean / <0.1 / std(q) |', '|---' * 8 + '|']
    for r in res['layers']:
        gate = (f"{r['gate_mean']:.2f} / {r['gate_below_0_1']:.2f} / {r['gate_std_over_queries']:.3f}"
                if 'gate_mean' in r else '')
        lines.append(f"| {r['layer']} | {r['first_token_attention']:.3f} ({r['first_token_uniform']:.3f}) | "
                     f"{r['first_token_heads']:.2f} / {r['sink_heads']:.2f} | "
                     f"{r['kurtosis_first']:.1f} / {r['kurtosis_rest']:.1f} | {r['max_activation']:.1f} "
                     f"({r['massive_ratio']:.0f}x) | "
                     f"{r['logit_top1']:.1f} / {r['logit_median']:.2f} | {r['erank_attention']:.1f} / "
                     f"{r['erank_qk']:.1f} | {gate} |")
    q = res['quantization']
    q = dict(q, **res.get('w8a8', {}))
    kinds = [('int8', 'int8'), ('int4', 'int4')] + ([('W8A8', 'w8a8')] if 'loss_w8a8' in q else [])
    lines += ['', f"val loss fp {q['loss_fp']:.4f} (ppl {q['ppl_fp']:.3f}); " + '; '.join(
        f"{name} {q[f'loss_{k}']:.4f} ({q[f'loss_penalty_{k}']:+.4f}, ppl {q[f'ppl_penalty_{k}']:+.3f})"
        for name, k in kinds)]
    return '\n'.join(lines)


def heatmaps(model, x, path):
    plt = pyplot()
    if plt is None:
        return False
    from matplotlib.colors import LogNorm
    maps = model.attention_maps(x[:1])
    fig, axes = plt.subplots(1, len(maps), figsize=(3 * len(maps) + 1, 3), squeeze=False)
    # a log colour scale: a causal row spreads 1 over up to T keys, so on a linear scale all but the first rows
    # are black; weights below 1e-3 (the masked future among them) take the darkest colour
    norm = LogNorm(vmin=1e-3, vmax=1.0, clip=True)
    for ax, (i, w) in zip(axes[0], enumerate(maps)):
        image = ax.imshow(w[0].float().mean(0).abs().cpu().numpy(), cmap='viridis', norm=norm)
        ax.set(title=f'layer {i + 1}', xlabel='key', ylabel='query' if i == 0 else None)
        ax.title.set_fontsize(8)
    fig.colorbar(image, ax=list(axes[0]), label='attention weight, mean over heads (|w| for Diff)', shrink=0.8)
    save_figure(fig, path)
    return True


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    ap.add_argument('--out_dir', default='out')
    ap.add_argument('--ckpt', default=None, help='default: OUT_DIR/ckpt.pt (the last state); OUT_DIR/best.pt holds '
                    'the weights of the best val loss')
    ap.add_argument('--eval_iters', type=int, default=10)
    ap.add_argument('--batch_size', type=int, default=8)
    ap.add_argument('--calib_iters', type=int, default=4, help="batches W8A8's activation ranges are taken on")
    ap.add_argument('--seed', type=int, default=1337)
    # full precision by default: the same numbers on every machine, and an int8 penalty of 1e-4 in loss is about
    # the size of bf16's rounding ('auto' is bf16 on GPUs and on some CPUs)
    add_device_args(ap, dtype='float32')
    ap.add_argument('--emergence_page', metavar='DIR', help="write DIR/emergence.md (and emergence.png) from the one "
                    "run under DIR that holds a summary.json, its log.jsonl's outlier curves and its analysis.json; "
                    "nothing else is done")
    ap.add_argument('--trajectory_page', metavar='DIR', help="write DIR/sink_trajectory.md from the snapshots' "
                    "analysis files in DIR/sink_trajectory/ and the finished run's summary.json; nothing else is done")
    ap.add_argument('--check', action='store_true', help='with a --*_page flag: write nothing, exit 1 where the page '
                    'differs from its render')
    args = ap.parse_args(argv)
    if args.check and not any(getattr(args, flag) for flag in RUN_PAGES):
        ap.error('--check checks a page: give --emergence_page DIR or --trajectory_page DIR')
    for flag in RUN_PAGES:
        if getattr(args, flag):
            return write_page(flag, getattr(args, flag), args.check)
    if args.eval_iters < 1 or args.batch_size < 1:
        ap.error('--eval_iters and --batch_size must be at least 1')
    if args.calib_iters < 1:
        ap.error("--calib_iters must be at least 1: W8A8's activation ranges are taken on that many batches")
    path = args.ckpt or os.path.join(args.out_dir, 'ckpt.pt')
    device, device_type, dtype = device_and_dtype(args)
    try:
        model, ckpt = load_checkpoint(path, device)
    except (FileNotFoundError, ValueError) as e:
        raise SystemExit(f'error: {e}')
    cfg = ckpt['config']
    meta = load_meta(cfg['dataset'])
    try:
        val = load_split(cfg['dataset'], 'val', meta, (ckpt.get('tokenizer') or {}).get('bos'))  # as it was trained
    except FileNotFoundError as e:
        raise SystemExit(f"error: {path} is measured on the validation split it was trained beside, and that is not "
                         f"here ({e.filename or e}): prepare dataset {cfg['dataset']!r} on this machine first")
    T = model.config.block_size
    batches = [get_batch(val, batch_rng(args.seed, 3, k), args.batch_size, T, device) for k in range(args.eval_iters)]
    # W8A8's activation ranges come from other windows of the same split (stream 4), so that they are not fitted to
    # the batches the penalty is measured on
    calibration = [get_batch(val, batch_rng(args.seed, 4, k), args.batch_size, T, device)
                   for k in range(args.calib_iters)]
    with autocast_context(dtype, device_type):
        res = analyze(model, batches)
        res['quantization'] = quantization(model, batches)
        res['w8a8'] = w8a8_penalty(model, batches, calibration, res['quantization']['loss_fp'])
    res.update(checkpoint=path, iter=ckpt['iter_num'], eval_iters=args.eval_iters, batch_size=args.batch_size,
               calib_iters=args.calib_iters,
               model_args=ckpt['model_args'], optimizer=cfg.get('optimizer'), device=device, dtype=dtype)
    # ckpt.pt's measures are the run's (report.py reads analysis.json); another checkpoint's go beside them
    # (best.pt: analysis_best.json), not over them
    folder = os.path.dirname(os.path.abspath(path))
    tag = os.path.splitext(os.path.basename(path))[0]
    tag = '' if tag == 'ckpt' else f'_{tag}'
    write_json(os.path.join(folder, f'analysis{tag}.json'), res)
    print(f'wrote {os.path.join(folder, f"analysis{tag}.json")}')
    if heatmaps(model, batches[0][0], os.path.join(folder, f'attention_maps{tag}.png')):
        print(f'wrote {os.path.join(folder, f"attention_maps{tag}.png")}')
    print(markdown(res, os.path.basename(folder)))


if __name__ == '__main__':
    main()
