"""
Many training runs in one process, one after another, each through train.py's own cli(): the imports, the CUDA
context and torch's caches are paid once, not once a run. On an H200 a run's own process spent 10-11 s before its
clock (imports, CUDA context, set-up: results/gpu_check/2026-11-27_h200_6cb9fa0), against about 2 s of GPU work for a
500-step 3-layer run; inside the worker a run pays only its own set-up.

$ python worker.py RUNS.txt     # a line a run: train.py's arguments (shell quoting), each with its --out_dir

Each run's output goes to its out_dir/train.log, as ablate.sh writes it. A run that fails is recorded (out_dir/FAILED
holds its exit status, as ablate.sh's) and the next one starts; one whose out_dir another process is training (exit
75) is left to it, with no FAILED. A stop (Ctrl-C, SIGTERM) lands in the run in progress, which saves its checkpoint
(before its first step: it stops at once, as train.py alone); the worker then starts no other run. Exit status: 0
when every run finished (or was busy elsewhere), 130 when stopped, 1 when a run failed.

One line a run on stdout, which ablate.sh reads (its WORKER path): `worker: run i/n: DIR` (+ ` (resumed)`), then
`worker: done DIR in S s (O s outside its clock)` (O: the run's cost in the worker beyond its own wall_time_s: data,
model, capture, the final writes; the GPU queue records it), `worker: FAILED DIR (exit N)`, `worker: busy DIR` or
`worker: stopped DIR`.

Nothing of one run reaches the next: train.py seeds torch at each run's start, batches and dropout masks are pure
functions of (seed, step), the model, optimizer and λ are built anew, and torch.compile's caches are reset between
runs (tests/test_worker.py compares each sweep variant's log inside a worker with the same run's alone).

Each run captures its own CUDA graphs. Reusing one run's capture for the next of the same shape would need train.py
to build the next run inside the captured tensors (its fresh weights and zeroed AdamW state copied in, its lr tensor
and dropout generator kept), and would save only the capture itself: the eager warm-up steps before it are the run's
own steps.
"""
import gc
import json
import os
import shlex
import signal
import sys
import time

STOP = []  # a signal between two runs: no other run starts


def on_signal(signum, frame):
    """Outside a run's own handler (train.py's Stop, from its main()'s start to its end): no other run starts."""
    STOP.append(signum)


if __name__ == '__main__':  # before the imports (seconds, for torch)
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, on_signal)

import torch  # noqa: E402

import train  # noqa: E402


def read_runs(path):
    """The runs of a RUNS file: each non-empty line that is not a comment, split as a shell would."""
    with open(path) as f:
        runs = [shlex.split(line) for line in f if line.strip() and not line.lstrip().startswith('#')]
    for argv in runs:
        if not any(a.startswith('--out_dir=') for a in argv):
            raise SystemExit(f"error: {path}: the run `{shlex.join(argv)}` has no --out_dir=: each run needs its own "
                             f"folder for its train.log and checkpoints")
    return runs


def out_dir(argv):
    return [a.split('=', 1)[1] for a in argv if a.startswith('--out_dir=')][-1]


def run_logged(argv):
    """train.cli(argv) with this process's stdout and stderr (the file descriptors, so that C code's output and the
    stop handler's os.write go there too) appended to out_dir/train.log; returns its exit status."""
    d = out_dir(argv)
    os.makedirs(d, exist_ok=True)
    saved = {}
    with open(os.path.join(d, 'train.log'), 'ab') as log:
        for fd, stream in ((1, sys.stdout), (2, sys.stderr)):
            stream.flush()
            saved[fd] = os.dup(fd)
            os.dup2(log.fileno(), fd)
        try:
            return train.cli(argv)
        finally:
            for fd, stream in ((1, sys.stdout), (2, sys.stderr)):
                stream.flush()
                os.dup2(saved[fd], fd)
                os.close(saved[fd])


def outside_clock(d, seconds):
    """Seconds of a finished run in the worker beyond its own clock (summary.json's wall_time_s), or None."""
    try:
        with open(os.path.join(d, 'summary.json')) as f:
            return seconds - json.load(f)['wall_time_s']
    except (OSError, ValueError, KeyError, TypeError):
        return None


def main(path):
    runs = read_runs(path)
    failed = busy = 0
    for i, argv in enumerate(runs):
        if STOP:
            print(f"worker: stopped; {len(runs) - i} run(s) not started", flush=True)
            return 130
        d = out_dir(argv)
        resumed = ' (resumed)' if '--init_from=resume' in argv else ''
        print(f"worker: run {i + 1}/{len(runs)}: {d}{resumed}", flush=True)
        if os.path.exists(os.path.join(d, 'FAILED')):
            os.remove(os.path.join(d, 'FAILED'))  # an earlier attempt's, as ablate.sh removes it before a run
        t0 = time.monotonic()
        rc = run_logged(argv)
        seconds = time.monotonic() - t0
        torch._dynamo.reset()  # a compiled model of this run is no guard for the next one's (a new module)
        gc.collect()  # the run's model, optimizer and graphs, where a reference cycle holds them
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
        if rc == 130:
            print(f"worker: stopped {d}", flush=True)
            print(f"worker: stopped; {len(runs) - i - 1} run(s) not started", flush=True)
            return 130
        if rc == 75:  # train.py: out_dir is locked by another process, which is training it: left to it
            busy += 1
            print(f"worker: busy {d}", flush=True)
        elif rc != 0:
            failed += 1
            with open(os.path.join(d, 'FAILED'), 'w') as f:
                f.write(f"{rc}\n")
            print(f"worker: FAILED {d} (exit {rc})", flush=True)
        else:
            extra = outside_clock(d, seconds)
            print(f"worker: done {d} in {seconds:.1f}s" + (f" ({extra:.1f}s outside its clock)" if extra is not None
                                                              else ''), flush=True)
    print(f"worker: {len(runs) - failed - busy} of {len(runs)} run(s) finished" +
          (f", {busy} left to another process" if busy else ''), flush=True)
    return 1 if failed else 0


if __name__ == '__main__':
    if len(sys.argv) != 2 or sys.argv[1] in ('-h', '--help'):
        print(__doc__.strip())
        sys.exit(0 if len(sys.argv) == 2 else 2)
    sys.exit(main(sys.argv[1]))
