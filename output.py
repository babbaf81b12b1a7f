"""
What the scripts write: files, atomically (a temporary file, then a rename, so a crash never leaves half a file),
and plots, where matplotlib is installed. No torch here: report.py and bench.py import it too.
"""
import json
import os


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
    """Save a pyplot() figure and close it; no 'Software' tag, so the PNG does not change with matplotlib's version."""
    fig.savefig(path, dpi=110, bbox_inches='tight', metadata={'Software': None})
    pyplot().close(fig)
