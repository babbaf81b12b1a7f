"""
Train a GPT whose attention is chosen by config flag (model.py; the README's "Attention variants").

Single process, on a laptop CPU or one GPU:
$ python train.py configs/diff_sym_6L.py --batch_size=16
Several GPUs with DDP (one node; for several nodes add torchrun's --nnodes/--node_rank/--rdzv_* flags):
$ torchrun --standalone --nproc_per_node=4 train.py configs/diff_sym_6L.py

Read top to bottom: the learning-rate schedule, the optimizer step, evaluation, then Run (a run's state, its loop
train() and what it logs and saves) and main(), the steps of a run in order. Ctrl-C or SIGTERM stops a run at the end
of its step or evaluation batch, with ckpt.pt saved and exit status 130; --init_from=resume continues it exactly.
Beside it: the keys and their checks (config.py, docs/config.md), data and batches (dataset.py), the run folder and
logs (rundir.py), checkpoints (checkpoint.py), DDP and the stop (processes.py), CUDA graphs (cuda_graph.py).
"""
import math
import os
import shlex
import sys

import torch
import torch.distributed as dist

from causality import check_causal
from checkpoint import check_finite, load_resumed, mend_best, restore_optimizer, resume_settings, save_checkpoint
from config import MODEL_KEYS, config_warnings, parse_config, refuse_default_shape
from cuda_graph import CudaGraphs
from dataset import batch_rng, eval_batches, get_batch, seed_torch, sequential_start, setup_data
from measures import outlier_batch, outlier_record
from model import GPT, GPTConfig
from processes import Stop, StopNow, master_first, mean_over_ranks, setup_processes
from rundir import (AlreadyFinished, RunBusy, RunError, RunLog, Throughput, code_version, lambda_metrics, open_run,
                    run_path, start_line, write_summary)


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


def set_lr(optimizer, lr):
    """The step's learning rate. A tensor lr (cuda_graph=True) is filled in place: the captured AdamW reads it
    from the device, so a new value needs neither a new capture nor a sync."""
    for group in optimizer.param_groups:
        if isinstance(group['lr'], torch.Tensor):
            group['lr'].fill_(lr)
        else:
            group['lr'] = lr


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


def batch_losses(env, model, X, Y, n):
    """The mean loss of each of the n batches stacked in X, Y, as n forwards of one batch give it: a batch's token
    losses averaged over its targets (y = -1: none, and a loss of 0 from reduction='none')."""
    with env.autocast:
        _, loss = model(X, Y, reduction='none')
    keep = (Y != -1).view(n, -1)
    return loss.view(n, -1).sum(1) / keep.sum(1)


@torch.no_grad()
def estimate_loss(cfg, env, model, batches, stop=None, graphs=None, progress=lambda done, total: None):
    """Mean loss over eval_iters batches per split (dataset.eval_batches: the same batches at every eval, less noise
    between evals), each batch's mean kept apart, so the number is that of eval_iters forwards of one batch whatever
    eval_group is. Under DDP one all-reduce gathers the ranks' batches, so the mean is the same as one process's.
    None when stop() said to stop during it (asked once per group, as often on every rank; stop None: never)."""
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
            if stop is not None and stop():
                return None
        if env.ddp:
            dist.all_reduce(losses)  # each batch's loss is nonzero on one rank only
        losses = losses.cpu()
        return dict(train=losses[0].mean().item(), val=losses[1].mean().item())
    finally:
        model.train()


# -----------------------------------------------------------------------------------------------------------

class Run:
    """One training run: its config and processes, data, model and optimizer, where the loop stands, and its log and
    clock. main() builds it and calls its steps in order; train() is the loop."""

    def __init__(self, cfg, env, stop):
        """The data, and the model with its optimizer and GradScaler: from scratch, or from ckpt.pt with its
        iteration, best val loss, last eval, wandb run and timings."""
        self.cfg, self.env, self.stop, self.log, self.clock = cfg, env, stop, None, None
        self.data, self.tokenizer, n_tokens = setup_data(cfg, env.device)
        torch.manual_seed(cfg['seed'])
        ckpt = {}
        if cfg['init_from'] == 'resume':
            self.raw_model, ckpt = load_resumed(cfg, run_path(cfg), n_tokens)
        else:
            self.raw_model = GPT(GPTConfig(**{k: cfg[k] for k in MODEL_KEYS}))
        if env.master:  # stderr: a note, once a job
            print(f"number of parameters: {self.raw_model.get_num_params() / 1e6:.2f}M", file=sys.stderr)
        self.raw_model.to(env.device)
        self.scaler = torch.amp.GradScaler(env.device_type, enabled=(env.dtype == 'float16'))
        self.optimizer = self.raw_model.configure_optimizers(
            cfg['weight_decay'], cfg['learning_rate'], (cfg['beta1'], cfg['beta2']), cfg['optimizer'],
            cfg['orthoadam_max_dim'], cfg['seed'], capturable=env.cuda_graph)
        if ckpt:
            restore_optimizer(self.optimizer, self.scaler, ckpt, env.cuda_graph, env.device)
        # what evaluation calls (outside DDP: each rank evaluates its share), and what training calls
        self.eval_model = torch.compile(self.raw_model, mode=cfg['compile_mode']) if env.compile else self.raw_model
        self.model = self.eval_model
        if env.ddp:
            from torch.nn.parallel import DistributedDataParallel as DDP
            self.model = DDP(self.eval_model, device_ids=[env.local_rank] if env.device_type == 'cuda' else None)
        self.graphs = CudaGraphs(cfg, env) if env.cuda_graph else None  # cuda_graph: the captured step and eval
        self.first_bad = torch.tensor(-1, device=env.device)  # the first non-finite loss's iteration, without syncs
        self.iter_num = self.start_iter = ckpt.get('iter_num', 0)  # start_iter: a stop there has nothing to save
        self.best_val_loss = ckpt.get('best_val_loss', float('inf'))
        self.wandb_id, self.timing = ckpt.get('wandb_run_id'), ckpt.get('timing', {})  # timing: earlier processes'
        # the last eval's losses (an eval iteration is evaluated once). A checkpoint saved by a stop at an eval
        # iteration has not had that eval yet, so the resumed run does it; older checkpoints were always evaluated
        self.last_eval = ckpt.get('last_eval', dict(iter=self.iter_num)) if ckpt else {}
        self.ckpt_iter = -1          # the iteration an eval of this process wrote ckpt.pt at (ckpt_due skips it)
        self.eval_batches = None     # made at the first evaluation, then kept
        self.code = code_version()   # the commit this process runs, and whether the tree was dirty
        if ckpt and env.master:
            print(f"resuming {run_path(cfg)} at iteration {self.iter_num}")

    def begin(self):
        """The start line, the causality check, the log and the clock."""
        cfg, env = self.cfg, self.env
        if cfg['init_from'] == 'resume' and not cfg['eval_only']:
            master_first(env, lambda: mend_best(self))
        self.clock = Throughput(cfg, env, self.raw_model, self.timing)
        if env.master:
            print(start_line(env, self.clock))
        # logits must not depend on later tokens, in training's forward (every rank: DDP's is collective) and in
        # evaluation's (eval mode: another path on CPU with dropout, and under compile); a black-box check
        if cfg['causal']:
            for model, training in ((self.model, True), (self.eval_model, False)):
                check_causal(model, cfg['vocab_size'], cfg['block_size'], env.device, env.autocast, seed=cfg['seed'],
                             batch_size=cfg['batch_size'], training=training)
            if env.device_type == 'cuda':
                torch.cuda.reset_peak_memory_stats(env.device)  # summary.json's peak memory is training's
        elif env.master:
            print("causal=False: attention sees later tokens, so not a causal language model (no causality check)")
        self.log = master_first(env, lambda: RunLog(cfg, self.iter_num, self.wandb_id, active=True))
        self.log = self.log or RunLog(cfg, self.iter_num, self.wandb_id, active=False)
        self.clock.start(self.timing)  # the run's wall time and tokens/s count from here, after the earlier parts'

    def train(self):
        """The loop: evaluate where due, ckpt.pt every ckpt_interval steps, one optimizer step, log every
        log_interval steps. Returns True when stopped by Ctrl-C or SIGTERM (after saving ckpt.pt), False at max_iters
        or after eval_only's eval. A stop lands at the end of the step or evaluation batch in progress."""
        cfg, env, clock = self.cfg, self.env, self.clock
        while True:
            lr = get_lr(self.iter_num, cfg)
            set_lr(self.optimizer, lr)
            if self.eval_due():
                with clock.paused():  # evaluation and checkpointing are not training time
                    if not self.evaluate(lr):
                        return self.save_at_stop()
            if self.iter_num == cfg['max_iters'] or cfg['eval_only']:
                return False
            if self.ckpt_due():  # after the eval, so that ckpt.pt records it
                with clock.paused():
                    self.save()
            loss_sum = self.train_step()
            self.stop.armed = True  # a stop from here on saves a checkpoint first
            clock.step()
            self.log.step()
            self.log.progress('iteration', self.iter_num, cfg['max_iters'])
            if self.iter_num % cfg['log_interval'] == 0:
                self.log_step(loss_sum, lr)
            if cfg['outlier_interval'] and self.iter_num % cfg['outlier_interval'] == 0:
                with clock.paused():  # a measurement, not training time: rank 0 only, on one fixed val batch
                    master_first(env, lambda: self.log.write(dict(iter=self.iter_num, kind='outliers', **outlier_record(
                        self.raw_model, outlier_batch(cfg, self.data[1], env.device), env.autocast))))
            if self.stop.agreed(env):
                return self.save_at_stop()

    def train_step(self):
        """This rank's optimizer step at iter_num: step() on its micro-batches, eagerly or as the replay of its CUDA
        graph. Micro-batch m of rank r is global number g = r * accum + m, so N processes see exactly the batches (and
        dropout masks) of one process with N times the accumulation; DDP all-reduces the gradients after the last
        one only. Returns the mean loss over the micro-batches, a tensor (no sync)."""
        cfg, env, it = self.cfg, self.env, self.iter_num

        def micro_batches():
            for m in range(env.accum):
                g = env.rank * env.accum + m
                X, Y = get_batch(self.data[0], batch_rng(cfg['seed'], 0, it, g), cfg['batch_size'],
                                 cfg['block_size'], env.device, sequential_start(cfg, it, g, env.world * env.accum))
                seed_torch(cfg['seed'], 2, it, g)
                if env.ddp:
                    self.model.require_backward_grad_sync = (m == env.accum - 1)
                yield X, Y

        def run(batches):
            return step(self.model, self.optimizer, self.scaler, batches, env.accum, cfg['grad_clip'], env.autocast)
        if self.graphs is None:
            loss_sum = run(micro_batches())
        else:
            loss_sum = self.graphs.step(run, micro_batches(), reseed=lambda: seed_torch(cfg['seed'], 2, it, 0))
        # the first iteration whose loss is not finite, kept on the device: no sync in the step
        self.first_bad = torch.where((self.first_bad < 0) & ~torch.isfinite(loss_sum), it, self.first_bad)
        self.iter_num += 1
        return loss_sum

    def eval_due(self):
        """Every eval_interval iterations and at max_iters, once per eval iteration across stops and resumes;
        eval_only: now, whatever the iteration."""
        it, cfg = self.iter_num, self.cfg
        return cfg['eval_only'] or ((it % cfg['eval_interval'] == 0 or it == cfg['max_iters'])
                                    and self.last_eval.get('iter') != it)

    def ckpt_due(self):
        """ckpt_interval's save: at every multiple of it that this process trained to, unless this iteration's eval
        wrote ckpt.pt already (ckpt_iter, set alike on every rank: the save is collective)."""
        it, every = self.iter_num, self.cfg['ckpt_interval']
        return every > 0 and it % every == 0 and it > self.start_iter and self.ckpt_iter != it

    def evaluate(self, lr):
        """Every rank: the train and val losses (estimate_loss); rank 0 logs them and writes best.pt when val loss
        improved and ckpt.pt per always_save_checkpoint. ckpt.pt first: a crash between the two leaves a resumable
        run, and the resume mends best.pt (mend_best). False when stopped during it (the resumed run redoes it)."""
        cfg, env = self.cfg, self.env
        if self.eval_batches is None:
            self.eval_batches = eval_batches(cfg, env, self.data, self.raw_model.config.vocab_size)
        losses = estimate_loss(cfg, env, self.eval_model, self.eval_batches, lambda: self.stop.agreed(env),
                               self.graphs, lambda done, total: self.log.progress(
                                   f'evaluation at iteration {self.iter_num}, batch', done, total))
        if losses is None:
            return False
        metrics = lambda_metrics(self.raw_model.lambda_table())
        check_finite(self, dict(losses, **metrics), weights=not cfg['eval_only'])
        self.last_eval = dict(iter=self.iter_num, train_loss=losses['train'], val_loss=losses['val'], lr=lr, **metrics)
        self.log.say(f"step {self.iter_num}: train loss {losses['train']:.4f}, val loss {losses['val']:.4f}")
        if cfg['eval_only']:  # a look at a checkpoint: its run's log and checkpoints stay as they were
            return True
        improved = losses['val'] < self.best_val_loss
        self.best_val_loss = min(self.best_val_loss, losses['val'])
        saves = self.iter_num > 0 and (improved or cfg['always_save_checkpoint'])
        if saves:
            self.ckpt_iter = self.iter_num

        def write():  # rank 0 writes; an error there (a full disk) reaches every rank
            self.log.write(dict(self.last_eval, kind='eval'))
            if saves:
                save_checkpoint(self)
            if self.iter_num > 0 and improved:
                save_checkpoint(self, 'best.pt')
        master_first(env, write)
        return True

    def log_step(self, loss_sum, lr):
        """Every log_interval steps: the step's loss over all ranks and rank 0's log line, once every rank's losses are
        known to be finite (so log.jsonl never holds a NaN)."""
        loss = mean_over_ranks(loss_sum, self.env.ddp, self.env.world)  # a sync: the window now holds all its work
        window = self.clock.close_window()
        with self.clock.paused():
            metrics = lambda_metrics(self.raw_model.lambda_table())  # from the updated weights, equal on every rank
            check_finite(self, metrics)

            def write():
                self.log.write(dict(iter=self.iter_num, kind='train', loss=loss, lr=lr, **window, **metrics))
                self.log.say(f"iter {self.iter_num}: loss {loss:.4f}, time {window['ms_per_iter']:.0f}ms, "
                             f"{window['tokens_per_sec']:,.0f} tok/s"
                             + (f", mfu {window['mfu'] * 100:.2f}%" if window['mfu'] is not None else ''))
            master_first(self.env, write)

    def save(self):
        """ckpt.pt, collectively: every rank checks the weights, rank 0 writes."""
        check_finite(self, weights=True)
        master_first(self.env, lambda: save_checkpoint(self))

    def save_at_stop(self):
        """After a stop: ckpt.pt at this iteration, where this process trained since its start, and the command
        that continues the run."""
        if self.cfg['eval_only']:
            return True
        trained = self.iter_num > self.start_iter
        if trained:
            self.save()
        kept = run_path(self.cfg)
        launcher = (f"torchrun --standalone --nproc_per_node={self.env.world} train.py" if self.env.ddp else
                    "python train.py")
        resume = f"continue with: {launcher} --out_dir={shlex.quote(self.cfg['out_dir'])} --init_from=resume"
        self.log.say(f"stopped at iteration {self.iter_num}; " + (
            f"{kept} saved; {resume}" if trained else
            f"nothing new to save ({kept} is as it was); {resume}" if os.path.exists(kept) else
            "no step had finished, so nothing was saved: start the run again"))
        return True

    def finish(self, stopped):
        """ckpt.pt and summary.json when the run finished (trained to max_iters and evaluated there; a stop at
        max_iters is not: its resume does that eval), then the log's close and the lambda table. Rank 0 writes;
        every rank takes part."""
        cfg = self.cfg
        finished = self.iter_num == cfg['max_iters'] and not stopped and not cfg['eval_only']
        if finished:  # also after a resume that only did the final eval: ckpt.pt then records that eval
            self.save()
        master_first(self.env, lambda: write_summary(self, finished))


# -----------------------------------------------------------------------------------------------------------

def main(argv):
    """A run's steps, in order. Returns 0 when it finished (or had finished already), 130 when stopped."""
    with Stop() as stop:  # first: a Ctrl-C or SIGTERM from here on is the run's
        cfg = parse_config(argv)
        if cfg['init_from'] == 'resume':  # the run's own settings, but for the keys the command line names
            resume_settings(cfg, argv, master=int(os.environ.get('RANK', 0)) == 0)
        refuse_default_shape(cfg, argv)
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
                for w in config_warnings(cfg, get_lr(cfg['max_iters'], cfg)):
                    print(f"warning: {w}")
            run = Run(cfg, env, stop)
            run.begin()
            stopped = run.train()
            run.finish(stopped)
        finally:
            if run_dir is not None:
                run_dir.close()
            if env.ddp:
                dist.destroy_process_group()  # also after an error: no rank exits with its process group alive
    # a signal after the last step's poll (in the final writes) finds the run finished and saved, and is still heard
    return 130 if stopped or stop.signum is not None else 0


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
