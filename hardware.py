"""
Where and in which precision a model runs: the device, the dtype and its autocast context, and the peak FLOP/s
and memory figures train.py reports. Shared by train.py, sample.py, analyze.py and needle_eval.py.
"""
import contextlib
import json
import os
import re
import time

import torch

from output import atomic_write, lock_at


def cpu_info(path='/proc/cpuinfo'):
    """{'name', 'vendor', 'family', 'model', 'bf16': its bf16 matrix flags (amx_bf16, avx512_bf16)} of the first processor in
    /proc/cpuinfo (Linux; empty fields elsewhere), and 'threads': torch's thread count. Same model names can hide
    different units (an "AMD EPYC" may or may not have AVX512-BF16), so benchmarks report the flags, not the name."""
    fields = {}
    try:
        with open(path) as f:
            for line in f:
                key, _, value = line.partition(':')
                fields.setdefault(key.strip(), value.strip())
    except OSError:
        pass
    flags = fields.get('flags', '').split()
    return dict(name=fields.get('model name', ''), vendor=fields.get('vendor_id', ''), family=fields.get('cpu family', ''),
                model=fields.get('model', ''), bf16=[f for f in ('amx_bf16', 'avx512_bf16') if f in flags],
                isa=[f for f in ('avx2', 'fma', 'avx512f', 'avx512_bf16', 'amx_bf16') if f in flags],
                threads=torch.get_num_threads())


def machine(device):
    """What a run ran on, for summary.json: the host processor (cpu_info) and, on CUDA, the GPU's name, memory and
    compute capability. With the commit and the dtype actually used, it says whether two runs' numbers may sit in one
    cell (report.py marks cells that mix processors or number formats)."""
    out = dict(cpu=cpu_info())  # torch's version: summary.json's torch_version
    if torch.device(device).type == 'cuda':
        p = torch.cuda.get_device_properties(torch.device(device))
        out.update(gpu=p.name, gpu_memory_gib=round(p.total_memory / 2 ** 30, 1), capability=f"{p.major}.{p.minor}",
                   cuda=torch.version.cuda)
    return out


def cpu_has_fast_bf16():
    """bf16 autocast is the fast path on CPUs with AMX, and on AMD's AVX512-BF16 (Zen 4). Intel's AVX512-BF16 without
    AMX (an Emerald Rapids VM that hides AMX) trained *slower* in bf16 than in fp32 (a step of the 3-layer model,
    measured at 1ddecd2: `git show a689c16:results/bench_cpu.md`), so fp32 there. A rule on the flags and the
    vendor, not a timing: every process of a sweep takes the same precision."""
    info = cpu_info()
    return 'amx_bf16' in info['bf16'] or ('avx512_bf16' in info['bf16'] and info['vendor'] == 'AuthenticAMD')


def resolve_device(device):
    """'auto' -> 'cuda' when CUDA is available, else 'cpu'. Returns (device, device_type), e.g. ('cuda:1', 'cuda').
    A device this machine lacks is a ValueError that says so, before anything is built or written."""
    if device == 'auto':
        device = 'cuda' if torch.cuda.is_available() else 'cpu'
    if not re.fullmatch(r'cpu|mps|cuda(:\d+)?', device):
        raise ValueError(f"device={device!r} is not a device: use 'auto' (cuda if present, else cpu), 'cpu', 'cuda', "
                         f"'cuda:1' (a GPU by index) or 'mps'")
    device_type = 'cuda' if device.startswith('cuda') else device.split(':')[0]
    if device_type == 'cuda':
        if torch.version.cuda is None and torch.version.hip is None:
            raise ValueError(f"device={device!r}, but this torch {torch.__version__} is a CPU build: use "
                             f"--device=cpu (or auto), or install a CUDA build of torch")
        n = torch.cuda.device_count()
        index = int(device.split(':')[1]) if ':' in device else 0
        visible = f"CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES', 'unset')}"
        if index >= n:
            raise ValueError(f"device={device!r}, but torch sees {n} GPU{'s' if n != 1 else ''} ({visible}): use "
                             f"--device=cpu, or a GPU index below {n}" if n else
                             f"device={device!r}, but torch sees no GPU (no driver, or {visible}): use --device=cpu "
                             f"(or auto)")
    elif device_type == 'mps' and not torch.backends.mps.is_available():
        raise ValueError(f"device={device!r}, but MPS (Apple GPU) is not available here: use --device=cpu (or auto)")
    return device, device_type


def add_device_args(ap, dtype='auto'):
    """The tools' --device and --dtype arguments (argparse); read them back with device_and_dtype(args)."""
    ap.add_argument('--device', default='auto', help="'auto' (cuda if present, else cpu), 'cpu', 'cuda', 'cuda:1', "
                    "'mps'")
    ap.add_argument('--dtype', default=dtype, choices=['auto', 'float32', 'bfloat16', 'float16'])


def device_and_dtype(args):
    """(device, device_type, dtype) from add_device_args's arguments."""
    device, device_type = resolve_device(args.device)
    return device, device_type, pick_dtype(args.dtype, device_type)


def pick_dtype(dtype, device_type):
    """The dtype a run takes: dtype itself, or for 'auto' the fast one of this device. float16 on a CPU is refused:
    its autocast has no fast CPU kernels (a 6-layer run sat 7 minutes in its step-0 evaluation on a 2-core EPYC at
    fceb1ab), and it is refused before anything is built or written."""
    if dtype == 'float16' and device_type == 'cpu':
        fast = cpu_has_fast_bf16()
        raise ValueError("dtype='float16' on a CPU: its float16 kernels are slow (minutes for one evaluation): write "
                         "--dtype=float32" + (" or --dtype=bfloat16 (fast on this CPU)" if fast else
                                              " (bfloat16 also works, but is slower here: no AMX or AVX512-BF16)")
                         + f", or --dtype=auto ({'bfloat16' if fast else 'float32'} here)")
    if dtype != 'auto':
        return dtype
    if device_type == 'cuda':
        # without including_emulation=False, pre-Ampere GPUs (V100, T4) count as bf16-capable through a slow
        # emulation; they get fp16 with the GradScaler instead
        return 'bfloat16' if torch.cuda.is_bf16_supported(including_emulation=False) else 'float16'
    if device_type == 'cpu' and cpu_has_fast_bf16():
        return 'bfloat16'
    return 'float32'


def autocast_context(dtype, device_type):
    """Mixed precision for dtype 'bfloat16' or 'float16'; nothing for 'float32'. Reusable across `with` blocks."""
    if dtype == 'float32':
        return contextlib.nullcontext()
    return torch.autocast(device_type, dtype=dict(bfloat16=torch.bfloat16, float16=torch.float16)[dtype])


GPU_PEAK_FLOPS = {  # dense bf16/fp16 tensor-core peaks, FLOP/s
    'H200': 989e12, 'H100': 989e12, 'A100': 312e12, 'A10': 125e12, 'L40S': 362e12, 'L40': 181e12, 'L4': 121e12,
    'V100': 125e12, 'RTX 4090': 165e12, 'RTX 3090': 71e12, 'T4': 65e12,
}


def peak(device, dtype, threads=None):
    """(the device's peak FLOP/s for this dtype, where the figure comes from), MFU's denominator and its source for the
    log and summary.json: the dense bf16/fp16 datasheet figure of a known GPU (TF32's, half of it, for float32), or
    on a CPU this machine's matmul peak on `threads` threads (torch's, where None), the highest timed here
    (cpu_peak); (None, None) where neither is known."""
    if device.startswith('cuda'):
        name = torch.cuda.get_device_name(device)
        flops = next((v for k, v in GPU_PEAK_FLOPS.items() if k in name), None)
        if flops is None:
            return None, None
        if dtype == 'float32':
            return flops / 2, f"the {name} datasheet's dense TF32"  # TF32 is half the bf16 rate
        return flops, f"the {name} datasheet's dense {dtype}"
    if device != 'cpu':
        return None, None
    entry = cpu_peak(dtype, threads)
    n = entry['threads']
    what = f"this CPU's {dtype} matmul peak on {n} thread{'s' if n != 1 else ''}"
    if 'unkept' in entry:
        return entry['flops'], f"{what}, timed at this start ({cpu_peak_path()} could not be written: {entry['unkept']})"
    since = entry.get('since') or entry['measured']
    return entry['flops'], (f"{what}: the highest of its timings on this machine since {since}, set on "
                            f"{entry['measured']}, kept in {cpu_peak_path()}")


def cpu_peak_path():
    """The per-user cache of CPU peaks: $XDG_CACHE_HOME (else ~/.cache)/attn-gpt/cpu_peak_flops.json."""
    cache = os.environ.get('XDG_CACHE_HOME') or os.path.join(os.path.expanduser('~'), '.cache')
    return os.path.join(cache, 'attn-gpt', 'cpu_peak_flops.json')


def cpu_peak(dtype, threads=None):
    """This CPU's peak FLOP/s in dtype: the highest figure ever timed on this machine (its model, instruction set,
    torch's threads, the torch version), kept in cpu_peak_path(). Each start times it again (a fraction of a second)
    and raises the kept figure if it beat it; it is never lowered, because other work on the machine only ever slows a
    matmul. Timed once and kept as it was, a figure timed while the machine was busy stayed, and every later run
    logged an MFU above 100% (a 2-core EPYC, fixed at 020ace5); timed at each start and used as timed, one config's
    MFU moved with the load (fixed at fceb1ab). Under a lock, so that runs starting at once
    read and write it in turn. threads: DDP's ranks on one CPU, timed on all their threads together."""
    info = cpu_info()
    info['threads'] = threads or info['threads']
    key = f"{info['name']} [{' '.join(info['isa'])}] threads={info['threads']} {dtype} torch {torch.__version__}"
    path = cpu_peak_path()
    own = torch.get_num_threads()
    torch.set_num_threads(info['threads'])
    try:
        now = time_matmul(dtype)
    finally:
        torch.set_num_threads(own)
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with lock_at(path + '.lock'):
            try:
                with open(path) as f:
                    peaks = json.load(f)
            except (OSError, ValueError):  # none yet, or unreadable: timed again
                peaks = {}
            kept = peaks.get(key)
            if kept is None or now > kept['flops']:
                peaks[key] = dict(flops=now, threads=info['threads'], measured=time.strftime('%Y-%m-%d'),
                                  since=(kept or {}).get('since') or time.strftime('%Y-%m-%d'))
                atomic_write(path, lambda f: f.write(json.dumps(peaks, indent=1).encode()))
            return peaks[key]
    except OSError as e:  # a read-only home: this run's own timing, and the log says so
        return dict(flops=now, threads=info['threads'], unkept=e.strerror or str(e))


def time_matmul(dtype, n=1024, repeats=10, seconds=1.0):
    """The best of `repeats` n^3 matmuls in dtype (fewer where they take more than `seconds` in all, at least 3), as
    FLOP/s: other work on the machine only ever slows one."""
    dt = dict(float32=torch.float32, bfloat16=torch.bfloat16, float16=torch.float16)[dtype]
    a, b = torch.randn(n, n, dtype=dt), torch.randn(n, n, dtype=dt)
    a @ b
    best, start = float('inf'), time.perf_counter()
    for i in range(repeats):
        t = time.perf_counter()
        a @ b
        best = min(best, time.perf_counter() - t)
        if i >= 2 and t - start > seconds:
            break
    return 2 * n ** 3 / best


def device_memory(device):
    """The bytes a run on this device can use at most: a GPU's memory, or the host's RAM."""
    if torch.device(device).type == 'cuda':
        return torch.cuda.get_device_properties(torch.device(device)).total_memory
    try:
        return os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES')
    except (ValueError, OSError, AttributeError):  # not on this OS (macOS has both; Windows neither)
        return None


def activation_floor(cfg, dtype):
    """A lower bound on the bytes a training step's activations take: Korthikanti et al. (2022, "Reducing
    Activation Recomputation in Large Transformer Models") count s*b*h*(34 + 5*a*s/h) bytes per layer in 16-bit,
    34*h per token without the attention scores that a fused kernel never stores; in fp32 twice that. Tokens are
    one micro-batch's, batch_size * block_size."""
    per_value = 2 if dtype in ('bfloat16', 'float16') else 4
    return cfg['batch_size'] * cfg['block_size'] * cfg['n_layer'] * cfg['n_embd'] * 34 * per_value // 2


def peak_memory_mb(device):
    if device.startswith('cuda'):
        return torch.cuda.max_memory_allocated(device) / 2 ** 20
    import resource
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux reports KiB: peak RSS of the process
