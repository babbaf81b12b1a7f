"""
Many training runs in one process, one after another, each through train.py's own cli(): the imports, the CUDA
context and torch's caches are paid once, not once a run. On a GPU a process start cost 30-70 s against about 1 s of
GPU work for the seed's 3-layer runs; inside the worker a run pays only its own set-up.

$ python worker.py RUNS.txt     # a line a run: train.py's arguments (shell quoting), each with its --out_dir

Each run's output goes to its out_dir/train.log, as ablate.sh writes it. A run that fails is recorded (out_dir/FAILED
holds its exit status, as ablate.sh's) and the next one starts. A stop (Ctrl-C, SIGTERM) lands in the run in progress,
which saves its checkpoint; the worker then starts no other run. Exit status: 0 when every run finished, 130 when
stopped, 1 when a run failed.

Nothing of one run reaches the next: train.py seeds torch at each run's start, batches and dropout masks are pure
functions of (seed, step), the model, optimizer and λ are built anew, and torch.compile's caches are reset between
runs (tests/test_worker.py compares each sweep variant's log inside a worker with the same run's alone).
"""
import os
import shlex
import signal
import sys

STOP = []  # a signal between two runs: no other run starts
if __name__ == '__main__':  # before the imports (seconds, for torch), as train.py's own
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda signum, frame: STOP.append(signum))

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


def main(path):
    runs = read_runs(path)
    failed = 0
    for i, argv in enumerate(runs):
        if STOP:
            print(f"worker: stopped; {len(runs) - i} run(s) not started")
            return 130
        d = out_dir(argv)
        print(f"worker: run {i + 1}/{len(runs)}: {d}", flush=True)
        rc = run_logged(argv)
        torch._dynamo.reset()  # a compiled model of this run is no guard for the next one's (a new module)
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
        if rc == 130:
            print(f"worker: {d} stopped; {len(runs) - i - 1} run(s) not started")
            return 130
        if rc != 0:
            failed += 1
            with open(os.path.join(d, 'FAILED'), 'w') as f:
                f.write(f"{rc}\n")
            print(f"worker: FAILED {d} (exit {rc}); see {os.path.join(d, 'train.log')}")
        elif os.path.exists(os.path.join(d, 'FAILED')):
            os.remove(os.path.join(d, 'FAILED'))  # an earlier attempt's
    print(f"worker: {len(runs) - failed} of {len(runs)} run(s) finished")
    return 1 if failed else 0


if __name__ == '__main__':
    if len(sys.argv) != 2 or sys.argv[1] in ('-h', '--help'):
        print(__doc__.strip())
        sys.exit(0 if len(sys.argv) == 2 else 2)
    sys.exit(main(sys.argv[1]))
