"""
Benchmark every attention variant: one training step (forward + backward + AdamW step) per configuration.

$ python bench.py                                   # the seed's 3-layer model, T=256, batch 32, fp32 and dropout 0
$ python bench.py --seq 256 512 1024 2048 --batch_size 4 --dropout 0 0.2 --dtype float32 bfloat16
$ python bench.py --variants softmax diff --compile 0 1 --json results/bench.json

Each configuration runs in its own process (clean peak-memory figures, no shared caches): `warmup` steps, then the
median of `steps` timed steps. Peak memory: CUDA's max allocated bytes above the resting state; on CPU the growth
of the process's peak RSS from before the first step (activations, gradients, optimizer state). The table gives
each variant's step time as a ratio to the softmax baseline of the same shape, dtype, dropout and compile setting.
On CUDA it also checks that every softmax-family variant runs on a fused SDPA kernel (flash or memory-efficient),
not on the math fallback. A benchmark, not a test.
"""
import argparse
import itertools
import json
import os
import subprocess
import sys
import time

from output import write_json

VARIANTS = {
    'softmax': {}, 'diff': dict(attn='diff'), 'sym': dict(symmetric=True),
    'diff_sym': dict(attn='diff', symmetric=True), 'cosine_sym': dict(attn='cosine', symmetric=True),
    'sym_noself': dict(symmetric=True, mask_self=True),
    'gated_headwise': dict(gate='headwise'), 'gated_elementwise': dict(gate='elementwise'),
    'softmax1': dict(softmax1=True), 'diff_softmax1': dict(attn='diff', softmax1=True), 'diffv2': dict(attn='diffv2'),
}


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
    if cuda and spec['variant'] != 'cosine_sym':  # is a fused kernel taken? the math fallback is disallowed here
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
    ap.add_argument('--one', default=None, help=argparse.SUPPRESS)  # internal: one configuration, as JSON
    args = ap.parse_args()
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


# the table's columns; a page's table of one T, dtype, dropout and compile setting leaves those out (markdown's drop)
COLUMNS = ('variant', 'T', 'dtype', 'dropout', 'compile', 'params', 'ms/step', 'tokens/s', 'vs softmax', 'peak MB')


def markdown(results, drop=()):
    """The results as a markdown table, a row each: each variant's step time as a ratio to the softmax baseline of the
    same shape, dtype, dropout and compile setting, and a fused SDPA column where CUDA checked the kernel. drop: the
    columns left out (evidence/pages.py renders results/bench_cpu.md's tables, one a dtype and dropout, with it)."""
    key = lambda r: (r['seq'], r['dtype'], r['dropout'], r['compile'])  # noqa: E731
    base = {key(r): r['ms_per_step'] for r in results if r['variant'] == 'softmax' and 'error' not in r}
    cols = [c for c in COLUMNS if c not in drop] + (['fused SDPA'] if any('fused_sdpa' in r for r in results) else [])
    lines = ['| ' + ' | '.join(cols) + ' |', '|' + '---|' * len(cols)]
    for r in results:
        cell = dict(variant=r['variant'], T=r['seq'], dtype=r['dtype'], dropout=r['dropout'], compile=r['compile'])
        if 'error' in r:
            cell['params'] = f"FAILED: {r['error'][:60]}"
        else:
            cell.update({'params': f"{r['n_params'] / 1e6:.2f}M", 'ms/step': f"{r['ms_per_step']:.1f}",
                         'tokens/s': f"{r['tokens_per_sec']:,.0f}", 'peak MB': f"{r['peak_mem_mb']:.0f}",
                         'vs softmax': f"{r['ms_per_step'] / base[key(r)]:.2f}x" if key(r) in base else '',
                         'fused SDPA': r.get('fused_sdpa', 'n/a')})
        lines.append('| ' + ' | '.join(str(cell.get(c, '')) for c in cols) + ' |')
    return '\n'.join(lines)


if __name__ == '__main__':
    main()
