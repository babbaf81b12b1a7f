"""
Train a GPT whose attention is chosen by config flag (see model.py and the README's table).

Single process, on a laptop CPU or one GPU:
$ python train.py configs/diff_sym_6L.py --batch_size=16
Several GPUs with DDP (one node; for several nodes add torchrun's --nnodes/--node_rank/--rdzv_* flags):
$ torchrun --standalone --nproc_per_node=4 train.py configs/diff_sym_6L.py

A config file is Python that assigns keys (it may include() another config file); `--key=value` on the
command line overrides it. Every key, its default and its type is in DEFAULTS below (training) and in
model.GPTConfig (architecture); parse_config() is the one place that validates them.
"""

import ast
import contextlib
import difflib
import json
import math
import os
import signal
import subprocess
import sys
import time
import typing
from dataclasses import asdict, fields

import numpy as np
import torch

from model import GPT, GPTConfig, check_causal, load_checkpoint, CHECKPOINT_FORMAT

# -----------------------------------------------------------------------------------------------------------
# default config values; model keys come from GPTConfig (vocab_size None = take it from the dataset's meta.json)
DEFAULTS = dict(
    # I/O
    out_dir='out', eval_interval=250, log_interval=10, eval_iters=200, eval_only=False,
    always_save_checkpoint=True,  # False: write ckpt.pt at an eval only when val loss improved (nanoGPT);
                                  # best.pt (the best val loss's weights) is written at every improvement either way
    init_from='scratch',          # 'scratch' | 'resume' (from out_dir/ckpt.pt)
    seed=1337,
    # wandb
    wandb_log=False, wandb_project='attn-gpt', wandb_run_name='', wandb_mode='online',
    # data
    dataset='shakespeare_char', gradient_accumulation_steps=1, batch_size=32,
    # optimizer
    optimizer='adamw',  # 'adamw' | 'orthoadam' (Adam in a fixed random rotated basis, orthoadam.py)
    orthoadam_max_dim=1024,  # OrthoAdam leaves tensor axes longer than this unrotated (e.g. a BPE vocabulary)
    learning_rate=3e-4, max_iters=5000, weight_decay=0.1, beta1=0.9, beta2=0.99, grad_clip=1.0,
    # learning rate schedule: linear warmup, then cosine decay to min_lr at lr_decay_iters
    decay_lr=True, warmup_iters=100, lr_decay_iters=5000, min_lr=3e-5,
    # system
    device='auto',   # 'auto' (cuda if present, else cpu) | 'cpu' | 'cuda' | 'cuda:1' | 'mps'
    dtype='auto',    # 'auto' | 'float32' | 'bfloat16' | 'float16'
    compile=None,    # None = auto: torch.compile on CUDA, off on CPU
)
DEFAULTS.update({f.name: f.default for f in fields(GPTConfig)})
DEFAULTS['vocab_size'] = None
MODEL_KEYS = [f.name for f in fields(GPTConfig)]
CHOICES = dict(init_from=('scratch', 'resume'), wandb_mode=('online', 'offline', 'disabled'),
               optimizer=('adamw', 'orthoadam'), dtype=('auto', 'float32', 'bfloat16', 'float16'))


def _expected_types(key):
    """The types a key accepts: its default's type; for Optional model fields, that type or None."""
    hints = typing.get_type_hints(GPTConfig)
    if key in hints and typing.get_origin(hints[key]) is typing.Union:
        return tuple(t for t in typing.get_args(hints[key]))
    if key == 'vocab_size':
        return (int, type(None))
    if key == 'compile':
        return (bool, type(None))
    return (type(DEFAULTS[key]),)


def _check(key, value, where):
    if key not in DEFAULTS:
        close = difflib.get_close_matches(key, DEFAULTS, n=3, cutoff=0.6)
        hint = f"; did you mean {', '.join(close)}?" if close else "; see the README's config table"
        raise ValueError(f"{where}: unknown config key '{key}'{hint}")
    types = _expected_types(key)
    if float in types and type(value) is int:
        value = float(value)  # an int where a float is expected is fine
    if type(value) not in types:  # exact types: bool is not accepted where an int is expected
        names = ' or '.join('None' if t is type(None) else t.__name__ for t in types)
        raise ValueError(f"{where}: {key}={value!r} has type {type(value).__name__}, expected {names}")
    if key in CHOICES and value not in CHOICES[key]:
        raise ValueError(f"{where}: {key}={value!r} must be one of {CHOICES[key]}")
    return value


def parse_config(argv):
    """Config files (positional, in order) then --key=value overrides -> a validated config dict."""
    cfg = dict(DEFAULTS)

    def run_file(path, ns):
        ns['include'] = lambda p: run_file(os.path.join(os.path.dirname(path), p), ns)
        with open(path) as f:
            exec(compile(f.read(), path, 'exec'), ns)

    for arg in argv:
        if not arg.startswith('--'):
            if not os.path.isfile(arg):
                raise ValueError(f"config file {arg} not found (configs live in configs/, e.g. configs/diff_sym_6L.py)")
            ns = {}
            run_file(arg, ns)
            for k, v in ns.items():
                if not k.startswith('_') and k != 'include' and not callable(v) and type(v).__name__ != 'module':
                    cfg[k] = _check(k, v, arg)
        else:
            if '=' not in arg:
                raise ValueError(f"command line: '{arg}' should be --key=value")
            key, val = arg[2:].split('=', 1)  # values may contain '='
            try:
                v = ast.literal_eval(val)
            except (ValueError, SyntaxError):
                v = val  # a bare string
            if key in DEFAULTS and str in _expected_types(key) and not isinstance(v, str):
                v = val  # e.g. --wandb_run_name=123 is a name, not a number
            cfg[key] = _check(key, v, 'command line')
    for k in CHOICES:
        _check(k, cfg[k], 'config')
    if cfg['eval_interval'] < 1 or cfg['log_interval'] < 1 or cfg['gradient_accumulation_steps'] < 1:
        raise ValueError("config: eval_interval, log_interval and gradient_accumulation_steps must be >= 1")
    return cfg


# -----------------------------------------------------------------------------------------------------------
# data: uint16 token files written by data/<dataset>/prepare.py, read through np.memmap

def data_dir(dataset):
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), 'data', dataset)


def ensure_data(dataset):
    """Run data/<dataset>/prepare.py when train.bin or val.bin is missing."""
    d = data_dir(dataset)
    if all(os.path.exists(os.path.join(d, f)) for f in ('train.bin', 'val.bin')):
        return
    prep = os.path.join(d, 'prepare.py')
    if not os.path.exists(prep):
        raise FileNotFoundError(f"dataset '{dataset}': no {d}/train.bin and no prepare.py to make it")
    print(f"dataset '{dataset}' is not prepared yet: running {prep}")
    if subprocess.run([sys.executable, prep]).returncode != 0:
        raise FileNotFoundError(f"{prep} failed (see its message above); run it by hand, e.g. with --input FILE")


def batch_rng(seed, *stream):
    """A generator that is a pure function of (seed, *stream), so batches never depend on history."""
    return np.random.default_rng([seed, *stream])


def seed_torch(seed, *stream):
    """Reseed torch (dropout) from (seed, *stream): resume and DDP need no saved generator state."""
    torch.manual_seed(int(np.random.SeedSequence([seed, *stream]).generate_state(1)[0]))


def load_split(dataset, split, meta):
    """A split as a token stream, or, for datasets of fixed-length records (meta['record_len'], e.g. data/needle),
    records of record_len = block_size + 1 tokens with a mask of the positions whose token is a target."""
    d = data_dir(dataset)
    split_data = dict(tokens=np.memmap(os.path.join(d, f'{split}.bin'), dtype=np.uint16, mode='r'),
                      record_len=meta.get('record_len'), mask=None)
    if split_data['record_len']:
        split_data['mask'] = np.memmap(os.path.join(d, f'{split}_mask.bin'), dtype=np.uint8, mode='r')
    return split_data


def get_batch(data, rng, batch_size, block_size, device):
    """Random windows of a token stream (x, y = x shifted by one); or random whole records, where y is -1 (no
    loss) except at the masked target positions."""
    tokens, L = data['tokens'], data['record_len']
    if L:
        ix = rng.integers(0, len(tokens) // L, size=batch_size)
        rec = np.stack([tokens[i * L:(i + 1) * L] for i in ix]).astype(np.int64)
        keep = np.stack([data['mask'][i * L + 1:(i + 1) * L] for i in ix]).astype(bool)
        x = torch.from_numpy(rec[:, :-1])
        y = torch.from_numpy(np.where(keep, rec[:, 1:], -1))
    else:
        ix = rng.integers(0, len(tokens) - block_size, size=batch_size)
        x = torch.from_numpy(np.stack([tokens[i:i + block_size] for i in ix]).astype(np.int64))
        y = torch.from_numpy(np.stack([tokens[i + 1:i + 1 + block_size] for i in ix]).astype(np.int64))
    if device.startswith('cuda'):
        return x.pin_memory().to(device, non_blocking=True), y.pin_memory().to(device, non_blocking=True)
    return x.to(device), y.to(device)


# -----------------------------------------------------------------------------------------------------------
# hardware

def cpu_has_fast_bf16():
    """bf16 matmuls are fast on CPUs with AMX or AVX512-BF16; elsewhere they are emulated and slow."""
    try:
        with open('/proc/cpuinfo') as f:
            flags = next((l for l in f if l.startswith('flags')), '')
    except OSError:
        return False
    return 'amx_bf16' in flags or 'avx512_bf16' in flags


def resolve_device(device):
    """'auto' -> 'cuda' when CUDA is available, else 'cpu'. Returns (device, device_type), e.g. ('cuda:1', 'cuda')."""
    if device == 'auto':
        device = 'cuda' if torch.cuda.is_available() else 'cpu'
    return device, ('cuda' if device.startswith('cuda') else device.split(':')[0])


def pick_dtype(dtype, device_type):
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


def peak_flops(device, dtype):
    """The device's peak for this dtype: a table for known GPUs, a short matmul measurement on CPU."""
    if device.startswith('cuda'):
        name = torch.cuda.get_device_name(device)
        peak = next((v for k, v in GPU_PEAK_FLOPS.items() if k in name), None)
        return peak if dtype != 'float32' or peak is None else peak / 2  # TF32 is half the bf16 rate
    if device != 'cpu':
        return None
    n, dt = 1024, dict(float32=torch.float32, bfloat16=torch.bfloat16, float16=torch.float16)[dtype]
    a, b = torch.randn(n, n, dtype=dt), torch.randn(n, n, dtype=dt)
    a @ b
    best = float('inf')
    for _ in range(3):
        t = time.perf_counter()
        a @ b
        best = min(best, time.perf_counter() - t)
    return 2 * n ** 3 / best


def peak_memory_mb(device):
    if device.startswith('cuda'):
        return torch.cuda.max_memory_allocated(device) / 2 ** 20
    import resource
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux reports KiB: peak RSS of the process


# -----------------------------------------------------------------------------------------------------------
# checkpoints and logs: written to a temporary file, then renamed, so a crash never leaves half a file

def atomic_write(path, write):
    tmp = path + '.tmp'
    with open(tmp, 'wb') as f:
        write(f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def write_json(path, obj):
    atomic_write(path, lambda f: f.write((json.dumps(obj, indent=2) + '\n').encode()))


def lambda_markdown(rows):
    lines = ['| layer | lambda_1 | lambda_2 | lambda_init | lambda_full |', '|---|---|---|---|---|']
    lines += [f"| {r['layer']} | {r['lambda_1']:.2f} | {r['lambda_2']:.2f} | {r['lambda_init']:.2f} | "
              f"{r['lambda_full']:.2f} |" for r in rows]
    return '\n'.join(lines)


def lambda_metrics(rows):
    return {f"lambda/L{r['layer']}/{k}": r[key] for r in rows
            for k, key in (('full', 'lambda_full'), ('lambda_1', 'lambda_1'), ('lambda_2', 'lambda_2'),
                           ('init', 'lambda_init'))}


def refuse_to_overwrite(ckpt_path, best_path):
    """A run from scratch must not replace another run's checkpoints."""
    if os.path.exists(ckpt_path):
        raise FileExistsError(f"{ckpt_path} exists: continue it with --init_from=resume, or pick another "
                              f"--out_dir (or delete that folder) to start from scratch")
    if os.path.exists(best_path):
        raise FileExistsError(f"{best_path} exists (the best weights of an earlier run, without its ckpt.pt): "
                              f"pick another --out_dir, or move that file away to start from scratch")


def log_step_sync(loss_sum, stop, ddp, world):
    """At a log step: (the step's training loss, whether to stop). loss_sum is the mean loss over this rank's
    micro-batches; under DDP one all-reduce, at log steps only, turns it into the mean over every micro-batch of
    every rank (the loss of the equivalent 1-process run) and stops all ranks if any was asked to stop."""
    if not ddp:
        return loss_sum.item(), stop
    import torch.distributed as dist
    both = torch.stack([loss_sum.float(), torch.tensor(float(stop), device=loss_sum.device)])
    dist.all_reduce(both)  # a sum: gloo has no average
    loss_total, stops = both.tolist()
    return loss_total / world, stops > 0


class GracefulExit:
    """The first Ctrl-C or SIGTERM asks the loop to save a checkpoint and stop; a second Ctrl-C stops at once."""

    def __init__(self):
        self.requested = False
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, self.handle)

    def handle(self, signum, frame):
        if self.requested and signum == signal.SIGINT:
            raise KeyboardInterrupt
        self.requested = True
        print(f"\n{signal.Signals(signum).name} received: saving a checkpoint after this iteration "
              "(Ctrl-C again to stop without saving)", flush=True)


# -----------------------------------------------------------------------------------------------------------

def main(argv):
    cfg = parse_config(argv)

    # --- distributed setup: torchrun sets RANK, LOCAL_RANK and WORLD_SIZE
    ddp = int(os.environ.get('RANK', -1)) != -1
    device, device_type = resolve_device(cfg['device'])
    if ddp:
        import torch.distributed as dist
        rank, local_rank, world = int(os.environ['RANK']), int(os.environ['LOCAL_RANK']), int(os.environ['WORLD_SIZE'])
        if device.startswith('cuda'):
            device = f'cuda:{local_rank}'
            torch.cuda.set_device(device)
        if cfg['gradient_accumulation_steps'] % world:
            raise ValueError(f"gradient_accumulation_steps={cfg['gradient_accumulation_steps']} must be divisible by "
                             f"the number of processes ({world}): it is the global number of micro-batches per step")
        dist.init_process_group(backend='nccl' if device.startswith('cuda') else 'gloo')
    else:
        rank, local_rank, world = 0, 0, 1
    master = rank == 0
    dtype = pick_dtype(cfg['dtype'], device_type)
    accum = cfg['gradient_accumulation_steps'] // world  # micro-batches per process per step
    B, T = cfg['batch_size'], cfg['block_size']
    tokens_per_iter = cfg['gradient_accumulation_steps'] * B * T
    out_dir = cfg['out_dir']
    ckpt_path, best_path = os.path.join(out_dir, 'ckpt.pt'), os.path.join(out_dir, 'best.pt')

    if master:
        os.makedirs(out_dir, exist_ok=True)
        if cfg['init_from'] == 'scratch':
            refuse_to_overwrite(ckpt_path, best_path)
        ensure_data(cfg['dataset'])
    if ddp:
        dist.barrier()
    meta_path = os.path.join(data_dir(cfg['dataset']), 'meta.json')
    meta = json.load(open(meta_path)) if os.path.exists(meta_path) else {}
    if cfg['vocab_size'] is None:
        cfg['vocab_size'] = meta.get('vocab_size', 50304)  # GPT-2's 50257 padded to a multiple of 64
    train_data, val_data = load_split(cfg['dataset'], 'train', meta), load_split(cfg['dataset'], 'val', meta)
    if meta.get('record_len') and meta['record_len'] != T + 1:
        raise ValueError(f"dataset '{cfg['dataset']}' has records of {meta['record_len']} tokens: "
                         f"set block_size={meta['record_len'] - 1}")
    for name, d in (('train', train_data), ('val', val_data)):
        if len(d['tokens']) <= T:
            raise ValueError(f"{name}.bin has {len(d['tokens'])} tokens, fewer than block_size + 1 = {T + 1}")

    if device_type == 'cuda':
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    autocast = autocast_context(dtype, device_type)

    # --- model and optimizer, from scratch or from the checkpoint
    torch.manual_seed(cfg['seed'])
    iter_num, best_val_loss, ckpt, wandb_id, last_eval = 0, float('inf'), None, None, {}
    if cfg['init_from'] == 'resume':
        model, ckpt = load_checkpoint(ckpt_path, 'cpu')
        for k in MODEL_KEYS:  # the architecture comes from the checkpoint
            if cfg[k] != DEFAULTS[k] and cfg[k] != ckpt['model_args'][k] and master:
                print(f"warning: {k}={cfg[k]!r} ignored: the checkpoint's model has {k}={ckpt['model_args'][k]!r}")
            cfg[k] = ckpt['model_args'][k]
        iter_num, best_val_loss = ckpt['iter_num'], ckpt['best_val_loss']
        if iter_num > cfg['max_iters']:
            raise ValueError(f"{ckpt_path} is at iteration {iter_num}, past max_iters={cfg['max_iters']}: "
                             f"set --max_iters to {iter_num} or more to continue it")
        wandb_id = ckpt.get('wandb_run_id')
        # the last eval before the checkpoint: a checkpoint saved by a stop at an eval iteration has not had that
        # eval yet, so the resumed run does it. Older checkpoints were always taken as evaluated.
        last_eval = ckpt.get('last_eval', dict(iter=iter_num))
    else:
        model = GPT(GPTConfig(**{k: cfg[k] for k in MODEL_KEYS}))
    model.to(device)
    raw_model = model
    scaler = torch.amp.GradScaler(device_type, enabled=(dtype == 'float16'))
    optimizer = model.configure_optimizers(cfg['weight_decay'], cfg['learning_rate'], (cfg['beta1'], cfg['beta2']),
                                           device_type, cfg['optimizer'], cfg['orthoadam_max_dim'], cfg['seed'])
    if ckpt is not None:
        optimizer.load_state_dict(ckpt['optimizer'])
        if 'scaler' in ckpt and scaler.is_enabled():
            scaler.load_state_dict(ckpt['scaler'])
        ckpt = None  # free memory
    use_compile = cfg['compile'] if cfg['compile'] is not None else device_type == 'cuda'
    if use_compile:
        model = torch.compile(model)
    if ddp:
        from torch.nn.parallel import DistributedDataParallel as DDP
        model = DDP(model, device_ids=[local_rank] if device_type == 'cuda' else None)
    eval_model = model.module if ddp else model  # rank 0 evaluates alone, outside DDP

    n_params = raw_model.get_num_params()
    flops_per_iter = raw_model.flops_per_token(T) * tokens_per_iter / world  # this device's share, for its peak
    peak = peak_flops(device, dtype) if master else None
    if master:
        print(f"device {device} ({world} process{'es' if world > 1 else ''}), dtype {dtype}, compile {use_compile}, "
              f"{tokens_per_iter:,} tokens per iteration")
    # before any training: the logits at a position must not depend on later tokens (every rank: DDP's forward is
    # collective). Training's own forward runs it, so a leak from any layer or variant, new ones included, stops here.
    if cfg['causal']:
        check_causal(model, cfg['vocab_size'], T, device, autocast, seed=cfg['seed'], batch_size=B)
    elif master:
        print("causal=False: attention sees later tokens, so this is not a causal language model (no causality check)")

    def get_lr(it):
        if not cfg['decay_lr']:
            return cfg['learning_rate']
        if it < cfg['warmup_iters']:
            return cfg['learning_rate'] * (it + 1) / (cfg['warmup_iters'] + 1)
        if it > cfg['lr_decay_iters']:
            return cfg['min_lr']
        ratio = (it - cfg['warmup_iters']) / max(1, cfg['lr_decay_iters'] - cfg['warmup_iters'])
        return cfg['min_lr'] + 0.5 * (1.0 + math.cos(math.pi * ratio)) * (cfg['learning_rate'] - cfg['min_lr'])

    @torch.no_grad()
    def estimate_loss():
        """Mean loss over eval_iters batches per split; the same batches at every eval (less noise between evals)."""
        out = {}
        eval_model.eval()
        for split_id, (split, data) in enumerate((('train', train_data), ('val', val_data))):
            losses = torch.zeros(cfg['eval_iters'])
            for k in range(cfg['eval_iters']):
                X, Y = get_batch(data, batch_rng(cfg['seed'], 1, split_id, k), B, T, device)
                with autocast:
                    _, loss = eval_model(X, Y)
                losses[k] = loss.item()
            out[split] = losses.mean().item()
        eval_model.train()
        return out

    # --- logs: log.jsonl keeps every log and eval line; on resume, lines past the checkpoint are dropped
    log_path = os.path.join(out_dir, 'log.jsonl')
    if master:
        kept = b''
        if cfg['init_from'] == 'resume' and os.path.exists(log_path):
            with open(log_path, 'rb') as f:
                kept = b''.join(l for l in f if l.strip() and json.loads(l).get('iter', 0) <= iter_num)
        atomic_write(log_path, lambda f: f.write(kept))
        log_file = open(log_path, 'a')
    run = None
    if master and cfg['wandb_log']:
        import wandb
        run = wandb.init(project=cfg['wandb_project'], name=cfg['wandb_run_name'] or None, config=cfg,
                         mode=cfg['wandb_mode'], dir=out_dir, id=wandb_id, resume='allow' if wandb_id else None)

    def log(record):
        log_file.write(json.dumps(record) + '\n')
        log_file.flush()
        if run is not None:
            run.log({k: v for k, v in record.items() if k != 'iter'}, step=record['iter'])

    def save_checkpoint(path=ckpt_path, resumable=True):
        ckpt = dict(format=CHECKPOINT_FORMAT, model=raw_model.state_dict(), model_args=asdict(raw_model.config),
                    iter_num=iter_num, best_val_loss=best_val_loss, last_eval=last_eval, config=cfg)
        if resumable:  # best.pt is for sampling and evaluation: weights only, a third of ckpt.pt with AdamW
            # no RNG state: batches and dropout masks are pure functions of (seed, iteration, micro-batch)
            ckpt['optimizer'] = optimizer.state_dict()
            if scaler.is_enabled():
                ckpt['scaler'] = scaler.state_dict()
            if run is not None:
                ckpt['wandb_run_id'] = run.id  # a resumed run continues the same wandb curves
        atomic_write(path, lambda f: torch.save(ckpt, f))

    # --- the training loop
    stopper = GracefulExit()
    bar = None
    if master and sys.stderr.isatty() and not cfg['eval_only']:
        from tqdm import tqdm
        bar = tqdm(total=cfg['max_iters'], initial=iter_num, dynamic_ncols=True, desc='train')
    say = (lambda s: bar.write(s)) if bar is not None else print
    first_bad = torch.tensor(-1, device=device)  # first iteration with a non-finite loss, tracked without syncs
    t_start = time.time()
    train_time, train_tokens, window_t, window_iters = 0.0, 0, time.time(), 0
    mfu, first_window = -1.0, True

    def check_finite():
        bad = int(first_bad.item())
        if bad >= 0:
            raise FloatingPointError(f"non-finite loss at iteration {bad}; stopping. {ckpt_path} still holds "
                                     f"the last good state (try a lower learning_rate or grad_clip)")

    stop = False
    while True:
        lr = get_lr(iter_num)
        for group in optimizer.param_groups:
            group['lr'] = lr

        # evaluate, log and checkpoint (rank 0); once per eval iteration across stops and resumes
        if (iter_num % cfg['eval_interval'] == 0 or iter_num == cfg['max_iters']) and master \
                and (last_eval.get('iter') != iter_num or cfg['eval_only']):
            check_finite()
            t_eval = time.time()
            losses = estimate_loss()
            last_eval = dict(iter=iter_num, train_loss=losses['train'], val_loss=losses['val'], lr=lr,
                             **lambda_metrics(raw_model.lambda_table()))
            say(f"step {iter_num}: train loss {losses['train']:.4f}, val loss {losses['val']:.4f}")
            log(dict(last_eval, kind='eval'))
            improved = losses['val'] < best_val_loss
            best_val_loss = min(best_val_loss, losses['val'])
            if iter_num > 0 and improved and not cfg['eval_only']:
                # before ckpt.pt: after a crash between the two, the resume redoes this eval and this write
                save_checkpoint(best_path, resumable=False)
            if iter_num > 0 and (improved or cfg['always_save_checkpoint']):
                save_checkpoint()
            window_t += time.time() - t_eval  # evaluation and checkpointing are not training time
        if iter_num == cfg['max_iters'] or cfg['eval_only']:
            break

        # one optimizer step: `accum` micro-batches on this rank; micro-batch m of rank r is global number
        # g = r * accum + m, so N processes see exactly the batches of one process with N times the accumulation
        loss_sum = 0.0
        for m in range(accum):
            g = rank * accum + m
            X, Y = get_batch(train_data, batch_rng(cfg['seed'], 0, iter_num, g), B, T, device)
            seed_torch(cfg['seed'], 2, iter_num, g)  # dropout masks too, so N processes equal one process
            if ddp:
                model.require_backward_grad_sync = (m == accum - 1)  # all-reduce only on the last micro-step
            with autocast:
                _, loss = model(X, Y)
                loss = loss / accum
            scaler.scale(loss).backward()
            loss_sum = loss_sum + loss.detach()  # mean over this rank's micro-batches (log_step_sync: all ranks)
            first_bad = torch.where((first_bad < 0) & ~torch.isfinite(loss.detach()), iter_num, first_bad)
        if cfg['grad_clip'] != 0.0:
            scaler.unscale_(optimizer)
            torch.nn.utils.clip_grad_norm_(model.parameters(), cfg['grad_clip'])
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad(set_to_none=True)
        iter_num += 1
        window_iters += 1
        if bar is not None:
            bar.update(1)

        stop = stopper.requested
        if iter_num % cfg['log_interval'] == 0:
            # a sync: the window's time now includes all its queued work
            lossf, stop = log_step_sync(loss_sum, stop, ddp, world)
            dt = time.time() - window_t
            if not first_window:  # the first window (warm-up, compilation) is left out of tokens/s
                train_time += dt
                train_tokens += window_iters * tokens_per_iter
            first_window = False
            tok_s = window_iters * tokens_per_iter / dt
            if master:
                check_finite()
                if peak:
                    mfu = flops_per_iter * window_iters / dt / peak
                rec = dict(iter=iter_num, kind='train', loss=lossf, lr=lr, tokens_per_sec=tok_s,
                           ms_per_iter=1000 * dt / window_iters, mfu=mfu if peak else None,
                           **lambda_metrics(raw_model.lambda_table()))
                log(rec)
                say(f"iter {iter_num}: loss {lossf:.4f}, time {rec['ms_per_iter']:.0f}ms, {tok_s:,.0f} tok/s"
                    + (f", mfu {mfu * 100:.2f}%" if peak else ''))
            window_t, window_iters = time.time(), 0
        elif ddp:
            stop = False  # only acted on at log steps, where all ranks agree
        if stop:
            if master:
                check_finite()
                save_checkpoint()
                say(f"stopped at iteration {iter_num}; {ckpt_path} saved. Continue with --init_from=resume")
            break

    # --- the end: summary.json, the lambda table
    if bar is not None:
        bar.close()
    # finished: trained to max_iters and evaluated there; a stop at max_iters is not (its resume does that eval)
    finished = iter_num == cfg['max_iters'] and not stop and not cfg['eval_only']
    if master:
        if finished:
            save_checkpoint()
        table = raw_model.lambda_table()
        summary = dict(
            config=cfg, n_params=n_params, iter=iter_num, finished=finished,
            final_train_loss=last_eval.get('train_loss'), final_val_loss=last_eval.get('val_loss'),
            final_eval_iter=last_eval.get('iter'), best_val_loss=best_val_loss if best_val_loss < float('inf') else None,
            lambda_table=table, tokens_per_sec=train_tokens / train_time if train_time > 0 else None,
            wall_time_s=time.time() - t_start, peak_memory_mb=peak_memory_mb(device), device=device, dtype=dtype,
            world_size=world, compile=use_compile, torch_version=torch.__version__)
        if finished:
            write_json(os.path.join(out_dir, 'summary.json'), summary)
        if table:
            print(f"\nper-layer lambda after {iter_num} iterations:\n{lambda_markdown(table)}")
        if run is not None:
            run.summary.update({k: v for k, v in summary.items() if k not in ('config', 'lambda_table')})
            run.finish()
        log_file.close()
    if ddp:
        dist.destroy_process_group()
    return 130 if stop else 0  # stopped by a signal: not finished, so scripts (ablate.sh) can tell


if __name__ == '__main__':
    try:
        sys.exit(main(sys.argv[1:]))
    except (ValueError, FileNotFoundError, FileExistsError, FloatingPointError) as e:
        if os.environ.get('TRAIN_DEBUG'):
            raise
        print(f"error: {e}", file=sys.stderr)
        sys.exit(1)
