"""
Several seeds as one batched model (train.py --seeds) against the same seeds as separate runs, one after another:
wall time, tokens/s and whether the losses agree. Issue #28: on a GPU a 3-layer model's step is launch-bound
(results/bench_gpu.md), so K seeds in one step of K-times-wider kernels could cost little more than one.

$ python bench_batched.py configs/nanogpt_3L.py --seeds 1 2 --max_iters 20 --device cpu      # a look on the CPU
$ python bench_batched.py configs/nanogpt_3L.py --seeds 1 2 3 4 5 6 --max_iters 600 --dtype bfloat16 \\
      --json results/batched_6.json -- --compile=True                                      # on a GPU

Each training is train.py in its own process, as a sweep runs it (this imports nothing of the trainer), into a
scratch folder that is removed at the end (--keep to keep it). The wall time is the process's, start-up and
compilation included, as a sweep pays them; tokens/s is train.py's own, without the first log window and the
evaluations (summary.json), summed over the group's seeds. At dropout 0 in fp32 the group's losses equal the
separate runs' to 1e-5 (tests/test_train.py; TF32 on a GPU rounds more); in bf16 they differ by rounding; with dropout a seed's masks in a
group are not its separate run's, so the gap says nothing there. A benchmark, not a test.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

from output import write_json

HERE = os.path.dirname(os.path.abspath(__file__))


def train(args, out_dir, who, extra):
    """train.py on the config with the benchmark's schedule; returns the process's wall time in seconds."""
    n = args.max_iters
    cmd = [sys.executable, os.path.join(HERE, 'train.py'), args.config, who, f'--out_dir={out_dir}',
           f'--max_iters={n}', f'--lr_decay_iters={n}', f'--eval_interval={n}', f'--eval_iters={args.eval_iters}',
           f'--log_interval={args.log_interval}', f'--device={args.device}', f'--dtype={args.dtype}', *extra]
    t = time.perf_counter()
    p = subprocess.run(cmd, cwd=HERE, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"bench_batched.py: {' '.join(cmd)} failed (exit {p.returncode}):\n{p.stderr.strip()[-2000:]}")
    return time.perf_counter() - t


def read_run(out_dir):
    with open(os.path.join(out_dir, 'summary.json')) as f:
        summary = json.load(f)
    with open(os.path.join(out_dir, 'log.jsonl')) as f:
        losses = [r['loss'] for r in map(json.loads, f) if r.get('kind') == 'train']
    return summary, losses


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    ap.add_argument('config', help='a train.py config, e.g. configs/nanogpt_3L.py')
    ap.add_argument('--seeds', nargs='+', type=int, default=[1, 2, 3])
    ap.add_argument('--max_iters', type=int, default=200)
    ap.add_argument('--eval_iters', type=int, default=20)
    ap.add_argument('--log_interval', type=int, default=10)
    ap.add_argument('--device', default='auto')
    ap.add_argument('--dtype', default='float32', choices=['float32', 'bfloat16', 'auto'])
    ap.add_argument('--json', default=None, help='write the timings and losses here')
    ap.add_argument('--keep', default=None, help='train into this folder and keep it (default: a scratch folder)')
    args, extra = ap.parse_known_args(argv)
    extra = [a for a in extra if a != '--']
    if len(set(args.seeds)) != len(args.seeds):
        ap.error(f"--seeds {args.seeds} names a seed twice")
    if args.max_iters < 2 * args.log_interval:
        ap.error(f"--max_iters ({args.max_iters}) must be at least twice --log_interval ({args.log_interval}): "
                 f"tokens/s leaves out the first log window")
    root = args.keep or tempfile.mkdtemp(prefix='bench_batched_')
    try:
        K = len(args.seeds)
        t_group = train(args, os.path.join(root, 'group_s{seed}'), f"--seeds={' '.join(map(str, args.seeds))}", extra)
        t_alone = [train(args, os.path.join(root, f'alone_s{s}'), f'--seed={s}', extra) for s in args.seeds]
        group = [read_run(os.path.join(root, f'group_s{s}')) for s in args.seeds]
        alone = [read_run(os.path.join(root, f'alone_s{s}')) for s in args.seeds]
    finally:
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)
    gap = max(abs(a - b) for (_, la), (_, lb) in zip(group, alone) for a, b in zip(la, lb))
    tok_group = sum(s['tokens_per_sec'] for s, _ in group)
    tok_alone = sum(s['tokens_per_sec'] for s, _ in alone) / K
    result = dict(config=args.config, seeds=args.seeds, max_iters=args.max_iters, extra=extra,
                  device=group[0][0]['device'], dtype=group[0][0]['dtype'], compile=group[0][0]['compile'],
                  wall_s_group=t_group, wall_s_alone=t_alone, tokens_per_sec_group=tok_group,
                  tokens_per_sec_alone=tok_alone, max_abs_loss_gap=gap,
                  mfu_note='tokens/s x flops per token / peak: train.py logs each seed\'s share (log.jsonl mfu)',
                  losses_group=[l for _, l in group], losses_alone=[l for _, l in alone])
    print(f"{K} seeds of {args.config}, {args.max_iters} steps on {result['device']} ({result['dtype']}, compile "
          f"{result['compile']}): one batched process {t_group:.1f} s, {K} separate runs {sum(t_alone):.1f} s "
          f"({sum(t_alone) / t_group:.2f}x); tokens/s {tok_group:,.0f} batched against {tok_alone:,.0f} a separate "
          f"run ({tok_group / tok_alone:.2f}x); largest |batched - separate| training loss {gap:.2e}")
    if args.json:
        write_json(args.json, result)
    return result


if __name__ == '__main__':
    main()
