"""
Many training runs in one process, one after another, each through train.py's own cli(): the imports, the CUDA
context and torch's caches are paid once, not once a run (ablate.sh's WORKER=1, a GPU's default). On an H200 a run's
own process spent 10-11 s before its clock (results/gpu_check/2026-11-27_h200_6cb9fa0), against about 2 s of GPU work
for a 500-step 3-layer run.

$ python worker.py RUNS.txt     # a line a run: train.py's arguments (shell quoting) with its --out_dir; # comments

Each run's output goes to its out_dir/train.log. On stdout, for ablate.sh: `worker: run DIR` as a run starts and
`worker: end DIR STATUS SECONDS` as it ends (train.py's exit status: 0 finished, 130 stopped, 75 its out_dir trained
by another process, else failed). A stop (Ctrl-C, SIGTERM) lands in the run in progress, which saves its checkpoint
(before its first step: it stops at once); no other run starts. Exit status: 130 stopped, 1 a run failed, else 0.

Nothing of one run reaches the next: train.py seeds torch at each run's start, batches and dropout masks are pure
functions of (seed, step), the model, optimizer and λ are built anew, and torch.compile's caches are reset between
runs (tests/test_worker.py compares each sweep variant's log inside a worker with the same run's alone). Each run
captures its own CUDA graphs.
"""
import gc
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


def out_dir(argv):
    return [a.split('=', 1)[1] for a in argv if a.startswith('--out_dir=')][-1]


def run_logged(argv):
    """train.cli(argv) with this process's stdout and stderr (the file descriptors, so that C code's output and the
    stop handler's os.write go there too) appended to out_dir/train.log; returns its exit status."""
    os.makedirs(out_dir(argv), exist_ok=True)
    saved = {}
    with open(os.path.join(out_dir(argv), 'train.log'), 'ab') as log:
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


def main(path):
    with open(path) as f:
        runs = [shlex.split(line) for line in f if line.strip() and not line.lstrip().startswith('#')]
    for argv in runs:
        if not any(a.startswith('--out_dir=') for a in argv):
            raise SystemExit(f"error: {path}: the run `{shlex.join(argv)}` has no --out_dir=: each run needs a folder")
    status = 0
    for argv in runs:
        if STOP:
            return 130
        print(f"worker: run {out_dir(argv)}", flush=True)
        t0 = time.monotonic()
        rc = run_logged(argv)
        torch._dynamo.reset()  # a compiled model of this run is no guard for the next one's (a new module)
        gc.collect()  # the run's model, optimizer and graphs, where a reference cycle holds them
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
        print(f"worker: end {out_dir(argv)} {rc} {time.monotonic() - t0:.1f}", flush=True)
        if rc == 130:
            return 130
        status = 1 if rc not in (0, 75) else status
    return status


if __name__ == '__main__':
    if len(sys.argv) != 2 or sys.argv[1] in ('-h', '--help'):
        print(__doc__.strip())
        sys.exit(0 if len(sys.argv) == 2 else 2)
    sys.exit(main(sys.argv[1]))
