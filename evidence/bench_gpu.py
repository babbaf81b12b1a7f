"""
The GPU check: one command, the first thing to run on a machine with a GPU. It fits a short loan of one.

$ bash evidence/loan.sh run --budget 540 --out DIR            # a loan's first command: the queue below, from a
                                                              # clean checkout of the commit loan.sh pack carried
$ python evidence/bench_gpu.py --next --budget 540 --out DIR  # the GPU queue (gpu_queue.py): the jobs results/ waits on
$ python evidence/bench_gpu.py --budget 540 --out DIR         # the check: results.json and results.md in DIR
$ python evidence/bench_gpu.py --dry-run [--next] --out DIR   # the same code on the CPU with tiny settings (a test)

Each step runs in a process of its own with a time limit: the steps go most important first, a step that needs
more time than is left is skipped and says so, one that overruns is killed, and each step's result is written to
DIR/results.json and DIR/results.md as soon as it ends, so a check cut short still brings back what it measured.
Nothing needs the network or wandb. Long runs go to a scratch folder (--scratch), never to DIR: DIR holds at most
results.json, results.md, log.txt and, for --next, queue.json and runs.tar.gz: every finished run's small files and
each job's ablate.sh output (`python evidence/gpu_queue.py collect DIR` puts the runs under results/). A GPU loan
brings back at most 8 files from at most 2 folders down, so nothing else goes there.

The steps (results/bench_gpu.md says what each measures and why):
  env          the machine, the commit, and its two ceilings measured: device memory bandwidth (a large copy) and
               the bf16 matrix rate (an 8192^3 product)
  floor        the seed's 3-layer step counted on this device: FLOPs, and the bytes its eager kernels read and
               write (a dispatch mode sums every op's inputs and outputs); the floor is the larger of FLOPs / rate
               and bytes / bandwidth, for a training step and for an eval forward
  smoke        a capture and replay of one tiny model a family of attention (SMOKE): the sanity's minute
  eval_smoke   the eval step on 20 batches a split: the grouped evaluation's equal loss, the sanity's part of it
  graph_tests  tests/test_cuda.py's CUDA graph and reduce-overhead tests: is the graphed step right?
  alone        one 3-layer run alone (the seed's schedule: bf16, dropout 0.2): eager, compiled, graphed, graphed +
               compiled; ms/step, tokens/s, MFU against the FLOP rate, and the floor over the step time
  eval         one evaluation of the seed's schedule (200 batches a split) by train.py's estimate_loss, a batch a
               forward against eval_group's auto, eagerly and graphed: seconds, and the losses (equal to rounding)
  gpt2_nanogpt the 124M config, then gpt2_diff the paper's Diff layout at 124M, each its own step (a failure costs
               only itself): tokens/s, MFU and peak memory for a few steps
  cuda_tests   the rest of tests/test_cuda.py
  jobs         the seed's five 3-layer runs (1000 steps, its evaluations), one at a time and five at once (JOBS)
"""
import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tarfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the repository's root
import gpu_queue  # noqa: E402
from gpu_queue import SEED5  # noqa: E402
from output import write_json, write_text  # noqa: E402

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the repository's root

# (step, seconds it needs at least, seconds it may take at most), most important first
STEPS = [('env', 10, 60), ('smoke', 20, 45), ('eval_smoke', 15, 40), ('floor', 10, 60), ('graph_tests', 60, 300),
         ('alone', 60, 200), ('eval', 30, 120), ('cuda_tests', 60, 200), ('gpt2_nanogpt', 60, 150),
         ('gpt2_diff', 60, 150), ('jobs', 90, 240)]
# the sanity's smoke: tests/test_cuda.py's capture-and-replay test (train steps, the grouped eval forward) on one
# model of each family of attention a sweep runs: the four attentions, and the masking bugs' naive path of each of
# softmax, diff and cosine (test_bench_gpu checks that these cover every family of the sweep models)
SMOKE = ('nanogpt', 'diff', 'needle_diffv2', 'norm_sym', 'nanogpt+zero_future', 'diff+time_norm',
         'norm_sym+zero_future')
CAPTURE_TEST = 'tests/test_cuda.py::test_cuda_graph_captures_every_sweep_model_and_replays_its_eager_steps'

# the seed's 3-layer model and schedule (configs/base_shakespeare_char.py, ablate.sh PROFILE=full)
SEED_3L = dict(n_layer=3, n_head=8, n_embd=256, block_size=256, batch_size=32, vocab_size=65, bias=False, dropout=0.2)
TINY = dict(n_layer=2, n_head=2, n_embd=32, block_size=32, batch_size=4, vocab_size=65, bias=False, dropout=0.2)
# what --dry-run appends to every train.py command: tiny, on the CPU, fp32, eager but where the step compiles
TINY_ARGS = ['--n_embd=32', '--n_head=2', '--block_size=32', '--batch_size=4', '--eval_iters=1', '--device=cpu',
             '--dtype=float32', '--compile=False']


# -----------------------------------------------------------------------------------------------------------
# the orchestrator: each step in a process of its own, time-boxed, its result written at once

def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    ap.add_argument('--out', required=True, help='where results.json, results.md and log.txt go')
    ap.add_argument('--budget', type=float, default=540, help='seconds for the whole check (default 540)')
    ap.add_argument('--dry-run', action='store_true', help='the same code on the CPU with tiny settings')
    ap.add_argument('--next', action='store_true', help="run the GPU queue's pending jobs instead of the check")
    ap.add_argument('--job', action='append', help='with --next: only this job of the queue (repeatable)')
    ap.add_argument('--cut-after', type=int, help=argparse.SUPPRESS)  # the dry run: stop a job after N runs came back
    ap.add_argument('--steps', nargs='+', choices=[s for s, _, _ in STEPS], help='only these steps (default all)')
    ap.add_argument('--scratch', default=None, help='where runs go (default: a folder under /tmp, removed after)')
    ap.add_argument('--step', help=argparse.SUPPRESS)  # internal: run one step in this process
    ap.add_argument('--queue-table', action='store_true', help="print the queue's table for results/bench_gpu.md")
    if '--queue-table' in (sys.argv[1:] if argv is None else argv):
        print(queue_table())
        return 0
    args = ap.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    if args.step:
        return run_step(args)
    t0 = time.monotonic()
    scratch = args.scratch or os.path.join('/tmp', f'bench_gpu_{os.getpid()}')
    os.makedirs(scratch, exist_ok=True)
    path = os.path.join(args.out, 'results.json')
    results = dict(mode=('dry-run ' if args.dry_run else '') + ('queue' if args.next else 'check'),
                   budget_s=args.budget, started=time.strftime('%Y-%m-%d %H:%M:%S %Z'), steps={})
    plan = [('env', 10, 60), ('queue', 30, 1e9)] if args.next else \
        [s for s in STEPS if not args.steps or s[0] in args.steps]
    try:
        for name, need, cap in plan:
            left = args.budget - (time.monotonic() - t0) - 5  # 5 s kept for the last write
            try:
                if left < need:
                    results['steps'][name] = dict(status='skipped', why=f"{left:.0f} s left, it needs {need} s")
                else:
                    results['steps'][name] = run_child(args, name, scratch, min(cap, left), results)
            finally:  # also when stopped: what it measured so far
                results['elapsed_s'] = round(time.monotonic() - t0, 1)
                write_json(path, results)
                write_text(os.path.join(args.out, 'results.md'), render(results))
            print(f"[{results['elapsed_s']:6.1f} s] {name}: {summary_line(results['steps'][name])}", flush=True)
    except SystemExit as e:  # a SIGTERM or SIGINT: the step and everything it started have ended
        print(f"bench_gpu.py: stopped during {name}; results.json has every step before it", flush=True)
        return e.code
    finally:
        if not args.scratch:
            shutil.rmtree(scratch, ignore_errors=True)
    print(render(results))
    bad = [n for n, s in results['steps'].items() if s['status'] in ('failed', 'error')]
    return 1 if bad else 0


def run_child(args, name, scratch, limit, results):
    """One step as `bench_gpu.py --step NAME` with a time limit; its partial result if it overran or failed."""
    part = os.path.join(scratch, f'{name}.json')
    if os.path.exists(part):
        os.remove(part)
    cmd = [sys.executable, os.path.abspath(__file__), '--step', name, '--out', args.out, '--scratch', scratch]
    cmd += ['--dry-run'] if args.dry_run else []
    cmd += ['--next'] if args.next else []
    cmd += [a for j in args.job or [] for a in ('--job', j)]
    cmd += ['--cut-after', str(args.cut_after)] if args.cut_after else []
    env = dict(os.environ, PYTHONUNBUFFERED='1', BENCH_GPU_DONE=json.dumps(results['steps']),  # earlier steps' results
               BENCH_GPU_UNTIL=str(time.time() + limit))  # when the step is stopped: a queue job stops itself before
    t = time.monotonic()
    with open(os.path.join(args.out, 'log.txt'), 'a') as log:
        log.write(f"\n===== {name} (limit {limit:.0f} s)\n")
        log.flush()
        p = subprocess.Popen(cmd, cwd=HERE, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        # the step and everything it started: at its limit, or when this check is stopped (SIGTERM, SIGINT), a TERM
        # (train.py saves and stops; a queue job stops its launches within gpu_queue.GRACE), then a KILL
        try:
            stopped = gpu_queue.wait_all([p], time.monotonic() + limit, grace=gpu_queue.GRACE + 5)
        except SystemExit:
            results['steps'][name] = dict(status='stopped', why='the check was stopped (SIGTERM or SIGINT)',
                                          seconds=round(time.monotonic() - t, 1))
            raise
        rc = None if stopped else p.returncode
    out = json.load(open(part)) if os.path.exists(part) else {}
    out['seconds'] = round(time.monotonic() - t, 1)
    if rc is None:
        out['status'] = 'timed out'
        out['why'] = f"stopped at its limit of {limit:.0f} s; what it finished is above"
    elif rc != 0:
        out['status'] = 'error'
        out['why'] = out.get('why') or f"exit {rc}: see log.txt"
    else:
        out.setdefault('status', 'ok')
    return out


def summary_line(s):
    return s['status'] + (f" ({s['why']})" if s.get('why') else '') + (f", {s['seconds']} s" if 'seconds' in s else '')


# -----------------------------------------------------------------------------------------------------------
# the steps, each in its own process: ctx.save() writes what it has so far

class Step:
    def __init__(self, args):
        self.args, self.dry = args, args.dry_run
        self.scratch = args.scratch
        self.path = os.path.join(args.scratch, f'{args.step}.json')
        self.result = {}
        self.done = json.loads(os.environ.get('BENCH_GPU_DONE') or '{}')  # the earlier steps' results
        self.env = self.done.get('env', {})

    def save(self, **kv):
        self.result.update(kv)
        write_json(self.path, self.result)

    def train(self, name, *args, check=True):
        """train.py in a process, into scratch/name; returns (returncode, output tail, run folder)."""
        out = os.path.join(self.scratch, name)
        shutil.rmtree(out, ignore_errors=True)
        tiny = TINY_ARGS if self.dry else []
        if '--compile=True' in args:  # the dry run really compiles (Inductor on the CPU) where the step does
            tiny = [a for a in tiny if a != '--compile=False']
        cmd = [sys.executable, 'train.py', *args, f'--out_dir={out}', *tiny]
        p = subprocess.run(cmd, cwd=HERE, capture_output=True, text=True)
        print(f"$ {' '.join(cmd)}\n{p.stdout[-1500:]}{p.stderr[-1500:]}", flush=True)
        if check and p.returncode != 0:
            raise RuntimeError(f"train.py {name} failed (exit {p.returncode}): {p.stderr.strip()[-300:]}")
        return p.returncode, p.stderr.strip()[-300:], out


def run_step(args):
    ctx = Step(args)
    try:
        globals()['step_' + args.step](ctx)
    except Exception as e:  # noqa: BLE001: recorded, and the check goes on with the next step
        ctx.save(status='error', why=f"{type(e).__name__}: {str(e)[:400]}")
        raise
    return 0


def device():
    import torch
    return 'cuda' if torch.cuda.is_available() else 'cpu'


def step_env(ctx):
    import torch
    dev = 'cpu' if ctx.dry else device()
    from rundir import code_version
    code = code_version(untracked=False)  # the check's scratch files are not code
    # the commit the tree's own git vouches for, never a claimed one: a device machine's copy of the tree may carry an
    # older .git (the checks of 2026-11-26 named 1d3817f for newer trees), so carry the checkout's .git along
    claimed = os.environ.get('BENCH_GPU_COMMIT')
    commit = (code['commit'] or '')[:7] or None
    if claimed and not (commit and code['commit'].startswith(claimed) and not code['dirty']):
        raise RuntimeError(f"BENCH_GPU_COMMIT={claimed}, but this tree's git says {commit or 'nothing'}"
                           f"{' with changes' if code['dirty'] else ''}: carry the checkout's .git with the tree")
    info = dict(torch=torch.__version__, cuda=torch.version.cuda, python=sys.version.split()[0], device=dev,
                commit=commit, dirty=bool(code['dirty']))
    if dev == 'cuda':
        p = torch.cuda.get_device_properties(0)
        info.update(gpu=p.name, memory_gib=round(p.total_memory / 2 ** 30, 1), sms=p.multi_processor_count,
                    capability=f"{p.major}.{p.minor}")
    from hardware import cpu_info
    info['host_cpu'] = cpu_info()
    ctx.save(**info)
    ok = subprocess.run([sys.executable, 'data/shakespeare_char/prepare.py'], cwd=HERE, capture_output=True, text=True)
    if ok.returncode != 0:
        raise RuntimeError(f"data/shakespeare_char/prepare.py failed: {ok.stderr[-300:]} (carry input.txt in)")
    ctx.save(**ceilings(dev, small=ctx.dry or dev == 'cpu'))  # a CPU: small sizes (a GPU's take minutes there)


def timed(fn, reps, dev):
    """Median seconds of fn() over reps calls, after two warm-ups, synchronised on CUDA."""
    import torch
    sync = torch.cuda.synchronize if dev == 'cuda' else (lambda: None)
    for _ in range(2):
        fn()
    sync()
    ts = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        sync()
        ts.append(time.perf_counter() - t)
    return statistics.median(ts)


def ceilings(dev, small=False):
    """The device's two ceilings, measured: bytes/s of a large copy (read + written), bf16 FLOP/s of a matmul."""
    import torch
    n_bytes = 2 ** 22 if small else 2 ** 30
    src = torch.randn(n_bytes // 4, device=dev)
    dst = torch.empty_like(src)
    t = timed(lambda: dst.copy_(src), 10, dev)
    n = 256 if small else 8192
    a, b = (torch.randn(n, n, device=dev, dtype=torch.bfloat16) for _ in range(2))
    tm = timed(lambda: a @ b, 10, dev)
    return dict(bandwidth_gbs=float(f'{2 * n_bytes / t / 1e9:.4g}'), bf16_tflops=float(f'{2 * n ** 3 / tm / 1e12:.4g}'))


def count_step(cfg, dev, dtype):
    """FLOPs (model.flops_per_token) and the bytes the eager kernels read and write, for one training step (train.step:
    forward, backward, clipping, fused AdamW) and one eval forward of a GPT of cfg. Bytes: every aten op's tensor
    inputs and outputs, views excluded; a fused kernel (compile) moves less, so this bounds the eager step, an upper
    bound on what a fused step must move."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_flatten
    from hardware import autocast_context
    from model import GPT, GPTConfig

    class Bytes(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.n = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            if func.is_view or func in (torch.ops.aten.detach.default,):
                return out
            for t in tree_flatten((args, kwargs, out))[0]:
                if isinstance(t, torch.Tensor) and t.device.type == torch.device(dev).type:
                    self.n += t.numel() * t.element_size()
            return out

    B, T = cfg['batch_size'], cfg['block_size']
    model = GPT(GPTConfig(**{k: v for k, v in cfg.items() if k != 'batch_size'})).to(dev)
    opt = model.configure_optimizers(0.1, 3e-4, (0.9, 0.99))
    x = torch.randint(cfg['vocab_size'], (B, T), device=dev)
    ac = autocast_context(dtype, torch.device(dev).type)
    from train import step  # the trainer's one step, counted as it runs (a benchmark of the trainer, not a tool)
    scaler = torch.amp.GradScaler(enabled=False)
    for _ in range(2):  # AdamW's state exists from the second step on: count that one
        mode = Bytes()
        with mode:
            step(model, opt, scaler, [(x, x)], 1, 1.0, ac)
    train_bytes = mode.n
    model.eval()
    mode = Bytes()
    with mode, torch.no_grad(), ac:
        model(x, x)
    flops = model.flops_per_token(T) * B * T
    return dict(train_flops=flops, eval_flops=flops / 3, train_bytes=train_bytes, eval_bytes=mode.n)


def step_floor(ctx):
    dev = 'cpu' if ctx.dry else device()
    cfg = TINY if ctx.dry else SEED_3L
    c = count_step(cfg, dev, 'float32' if ctx.dry else 'bfloat16')
    bw, rate = ctx.env.get('bandwidth_gbs'), ctx.env.get('bf16_tflops')
    out = dict(model=cfg, **c)
    if bw and rate:
        for k in ('train', 'eval'):
            t_flop, t_byte = c[f'{k}_flops'] / (rate * 1e12), c[f'{k}_bytes'] / (bw * 1e9)
            out[f'{k}_floor_ms'] = round(1e3 * max(t_flop, t_byte), 4)
            out[f'{k}_bound'] = 'bytes' if t_byte > t_flop else 'FLOPs'
        # a 5000-step run of the seed's schedule: 21 evaluations of 200 batches of each split
        run_s = 5000 * out['train_floor_ms'] / 1e3 + 21 * 400 * out['eval_floor_ms'] / 1e3
        out['run_5000_floor_s'] = round(run_s, 1)
        out['eval_share_of_run'] = round(21 * 400 * out['eval_floor_ms'] / 1e3 / run_s, 3)
    ctx.save(**out)
    # every cell of the seed's table, counted the same way: the table's floor is the sum over its runs, each variant
    # and depth at its own bytes and FLOPs (Diff's two maps and the cosine weights move more than nanogpt's)
    cells = {}
    for v in (SEED5.split()[:2] if ctx.dry else SEED5.split()):
        for depth in (('3L',) if ctx.dry else ('3L', '6L', '8L')):
            c = count_step(seed_model(v, depth, tiny=ctx.dry), dev, 'float32' if ctx.dry else 'bfloat16')
            cell = dict(c, train_bytes_ms=round(1e3 * c['train_bytes'] / (bw * 1e9), 4) if bw else None,
                        train_flops_ms=round(1e3 * c['train_flops'] / (rate * 1e12), 4) if rate else None,
                        eval_bytes_ms=round(1e3 * c['eval_bytes'] / (bw * 1e9), 4) if bw else None,
                        eval_flops_ms=round(1e3 * c['eval_flops'] / (rate * 1e12), 4) if rate else None)
            if bw and rate:  # a 5000-step run: the larger bound of each part, 8,400 eval batches
                cell['run_5000_floor_s'] = round(
                    5000 * max(cell['train_bytes_ms'], cell['train_flops_ms']) / 1e3 +
                    8400 * max(cell['eval_bytes_ms'], cell['eval_flops_ms']) / 1e3, 2)
            cells[f'{v}_{depth}'] = cell
            ctx.save(cells=cells)
    if cells and all('run_5000_floor_s' in c for c in cells.values()):
        ctx.save(table_45_floor_s=round(3 * sum(c['run_5000_floor_s'] for c in cells.values()), 1))


def seed_model(variant, depth, tiny=False):
    """configs/<variant>_<depth>.py's model at the seed's dropout 0.2 and batch, as count_step takes it."""
    from config import MODEL_KEYS, parse_config
    cfg = parse_config([f'configs/{variant}_{depth}.py', '--dropout=0.2'])
    out = {k: cfg[k] for k in MODEL_KEYS} | dict(vocab_size=65, batch_size=cfg['batch_size'])
    return out | ({k: TINY[k] for k in ('n_layer', 'n_head', 'n_embd', 'block_size', 'batch_size')} if tiny else {})


def pytest_step(ctx, select):
    """tests/test_cuda.py's tests that select names (a -k expression after the file, or node ids), each test's outcome
    saved as it ends (a step stopped at its limit keeps what finished)."""
    cmd = [sys.executable, '-m', 'pytest', '-v', '-p', 'no:cacheprovider', *select]
    if ctx.dry:
        cmd.append('--collect-only')
    passed, failed, skipped, summary = [], [], [], ''
    p = subprocess.Popen(cmd, cwd=HERE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    for line in p.stdout:
        print(line, end='', flush=True)
        m = re.match(r'^(tests/\S+::\S+) (PASSED|FAILED|ERROR|SKIPPED)', line)
        if m:
            {'PASSED': passed, 'SKIPPED': skipped}.get(m[2], failed).append(m[1].split('::', 1)[1])
            ctx.save(passed=len(passed), skipped=len(skipped), failed=failed)
        elif re.match(r'^=+ .*(passed|failed|error|collected|selected|deselected).* =+$|^\d+/\d+ tests collected',
                      line.strip()):
            summary = line.strip().strip('= ')
    rc = p.wait()
    ctx.save(summary=summary, passed=len(passed), skipped=len(skipped), failed=failed,
             status='ok' if rc in (0, 5) and not failed else 'failed')


def step_smoke(ctx):
    pytest_step(ctx, [f'{CAPTURE_TEST}[{name}]' for name in SMOKE])


def step_graph_tests(ctx):
    pytest_step(ctx, ['tests/test_cuda.py', '-k', 'cuda_graph or reduce_overhead'])


def step_cuda_tests(ctx):
    pytest_step(ctx, ['tests/test_cuda.py', '-k', 'not (cuda_graph or reduce_overhead)'])


def windows(out):
    """The train windows of a run's log.jsonl after the first (compilation, warm-up): median ms/iter, tokens/s,
    MFU (train.py's, against hardware.py's table)."""
    recs = [json.loads(l) for l in open(os.path.join(out, 'log.jsonl')) if l.strip()]
    w = [r for r in recs if r.get('kind') == 'train'][1:]
    if not w:
        return {}
    med = lambda k: statistics.median(r[k] for r in w) if all(r.get(k) is not None for r in w) else None
    return dict(ms_per_iter=round(med('ms_per_iter'), 3), tokens_per_sec=round(med('tokens_per_sec')),
                mfu_table=med('mfu') and round(med('mfu'), 4), windows=len(w))


def schedule(n, log=50):
    return [f'--max_iters={n}', f'--lr_decay_iters={n}', f'--eval_interval={n}', '--eval_iters=20',
            f'--log_interval={log}', '--warmup_iters=10']


def step_alone(ctx):
    n, log = (6, 2) if ctx.dry else (400, 50)
    base = ['configs/nanogpt_3L.py', *schedule(n, log), '--dropout=0.2']
    floor = ctx.done.get('floor', {}).get('train_floor_ms')
    runs = {}
    for name, extra in (('eager', ['--compile=False', '--cuda_graph=False']),
                        ('compiled', ['--compile=True', '--cuda_graph=False']),
                        ('graphed', ['--compile=False', '--cuda_graph=True']),
                        ('graphed_compiled', ['--compile=True', '--cuda_graph=True'])):
        rc, err, out = ctx.train(f'alone_{name}', *base, *extra, check=False)
        if rc != 0:
            runs[name] = dict(status='refused' if 'cuda_graph=True cannot run here: not a CUDA' in err else 'failed',
                              why=err.splitlines()[-1] if err else f'exit {rc}')
        else:
            s = json.load(open(os.path.join(out, 'summary.json')))
            runs[name] = dict(windows(out), final_val_loss=s['final_val_loss'], wall_s=round(s['wall_time_s'], 1),
                              compiled=s['compile'])
            if floor and runs[name].get('ms_per_iter'):
                runs[name]['floor_over_step'] = round(floor / runs[name]['ms_per_iter'], 3)
        ctx.save(runs=runs)
    if any(r.get('status') == 'failed' for r in runs.values()):
        ctx.save(status='failed')


def step_eval_smoke(ctx):
    step_eval(ctx, iters=20)


def step_eval(ctx, iters=200):
    """One evaluation of the seed's schedule (eval_iters=200 a split, or iters; the seed's 3-layer model, bf16) through
    train.py's estimate_loss, one batch a forward (eval_group=1) and eval_group's auto, eager and graphed (CUDA):
    seconds, ms a batch, and the losses, which must agree to rounding (a benchmark of the trainer's evaluation). On a
    CPU (without --dry-run): 12 batches a split in fp32, one a forward and four."""
    import torch
    import config
    import processes
    import train
    from cuda_graph import CudaGraphs
    from model import GPT, GPTConfig
    dev = 'cpu' if ctx.dry else device()
    args = ['configs/nanogpt_3L.py', '--dropout=0.2', f'--device={dev}', f'--eval_iters={iters}']
    # the dry run: tiny; a CPU: 12 batches a split, about a minute on 2 cores
    cfg = config.parse_config(args + (TINY_ARGS + ['--eval_iters=6'] if ctx.dry else
                                      ['--eval_iters=12', '--dtype=float32'] if dev == 'cpu' else []))
    env = processes.setup_processes(cfg)
    data, _, n_tokens = train.setup_data(cfg, env.device)
    cfg['vocab_size'] = cfg['vocab_size'] or n_tokens
    torch.manual_seed(0)
    model = GPT(GPTConfig(**{k: cfg[k] for k in config.MODEL_KEYS})).to(env.device)
    sync = torch.cuda.synchronize if dev == 'cuda' else (lambda: None)
    out = {}
    for graphed in (False, True) if dev == 'cuda' else (False,):
        for group in (1, 0) if dev == 'cuda' else (1, 4):  # on a CPU (auto: 1) groups of 4 too
            cfg['eval_group'] = group
            batches = train.eval_batches(cfg, env, data, cfg['vocab_size'])
            graphs = CudaGraphs(cfg, env) if graphed else None
            train.estimate_loss(cfg, env, model, batches, graphs=graphs)  # warm-up (and capture)
            sync()
            t = time.perf_counter()
            losses = train.estimate_loss(cfg, env, model, batches, graphs=graphs)
            sync()
            s = time.perf_counter() - t
            n = train.eval_group(cfg, env, cfg['vocab_size'])
            out[f"{'graphed' if graphed else 'eager'}, {n} a forward"] = dict(
                seconds=round(s, 4), ms_per_batch=round(1e3 * s / (2 * cfg['eval_iters']), 4), **losses)
            ctx.save(evals=out)
    spread = max(abs(a[k] - b[k]) for a in out.values() for b in out.values() for k in ('train', 'val'))
    ctx.save(evals=out, largest_difference=spread, status='ok' if spread < 1e-3 else 'failed')


def gpt2_run(ctx, variant):
    """One 124M config on random GPT-2 token ids (no network here): the step's speed, not a loss."""
    import numpy as np
    data = os.path.join(ctx.scratch, 'tokens')
    if not os.path.exists(os.path.join(data, 'meta.json')):
        os.makedirs(data, exist_ok=True)
        rng = np.random.default_rng(0)
        for split, n in (('train', 2_000_000), ('val', 200_000)):
            rng.integers(0, 50257, n, dtype=np.uint16).tofile(os.path.join(data, f'{split}.bin'))
        json.dump(dict(vocab_size=50304, tokenizer='gpt2'), open(os.path.join(data, 'meta.json'), 'w'))
    n = 4 if ctx.dry else 30
    args = [f'--dataset={data}', f'--max_iters={n}', f'--lr_decay_iters={n}', '--warmup_iters=2',
            f'--eval_interval={n}', '--eval_iters=2', f'--log_interval={2 if ctx.dry else 5}',
            '--gradient_accumulation_steps=4']  # what a user's run gets: compiled, and graphed where it can be
    rc, err, out = ctx.train(f'gpt2_{variant}', f'configs/{variant}_124M.py', *args,
                             *([] if ctx.dry else ['--compile=True']))
    s = json.load(open(os.path.join(out, 'summary.json')))
    ctx.save(runs={variant: dict(windows(out), peak_memory_mb=round(s['peak_memory_mb']), n_params=s['n_params'],
                                 cuda_graph=s['cuda_graph'])})


def step_gpt2_nanogpt(ctx):
    gpt2_run(ctx, 'nanogpt')


def step_gpt2_diff(ctx):
    gpt2_run(ctx, 'diff')


def step_jobs(ctx):
    """The seed's five 3-layer runs at its schedule's density (PROFILE=full: graphed, an evaluation of 200 batches a
    split every 250 steps) cut to 1000 steps, one at a time (JOBS=1) and all at once (JOBS=5): the wall time of each,
    so that the seed's table runs the faster way."""
    n = 4 if ctx.dry else 1000
    extra = [f'--max_iters={n}', f'--lr_decay_iters={n}']
    extra += TINY_ARGS + [f'--eval_interval={n}'] if ctx.dry else []
    out = {}
    for jobs in ((1, 2) if ctx.dry else (1, 5)):
        root = os.path.join(ctx.scratch, f'jobs{jobs}')
        env = dict(os.environ, SEEDS='1', JOBS=str(jobs), PROFILE='full', VARIANTS=SEED5, DEPTHS='3L',
                   RUNS_DIR=root, PYTHON=sys.executable)
        if ctx.dry:  # the same command on two runs
            env.update(VARIANTS='nanogpt diff')
        t = time.monotonic()
        p = subprocess.run(['bash', 'ablate.sh', *extra], cwd=HERE, env=env, capture_output=True, text=True)
        print(p.stdout[-3000:], p.stderr[-2000:], flush=True)
        if p.returncode != 0:
            raise RuntimeError(f"ablate.sh JOBS={jobs} failed (exit {p.returncode}): {p.stderr.strip()[-300:]}")
        out[str(jobs)] = dict(wall_s=round(time.monotonic() - t, 1), runs=len(env['SEEDS'].split()) *
                              len(env['VARIANTS'].split()), steps=n)
        ctx.save(jobs=out)


def step_queue(ctx):
    """The GPU queue's pending jobs (gpu_queue.py), in order, each started only if its estimate fits the time left;
    each finished run's small files land in DIR/results/ as it finishes, and DIR/queue.json says what ran."""
    import gpu_queue
    until = float(os.environ.get('BENCH_GPU_UNTIL') or time.time() + 1e9) - 30  # 30 s to stop, pack and write
    jobs = [j for j in gpu_queue.pending() if not ctx.args.job or j.name in ctx.args.job]
    if ctx.args.job and not jobs:
        jobs = [j for j in gpu_queue.QUEUE if j.name in ctx.args.job]  # named: run it even if results/ holds it
    done = []
    ctx.save(queue=done)
    # a failed sanity stops the queue: runs on a broken path are worthless (one committed for this code, or this call's)
    gate = gpu_queue.QUEUE[0]
    held = gpu_queue.checked(gate)
    broken = f"sanity failed at this code ({held[len('failed: '):]}): a person looks first" \
        if held and held.startswith('failed') else None
    trained = {}  # the dry run: the first job of each shape of launches (dry_shape) trains, the others are checked
    for job in jobs:
        left = until - time.time()
        same = trained.get(dry_shape(job)) if ctx.dry and job.launches else None
        if broken:
            done.append(dict(job=job.name, status='skipped', estimate_s=job.estimate_s, why=broken))
        elif same:
            done.append(dry_checked(job, same))
        elif left < (30 if ctx.dry else job.estimate_s):
            done.append(dict(job=job.name, status='skipped', estimate_s=job.estimate_s,
                             why=f"{left:.0f} s left, its estimate is {job.estimate_s} s"))
        else:
            deadline = time.monotonic() + left
            done.append(gpu_queue.run_job(job, ctx.args.out, deadline, scratch=ctx.scratch,
                                          # the dry run of a check job: its env step (the check's own dry run
                                          # runs every step)
                                          check_args=('--dry-run',) if ctx.dry else (),
                                          check_steps=('env',) if ctx.dry else None,
                                          cut_after=ctx.args.cut_after, extra=DRY_SCHEDULE if ctx.dry else (),
                                          shrink=shrink if ctx.dry else None))
            if ctx.dry and job.launches:
                trained.setdefault(dry_shape(job), job.name)
            if job.name == gate.name and done[-1]['status'] != 'done':
                broken = f"sanity {done[-1]['status']} in this call ({done[-1].get('steps')}): see its log"
        ctx.save(queue=done)
        write_json(os.path.join(ctx.args.out, 'queue.json'), dict(env=ctx.env, jobs=done))
    ctx.save(status='ok' if all(j['status'] in ('done', 'skipped', 'cut', 'checked') for j in done) else 'failed')


# the dry run of a queue job: two steps a run, tiny, on the CPU (records of the sink's 128 tokens keep their length)
DRY_SCHEDULE = ('--max_iters=2', '--lr_decay_iters=2', '--eval_interval=2', '--warmup_iters=1', '--n_embd=32',
                '--n_head=2', '--batch_size=4', '--eval_iters=1', '--device=cpu', '--dtype=float32', '--compile=False')


def dry_shape(job):
    """A job's launches but for their seeds, variants and runs at once: the split parts of one job (seed_pipeline_s1a,
    s1b, s2a, ...) have one shape, and after shrink() their dry runs would train the same code on another variant or
    seed."""
    return tuple((lc.sweep, tuple(kv for kv in lc.env if kv[0] not in ('SEEDS', 'VARIANTS', 'JOBS')), lc.args)
                 for lc in job.launches)


def dry_checked(job, like):
    """The dry run of a job whose shape an earlier job of this call trained: each launch checked as ablate.sh checks
    it before a run (sweep.py check: the environment, then every config of every variant, depth and seed with its
    arguments), none trained."""
    from sweep import Refused, check
    try:
        for lc in job.launches:
            check(dict(lc.env, SWEEP=lc.sweep), list(lc.args))
    except Refused as e:
        return dict(job=job.name, status='failed', estimate_s=job.estimate_s, why=f'sweep.py check: {e}')
    return dict(job=job.name, status='checked', estimate_s=job.estimate_s, like=like,
                why=f'dry run: checked, not trained: its launches are those of {like} but for seeds, variants and JOBS')


def shrink(launch):
    """A queue launch as the dry run runs it: its first seed and first variant, on the CPU. The queue's first graphed
    launch keeps --cuda_graph=True, the stand-in for a capture that fails: train.py refuses it on a CPU, and the job's
    eager retry runs (gpu_queue.run_job), as it would after a failed capture on a GPU (the others run eagerly at
    once: each refusal costs a launch's start)."""
    env = dict(launch.env)
    env.update(SEEDS=env['SEEDS'].split()[0], VARIANTS=env['VARIANTS'].split()[0], JOBS='1')
    if 'DEPTHS' in env:
        env['DEPTHS'] = env['DEPTHS'].split()[0]
    first = next(lc for job in gpu_queue.QUEUE for lc in job.launches if '--cuda_graph=True' in lc.args)
    graphed = launch == first
    return gpu_queue.Launch(launch.sweep, tuple(env.items()), tuple(a for a in launch.args if not a.startswith(
        ('--device', '--cuda_graph', '--compile'))) + (('--cuda_graph=True',) if graphed else ()))


# what a dry run cannot show, said in its results.md: it runs the code, never the GPU's part of it
ONLY_A_GPU = ("This is a dry run on the CPU: it ran the code of every step, every shape of queue launch through its "
              "worker processes (worker.py, as on a GPU; another part of a split job is checked as ablate.sh checks "
              "it, not trained), the packing of finished runs, a job cut at its budget, collect's "
              "refusals and the eager retry after a refused capture (the stand-in for a failed one). Only a GPU shows: "
              "that CUDA graphs capture and replay each model, every time and speed, the estimates of the queue's jobs "
              "and a run's cost inside a worker (in_worker_s, which they assume), several workers at once on one "
              "device, and the 124M step's memory.")


# -----------------------------------------------------------------------------------------------------------
# results.md, and the queue's table of results/bench_gpu.md

def queue_table():
    """The queue as results/bench_gpu.md shows it, from gpu_queue.QUEUE: each job, its runs (or a check's steps), its
    estimate and what it moves (test_bench_gpu checks that the page has it as the code renders it)."""
    lines = ['| job | runs | estimate s | what it moves |', '|---|---|---|---|']
    for job in gpu_queue.QUEUE:
        runs = f"check: {', '.join(job.steps)}" if job.steps else \
            str(sum(len(gpu_queue.runs_of(lc, 'results')) for lc in job.launches))
        lines.append(f"| `{job.name}` | {runs} | {job.estimate_s} | {job.why} |")
    return '\n'.join(lines)


def render(res):
    s, lines = res['steps'], []
    env = s.get('env', {})
    lines += [f"# GPU check ({res['mode']})", '', *([ONLY_A_GPU, ''] if res['mode'].startswith('dry-run') else []),
              f"{env.get('gpu') or env.get('device', '?')}, torch {env.get('torch')}, CUDA {env.get('cuda')}, "
              f"commit {env.get('commit')}{' (dirty)' if env.get('dirty') else ''}; started {res['started']}, "
              f"budget {res['budget_s']:.0f} s, {res.get('elapsed_s', 0)} s used.", '']
    if env.get('bandwidth_gbs'):
        lines.append(f"Ceilings measured: {env['bandwidth_gbs']} GB/s copy (read + write), "
                     f"{env['bf16_tflops']} TFLOP/s bf16 matmul.")
        lines.append('')
    lines += ['| step | status | seconds | note |', '|---|---|---|---|']
    for name, r in s.items():
        lines.append(f"| {name} | {r['status']} | {r.get('seconds', '')} | {r.get('why', '')} |")
    f = s.get('floor', {})
    if f.get('train_flops'):
        lines += ['', '## Floor of one step', '',
                  f"Training step: {f['train_flops'] / 1e9:.1f} GFLOP, {f['train_bytes'] / 1e9:.3f} GB read and "
                  f"written by the eager kernels; eval forward: {f['eval_flops'] / 1e9:.1f} GFLOP, "
                  f"{f['eval_bytes'] / 1e9:.3f} GB."]
        if 'train_floor_ms' in f:
            lines.append(f"Floor: {f['train_floor_ms']} ms a training step ({f['train_bound']}-bound), "
                         f"{f['eval_floor_ms']} ms an eval batch ({f['eval_bound']}-bound); a 5000-step run of the "
                         f"seed's schedule {f['run_5000_floor_s']} s, evaluation {100 * f['eval_share_of_run']:.0f}% "
                         f"of it.")
    if f.get('cells'):
        lines += ['', "Every cell of the seed's table, counted the same way (ms: bytes at the copy's rate, FLOPs at the "
                  "matmul's; the larger bounds a step):", '',
                  '| cell | train GB | train GFLOP | bytes ms | FLOPs ms | eval bytes ms | 5000-step run floor s |',
                  '|---|---|---|---|---|---|---|']
        for k, c in f['cells'].items():
            lines.append(f"| {k} | {c['train_bytes'] / 1e9:.3f} | {c['train_flops'] / 1e9:.1f} | "
                         f"{c.get('train_bytes_ms')} | {c.get('train_flops_ms')} | {c.get('eval_bytes_ms')} | "
                         f"{c.get('run_5000_floor_s', '')} |")
        if f.get('table_45_floor_s'):
            lines.append(f"\nThe 45-run table (these cells, 3 seeds): {f['table_45_floor_s']} s of floor.")
    ev = s.get('eval', {}).get('evals')
    if ev:
        lines += ['', "## One evaluation of the seed's schedule", '', '| how | seconds | ms a batch | train | val |',
                  '|---|---|---|---|---|'] + [f"| {k} | {v['seconds']} | {v['ms_per_batch']} | {v['train']:.6f} | "
                                              f"{v['val']:.6f} |" for k, v in ev.items()]
        lines.append(f"\nLargest difference between the losses: {s['eval'].get('largest_difference')}")
    for name in ('graph_tests', 'cuda_tests'):
        t = s.get(name, {})
        if t.get('summary'):
            lines += ['', f"**{name}**: {t['summary']}" + (f"; failed: {', '.join(t['failed'])}" if t['failed']
                                                            else '')]
    for name, title in (('alone', 'One 3-layer run alone'), ('gpt2_nanogpt', '124M nanogpt'),
                        ('gpt2_diff', "124M Diff (the paper's layout)")):
        runs = s.get(name, {}).get('runs')
        if runs:
            lines += ['', f'## {title}', '', '| run | ms/step | tokens/s | MFU (table peak) | floor / step | other |',
                      '|---|---|---|---|---|---|']
            for k, r in runs.items():
                other = r.get('why') or (f"val {r['final_val_loss']:.4f}, wall {r['wall_s']} s" if 'wall_s' in r else
                                         f"group {r['tokens_per_sec_group']:,} tokens/s"
                                         if 'tokens_per_sec_group' in r else
                                         f"peak {r['peak_memory_mb']} MB" if 'peak_memory_mb' in r else '')
                lines.append(f"| {k} | {r.get('ms_per_iter', '')} | {r.get('tokens_per_sec', '')} | "
                             f"{r.get('mfu_table', '')} | {r.get('floor_over_step', '')} | {other} |")
    j = s.get('jobs', {}).get('jobs')
    if j:
        lines += ['', '## Several runs at once', ''] + [f"- JOBS={k}: {v['runs']} runs of {v['steps']} steps in "
                                                          f"{v['wall_s']} s" for k, v in j.items()]
    q = s.get('queue', {}).get('queue')
    if q:
        lines += ['', '## The queue', '', '| job | status | runs finished | wall s (estimate) | note |',
                  '|---|---|---|---|---|']
        for j in q:
            note = j.get('why') or '; '.join(x for x in (
                f"unfinished: {', '.join(j['unfinished'])}" if j.get('unfinished') else '',
                f"retried eagerly: {', '.join(j['retried_eagerly'])}" if j.get('retried_eagerly') else '',
                f"a run in its worker beyond its clock: median {j['in_worker_s']['median']:.1f} s of "
                f"{j['in_worker_s']['n']} (estimates assume {gpu_queue.IN_WORKER})" if j.get('in_worker_s') else '')
                if x)
            lines.append(f"| {j['job']} | {j['status']} | {len(j.get('finished', []))}/{j.get('runs', '')} | "
                         f"{j.get('wall_s', '')} ({j['estimate_s']}) | {note} |")
    return '\n'.join(lines) + '\n'


if __name__ == '__main__':
    sys.exit(main())
