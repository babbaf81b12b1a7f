"""
The render of the GPU checks committed under results/gpu_check/*/results.json (each folder's results.md is this
render of its results.json; evidence/pages.py checks that). The checks were made by an earlier GPU check and its job
queue, both since removed: `python bench.py --cuda` is the GPU check now (its --json record is another format).
"""

IN_WORKER = 3  # what the removed queue's estimates assumed a run cost inside a worker beyond its clock (seconds)

# what a dry run cannot show, said in its results.md: it runs the code, never the GPU's part of it
ONLY_A_GPU = ("This is a dry run on the CPU: it ran the code of every step, every shape of queue launch through its "
              "worker processes (worker.py, as on a GPU; another part of a split job is checked as ablate.sh checks "
              "it, not trained), the packing of finished runs, a job cut at its budget, collect's "
              "refusals and the eager retry after a refused capture (the stand-in for a failed one). Only a GPU shows: "
              "that CUDA graphs capture and replay each model, every time and speed, the estimates of the queue's jobs "
              "and a run's cost inside a worker (in_worker_s, which they assume), several workers at once on one "
              "device, and the 124M step's memory.")


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
                f"{j['in_worker_s']['n']} (estimates assume {IN_WORKER})" if j.get('in_worker_s') else '')
                if x)
            lines.append(f"| {j['job']} | {j['status']} | {len(j.get('finished', []))}/{j.get('runs', '')} | "
                         f"{j.get('wall_s', '')} ({j['estimate_s']}) | {note} |")
    return '\n'.join(lines) + '\n'

