"""
Where train.py runs: its place among the DDP processes (torchrun sets RANK, LOCAL_RANK and WORLD_SIZE), its device
and precision (Env, setup_processes), and how the processes act together: rank 0 first with its errors passed on
(master_first), a stop agreed by every rank at the same step (Stop), a loss averaged over ranks.
"""
import contextlib
import datetime
import os
import signal
import sys
from dataclasses import dataclass

import torch
import torch.distributed as dist

from cuda_graph import cuda_graph_refusal
from hardware import activation_floor, autocast_context, device_memory, pick_dtype, resolve_device


def mean_over_ranks(loss_sum, ddp, world):
    """At a log step: this rank's mean loss over its micro-batches -> the step's loss, the mean over every
    micro-batch of every rank (the loss of the equivalent 1-process run): one all-reduce, at log steps only."""
    if not ddp:
        return loss_sum.item()
    total = loss_sum.detach().float().clone()
    dist.all_reduce(total)  # a sum: gloo has no average
    return total.item() / world


class StopNow(BaseException):
    """A stop before this process trained a step: nothing new to save, so the run ends at once (exit status 130).
    A BaseException, as KeyboardInterrupt is: raised by the signal handler wherever the run is, it must pass through
    every `except Exception` on the way (a library's, a fallback's), which would otherwise swallow the stop."""


class Stop:
    """Ctrl-C or SIGTERM, installed by train.py's main() for the run's life (the previous handlers come back after
    it). Before the run's first step there is nothing new to save, so a signal ends the run at once (StopNow). From
    the first step on (armed), it sets a flag, which the training loop acts on at the end of the step or evaluation
    batch in progress: it saves ckpt.pt and exits 130. A second Ctrl-C stops at once, without saving."""

    def __enter__(self):
        self.signum, self.armed, self.group = None, False, None
        self.previous = {sig: signal.signal(sig, self.handle) for sig in (signal.SIGINT, signal.SIGTERM)}
        return self

    def __exit__(self, *exc):
        for sig, handler in self.previous.items():
            signal.signal(sig, handler)

    def handle(self, signum, frame):
        name = signal.Signals(signum).name
        if not self.armed:
            raise StopNow(f"{name} received before the first step: stopped; no step had finished, so nothing was saved")
        if self.signum is not None and signum == signal.SIGINT:
            raise KeyboardInterrupt
        self.signum = signum
        # os.write, not print: the handler may interrupt a print, and a buffered stream cannot be re-entered
        os.write(sys.stdout.fileno(), f"\n{name} received: saving a checkpoint after this step "
                 f"(Ctrl-C again to stop without saving)\n".encode())

    def agreed(self, env):
        """Whether the run stops here. Under DDP every rank must stop at the same step: the ranks agree through one
        all-reduce (max) of their flags at each of these points (every rank polls at the same ones), on a CPU (gloo)
        group of its own, so that it never waits on the GPU."""
        flag = self.signum is not None
        if not env.ddp:
            return flag
        if self.group is None:
            self.group = dist.new_group(backend='gloo')
        vote = torch.tensor([int(flag)])
        dist.all_reduce(vote, op=dist.ReduceOp.MAX, group=self.group)
        return vote.item() > 0


def master_first(env, fn):
    """fn() on rank 0 only (checks and writes in the run folder), its value there and None elsewhere. Under DDP every
    rank then raises rank 0's error, if it had one, so that all ranks leave together with one message instead of
    waiting in a collective for a rank that is gone."""
    err = value = None
    if env.master:
        try:
            value = fn()
        except Exception as e:  # noqa: BLE001: passed on to the other ranks, then raised here too
            err = e
    if env.ddp:
        box = [err]
        dist.broadcast_object_list(box, src=0)
        err = box[0]
        if err is not None and not env.master:
            err.from_rank0 = True  # rank 0 prints it; this rank leaves quietly
    if err is not None:
        raise err
    return value


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
    cuda_graph: bool = False  # the step and eval forward captured (cuda_graph.py); cfg's None resolved here
    cuda_graph_why: str = ''  # why they are not, where a CUDA run could want them

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
            accum = cfg['gradient_accumulation_steps']
            raise ValueError(f"config: gradient_accumulation_steps={accum} must be divisible by the number of "
                             f"processes ({world}): it is the global number of micro-batches per step. Write "
                             f"--gradient_accumulation_steps={-(-accum // world) * world}")
    if device_type == 'cuda':
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    dtype = pick_dtype(cfg['dtype'], device_type)
    env = Env(ddp, rank, local_rank, world, device, device_type, dtype, autocast_context(dtype, device_type),
              compile=cfg['compile'] if cfg['compile'] is not None else device_type == 'cuda',
              accum=cfg['gradient_accumulation_steps'] // world)
    # before the process group: a refusal leaves nothing to tear down
    need, have = activation_floor(cfg, dtype), device_memory(device)
    if have and need > have:  # the OOM killer's SIGKILL says nothing: a run that cannot fit is refused here
        raise ValueError(f"config: batch_size={cfg['batch_size']} x block_size={cfg['block_size']} through "
                         f"n_layer={cfg['n_layer']} layers of n_embd={cfg['n_embd']} needs at least "
                         f"{need / 2 ** 30:,.0f} GiB of activations in {dtype}, more than the "
                         f"{have / 2 ** 30:,.0f} GiB of this {device_type.upper()}'s memory: write a smaller "
                         f"--block_size or --batch_size (--gradient_accumulation_steps keeps the tokens a step)")
    env.cuda_graph_why = cuda_graph_refusal(cfg, env) or ''
    if cfg['cuda_graph'] and env.cuda_graph_why:
        raise ValueError(f"config: cuda_graph=True cannot run here: {env.cuda_graph_why}"
                         + ("; drop --cuda_graph" if env.device_type != 'cuda' else ''))
    env.cuda_graph = cfg['cuda_graph'] is not False and not env.cuda_graph_why  # None (auto): wherever it can be
    if ddp:
        # every rank evaluates its share, but rank 0 writes checkpoints while the others wait in the next step's
        # all-reduce: 30 minutes, not NCCL's default 10, leaves room for a large model on a slow shared disk
        dist.init_process_group(backend='nccl' if device.startswith('cuda') else 'gloo',
                                timeout=datetime.timedelta(minutes=30))
        if device_type == 'cpu' and cfg['dtype'] == 'auto':
            env.dtype = rank0_dtype(env.dtype)
            env.autocast = autocast_context(env.dtype, device_type)
    return env


def rank0_dtype(dtype):
    """Rank 0's dtype, on every rank. dtype='auto' on a CPU depends on the processor (hardware.cpu_has_fast_bf16),
    and the nodes of one run may have different ones: they must still train in one precision."""
    choices = ('float32', 'bfloat16', 'float16')
    index = torch.tensor([choices.index(dtype)])
    dist.broadcast(index, 0)
    return choices[index.item()]
