"""
Train a GPT whose attention is chosen by config flag (model.py; the README's "Attention variants").

Single process, on a laptop CPU or one GPU:
$ python train.py configs/diff_sym_6L.py --batch_size=16
Several GPUs with DDP (one node; for several nodes add torchrun's --nnodes/--node_rank/--rdzv_* flags):
$ torchrun --standalone --nproc_per_node=4 train.py configs/diff_sym_6L.py

This file is the training script: the data, the model, the loop, the one optimizer step (step()), evaluation,
logging, and main() at the end, which lists the steps of a run in order. The machinery lives beside it: the config
keys and their validation (config.py, docs/config.md), the run folder and its logs (rundir.py), checkpoints and the
rules of a resume (checkpoint.py), the DDP processes and stops (processes.py), the CUDA graphs (cuda_graph.py).
"""

import os
import signal
import sys

EARLY_SIGNALS = []  # a Ctrl-C or SIGTERM while train.py imports (seconds, for torch): main() stops on it at once
if __name__ == '__main__':
    # Installed before the imports, and even where the shell that started the run in the background set SIGINT to be
    # ignored. Recorded, not raised: an exception raised inside an import is caught by some libraries' optional
    # imports, which then go on half-imported (numpy lost np.multiply, and the run went on)
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda signum, frame: EARLY_SIGNALS.append(signum))

import math  # noqa: E402
import typing
from dataclasses import dataclass, field

import torch
import torch.distributed as dist

from checkpoint import load_resumed, mend_best, restore_optimizer, resume_settings, save_checkpoint
from config import MODEL_KEYS, config_files, explicit_keys, parse_config
from cuda_graph import CudaGraphs
from dataset import batch_rng, get_batch, load_meta, load_split, seed_torch, sequential_start
from hardware import machine, peak_memory_mb
from measures import outlier_batch, outlier_record
from model import GPT, GPTConfig, check_causal
from output import write_json
from processes import StopNow, StopSignal, StopVote, master_first, mean_over_ranks, setup_processes
from rundir import (AlreadyFinished, RunBusy, RunError, RunLog, Throughput, code_version, lambda_markdown,
                    lambda_metrics, open_run, run_path)


def config_warnings(cfg):
    """Settings that are legal but probably not meant: a schedule that ends before the learning rate decays."""
    out = []
    if cfg['decay_lr'] and cfg['lr_decay_iters'] > cfg['max_iters']:
        lr = get_lr(cfg['max_iters'], cfg)
        out.append(f"lr_decay_iters={cfg['lr_decay_iters']} is past max_iters={cfg['max_iters']}: the learning rate "
                   f"ends at {lr:.3g}, not min_lr={cfg['min_lr']:g} (set --lr_decay_iters={cfg['max_iters']} to "
                   f"decay fully)")
    if cfg['decay_lr'] and cfg['warmup_iters'] > cfg['max_iters']:
        out.append(f"warmup_iters={cfg['warmup_iters']} is past max_iters={cfg['max_iters']}: the run ends in warm-up")
    return out


# -----------------------------------------------------------------------------------------------------------
# the schedule, the logs

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


# -----------------------------------------------------------------------------------------------------------
# the steps of main(), in order

def setup_data(cfg, device='cpu'):
    """Every rank opens the train and val splits (a small token stream held on the GPU, dataset.load_split);
    vocab_size, unless set, comes from the dataset's meta.json.
    Returns the splits, the tokenizer's description (checkpoints carry it, so that sample.py can decode without the
    dataset) and the number of token ids the batches hold."""
    T = cfg['block_size']
    meta = load_meta(cfg['dataset'])
    if not isinstance(meta.get('vocab_size'), int):
        raise ValueError(f"dataset '{cfg['dataset']}': its meta.json has no vocab_size (an integer); "
                         f"e.g. 50304 for GPT-2 tokens (50257 padded to a multiple of 64)")
    n_vocab = meta['vocab_size']
    bos = n_vocab if cfg['bos'] else None    # the first id past the dataset's
    n_tokens = n_vocab + cfg['bos']          # the ids the batches hold: the embedding needs a row for each
    if cfg['vocab_size'] is None:
        cfg['vocab_size'] = n_tokens
    elif cfg['vocab_size'] < n_tokens and not cfg['bos']:
        raise ValueError(f"vocab_size={cfg['vocab_size']} is below dataset '{cfg['dataset']}''s {n_tokens} token ids "
                         f"(its meta.json): the embedding would have no row for ids {cfg['vocab_size']}..{n_tokens - 1}. "
                         f"Leave vocab_size unset (None takes the dataset's), or give at least {n_tokens}")
    if cfg['bos'] and (meta.get('record_len') or cfg['vocab_size'] <= bos):
        raise ValueError(f"bos=True needs a token stream (dataset '{cfg['dataset']}' is fixed-length records)"
                         if meta.get('record_len') else f"bos=True puts token {bos} at position 0: vocab_size="
                         f"{cfg['vocab_size']} must be at least {bos + 1} (or None, which takes it)")
    if cfg['window_order'] == 'sequential' and meta.get('record_len'):
        raise ValueError(f"window_order='sequential' walks the windows of a token stream; dataset "
                         f"'{cfg['dataset']}' is fixed-length records: use window_order='random'")
    splits = tuple(load_split(cfg['dataset'], split, meta, bos, device) for split in ('train', 'val'))
    if meta.get('record_len') and meta['record_len'] != T + 1:
        raise ValueError(f"dataset '{cfg['dataset']}' has records of {meta['record_len']} tokens: "
                         f"set block_size={meta['record_len'] - 1}, or make the data again for block_size={T} "
                         f"(python data/{cfg['dataset']}/prepare.py --help)")
    for name, d in zip(('train', 'val'), splits):
        if len(d['tokens']) <= T:
            raise ValueError(f"{name}.bin has {len(d['tokens'])} tokens, fewer than block_size + 1 = {T + 1}")
    # a dataset whose records start with its own BOS (data/bigram_backcopy) names it in meta.json, as bos=True does
    # with the needle task's vocabulary settings (data/needle/prepare.py's TASK_KEYS), which say what its ids mean
    tokenizer = {k: meta[k] for k in ('tokenizer', 'itos', 'bos', 'n_keys', 'n_values', 'n_filler', 'fused')
                 if k in meta} or dict(tokenizer='gpt2')
    if bos is not None:
        tokenizer['bos'] = bos  # sample.py starts every prompt with it
    return splits, tokenizer, n_tokens


@dataclass
class TrainState:
    """The model and optimizer, and what the loop advances and checkpoints hold."""
    model: torch.nn.Module       # what training calls: raw_model, compiled and/or wrapped in DDP
    raw_model: GPT
    eval_model: torch.nn.Module  # what evaluation calls: outside DDP (each rank evaluates its share)
    optimizer: torch.optim.Optimizer
    scaler: torch.amp.GradScaler
    first_bad: torch.Tensor      # the first iteration with a non-finite loss (-1: none), tracked without syncs
    tokenizer: dict              # how the tokens decode (the dataset's meta.json), kept in every checkpoint
    iter_num: int = 0
    start_iter: int = 0          # where this process started: a stop before any step has nothing new to save
    ckpt_iter: int = -1          # the iteration an eval of this process wrote ckpt.pt at (ckpt_due skips it)
    best_val_loss: float = float('inf')
    last_eval: dict = field(default_factory=dict)  # the last eval's losses: an eval iteration is evaluated once
    wandb_id: typing.Optional[str] = None
    graphs: typing.Optional['CudaGraphs'] = None  # cuda_graph on: the captured step and eval forward
    eval_batches: typing.Optional[list] = None     # eval_batches(): made at the first evaluation, then kept
    timing: dict = field(default_factory=dict)     # ckpt.pt's totals of the earlier processes (Throughput.start)
    clock: typing.Optional['Throughput'] = None    # this process's, whose totals() each ckpt.pt keeps
    code: dict = field(default_factory=code_version)  # the commit this process runs, and whether the tree was dirty


def setup_model(cfg, env, tokenizer, n_tokens):
    """The model, its optimizer and GradScaler: from scratch, or from ckpt.pt with its iteration, best val loss,
    last eval and wandb run."""
    torch.manual_seed(cfg['seed'])
    ckpt = {}
    if cfg['init_from'] == 'resume':
        raw_model, ckpt = load_resumed(cfg, run_path(cfg), n_tokens)
    else:
        raw_model = GPT(GPTConfig(**{k: cfg[k] for k in MODEL_KEYS}))
    raw_model.to(env.device)
    scaler = torch.amp.GradScaler(env.device_type, enabled=(env.dtype == 'float16'))
    optimizer = raw_model.configure_optimizers(cfg['weight_decay'], cfg['learning_rate'],
                                               (cfg['beta1'], cfg['beta2']), cfg['optimizer'],
                                               cfg['orthoadam_max_dim'], cfg['seed'], capturable=env.cuda_graph)
    if ckpt:
        restore_optimizer(optimizer, scaler, ckpt, env.cuda_graph, env.device)
    model = torch.compile(raw_model, mode=cfg['compile_mode']) if env.compile else raw_model
    if env.ddp:
        from torch.nn.parallel import DistributedDataParallel as DDP
        model = DDP(model, device_ids=[env.local_rank] if env.device_type == 'cuda' else None)
    state = TrainState(model, raw_model, model.module if env.ddp else model, optimizer, scaler,
                       first_bad=torch.tensor(-1, device=env.device), tokenizer=tokenizer,
                       graphs=CudaGraphs(cfg, env) if env.cuda_graph else None)
    if ckpt:
        state.iter_num = state.start_iter = ckpt['iter_num']
        state.best_val_loss = ckpt['best_val_loss']
        state.wandb_id = ckpt.get('wandb_run_id')
        state.timing = ckpt.get('timing', {})  # older checkpoints: the last part's timings only
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


def train(cfg, env, state, log, clock, data, stop):
    """The loop: evaluate where due, ckpt.pt every ckpt_interval steps, one optimizer step, log every log_interval
    steps. Returns True when stopped by Ctrl-C or SIGTERM (after saving ckpt.pt), False at max_iters or after
    eval_only's eval. A stop lands at the end of the step or evaluation batch in progress (stop.poll(): every rank
    at the same point)."""
    while True:
        lr = get_lr(state.iter_num, cfg)
        set_lr(state.optimizer, lr)
        if eval_due(cfg, state):
            with clock.paused():  # evaluation and checkpointing are not training time
                if not evaluate(cfg, env, state, log, lr, data, stop):
                    return save_at_stop(cfg, env, state, log)
        if state.iter_num == cfg['max_iters'] or cfg['eval_only']:
            return False
        if ckpt_due(cfg, state):  # after the eval, so that ckpt.pt records it
            with clock.paused():
                check_finite(cfg, env, state, weights=True)
                master_first(env, lambda: save_checkpoint(cfg, state, log))
        loss_sum = train_step(cfg, env, state, data[0])
        stop.signal.deferred = True  # a stop from here on saves a checkpoint first
        clock.step()
        log.step()
        log.progress('iteration', state.iter_num, cfg['max_iters'])
        if state.iter_num % cfg['log_interval'] == 0:
            log_step(cfg, env, state, log, clock, loss_sum, lr)
        if cfg['outlier_interval'] and state.iter_num % cfg['outlier_interval'] == 0:
            with clock.paused():  # a measurement, not training time: rank 0 only, on one fixed val batch
                master_first(env, lambda: log.write(dict(iter=state.iter_num, kind='outliers', **outlier_record(
                    state.raw_model, outlier_batch(cfg, data[1], env.device), env.autocast))))
        if stop.poll():
            return save_at_stop(cfg, env, state, log)


def set_lr(optimizer, lr):
    """The step's learning rate. A tensor lr (cuda_graph=True) is filled in place: the captured AdamW reads it
    from the device, so a new value needs neither a new capture nor a sync."""
    for group in optimizer.param_groups:
        if isinstance(group['lr'], torch.Tensor):
            group['lr'].fill_(lr)
        else:
            group['lr'] = lr


def save_at_stop(cfg, env, state, log):
    """After a stop: ckpt.pt at this iteration, where this process trained since its start, and a word on resuming."""
    if cfg['eval_only']:
        return True
    trained = state.iter_num > state.start_iter
    if trained:
        check_finite(cfg, env, state, weights=True)
        master_first(env, lambda: save_checkpoint(cfg, state, log))
    kept = run_path(cfg)
    log.say(f"stopped at iteration {state.iter_num}; " + (
        f"{kept} saved. Continue with --init_from=resume" if trained else
        f"nothing new to save ({kept} is as it was). Continue with --init_from=resume" if os.path.exists(kept) else
        "no step had finished, so nothing was saved: start the run again"))
    return True


def ckpt_due(cfg, state):
    """ckpt_interval's save: at every multiple of it that this process trained to, unless this iteration's eval
    wrote ckpt.pt already (state.ckpt_iter, set alike on every rank: the save is collective)."""
    it, every = state.iter_num, cfg['ckpt_interval']
    return every > 0 and it % every == 0 and it > state.start_iter and state.ckpt_iter != it


def eval_due(cfg, state):
    """Every eval_interval iterations and at max_iters, once per eval iteration across stops and resumes;
    eval_only: now, whatever the iteration."""
    it = state.iter_num
    return cfg['eval_only'] or ((it % cfg['eval_interval'] == 0 or it == cfg['max_iters'])
                                and state.last_eval.get('iter') != it)


def eval_group(cfg, env, vocab_size):
    """How many eval batches go through one forward: eval_group, or for 0 (auto) 1 on a CPU (4 batches of the seed's
    3-layer model at once took longer a batch than one at a time: results/eval_group_cpu) and on CUDA as many as
    keep a forward within 2^16 tokens and 2^28 bytes of float logits: the seed's 3L model 8 batches of 32 x 256,
    GPT-2 124M 1. A small model's eval forward is launch-bound on a GPU: 8,400 eval batches were 39% of a 5000-step
    run's floor (results/bench_gpu.md)."""
    if cfg['eval_group'] or env.device_type != 'cuda':
        return cfg['eval_group'] or 1
    tokens = cfg['batch_size'] * cfg['block_size']
    return max(1, min(2 ** 16 // tokens, 2 ** 28 // (tokens * vocab_size * 4)))


def eval_batches(cfg, env, data, vocab_size):
    """This rank's eval batches of each split, the same at every evaluation (a pure function of the seed), made once
    and kept on the device in groups of eval_group(): [(split_id, ks, X, Y)], ks the batch numbers, X and Y the
    batches stacked. Under DDP rank r takes batches r, r + world, ... The groups are balanced (200 batches at most 8 a
    group: 25 of 8), a short last one is filled up with copies of its first batch whose losses are dropped, so that
    every group has one shape (one capture, one compile), and every rank has as many groups (each polls as often)."""
    B, T = cfg['batch_size'], cfg['block_size']
    most = -(-cfg['eval_iters'] // env.world)  # the most batches a rank has
    rounds = -(-most // min(eval_group(cfg, env, vocab_size), most))
    size = -(-most // rounds)
    groups = []
    for split_id, split in enumerate(data):
        mine = range(env.rank, cfg['eval_iters'], env.world)
        for i in range(rounds):
            ks = mine[i * size:(i + 1) * size]  # a range: losses[split_id, ks] is a slice, no index tensor
            if not ks:  # this rank has fewer batches than the others: it only polls
                groups.append((split_id, ks, None, None))
                continue
            xy = [get_batch(split, batch_rng(cfg['seed'], 1, split_id, k), B, T, env.device)
                  for k in list(ks) + [ks[0]] * (size - len(ks))]
            groups.append((split_id, ks, torch.cat([x for x, _ in xy]), torch.cat([y for _, y in xy])))
    return groups


def batch_losses(env, model, X, Y, n):
    """The mean loss of each of the n batches stacked in X, Y, as n forwards of one batch give it: a batch's token
    losses averaged over its targets (y = -1: none, and a loss of 0 from reduction='none')."""
    with env.autocast:
        _, loss = model(X, Y, reduction='none')
    keep = (Y != -1).view(n, -1)
    return loss.view(n, -1).sum(1) / keep.sum(1)


@torch.no_grad()
def estimate_loss(cfg, env, model, batches, stop=None, graphs=None, progress=lambda done, total: None):
    """Mean loss over eval_iters batches per split (eval_batches(): the same batches at every eval, less noise
    between evals), each batch's mean kept apart, so the number is that of eval_iters forwards of one batch whatever
    eval_group is. Under DDP one all-reduce gathers the ranks' batches, so the mean is the same as one process's.
    None when a stop was asked for during it (polled once per group, as often on every rank; stop None: none)."""
    model.eval()
    try:
        losses = torch.zeros(2, cfg['eval_iters'], device=env.device)  # filled on the device: no sync per batch
        done, total = 0, 2 * cfg['eval_iters']

        def forward(X, Y):
            return batch_losses(env, model, X, Y, X.size(0) // cfg['batch_size'])
        for split_id, ks, X, Y in batches:
            if ks:
                each = graphs.eval_loss(forward, X, Y) if graphs is not None else forward(X, Y)
                losses[split_id, ks.start:ks.stop:ks.step] = each[:len(ks)]
            done += len(ks) * env.world
            progress(min(done, total), total)
            if stop is not None and stop.poll():
                return None
        if env.ddp:
            dist.all_reduce(losses)  # each batch's loss is nonzero on one rank only
        losses = losses.cpu()
        return dict(train=losses[0].mean().item(), val=losses[1].mean().item())
    finally:
        model.train()


def evaluate(cfg, env, state, log, lr, data, stop):
    """Every rank: the train and val losses (estimate_loss); rank 0
    logs them and writes best.pt when val loss improved and ckpt.pt per always_save_checkpoint. ckpt.pt first: a
    crash between the two leaves a resumable run, and the resume mends best.pt (mend_best). False when stopped
    during the evaluation (which the resumed run redoes)."""
    if state.eval_batches is None:
        state.eval_batches = eval_batches(cfg, env, data, state.raw_model.config.vocab_size)
    losses = estimate_loss(cfg, env, state.eval_model, state.eval_batches, stop, state.graphs,
                           lambda done, total: log.progress(f'evaluation at iteration {state.iter_num}, batch', done,
                                                            total))
    if losses is None:
        return False
    metrics = lambda_metrics(state.raw_model.lambda_table())
    check_finite(cfg, env, state, dict(losses, **metrics), weights=not cfg['eval_only'])
    state.last_eval = dict(iter=state.iter_num, train_loss=losses['train'], val_loss=losses['val'], lr=lr, **metrics)
    log.say(f"step {state.iter_num}: train loss {losses['train']:.4f}, val loss {losses['val']:.4f}")
    if cfg['eval_only']:  # a look at a checkpoint: its run's log and checkpoints stay as they were
        return True
    improved = losses['val'] < state.best_val_loss
    state.best_val_loss = min(state.best_val_loss, losses['val'])

    saves = state.iter_num > 0 and (improved or cfg['always_save_checkpoint'])
    if saves:
        state.ckpt_iter = state.iter_num

    def save():  # rank 0 writes; an error there (a full disk) reaches every rank
        log.write(dict(state.last_eval, kind='eval'))
        if saves:
            save_checkpoint(cfg, state, log)
        if state.iter_num > 0 and improved:
            save_checkpoint(cfg, state, log, 'best.pt')
    master_first(env, save)
    return True


def micro_batches(cfg, env, state, data):
    """This rank's `accum` micro-batches of the step, (X, Y) on the device, each after its dropout seed is set.
    Micro-batch m of rank r is global number g = r * accum + m, so N processes see exactly the batches (and dropout
    masks) of one process with N times the accumulation; DDP all-reduces the gradients after the last one only."""
    it, n = state.iter_num, env.world * env.accum
    for m in range(env.accum):
        g = env.rank * env.accum + m
        X, Y = get_batch(data, batch_rng(cfg['seed'], 0, it, g), cfg['batch_size'], cfg['block_size'], env.device,
                         sequential_start(cfg, it, g, n))
        seed_torch(cfg['seed'], 2, it, g)
        if env.ddp:
            state.model.require_backward_grad_sync = (m == env.accum - 1)
        yield X, Y


def step(model, optimizer, scaler, batches, accum, grad_clip, autocast):
    """One optimizer step, the one every path runs (cuda_graph=True records it once and replays it): forward and
    backward over the micro-batches, each loss divided by accum so that the gradients are the mean's; the gradients
    clipped to a global norm of grad_clip (0: not clipped); the optimizer's step. fp16's GradScaler scales the loss and
    unscales before clipping (disabled otherwise, when it does nothing). Returns the mean loss over the micro-batches,
    a tensor on the device (no sync)."""
    loss_sum = 0.0
    for X, Y in batches:
        with autocast:
            _, loss = model(X, Y)
        loss = loss / accum
        scaler.scale(loss).backward()
        loss_sum = loss_sum + loss.detach()
    if grad_clip != 0.0:
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
    scaler.step(optimizer)
    scaler.update()
    optimizer.zero_grad(set_to_none=True)
    return loss_sum


def train_step(cfg, env, state, data):
    """This rank's optimizer step at state.iter_num: step() on its micro-batches, eagerly or as the replay of its CUDA
    graph. Returns the mean loss over the micro-batches, a tensor (no sync)."""
    def run(batches):
        return step(state.model, state.optimizer, state.scaler, batches, env.accum, cfg['grad_clip'], env.autocast)
    batches = micro_batches(cfg, env, state, data)
    if state.graphs is None:
        loss_sum = run(batches)
    else:
        loss_sum = state.graphs.step(run, batches, reseed=lambda: seed_torch(cfg['seed'], 2, state.iter_num, 0))
    note_first_bad(state, loss_sum)
    state.iter_num += 1
    return loss_sum


def note_first_bad(state, loss):
    """Keep the first iteration whose loss is not finite in state.first_bad, on the device: no sync in the step."""
    state.first_bad = torch.where((state.first_bad < 0) & ~torch.isfinite(loss), state.iter_num, state.first_bad)


def log_step(cfg, env, state, log, clock, loss_sum, lr):
    """Every log_interval steps: the step's loss over all ranks and rank 0's log line, once every rank's losses are
    known to be finite (so log.jsonl never holds a NaN)."""
    loss = mean_over_ranks(loss_sum, env.ddp, env.world)  # a sync: the window now holds all its work
    window = clock.close_window()
    with clock.paused():
        metrics = lambda_metrics(state.raw_model.lambda_table())  # from the updated weights, equal on every rank
        check_finite(cfg, env, state, metrics)

        def write():
            log.write(dict(iter=state.iter_num, kind='train', loss=loss, lr=lr, **window, **metrics))
            log.say(f"iter {state.iter_num}: loss {loss:.4f}, time {window['ms_per_iter']:.0f}ms, "
                    f"{window['tokens_per_sec']:,.0f} tok/s"
                    + (f", mfu {window['mfu'] * 100:.2f}%" if window['mfu'] is not None else ''))
        master_first(env, write)


def check_finite(cfg, env, state, values=None, weights=False):
    """Stop before anything non-finite is logged or saved: a training loss on any rank (the first bad step, the
    minimum over ranks), the values about to be logged (eval losses, lambdas), and before a save the weights (equal
    on every rank, so every rank reaches the same verdict). Every rank calls it at the same points: it is collective
    under DDP. Steps are named as the log names them: the step from iteration i to i + 1 is 'iteration i + 1'."""
    bad = state.first_bad
    if env.ddp:
        bad = torch.where(bad < 0, torch.iinfo(torch.int64).max, bad.long()).reshape(1)
        dist.all_reduce(bad, op=dist.ReduceOp.MIN)
        bad = torch.where(bad == torch.iinfo(torch.int64).max, -1, bad)
    bad = int(bad.item())
    what = None
    if bad >= 0:
        what = f"non-finite training loss at iteration {bad + 1}"
    elif values is not None and not all(math.isfinite(v) for v in values.values()):
        what = f"non-finite values at iteration {state.iter_num}: " + ', '.join(
            f"{k}={v}" for k, v in values.items() if not math.isfinite(v))
    elif weights and not torch.stack([torch.isfinite(p).all() for p in state.raw_model.parameters()]).all():
        what = f"non-finite weights at iteration {state.iter_num}"
    if what:
        kept = run_path(cfg)
        held = (f"{kept} still holds the last good state" if os.path.exists(kept) else "nothing was saved")
        raise FloatingPointError(f"{what}; stopping. {held} (try a lower learning_rate, or grad_clip)")


def finish(cfg, env, state, log, clock, stopped):
    """ckpt.pt and summary.json when the run finished (trained to max_iters and evaluated there; a stop at max_iters
    is not: its resume does that eval), then the lambda table. Rank 0 writes; every rank takes part."""
    finished = state.iter_num == cfg['max_iters'] and not stopped and not cfg['eval_only']
    if finished:  # also after a resume that only did the final eval: ckpt.pt then records that eval
        check_finite(cfg, env, state, weights=True)
        master_first(env, lambda: save_checkpoint(cfg, state, log))
    master_first(env, lambda: write_summary(cfg, env, state, log, clock, finished))


def write_summary(cfg, env, state, log, clock, finished):
    """Rank 0: summary.json when the run finished, the log's close, and the lambda table."""
    table = state.raw_model.lambda_table()
    last, best = state.last_eval, state.best_val_loss
    summary = dict(
        config=cfg, n_params=state.raw_model.get_num_params(), iter=state.iter_num, finished=finished,
        final_train_loss=last.get('train_loss'), final_val_loss=last.get('val_loss'),
        final_eval_iter=last.get('iter'), best_val_loss=best if best < float('inf') else None,
        lambda_table=table, tokens_per_sec=clock.tokens_per_sec(), wall_time_s=clock.totals()['wall_time'],
        mfu_peak_flops=clock.peak, mfu_peak_source=clock.peak_source, peak_memory_mb=peak_memory_mb(env.device),
        device=env.device, dtype=env.dtype, world_size=env.world, compile=env.compile, cuda_graph=env.cuda_graph,
        torch_version=torch.__version__, code=state.code,
        corpus_sha256=load_meta(cfg['dataset']).get('corpus_sha256'), machine=machine(env.device))
    if finished:
        write_json(run_path(cfg, 'summary.json'), summary)
    log.close(summary)
    if table:
        print(f"\nper-layer lambda after {state.iter_num} iterations:\n{lambda_markdown(table)}")


# -----------------------------------------------------------------------------------------------------------

def main(argv):
    cfg = parse_config(argv)
    if cfg['init_from'] == 'resume':  # the run's own settings, but for the keys the command line names
        resume_settings(cfg, argv, master=int(os.environ.get('RANK', 0)) == 0)
    if cfg['init_from'] == 'scratch' and not config_files(argv) and \
            not {'n_layer', 'n_embd', 'block_size'} & explicit_keys(argv):
        raise ValueError("no config file: without one, train.py's defaults are GPT-2 small's shape (12 layers, n_embd "
                         "768, block 1024: 85M parameters), hours a step on a CPU. Give a config, e.g. python train.py "
                         "configs/diff_sym_6L.py (configs/ holds each variant and depth), or the shape on the command "
                         "line (--n_layer=... --n_embd=... --block_size=...)")
    with StopSignal() as stop_signal:  # first: a stop during setup is acted on, not lost
        if EARLY_SIGNALS:
            stop_signal.handle(EARLY_SIGNALS[0], None)  # StopNow: nothing was made
        env = setup_processes(cfg)
        run_dir = None
        try:
            try:
                run_dir = master_first(env, lambda: open_run(cfg))
            except AlreadyFinished as e:
                if env.master:
                    print(e)
                return 0
            if env.master:
                for w in config_warnings(cfg):
                    print(f"warning: {w}")
            data, tokenizer, n_tokens = setup_data(cfg, env.device)
            state = setup_model(cfg, env, tokenizer, n_tokens)
            if cfg['init_from'] == 'resume' and not cfg['eval_only']:
                master_first(env, lambda: mend_best(cfg, state))
            clock = Throughput(cfg, env, state.raw_model, state.timing)
            if env.master:
                graphs = ''
                if env.device_type == 'cuda':  # on, or off and why
                    graphs = f", CUDA graphs {'on' if env.cuda_graph else 'off'}"
                    graphs += f" ({env.cuda_graph_why})" if env.cuda_graph_why else ''
                print(f"device {env.device} ({env.world} process{'es' if env.world > 1 else ''}), dtype {env.dtype}, "
                      f"compile {env.compile}{graphs}, {clock.tokens_per_iter:,} tokens per iteration" + (
                          f", MFU against {clock.peak / 1e12:.3g} TFLOP/s ({clock.peak_source})" if clock.peak else ''))
            check_causality(cfg, env, state)
            log = master_first(env, lambda: RunLog(cfg, state.iter_num, state.wandb_id, active=True))
            log = log or RunLog(cfg, state.iter_num, state.wandb_id, active=False)
            clock.start(state.timing)  # the run's wall time and tokens/s count from here, after the earlier parts'
            state.clock = clock
            stop = StopVote(stop_signal, env)
            try:
                stopped = train(cfg, env, state, log, clock, data, stop)
                finish(cfg, env, state, log, clock, stopped)
            finally:
                stop.close()
        except RuntimeError as e:  # a collective's error: under DDP, after a stop, a peer that stopped at once (StopNow)
            if stop_signal.requested and int(os.environ.get('WORLD_SIZE', 1)) > 1:
                raise StopNow(f"stopped: another rank took the same signal before its first step and left the "
                              f"collective this rank was in ({type(e).__name__}); this rank saved nothing new") from None
            raise
        finally:
            if run_dir is not None:
                run_dir.close()
            if env.ddp:
                dist.destroy_process_group()  # also after an error: no rank exits with its process group alive
    # stopped by a signal: not finished, so scripts (ablate.sh) can tell. A signal after the last step's poll (in the
    # final writes) finds the run finished and saved, and still says it was heard
    return 130 if stopped or stop_signal.requested else 0


def cli(argv):
    """The command line: main(), with the errors a user can act on printed as one line, no traceback (TRAIN_DEBUG=1
    shows it). Returns the exit status: 0 finished, 1 an error, 75 out_dir in use by another run, 130 stopped."""
    try:
        return main(argv)
    except RunBusy as e:
        print(f"error: {e}", file=sys.stderr)
        return 75
    except (ValueError, OSError, FloatingPointError, RunError) as e:  # FileNotFoundError, FileExistsError: OSErrors
        if os.environ.get('TRAIN_DEBUG'):
            raise
        # one message: rank 0 prints every error; another rank, only one of its own that is not a config or NaN
        # verdict (those every rank reaches alike), e.g. a node without the dataset
        rank = int(os.environ.get('RANK', 0))
        if rank == 0 or not (getattr(e, 'from_rank0', False) or isinstance(e, (ValueError, FloatingPointError))):
            print(f"error{f' (rank {rank})' if rank else ''}: {e}", file=sys.stderr)
        return 1
    except StopNow as e:  # a stop before the first step
        print(e, file=sys.stderr)
        return 130
    except KeyboardInterrupt:  # a second Ctrl-C: stop without saving
        print("stopped without saving", file=sys.stderr)
        return 130


if __name__ == '__main__':
    sys.exit(cli(sys.argv[1:]))
