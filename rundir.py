"""
A run's folder, as rank 0 keeps it: made, checked and locked for the run's life (RunDir), log.jsonl, the console and
wandb (RunLog), the throughput a log line reports (Throughput), and the refusals before a run starts (open_run): a
scratch run never replaces another run's files, and a finished run is not trained again.
"""
import contextlib
import json
import os
import socket
import subprocess
import sys
import time

import torch

from dataset import ensure_data, load_meta
from hardware import machine, peak, peak_memory_mb
from output import atomic_write, duration, lock_at, read_log_lines, write_json

try:
    import fcntl  # the run folder's lock (POSIX); without it (Windows) runs are not locked
except ImportError:
    fcntl = None


class RunError(Exception):
    """A problem with the run's setting (its folder, device, checkpoint or wandb) that the message explains:
    train.py prints it without a traceback."""


class RunBusy(RunError):
    """out_dir is locked by a run in progress: exit status 75 (EX_TEMPFAIL), so that ablate.sh leaves it alone."""


def run_path(cfg, name='ckpt.pt'):
    return os.path.join(cfg['out_dir'], name)


def refuse_to_overwrite(ckpt_path, best_path):
    """A run from scratch must not replace another run's checkpoints, nor a finished run's summary.json (a folder of
    results/ keeps that and log.jsonl without the checkpoints)."""
    if os.path.exists(ckpt_path):
        raise FileExistsError(f"{ckpt_path} exists: continue it with --init_from=resume, or pick another "
                              f"--out_dir (or delete that folder) to start from scratch")
    if os.path.exists(best_path):
        raise FileExistsError(f"{best_path} exists (the best weights of an earlier run, without its ckpt.pt): "
                              f"pick another --out_dir, or move that file away to start from scratch")
    summary = os.path.join(os.path.dirname(ckpt_path), 'summary.json')
    if os.path.exists(summary):
        raise FileExistsError(f"{summary} exists (a finished run's record, without its checkpoints): pick another "
                              f"--out_dir, or move that folder's files away to start from scratch")


class RunDir:
    """Rank 0's hold on out_dir: made if missing, checked writable, and locked for the run's life (flock on
    out_dir/.lock), so that a second run into the same folder is refused, naming the holder, instead of the two
    overwriting each other's files. The kernel drops the lock when the process dies: a crash leaves no stale lock.
    Once locked, the part-files of a write killed half-way are removed. close() removes the lock, and the folder
    itself when this run made it and left nothing in it."""

    def __init__(self, out_dir):
        self.path, self.lock = out_dir, None
        self.made = not os.path.isdir(out_dir)
        try:
            os.makedirs(out_dir, exist_ok=True)
        except OSError as e:
            raise RunError(f"cannot make out_dir {out_dir}: {e.strerror}; pick another --out_dir") from None
        if not os.access(out_dir, os.W_OK | os.X_OK):
            raise RunError(f"out_dir {out_dir} is not writable (permission denied): pick another --out_dir")
        if fcntl is not None:
            self.take_lock()
            for name in ('ckpt.pt', 'best.pt', 'log.jsonl', 'summary.json'):  # a write killed half-way (SIGKILL)
                if os.path.isfile(os.path.join(out_dir, name + '.tmp')):     # left its part-file: ours alone now
                    os.remove(os.path.join(out_dir, name + '.tmp'))

    def take_lock(self):
        path = os.path.join(self.path, '.lock')
        try:  # the file locked is still the one at path: a run ending meanwhile unlinks its lock file
            f = lock_at(path, blocking=False)
        except BlockingIOError:
            try:
                with open(path) as held:
                    holder = held.read().strip()
            except OSError:
                holder = ''
            raise RunBusy(f"out_dir {self.path} is in use by another run ({holder or 'another process'}): wait for "
                          f"it to end, or pick another --out_dir") from None
        f.seek(0)
        f.truncate()
        f.write(f"pid {os.getpid()} on {socket.gethostname()}, since {time.strftime('%Y-%m-%d %H:%M:%S')}\n")
        f.flush()
        self.lock = f

    def close(self):
        if self.lock is not None:
            os.unlink(self.lock.name)  # still held: a run that opened the old file is refused, a later one locks anew
            self.lock.close()
            self.lock = None
        if self.made and os.path.isdir(self.path):  # a failed start leaves no empty folder behind
            log = os.path.join(self.path, 'log.jsonl')
            if os.path.isfile(log) and os.path.getsize(log) == 0:
                os.remove(log)
            if not os.listdir(self.path):
                os.rmdir(self.path)


def start_wandb(cfg, wandb_id):
    """wandb.init with wandb's conventions: wandb_mode=None leaves the mode to wandb (WANDB_MODE, else online)."""
    try:
        import wandb
    except ImportError:
        raise RunError("wandb_log=True but wandb is not installed: pip install wandb") from None
    try:
        return wandb.init(project=cfg['wandb_project'], name=cfg['wandb_run_name'] or None, config=cfg,
                          mode=cfg['wandb_mode'], dir=cfg['out_dir'], id=wandb_id,
                          resume='allow' if wandb_id else None)
    except Exception as e:  # noqa: BLE001: wandb raises its own types (no API key, no network, ...)
        raise RunError(f"wandb could not start ({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}); "
                       f"log in with `wandb login`, or log locally with WANDB_MODE=offline (or --wandb_mode=offline), "
                       f"or drop --wandb_log") from None


class RunLog:
    """Rank 0's outputs: log.jsonl (every log and eval line; on resume, lines past the checkpoint are dropped; a
    scratch run keeps an earlier log it finds, from a run whose ckpt.pt is gone, as log_until_<iter>.jsonl), the
    console (through the tqdm bar when there is one) and wandb. A finished run's summary.json, which a resume
    extends, is renamed summary_at_<iter>.json once ckpt.pt moves past it (retire_summary). On other ranks it
    writes nothing, and with eval_only it leaves the run's files and wandb alone."""

    PROGRESS_EVERY = 30.0  # seconds between progress lines where there is no bar

    def __init__(self, cfg, iter_num, wandb_id, active):
        self.file = self.wandb = self.bar = self.old_summary = None
        self.active = active
        self.print = print
        self.pace = {}  # what -> (time, count) of its first progress call: its ETA's pace
        self.last_progress = time.monotonic()
        if not active:
            return
        if cfg['wandb_log'] and not cfg['eval_only']:  # a look at a checkpoint leaves its run's wandb as it was
            self.wandb = start_wandb(cfg, wandb_id)
        if not cfg['eval_only']:
            path = run_path(cfg, 'log.jsonl')
            kept = b''
            if cfg['init_from'] == 'resume' and os.path.exists(path):
                kept = b''.join(line.rstrip(b'\n') + b'\n' for line, rec in read_log_lines(path)
                                if rec.get('iter', 0) <= iter_num)  # a whole last line may lack its newline
            elif os.path.exists(path):
                self.keep_earlier_log(cfg, path)
            atomic_write(path, lambda f: f.write(kept))
            self.file = open(path, 'a')
            summary = run_path(cfg, 'summary.json')
            if cfg['init_from'] == 'resume' and os.path.exists(summary):  # a finished run trained further (a larger
                self.old_summary = (summary, run_path(cfg, f'summary_at_{iter_num}.json'))  # max_iters)
        if sys.stderr.isatty() and not cfg['eval_only']:
            from tqdm import tqdm
            self.print = tqdm.write  # above the bar
            self.bar = tqdm(total=cfg['max_iters'], initial=iter_num, dynamic_ncols=True, desc='train')

    def keep_earlier_log(self, cfg, path):
        """A scratch run in a folder whose log.jsonl is of an earlier run without its ckpt.pt (killed before its
        first checkpoint, or a committed log copied back): that log is kept beside, not emptied."""
        iters = [rec.get('iter', 0) for _, rec in read_log_lines(path)]
        if not iters:
            return
        kept, k = run_path(cfg, f'log_until_{max(iters)}.jsonl'), 1
        while os.path.exists(kept):
            kept, k = run_path(cfg, f'log_until_{max(iters)}.{k}.jsonl'), k + 1
        os.replace(path, kept)
        self.say(f"{path} held an earlier run's log ({max(iters)} steps) without its ckpt.pt, so it cannot be "
                 f"resumed: kept as {kept}; this run starts from scratch")

    def retire_summary(self):
        """Once ckpt.pt has moved past a finished run's summary.json (a resume with a larger max_iters): the summary
        is kept as summary_at_<iter>.json, no longer the run's, so that a stop now leaves an unfinished run; an
        extension that fails before its first checkpoint is written leaves the finished run as it was."""
        if self.old_summary is not None and os.path.exists(self.old_summary[0]):
            os.replace(*self.old_summary)
        self.old_summary = None

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
        if self.active:
            self.print(text)

    def step(self):
        if self.bar is not None:
            self.bar.update(1)

    def progress(self, what, done, total):
        """Where the run is, a line every PROGRESS_EVERY seconds when there is no bar (output to a file: a sweep's
        train.log, a batch job's log), so that a long evaluation or a slow step never leaves minutes of silence:
        'progress: iteration 120/5000, ETA 1h 37m', the ETA at this phase's pace so far. With a bar, which counts
        the iterations, anything else (an evaluation's batches) is the bar's postfix until it is done, so that a long
        evaluation does not leave the bar standing still."""
        if not self.active:
            return
        now, first = time.monotonic(), what not in self.pace
        t0, n0 = self.pace.setdefault(what, (now, done))
        eta = (now - t0) / (done - n0) * (total - done) if done > n0 else None
        where = f"{what} {done}/{total}" + (f", ETA {duration(eta)}" if eta is not None else '')
        if self.bar is not None:
            if what != 'iteration':  # redrawn at its start and end, and at the bar's own pace (mininterval)
                self.bar.set_postfix_str(where if done < total else '', refresh=False)
                if first or done >= total or now - self.last_progress >= self.bar.mininterval:
                    self.last_progress = now
                    self.bar.refresh()
            return
        if now - self.last_progress < self.PROGRESS_EVERY:
            return
        self.last_progress = now
        self.say(f"progress: {where}")

    def close(self, summary):
        if self.bar is not None:
            self.bar.close()
        if self.wandb is not None:
            self.wandb.summary.update({k: v for k, v in summary.items() if k not in ('config', 'lambda_table')})
            self.wandb.finish()
        if self.file is not None:
            self.file.close()


def lambda_markdown(rows):
    """The per-layer λ table a Diff run prints at its end."""
    lines = ['| layer | lambda_1 | lambda_2 | lambda_init | lambda_full |', '|---|---|---|---|---|']
    lines += [f"| {r['layer']} | {r['lambda_1']:.2f} | {r['lambda_2']:.2f} | {r['lambda_init']:.2f} | "
              f"{r['lambda_full']:.2f} |" for r in rows]
    return '\n'.join(lines)


def lambda_metrics(rows):
    """Each layer's λ as log.jsonl and wandb keys: lambda/L{n}/full, .../lambda_1, .../lambda_2, .../init."""
    return {f"lambda/L{r['layer']}/{k}": r[key] for r in rows
            for k, key in (('full', 'lambda_full'), ('lambda_1', 'lambda_1'), ('lambda_2', 'lambda_2'),
                           ('init', 'lambda_init'))}


class Throughput:
    """Tokens/s, ms per iteration and MFU of each log window, and the run's tokens/s, which leaves out the first
    window (warm-up, compilation) and the time spent evaluating, checkpointing and logging. A monotonic clock: a
    wall-clock jump cannot make an interval zero or negative."""

    def __init__(self, cfg, env, model, before=None):
        """before: ckpt.pt's 'timing' on resume. MFU's peak is stated once for the run and kept across its resumes on
        the same kind of device: a GPU's datasheet figure, or the highest CPU matmul peak timed on this machine
        (hardware.cpu_peak); peak_source says which."""
        before = before or {}
        self.tokens_per_iter = cfg['gradient_accumulation_steps'] * cfg['batch_size'] * cfg['block_size']
        # MFU: this device's share of the step's FLOPs, against one device's peak (rank 0 only). DDP's ranks on a CPU
        # share one processor: the whole step against the peak timed on all their threads together
        shared = env.device_type == 'cpu'
        self.flops_per_iter = model.flops_per_token(cfg['block_size']) * self.tokens_per_iter / (1 if shared else
                                                                                                  env.world)
        threads = torch.get_num_threads() * env.world if shared else None
        self.peak_for = [env.device_type, env.dtype] + ([threads] if shared else [])
        self.peak, self.peak_source = None, None
        if env.master and before.get('peak_for') == self.peak_for and before.get('peak_flops'):
            self.peak = before['peak_flops']
            self.peak_source = before.get('peak_source') or "stated at the run's first start"
        elif env.master:
            self.peak, self.peak_source = peak(env.device, env.dtype, threads)

    def start(self, before=None):
        """before: ckpt.pt's 'timing', the totals of the processes that trained this run earlier, so that a
        resumed run's tokens/s and wall time are the whole run's (up to its last checkpoint), not its last part's."""
        before = before or {}
        self.started = self.window_start = time.perf_counter()
        self.window_iters, self.first_window = 0, True
        self.train_time, self.train_tokens = before.get('train_time', 0.0), before.get('train_tokens', 0)
        self.wall_before = before.get('wall_time', 0.0)

    def totals(self):
        """What ckpt.pt keeps for a resume, and summary.json reports."""
        return dict(train_time=self.train_time, train_tokens=self.train_tokens,
                    wall_time=self.wall_before + time.perf_counter() - self.started, peak_flops=self.peak,
                    peak_for=self.peak_for, peak_source=self.peak_source)

    def step(self):
        self.window_iters += 1

    @contextlib.contextmanager
    def paused(self):
        t = time.perf_counter()
        yield
        self.window_start += time.perf_counter() - t

    def close_window(self):
        dt, n = time.perf_counter() - self.window_start, self.window_iters
        if not self.first_window:
            self.train_time += dt
            self.train_tokens += n * self.tokens_per_iter
        self.first_window = False
        self.window_start, self.window_iters = time.perf_counter(), 0
        return dict(tokens_per_sec=n * self.tokens_per_iter / dt, ms_per_iter=1000 * dt / n,
                    mfu=self.flops_per_iter * n / dt / self.peak if self.peak else None)

    def tokens_per_sec(self):
        return self.train_tokens / self.train_time if self.train_time > 0 else None


def start_line(env, clock):
    """The line a run starts with: where it runs, in what precision, and its tokens a step."""
    graphs = ''
    if env.device_type == 'cuda':  # on, or off and why
        graphs = f", CUDA graphs {'on' if env.cuda_graph else 'off'}" + (f" ({env.cuda_graph_why})"
                                                                         if env.cuda_graph_why else '')
    return (f"device {env.device} ({env.world} process{'es' if env.world > 1 else ''}), dtype {env.dtype}, compile "
            f"{env.compile}{graphs}, {clock.tokens_per_iter:,} tokens per iteration" + (
                f", MFU against {clock.peak / 1e12:.3g} TFLOP/s ({clock.peak_source})" if clock.peak else ''))


def write_summary(run, finished):
    """Rank 0, at a run's end (train.py's Run): summary.json when the run finished, the log's close, and the lambda
    table."""
    cfg, env, clock, table = run.cfg, run.env, run.clock, run.raw_model.lambda_table()
    last, best = run.last_eval, run.best_val_loss
    summary = dict(
        config=cfg, n_params=run.raw_model.get_num_params(), iter=run.iter_num, finished=finished,
        final_train_loss=last.get('train_loss'), final_val_loss=last.get('val_loss'),
        final_eval_iter=last.get('iter'), best_val_loss=best if best < float('inf') else None,
        lambda_table=table, tokens_per_sec=clock.tokens_per_sec(), wall_time_s=clock.totals()['wall_time'],
        mfu_peak_flops=clock.peak, mfu_peak_source=clock.peak_source, peak_memory_mb=peak_memory_mb(env.device),
        device=env.device, dtype=env.dtype, world_size=env.world, compile=env.compile, cuda_graph=env.cuda_graph,
        torch_version=torch.__version__, code=run.code,
        corpus_sha256=load_meta(cfg['dataset']).get('corpus_sha256'), machine=machine(env.device))
    if finished:
        write_json(run_path(cfg, 'summary.json'), summary)
    run.log.close(summary)
    if table:
        print(f"\nper-layer lambda after {run.iter_num} iterations:\n{lambda_markdown(table)}")


def code_version(untracked=True):
    """The commit of the code this run uses and whether its tree has changes git would see (a model.py edited between
    two runs of a sweep, say; untracked=False: changes to tracked files only): {'commit': sha or None, 'dirty': bool
    or None}, None outside a git checkout."""
    here = os.path.dirname(os.path.abspath(__file__))
    try:
        sha = subprocess.run(['git', 'rev-parse', 'HEAD'], cwd=here, capture_output=True, text=True, timeout=30)
        status = subprocess.run(['git', 'status', '--porcelain', f"--untracked-files={'normal' if untracked else 'no'}"],
                                cwd=here, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return dict(commit=None, dirty=None)
    if sha.returncode != 0:
        return dict(commit=None, dirty=None)
    return dict(commit=sha.stdout.strip(), dirty=bool(status.stdout.strip()))


class AlreadyFinished(Exception):
    """A resume of a run that finished at this max_iters: nothing to train, and nothing is rewritten."""


def open_run(cfg):
    """Rank 0, before any training: the run folder (made, checked and locked; not for eval_only, which writes
    nothing), no earlier run's checkpoints in the way of a scratch run, no finished run to resume, and the dataset
    prepared."""
    run_dir = None if cfg['eval_only'] else RunDir(cfg['out_dir'])
    try:
        if cfg['init_from'] == 'scratch':
            refuse_to_overwrite(run_path(cfg), run_path(cfg, 'best.pt'))
        elif not cfg['eval_only']:
            refuse_finished(cfg)
        ensure_data(cfg['dataset'])
    except BaseException:
        if run_dir is not None:
            run_dir.close()
        raise
    return run_dir


def refuse_finished(cfg):
    """A resume whose summary.json says the run finished at max_iters would train nothing and rewrite its summary
    and checkpoint with this process's timings: AlreadyFinished instead (main() exits 0 and writes nothing)."""
    path = run_path(cfg, 'summary.json')
    try:
        with open(path) as f:
            it = json.load(f).get('iter')
    except (OSError, ValueError):  # none, or unreadable: the resume finishes the run and writes it again
        return
    if it == cfg['max_iters']:
        raise AlreadyFinished(f"{cfg['out_dir']} finished at iteration {it} ({path}): nothing to train, nothing "
                              f"rewritten. To train it further, resume with --max_iters above {it}")
