"""
Benchmark every attention variant: one training step (forward + backward + AdamW step) per configuration.

$ python bench.py                                   # the seed's 3-layer model, T=256, batch 32, fp32 and dropout 0
$ python bench.py --seq 256 512 1024 2048 --batch_size 4 --dropout 0 0.2 --dtype float32 bfloat16
$ python bench.py --variants nanogpt diff --compile 0 1 --json results/bench.json
$ python bench.py --cuda --json FILE               # the GPU check, about a minute on a GPU (--dry-run: on the CPU)

Each configuration runs in its own process (clean peak-memory figures, no shared caches): `warmup` steps, then the
median of `steps` timed steps. Peak memory: CUDA's max allocated bytes above the resting state; on CPU the growth
of the process's peak RSS from before the first step (activations, gradients, optimizer state). The table gives
each variant's step time as a ratio to nanogpt's of the same shape, dtype, dropout and compile setting. On CUDA it
also checks that every softmax-family variant runs on a fused SDPA kernel (flash or memory-efficient), not on the math
fallback. A benchmark, not a test.

--cuda, the GPU check, in one process: (1) every attention family (each variant of variants.py, and diffv2) trains 6
steps as a CUDA graph (3 eager warm-ups, a capture, replays: cuda_graph.py, train.py's step) beside 6 eager steps,
the same losses and weights, and its grouped eval forward gives the eager per-batch losses; (2) the grouped
evaluation (train.batch_losses over 8 stacked batches, graphed) gives the plain one's loss; (3) each variant's step at
the seed's 3-layer shape in bf16, eager, compiled and graphed, in ms beside its floor: the larger of its FLOPs at the
measured bf16 matmul rate and the bytes its eager kernels move at the measured copy bandwidth. --dry-run: the same
code on the CPU with graphs off, tiny shapes and a few steps (torch.compile's eager backend). The record (--json):
commit, dirty, date, machine, torch, ceilings, and families, eval and steps (docs/details.md, "Sweeps").
"""
import argparse
import itertools
import json
import os
import subprocess
import sys
import time

from output import write_json
from variants import VARIANTS as TABLE

# variants.py's models (not the optimizer variants: OrthoAdam's model is nanogpt's), and two attentions it has no row
# for: Diff with softmax-1, and DIFF V2 (configs/needle_diffv2.py)
VARIANTS = {name: row['flags'] for name, row in TABLE.items() if 'optimizer' not in row['flags']}
VARIANTS.update(diff_softmax1=dict(attn='diff', softmax1=True), diffv2=dict(attn='diffv2'))
# the names of bench.py's records made before variants.py (results/bench_cpu*.json): the one place they are mapped
OLD_NAMES = {'softmax': 'nanogpt', 'cosine_sym': 'norm_sym', 'gated_elementwise': 'gated'}


def run_one(spec):
    """Time one configuration in this process; returns a dict."""
    import resource
    import torch
    from hardware import autocast_context
    from model import GPT, GPTConfig
    torch.manual_seed(0)
    dev = spec['device']
    cfg = GPTConfig(block_size=spec['seq'], vocab_size=65, n_layer=spec['n_layer'], n_head=spec['n_head'],
                    n_embd=spec['n_embd'], dropout=spec['dropout'], bias=False, **VARIANTS[spec['variant']])
    model = GPT(cfg).to(dev)
    opt = model.configure_optimizers(0.1, 3e-4, (0.9, 0.99))
    step_model = torch.compile(model) if spec['compile'] else model
    ctx = autocast_context(spec['dtype'], dev.split(':')[0])
    B, T = spec['batch_size'], spec['seq']
    x = torch.randint(0, 65, (B, T), device=dev)
    y = torch.randint(0, 65, (B, T), device=dev)
    cuda = dev.startswith('cuda')
    sync = torch.cuda.synchronize if cuda else (lambda: None)

    def step():
        with ctx:
            _, loss = step_model(x, y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    out = dict(spec, n_params=model.get_num_params())
    # is a fused kernel taken? the math fallback is disallowed here (cosine attention is not SDPA's)
    if cuda and VARIANTS[spec['variant']].get('attn') != 'cosine':
        from torch.nn.attention import sdpa_kernel, SDPBackend
        try:
            with sdpa_kernel([SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.CUDNN_ATTENTION]):
                step()
            out['fused_sdpa'] = True
        except RuntimeError:
            out['fused_sdpa'] = False
    # memory above the resting state (weights, the batch): activations, gradients and optimizer state.
    # On CPU the peak RSS only grows, so the baseline is taken before the first step.
    sync()
    if cuda:
        torch.cuda.reset_peak_memory_stats(dev)
        base = torch.cuda.memory_allocated(dev)
    else:
        base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    for _ in range(spec['warmup']):
        step()
    sync()
    times = []
    for _ in range(spec['steps']):
        t = time.perf_counter()
        step()
        sync()
        times.append(time.perf_counter() - t)
    times.sort()
    med = times[len(times) // 2]
    peak = (torch.cuda.max_memory_allocated(dev) if cuda else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)
    out.update(ms_per_step=1000 * med, tokens_per_sec=B * T / med, peak_mem_mb=(peak - base) / 2 ** 20,
               memory_kind='max allocated above the resting state' if cuda else 'peak RSS growth from the first step')
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    ap.add_argument('--variants', nargs='+', default=list(VARIANTS), choices=list(VARIANTS))
    ap.add_argument('--seq', nargs='+', type=int, default=[256])
    ap.add_argument('--dtype', nargs='+', default=['float32'], choices=['float32', 'bfloat16'])
    ap.add_argument('--dropout', nargs='+', type=float, default=[0.0])
    ap.add_argument('--compile', nargs='+', type=int, default=[0], choices=[0, 1])
    ap.add_argument('--n_layer', type=int, default=3)
    ap.add_argument('--n_embd', type=int, default=256)
    ap.add_argument('--n_head', type=int, default=8)
    ap.add_argument('--batch_size', type=int, default=32)
    ap.add_argument('--steps', type=int, default=5)
    ap.add_argument('--warmup', type=int, default=2)
    ap.add_argument('--device', default='auto')
    ap.add_argument('--json', default=None, help='write all results to this JSON file')
    ap.add_argument('--cuda', action='store_true', help='the GPU check (see above) instead of the benchmark')
    ap.add_argument('--dry-run', action='store_true', help='with --cuda: the same code on the CPU, tiny and short')
    ap.add_argument('--one', default=None, help=argparse.SUPPRESS)  # internal: one configuration, as JSON
    args = ap.parse_args()
    if args.cuda:
        return cuda_check(args)
    if args.one:
        print('RESULT ' + json.dumps(run_one(json.loads(args.one))), flush=True)
        return
    import torch
    from hardware import cpu_info, pick_dtype, resolve_device
    try:
        device = resolve_device(args.device)[0]  # a device this machine lacks: one line, before any run
    except ValueError as e:
        raise SystemExit(f"bench.py: {e}") from None
    cpu = cpu_info()
    auto = pick_dtype('auto', 'cpu')  # what train.py's dtype=auto takes on this CPU (hardware.cpu_has_fast_bf16's rule)
    print(f"processor: {cpu['name'] or 'unknown'} (family {cpu['family']}, model {cpu['model']}), "
          f"{cpu['threads']} threads, bf16 units: {' '.join(cpu['bf16']) or 'none (bf16 is emulated)'}, "
          f"dtype=auto takes {auto} here; "
          f"torch {torch.__version__}" + (f"; {torch.cuda.get_device_name(device)}" if device.startswith('cuda') else ''))
    results = []
    for T, dtype, dropout, comp, v in itertools.product(args.seq, args.dtype, args.dropout, args.compile,
                                                         args.variants):
        spec = dict(variant=v, seq=T, dtype=dtype, dropout=dropout, compile=comp, device=device,
                    n_layer=args.n_layer, n_embd=args.n_embd, n_head=args.n_head,
                    batch_size=args.batch_size, steps=args.steps, warmup=args.warmup)
        p = subprocess.run([sys.executable, os.path.abspath(__file__), '--one', json.dumps(spec)],
                           capture_output=True, text=True)
        line = next((l for l in p.stdout.splitlines() if l.startswith('RESULT ')), None)
        if line is None:
            err = (p.stderr.strip().splitlines() or ['no output'])[-1]
            print(f"{v} T={T} {dtype} dropout={dropout} compile={comp}: FAILED ({err})", file=sys.stderr)
            results.append(dict(spec, error=err))
            continue
        r = json.loads(line[7:])
        results.append(r)
        print(f"{v:18s} T={T:5d} {dtype:8s} dropout={dropout} compile={comp}: "
              f"{r['ms_per_step']:8.1f} ms/step {r['tokens_per_sec']:10,.0f} tok/s "
              f"{r['peak_mem_mb']:8.1f} MB", file=sys.stderr, flush=True)
    print(markdown(results))
    if args.json:
        from rundir import code_version
        write_json(args.json, dict(processor=cpu, cpu_dtype_auto=auto, torch=torch.__version__,
                                   threads=torch.get_num_threads(), date=time.strftime('%Y-%m-%d', time.gmtime()),
                                   command='python bench.py ' + ' '.join(sys.argv[1:]), **code_version(),
                                   results=results))


# ----------------------------------------------------------------------------- the GPU check (--cuda)

SEED_3L = dict(n_layer=3, n_head=8, n_embd=256, block_size=256, batch_size=32)  # configs/nanogpt_3L.py's model
TINY = dict(n_layer=2, n_head=2, n_embd=32, block_size=32, batch_size=4)


def timed(fn, reps, sync):
    """Median seconds of fn() over reps calls, after two warm-ups."""
    for _ in range(2):
        fn()
    sync()
    ts = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        sync()
        ts.append(time.perf_counter() - t)
    return sorted(ts)[len(ts) // 2]


def ceilings(dev, sync, small):
    """The device's two ceilings, measured: bytes/s of a large copy (read + written), bf16 FLOP/s of a matmul."""
    import torch
    n_bytes, n = (2 ** 22, 256) if small else (2 ** 30, 8192)
    src = torch.randn(n_bytes // 4, device=dev)
    dst = torch.empty_like(src)
    a, b = (torch.randn(n, n, device=dev, dtype=torch.bfloat16) for _ in range(2))
    return dict(bandwidth_gbs=2 * n_bytes / timed(lambda: dst.copy_(src), 10, sync) / 1e9,
                bf16_tflops=2 * n ** 3 / timed(lambda: a @ b, 10, sync) / 1e12)


def step_bytes(run, dev):
    """The bytes every aten op of run() reads and writes on dev (views left out): what the eager kernels move."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_flatten

    class Bytes(TorchDispatchMode):
        n = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            if not func.is_view and func is not torch.ops.aten.detach.default:
                self.n += sum(t.numel() * t.element_size() for t in tree_flatten((args, kwargs, out))[0]
                              if isinstance(t, torch.Tensor) and t.device.type == torch.device(dev).type)
            return out
    with Bytes() as mode:
        run()
    return mode.n


def cuda_check(args):
    import contextlib
    import torch
    import train  # its step and its grouped eval forward are what the check is of
    from cuda_graph import CudaGraphs
    from hardware import autocast_context, cpu_info
    from model import GPT, GPTConfig
    from rundir import code_version
    dry = args.dry_run
    if not dry and not torch.cuda.is_available():
        raise SystemExit("bench.py --cuda: torch sees no CUDA device here (--dry-run runs the check's code on the CPU)")
    dev = 'cpu' if dry else 'cuda'
    sync = (lambda: None) if dry else torch.cuda.synchronize
    shape, dtype, reps = (TINY, 'float32', 2) if dry else (SEED_3L, 'bfloat16', 20)
    env = argparse.Namespace(accum=1, device=dev, autocast=contextlib.nullcontext())  # what CudaGraphs and
    graphs = (lambda: None) if dry else (lambda: CudaGraphs(shape, env))          # batch_losses read of train's Env
    scaler = torch.amp.GradScaler(enabled=False)

    def model(flags, graphed=False, **over):
        torch.manual_seed(0)
        keys = {k: v for k, v in shape.items() if k != 'batch_size'}
        m = GPT(GPTConfig(**dict(keys, vocab_size=65, bias=False, dropout=0.0, **flags, **over))).to(dev)
        return m, m.configure_optimizers(0.1, 1e-3, (0.9, 0.99), capturable=graphed)

    def batch(k, n=1):
        g = torch.Generator().manual_seed(k)
        x = torch.randint(0, 65, (n * shape['batch_size'], shape['block_size']), generator=g).to(dev)
        return x, torch.roll(x, -1, 1)
    code = code_version(untracked=False)
    rec = dict(commit=(code['commit'] or '')[:7] or None, dirty=bool(code['dirty']),
               date=time.strftime('%Y-%m-%d', time.gmtime()), torch=torch.__version__, cuda=torch.version.cuda,
               machine=torch.cuda.get_device_name(0) if not dry else 'cpu (dry run)', host_cpu=cpu_info()['name'],
               dry_run=dry, **ceilings(dev, sync, small=dry), families={}, steps={})
    print(f"bench.py --cuda: {rec['machine']}, torch {rec['torch']}, commit {rec['commit']}"
          f"{' (dirty)' if rec['dirty'] else ''}", flush=True)
    # (1) each family: 6 steps through CudaGraphs (3 eager warm-ups, a capture, replays) beside 6 eager ones
    chosen = {v: VARIANTS[v] for v in args.variants}
    for name, flags in chosen.items():
        (m0, o0), (m1, o1) = model(flags), model(flags, graphed=not dry)
        g, losses = graphs(), ([], [])
        for it in range(6):
            xy = [batch(it)]
            losses[0].append(train.step(m0, o0, scaler, xy, 1, 1.0, contextlib.nullcontext()).item())
            run = lambda b: train.step(m1, o1, scaler, b, 1, 1.0, contextlib.nullcontext())  # noqa: E731
            losses[1].append((g.step(run, xy, reseed=lambda: None) if g else run(xy)).item())
        weights = max((a - b).abs().max().item() for a, b in zip(m0.parameters(), m1.parameters()))
        X, Y, B = *batch(10, 3), shape['batch_size']
        m1.eval()
        with torch.no_grad():
            eager = torch.stack([m1(X[B * k:B * k + B], Y[B * k:B * k + B])[1] for k in range(3)])
            forward = lambda x, y: train.batch_losses(env, m1, x, y, 3)  # noqa: E731,B023
            grouped = g.eval_loss(forward, X, Y) if g else forward(X, Y)
        r = dict(loss_diff=max(abs(a - b) for a, b in zip(*losses)), weight_diff=weights,
                 eval_diff=(grouped - eager).abs().max().item(), captured=bool(g and g.train_graph is not None))
        r['ok'] = r['loss_diff'] < 1e-4 and r['weight_diff'] < 1e-3 and r['eval_diff'] < 1e-5 and (dry or r['captured'])
        rec['families'][name] = r
        print(f"  graph {name:18s} {'ok' if r['ok'] else 'FAILED'}: {r}", flush=True)
    # (2) the grouped evaluation: 8 batches stacked in one forward, graphed, against 8 forwards of one batch
    m, _ = model({})
    m.eval()
    with torch.no_grad():
        X, Y, B = *batch(20, 8), shape['batch_size']
        plain = torch.stack([m(X[B * k:B * k + B], Y[B * k:B * k + B])[1] for k in range(8)]).mean().item()
        forward = lambda x, y: train.batch_losses(env, m, x, y, 8)  # noqa: E731
        g = graphs()
        grouped = (g.eval_loss(forward, X, Y) if g else forward(X, Y)).mean().item()
    rec['eval'] = dict(plain=plain, grouped=grouped, ok=abs(plain - grouped) < 1e-5)
    print(f"  eval grouped {grouped:.6f} plain {plain:.6f}: {'ok' if rec['eval']['ok'] else 'FAILED'}", flush=True)
    # (3) each variant's step, eager, compiled and graphed, beside its floor
    ac = autocast_context(dtype, dev)
    for name, flags in chosen.items():
        torch._dynamo.reset()  # each variant compiled afresh (else dynamo's recompile limit leaves it eager)
        xy = [batch(30)]
        m, o = model(flags)
        out = dict(flops=m.flops_per_token(shape['block_size']) * shape['batch_size'] * shape['block_size'],
                   bytes=step_bytes(lambda: [train.step(m, o, scaler, xy, 1, 1.0, ac) for _ in range(2)], dev) // 2)
        out['floor_ms'] = 1e3 * max(out['flops'] / (rec['bf16_tflops'] * 1e12),
                                    out['bytes'] / (rec['bandwidth_gbs'] * 1e9))
        for how in ('eager', 'compiled', 'graphed'):
            if how == 'graphed' and dry:
                continue
            m, o = model(flags, graphed=how == 'graphed')
            step_model = torch.compile(m, backend='eager' if dry else 'inductor') if how == 'compiled' else m
            g = graphs() if how == 'graphed' else None
            run = lambda b: train.step(step_model, o, scaler, b, 1, 1.0, ac)  # noqa: E731,B023
            one = (lambda: g.step(run, xy, reseed=lambda: None)) if g else (lambda: run(xy))  # noqa: B023
            out[f'{how}_ms'] = 1e3 * timed(one, reps, sync)
        rec['steps'][name] = out
        print(f"  step  {name:18s} " + ', '.join(f"{k} {out[k]:.3f}" for k in out if k.endswith('_ms')), flush=True)
    ok = all(r['ok'] for r in rec['families'].values()) and rec['eval']['ok']
    if args.json:
        write_json(args.json, rec)
    print(f"bench.py --cuda: {'every check passed' if ok else 'a check FAILED (above)'}", flush=True)
    return 0 if ok else 1


# the table's columns; a page's table of one T, dtype, dropout and compile setting leaves those out (markdown's drop)
COLUMNS = ('variant', 'T', 'dtype', 'dropout', 'compile', 'params', 'ms/step', 'tokens/s', 'vs nanogpt', 'peak MB')


def markdown(results, drop=()):
    """The results as a markdown table, a row each: each variant's step time as a ratio to nanogpt's of the
    same shape, dtype, dropout and compile setting, and a fused SDPA column where CUDA checked the kernel. drop: the
    columns left out (evidence/pages.py renders results/bench_cpu.md's tables, one a dtype and dropout, with it)."""
    key = lambda r: (r['seq'], r['dtype'], r['dropout'], r['compile'])  # noqa: E731
    base = {key(r): r['ms_per_step'] for r in results if OLD_NAMES.get(r['variant'], r['variant']) == 'nanogpt'
            and 'error' not in r}
    cols = [c for c in COLUMNS if c not in drop] + (['fused SDPA'] if any('fused_sdpa' in r for r in results) else [])
    lines = ['| ' + ' | '.join(cols) + ' |', '|' + '---|' * len(cols)]
    for r in results:
        cell = dict(variant=r['variant'], T=r['seq'], dtype=r['dtype'], dropout=r['dropout'], compile=r['compile'])
        if 'error' in r:
            cell['params'] = f"FAILED: {r['error'][:60]}"
        else:
            cell.update({'params': f"{r['n_params'] / 1e6:.2f}M", 'ms/step': f"{r['ms_per_step']:.1f}",
                         'tokens/s': f"{r['tokens_per_sec']:,.0f}", 'peak MB': f"{r['peak_mem_mb']:.0f}",
                         'vs nanogpt': f"{r['ms_per_step'] / base[key(r)]:.2f}x" if key(r) in base else '',
                         'fused SDPA': r.get('fused_sdpa', 'n/a')})
        lines.append('| ' + ' | '.join(str(cell.get(c, '')) for c in cols) + ' |')
    return '\n'.join(lines)


if __name__ == '__main__':
    sys.exit(main())
