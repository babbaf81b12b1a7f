"""
Train a GPT whose attention is chosen by config flag (see model.py and the README's table).

Single process, on a laptop CPU or one GPU:
$ python train.py configs/diff_sym_6L.py --batch_size=16
Several GPUs with DDP (one node; for several nodes add torchrun's --nnodes/--node_rank/--rdzv_* flags):
$ torchrun --standalone --nproc_per_node=4 train.py configs/diff_sym_6L.py

A config file is Python that assigns keys (it may include() another config file); `--key=value` on the
command line overrides it. Every key, its default and its type is in DEFAULTS below (training) and in
model.GPTConfig (architecture); parse_config() is the one place that validates them. main() at the end of the
file reads top to bottom: processes and device, data, model and optimizer, the loop, the end.
"""

import ast
import contextlib
import difflib
import json
import math
import os
import signal
import sys
import time
import typing
from dataclasses import asdict, dataclass, field, fields

import numpy as np
import torch
import torch.distributed as dist

from dataset import batch_rng, ensure_data, get_batch, load_meta, load_split
from hardware import autocast_context, peak_flops, peak_memory_mb, pick_dtype, resolve_device
from model import GPT, GPTConfig, check_causal, load_checkpoint, CHECKPOINT_FORMAT
from output import atomic_write, write_json

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
# the schedule, the logs

def run_path(cfg, name='ckpt.pt'):
    return os.path.join(cfg['out_dir'], name)


def get_lr(it, cfg):
    """Linear warmup to learning_rate over warmup_iters, then cosine decay to min_lr at lr_decay_iters."""
    if not cfg['decay_lr']:
        return cfg['learning_rate']
    if it < cfg['warmup_iters']:
        return cfg['learning_rate'] * (it + 1) / (cfg['warmup_iters'] + 1)
    if it > cfg['lr_decay_iters']:
        return cfg['min_lr']
    ratio = (it - cfg['warmup_iters']) / max(1, cfg['lr_decay_iters'] - cfg['warmup_iters'])
    return cfg['min_lr'] + 0.5 * (1.0 + math.cos(math.pi * ratio)) * (cfg['learning_rate'] - cfg['min_lr'])


def seed_torch(seed, *stream):
    """Reseed torch (dropout) from (seed, *stream): resume and DDP need no saved generator state."""
    torch.manual_seed(int(np.random.SeedSequence([seed, *stream]).generate_state(1)[0]))


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


class RunLog:
    """Rank 0's outputs: log.jsonl (every log and eval line; on resume, lines past the checkpoint are dropped),
    the console (through the tqdm bar when there is one) and wandb. On other ranks it writes nothing."""

    def __init__(self, cfg, iter_num, wandb_id, active):
        self.file = self.wandb = self.bar = None
        if not active:
            return
        path = run_path(cfg, 'log.jsonl')
        kept = b''
        if cfg['init_from'] == 'resume' and os.path.exists(path):
            with open(path, 'rb') as f:
                kept = b''.join(l for l in f if l.strip() and json.loads(l).get('iter', 0) <= iter_num)
        atomic_write(path, lambda f: f.write(kept))
        self.file = open(path, 'a')
        if cfg['wandb_log']:
            import wandb
            self.wandb = wandb.init(project=cfg['wandb_project'], name=cfg['wandb_run_name'] or None, config=cfg,
                                    mode=cfg['wandb_mode'], dir=cfg['out_dir'], id=wandb_id,
                                    resume='allow' if wandb_id else None)
        if sys.stderr.isatty() and not cfg['eval_only']:
            from tqdm import tqdm
            self.bar = tqdm(total=cfg['max_iters'], initial=iter_num, dynamic_ncols=True, desc='train')

    @property
    def wandb_id(self):
        return self.wandb.id if self.wandb is not None else None

    def write(self, record):
        if self.file is not None:
            self.file.write(json.dumps(record) + '\n')
            self.file.flush()
        if self.wandb is not None:
            self.wandb.log({k: v for k, v in record.items() if k != 'iter'}, step=record['iter'])

    def say(self, text):
        (self.bar.write if self.bar is not None else print)(text)

    def step(self):
        if self.bar is not None:
            self.bar.update(1)

    def close(self, summary):
        if self.bar is not None:
            self.bar.close()
        if self.wandb is not None:
            self.wandb.summary.update({k: v for k, v in summary.items() if k not in ('config', 'lambda_table')})
            self.wandb.finish()
        if self.file is not None:
            self.file.close()


class Throughput:
    """Tokens/s, ms per iteration and MFU of each log window, and the run's tokens/s, which leaves out the first
    window (warm-up, compilation) and the time spent evaluating, checkpointing and logging."""

    def __init__(self, cfg, env, model):
        self.tokens_per_iter = cfg['gradient_accumulation_steps'] * cfg['batch_size'] * cfg['block_size']
        # MFU: this device's share of the step's FLOPs, against one device's peak (measured on CPU: rank 0 only)
        self.flops_per_iter = model.flops_per_token(cfg['block_size']) * self.tokens_per_iter / env.world
        self.peak = peak_flops(env.device, env.dtype) if env.master else None
        self.start()

    def start(self):
        self.started = self.window_start = time.time()
        self.window_iters, self.train_time, self.train_tokens, self.first_window = 0, 0.0, 0, True

    def step(self):
        self.window_iters += 1

    @contextlib.contextmanager
    def paused(self):
        t = time.time()
        yield
        self.window_start += time.time() - t

    def close_window(self):
        dt, n = time.time() - self.window_start, self.window_iters
        if not self.first_window:
            self.train_time += dt
            self.train_tokens += n * self.tokens_per_iter
        self.first_window = False
        self.window_start, self.window_iters = time.time(), 0
        return dict(tokens_per_sec=n * self.tokens_per_iter / dt, ms_per_iter=1000 * dt / n,
                    mfu=self.flops_per_iter * n / dt / self.peak if self.peak else None)

    def tokens_per_sec(self):
        return self.train_tokens / self.train_time if self.train_time > 0 else None


# -----------------------------------------------------------------------------------------------------------
# the steps of main(), in order

@dataclass
class Env:
    """Where this process runs: its place among the DDP processes, its device and precision."""
    ddp: bool
    rank: int
    local_rank: int
    world: int
    device: str
    device_type: str
    dtype: str
    autocast: contextlib.AbstractContextManager  # mixed precision for dtype, reusable across `with` blocks
    compile: bool
    accum: int  # micro-batches per process per optimizer step

    @property
    def master(self):
        return self.rank == 0


def setup_processes(cfg):
    """DDP (torchrun sets RANK, LOCAL_RANK and WORLD_SIZE), this process's device, dtype and torch.compile."""
    device, device_type = resolve_device(cfg['device'])
    ddp = int(os.environ.get('RANK', -1)) != -1
    rank, local_rank, world = 0, 0, 1
    if ddp:
        rank, local_rank, world = (int(os.environ[k]) for k in ('RANK', 'LOCAL_RANK', 'WORLD_SIZE'))
        if device.startswith('cuda'):
            device = f'cuda:{local_rank}'
            torch.cuda.set_device(device)
        if cfg['gradient_accumulation_steps'] % world:
            raise ValueError(f"gradient_accumulation_steps={cfg['gradient_accumulation_steps']} must be divisible by "
                             f"the number of processes ({world}): it is the global number of micro-batches per step")
        dist.init_process_group(backend='nccl' if device.startswith('cuda') else 'gloo')
    if device_type == 'cuda':
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    dtype = pick_dtype(cfg['dtype'], device_type)
    return Env(ddp, rank, local_rank, world, device, device_type, dtype, autocast_context(dtype, device_type),
               compile=cfg['compile'] if cfg['compile'] is not None else device_type == 'cuda',
               accum=cfg['gradient_accumulation_steps'] // world)


def setup_data(cfg, env):
    """Rank 0 checks the run folder and prepares the dataset if needed; then every rank opens the train and val
    splits. vocab_size, unless set, comes from the dataset's meta.json."""
    T = cfg['block_size']
    if env.master:
        os.makedirs(cfg['out_dir'], exist_ok=True)
        if cfg['init_from'] == 'scratch':
            refuse_to_overwrite(run_path(cfg), run_path(cfg, 'best.pt'))
        ensure_data(cfg['dataset'])
    if env.ddp:
        dist.barrier()
    meta = load_meta(cfg['dataset'])
    if cfg['vocab_size'] is None:
        cfg['vocab_size'] = meta.get('vocab_size', 50304)  # GPT-2's 50257 padded to a multiple of 64
    splits = load_split(cfg['dataset'], 'train', meta), load_split(cfg['dataset'], 'val', meta)
    if meta.get('record_len') and meta['record_len'] != T + 1:
        raise ValueError(f"dataset '{cfg['dataset']}' has records of {meta['record_len']} tokens: "
                         f"set block_size={meta['record_len'] - 1}, or make the data again for block_size={T} "
                         f"(python data/{cfg['dataset']}/prepare.py --help)")
    for name, d in zip(('train', 'val'), splits):
        if len(d['tokens']) <= T:
            raise ValueError(f"{name}.bin has {len(d['tokens'])} tokens, fewer than block_size + 1 = {T + 1}")
    return splits


@dataclass
class TrainState:
    """The model and optimizer, and what the loop advances and checkpoints hold."""
    model: torch.nn.Module       # what training calls: raw_model, compiled and/or wrapped in DDP
    raw_model: GPT
    eval_model: torch.nn.Module  # rank 0 evaluates alone, outside DDP
    optimizer: torch.optim.Optimizer
    scaler: torch.amp.GradScaler
    first_bad: torch.Tensor      # the first iteration with a non-finite loss (-1: none), tracked without syncs
    iter_num: int = 0
    best_val_loss: float = float('inf')
    last_eval: dict = field(default_factory=dict)  # the last eval's losses: an eval iteration is evaluated once
    wandb_id: typing.Optional[str] = None


def load_resumed(cfg, path, master):
    """ckpt.pt's model and contents; the architecture comes from the checkpoint, so cfg's model keys are set."""
    model, ckpt = load_checkpoint(path, 'cpu')
    for k in MODEL_KEYS:
        if cfg[k] != DEFAULTS[k] and cfg[k] != ckpt['model_args'][k] and master:
            print(f"warning: {k}={cfg[k]!r} ignored: the checkpoint's model has {k}={ckpt['model_args'][k]!r}")
        cfg[k] = ckpt['model_args'][k]
    if ckpt['iter_num'] > cfg['max_iters']:
        raise ValueError(f"{path} is at iteration {ckpt['iter_num']}, past max_iters={cfg['max_iters']}: "
                         f"set --max_iters to {ckpt['iter_num']} or more to continue it")
    return model, ckpt


def setup_model(cfg, env):
    """The model, its optimizer and GradScaler: from scratch, or from ckpt.pt with its iteration, best val loss,
    last eval and wandb run."""
    torch.manual_seed(cfg['seed'])
    ckpt = {}
    if cfg['init_from'] == 'resume':
        raw_model, ckpt = load_resumed(cfg, run_path(cfg), env.master)
    else:
        raw_model = GPT(GPTConfig(**{k: cfg[k] for k in MODEL_KEYS}))
    raw_model.to(env.device)
    scaler = torch.amp.GradScaler(env.device_type, enabled=(env.dtype == 'float16'))
    optimizer = raw_model.configure_optimizers(cfg['weight_decay'], cfg['learning_rate'],
                                               (cfg['beta1'], cfg['beta2']), cfg['optimizer'],
                                               cfg['orthoadam_max_dim'], cfg['seed'])
    if ckpt:
        optimizer.load_state_dict(ckpt['optimizer'])
        if 'scaler' in ckpt and scaler.is_enabled():
            scaler.load_state_dict(ckpt['scaler'])
    model = torch.compile(raw_model) if env.compile else raw_model
    if env.ddp:
        from torch.nn.parallel import DistributedDataParallel as DDP
        model = DDP(model, device_ids=[env.local_rank] if env.device_type == 'cuda' else None)
    state = TrainState(model, raw_model, model.module if env.ddp else model, optimizer, scaler,
                       first_bad=torch.tensor(-1, device=env.device))
    if ckpt:
        state.iter_num, state.best_val_loss = ckpt['iter_num'], ckpt['best_val_loss']
        state.wandb_id = ckpt.get('wandb_run_id')
        # a checkpoint saved by a stop at an eval iteration has not had that eval yet, so the resumed run does it.
        # Older checkpoints were always taken as evaluated.
        state.last_eval = ckpt.get('last_eval', dict(iter=state.iter_num))
    return state


def check_causality(cfg, env, state):
    """Before any training: the logits at a position must not depend on later tokens, in the forward that training
    runs (every rank: DDP's forward is collective) and in the one evaluation runs (eval mode, no gradients: on CPU
    with dropout, and under compile, a different code path). A black-box check, so it covers every layer and
    variant, new ones included, at the positions check_causal perturbs."""
    if cfg['causal']:
        for model, training in ((state.model, True), (state.eval_model, False)):
            check_causal(model, cfg['vocab_size'], cfg['block_size'], env.device, env.autocast, seed=cfg['seed'],
                         batch_size=cfg['batch_size'], training=training)
        if env.device_type == 'cuda':
            torch.cuda.reset_peak_memory_stats(env.device)  # summary.json's peak memory is training's, not the check's
    elif env.master:
        print("causal=False: attention sees later tokens, so this is not a causal language model (no causality check)")


def train(cfg, env, state, log, clock, train_data, val_data):
    """The loop: evaluate where due (rank 0), one optimizer step, log every log_interval steps. Returns True when
    stopped by Ctrl-C or SIGTERM (after saving ckpt.pt), False at max_iters or after eval_only's eval."""
    stopper = GracefulExit()
    while True:
        lr = get_lr(state.iter_num, cfg)
        for group in state.optimizer.param_groups:
            group['lr'] = lr
        if env.master and eval_due(cfg, state):
            with clock.paused():  # evaluation and checkpointing are not training time
                evaluate(cfg, env, state, log, lr, train_data, val_data)
        if state.iter_num == cfg['max_iters'] or cfg['eval_only']:
            return False
        loss_sum = train_step(cfg, env, state, train_data)
        clock.step()
        log.step()
        stop = stopper.requested
        if state.iter_num % cfg['log_interval'] == 0:
            stop = log_step(cfg, env, state, log, clock, loss_sum, lr, stop)
        elif env.ddp:
            stop = False  # only acted on at log steps, where all ranks agree
        if stop:
            if env.master:
                check_finite(cfg, state)
                save_checkpoint(cfg, state, log)
                log.say(f"stopped at iteration {state.iter_num}; {run_path(cfg)} saved. "
                        "Continue with --init_from=resume")
            return True


def eval_due(cfg, state):
    """Every eval_interval iterations and at max_iters, once per eval iteration across stops and resumes;
    eval_only: now, whatever the iteration."""
    it = state.iter_num
    return cfg['eval_only'] or ((it % cfg['eval_interval'] == 0 or it == cfg['max_iters'])
                                and state.last_eval.get('iter') != it)


@torch.no_grad()
def estimate_loss(cfg, env, model, train_data, val_data):
    """Mean loss over eval_iters batches per split; the same batches at every eval (less noise between evals)."""
    out = {}
    model.eval()
    for split_id, (split, data) in enumerate((('train', train_data), ('val', val_data))):
        losses = torch.zeros(cfg['eval_iters'])
        for k in range(cfg['eval_iters']):
            X, Y = get_batch(data, batch_rng(cfg['seed'], 1, split_id, k), cfg['batch_size'], cfg['block_size'],
                             env.device)
            with env.autocast:
                _, loss = model(X, Y)
            losses[k] = loss.item()
        out[split] = losses.mean().item()
    model.train()
    return out


def evaluate(cfg, env, state, log, lr, train_data, val_data):
    """Rank 0: the train and val losses, logged; best.pt when val loss improved; ckpt.pt per always_save_checkpoint."""
    check_finite(cfg, state)
    losses = estimate_loss(cfg, env, state.eval_model, train_data, val_data)
    state.last_eval = dict(iter=state.iter_num, train_loss=losses['train'], val_loss=losses['val'], lr=lr,
                           **lambda_metrics(state.raw_model.lambda_table()))
    log.say(f"step {state.iter_num}: train loss {losses['train']:.4f}, val loss {losses['val']:.4f}")
    if cfg['eval_only']:  # a look at a checkpoint: its run's log and checkpoints stay as they were
        return
    log.write(dict(state.last_eval, kind='eval'))
    improved = losses['val'] < state.best_val_loss
    state.best_val_loss = min(state.best_val_loss, losses['val'])
    if state.iter_num > 0 and improved:
        # before ckpt.pt: after a crash between the two, the resume redoes this eval and this write
        save_checkpoint(cfg, state, log, 'best.pt')
    if state.iter_num > 0 and (improved or cfg['always_save_checkpoint']):
        save_checkpoint(cfg, state, log)


def train_step(cfg, env, state, data):
    """One optimizer step over this rank's `accum` micro-batches. Micro-batch m of rank r is global number
    g = r * accum + m, so N processes see exactly the batches (and dropout masks) of one process with N times the
    accumulation. Returns the mean loss over this rank's micro-batches, as a tensor (no sync)."""
    loss_sum = 0.0
    for m in range(env.accum):
        g = env.rank * env.accum + m
        X, Y = get_batch(data, batch_rng(cfg['seed'], 0, state.iter_num, g), cfg['batch_size'], cfg['block_size'],
                         env.device)
        seed_torch(cfg['seed'], 2, state.iter_num, g)  # dropout masks too, so N processes equal one process
        if env.ddp:
            state.model.require_backward_grad_sync = (m == env.accum - 1)  # all-reduce only on the last micro-step
        with env.autocast:
            _, loss = state.model(X, Y)
            loss = loss / env.accum
        state.scaler.scale(loss).backward()
        loss_sum = loss_sum + loss.detach()
        state.first_bad = torch.where((state.first_bad < 0) & ~torch.isfinite(loss.detach()), state.iter_num,
                                      state.first_bad)
    if cfg['grad_clip'] != 0.0:
        state.scaler.unscale_(state.optimizer)
        torch.nn.utils.clip_grad_norm_(state.model.parameters(), cfg['grad_clip'])
    state.scaler.step(state.optimizer)
    state.scaler.update()
    state.optimizer.zero_grad(set_to_none=True)
    state.iter_num += 1
    return loss_sum


def log_step(cfg, env, state, log, clock, loss_sum, lr, stop):
    """Every log_interval steps: the step's loss over all ranks and rank 0's log line. Returns whether to stop
    (any rank asked to)."""
    loss, stop = log_step_sync(loss_sum, stop, env.ddp, env.world)  # a sync: the window now holds all its work
    window = clock.close_window()
    if env.master:
        with clock.paused():
            check_finite(cfg, state)
            log.write(dict(iter=state.iter_num, kind='train', loss=loss, lr=lr, **window,
                           **lambda_metrics(state.raw_model.lambda_table())))
            log.say(f"iter {state.iter_num}: loss {loss:.4f}, time {window['ms_per_iter']:.0f}ms, "
                    f"{window['tokens_per_sec']:,.0f} tok/s"
                    + (f", mfu {window['mfu'] * 100:.2f}%" if window['mfu'] is not None else ''))
    return stop


def check_finite(cfg, state):
    bad = int(state.first_bad.item())
    if bad >= 0:
        raise FloatingPointError(f"non-finite loss at iteration {bad}; stopping. {run_path(cfg)} still holds "
                                 f"the last good state (try a lower learning_rate or grad_clip)")


def save_checkpoint(cfg, state, log, name='ckpt.pt'):
    """ckpt.pt: everything a resume needs. best.pt, for sampling and evaluation: the weights only (a third of
    ckpt.pt with AdamW). No RNG state: batches and dropout masks are pure functions of (seed, iteration,
    micro-batch)."""
    raw = state.raw_model
    ckpt = dict(format=CHECKPOINT_FORMAT, model=raw.state_dict(), model_args=asdict(raw.config),
                iter_num=state.iter_num, best_val_loss=state.best_val_loss, last_eval=state.last_eval, config=cfg)
    if name == 'ckpt.pt':
        ckpt['optimizer'] = state.optimizer.state_dict()
        if state.scaler.is_enabled():
            ckpt['scaler'] = state.scaler.state_dict()
        if log.wandb_id is not None:
            ckpt['wandb_run_id'] = log.wandb_id  # a resumed run continues the same wandb curves
    atomic_write(run_path(cfg, name), lambda f: torch.save(ckpt, f))


def finish(cfg, env, state, log, clock, stopped):
    """Rank 0: ckpt.pt and summary.json when the run finished (trained to max_iters and evaluated there; a stop at
    max_iters is not: its resume does that eval), then the lambda table."""
    if not env.master:
        return
    finished = state.iter_num == cfg['max_iters'] and not stopped and not cfg['eval_only']
    if finished:
        save_checkpoint(cfg, state, log)
    table = state.raw_model.lambda_table()
    last, best = state.last_eval, state.best_val_loss
    summary = dict(
        config=cfg, n_params=state.raw_model.get_num_params(), iter=state.iter_num, finished=finished,
        final_train_loss=last.get('train_loss'), final_val_loss=last.get('val_loss'),
        final_eval_iter=last.get('iter'), best_val_loss=best if best < float('inf') else None,
        lambda_table=table, tokens_per_sec=clock.tokens_per_sec(), wall_time_s=time.time() - clock.started,
        peak_memory_mb=peak_memory_mb(env.device), device=env.device, dtype=env.dtype, world_size=env.world,
        compile=env.compile, torch_version=torch.__version__)
    if finished:
        write_json(run_path(cfg, 'summary.json'), summary)
    log.close(summary)
    if table:
        print(f"\nper-layer lambda after {state.iter_num} iterations:\n{lambda_markdown(table)}")


# -----------------------------------------------------------------------------------------------------------

def main(argv):
    cfg = parse_config(argv)
    env = setup_processes(cfg)
    train_data, val_data = setup_data(cfg, env)
    state = setup_model(cfg, env)
    clock = Throughput(cfg, env, state.raw_model)
    if env.master:
        print(f"device {env.device} ({env.world} process{'es' if env.world > 1 else ''}), dtype {env.dtype}, "
              f"compile {env.compile}, {clock.tokens_per_iter:,} tokens per iteration")
    check_causality(cfg, env, state)
    log = RunLog(cfg, state.iter_num, state.wandb_id, active=env.master)
    clock.start()  # the run's wall time and tokens/s count from here
    stopped = train(cfg, env, state, log, clock, train_data, val_data)
    finish(cfg, env, state, log, clock, stopped)
    if env.ddp:
        dist.destroy_process_group()
    return 130 if stopped else 0  # stopped by a signal: not finished, so scripts (ablate.sh) can tell


if __name__ == '__main__':
    try:
        sys.exit(main(sys.argv[1:]))
    except (ValueError, FileNotFoundError, FileExistsError, FloatingPointError) as e:
        if os.environ.get('TRAIN_DEBUG'):
            raise
        print(f"error: {e}", file=sys.stderr)
        sys.exit(1)
