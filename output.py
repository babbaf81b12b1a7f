"""
What the scripts write: files, atomically (a temporary file, then a rename, so a crash never leaves half a file),
and plots, where matplotlib is installed; how they read log.jsonl back, and how they say a duration. No torch
here: report.py, bench.py and sweep.py import it too.
"""
import json
import os
import sys

try:
    import fcntl  # lock_at (POSIX)
except ImportError:
    fcntl = None


def atomic_write(path, write):
    """Write a file through write(f), f a binary file, to path + '.tmp', then rename it to path. On any failure (a
    full disk, say) path is left as it was and the partial path + '.tmp' is removed; the error is raised."""
    tmp = path + '.tmp'
    try:
        with open(tmp, 'wb') as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.lexists(tmp):
            os.remove(tmp)
        raise


def lock_at(path, blocking=True):
    """path opened and locked exclusively (flock) for as long as the file is open, and still the file at path: a
    holder that ends unlinks its lock file, so a process that waited on that file locks the new one instead. With
    blocking=False, BlockingIOError while another holds it. Unlocked where there is no flock (Windows)."""
    while True:
        f = open(path, 'a+')
        if fcntl is None:
            return f
        try:
            fcntl.flock(f, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
        except BlockingIOError:
            f.close()
            raise
        try:
            if os.fstat(f.fileno()).st_ino == os.stat(path).st_ino:
                return f
        except FileNotFoundError:
            pass
        f.close()


def duration(seconds):
    """4321 -> '1h 12m', 75 -> '1m 15s', 9 -> '9s'."""
    s = int(round(seconds))
    return f"{s // 3600}h {s % 3600 // 60}m" if s >= 3600 else f"{s // 60}m {s % 60}s" if s >= 60 else f"{s}s"


def read_log_lines(path):
    """log.jsonl as (line, record) pairs. A torn last line (no newline: a crash or a full disk mid-write) is dropped
    with a warning; any other line that is not JSON is an error naming the file and the line."""
    with open(path, 'rb') as f:
        lines = f.readlines()
    out = []
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            out.append((line, json.loads(line)))
        except json.JSONDecodeError as e:
            if n == len(lines) and not line.endswith(b'\n'):
                print(f"warning: {path}: dropped its torn last line {n} ({line[:40]!r}...), as a crash leaves it",
                      file=sys.stderr)
                continue
            raise ValueError(f"{path}, line {n}, is not JSON ({e.msg}): mend or delete that line") from None
    return out


def write_text(path, text):
    atomic_write(path, lambda f: f.write(text.encode()))


def write_json(path, obj):
    write_text(path, json.dumps(obj, indent=2) + '\n')


def pyplot():
    """matplotlib.pyplot with the file-only Agg backend, or None when matplotlib is not installed."""
    try:
        import matplotlib
    except ImportError:
        return None
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    return plt


def save_figure(fig, path):
    """Save a pyplot() figure, atomically (a full disk leaves the previous plot whole), and close it; no 'Software'
    tag, so the PNG does not change with matplotlib's version."""
    try:
        atomic_write(path, lambda f: fig.savefig(f, format=os.path.splitext(path)[1][1:] or 'png', dpi=110,
                                                 bbox_inches='tight', metadata={'Software': None}))
    finally:
        pyplot().close(fig)
