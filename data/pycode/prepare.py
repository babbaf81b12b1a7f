"""
Python source code from a pinned list of PyPI wheels, as UTF-8 bytes: the corpus of the outlier runs (claim 5).

$ python data/pycode/prepare.py                  # downloads the pinned wheels into data/pycode/downloads/ once
$ python data/pycode/prepare.py --check          # (re)builds from downloads/ and fails unless the corpus hash is
                                                 # the one manifest.json records

Why pinned: the GPU machines reach no network and the installed packages differ between machines, so a corpus read
from "whatever is installed" would differ between runs. Every wheel is named with its version and sha256 below
(pip downloads it with --require-hashes), so the same bytes go in everywhere; the wheels in downloads/ (about 21 MB
at c3a194b, already compressed) are what travels to a machine without network, and this script rebuilds the token
files there.

What is built, all of it a function of the wheels' bytes alone (no paths of temporary folders, no dates):
  - every *.py member of each wheel, read in sorted (wheel, member) order, kept if it is UTF-8 (the others are
    counted, not kept); a file whose content sha256 was seen before is a duplicate and is dropped (Django and
    setuptools ship the same vendored files; empty __init__.py files are one file);
  - the split is by file: a file is validation when int(sha256[:8], 16) % 1000 < VAL_PER_MILLE (3%), so the split
    does not depend on the order or on which other files are there;
  - tokens are the file's UTF-8 bytes (ids 0..255) followed by END (256), which ends each file, as
    data/fineweb/prepare.py's byte tokenizer; vocab_size 257 (train.py's bos=True adds 257 as the BOS id);
  - corpus_sha256 = sha256 over b'train\\n' + train.bin's bytes + b'val\\n' + val.bin's bytes (uint16 little endian):
    equal hashes mean equal token files. meta.json carries it, and train.py copies it into summary.json.
  - manifest.json (committed) lists every wheel's sha256, every kept file's wheel, path, sha256, bytes and split,
    the duplicates and non-UTF-8 files dropped, the token counts and corpus_sha256. Without --write-manifest a
    rebuild that gives another hash than the committed manifest's is an error.
"""
import argparse
import hashlib
import json
import os
import subprocess
import sys
import zipfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
DOWNLOADS = os.path.join(HERE, 'downloads')
# (requirement, wheel file name, sha256 of the wheel as PyPI serves it): pure-Python wheels (py3-none-any), so the
# same file on every platform. Chosen for size (54 MB of .py together at c3a194b) and variety: a computer algebra
# system, a web framework, a networking framework, graph algorithms, a syntax highlighter, a build tool.
PINS = [
    ('Django==4.2.7', 'Django-4.2.7-py3-none-any.whl',
     'e1d37c51ad26186de355cbcec16613ebdabfa9689bbade9c538835205a8abbe9'),
    ('networkx==3.2.1', 'networkx-3.2.1-py3-none-any.whl',
     'f18c69adc97877c42332c170849c96cefa91881c99a7cb3e95b7c659ebdc1ec2'),
    ('Pygments==2.17.2', 'pygments-2.17.2-py3-none-any.whl',
     'b27c2826c47d0f3219f29554824c30c5e8945175d888647acd804ddd04af846c'),
    ('setuptools==69.0.2', 'setuptools-69.0.2-py3-none-any.whl',
     '1e8fdff6797d3865f37397be788a4e3cba233608e9b509382a2777d25ebde7f2'),
    ('sympy==1.12', 'sympy-1.12-py3-none-any.whl',
     'c3588cd4295d0c0f603d0f2ae780587e64e2efeedb3521e46b9bb1d08d184fa5'),
    ('Twisted==23.10.0', 'twisted-23.10.0-py3-none-any.whl',
     '4ae8bce12999a35f7fe6443e7f1893e6fe09588c8d2bed9c35cdce8ff2d5b444'),
]
VAL_PER_MILLE = 30
END = 256  # ends every file
VOCAB = 257


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, 'rb') as f:
        for chunk in iter(lambda: f.read(1 << 20), b''):
            h.update(chunk)
    return h.hexdigest()


def missing_wheels(folder=DOWNLOADS):
    """The pins whose wheel is not in folder with its pinned sha256 (a wrong file is removed, to be fetched again)."""
    out = []
    for req, name, digest in PINS:
        path = os.path.join(folder, name)
        if os.path.exists(path) and sha256_file(path) != digest:
            print(f"{path} has sha256 {sha256_file(path)}, not the pinned {digest}: removing it, to download again")
            os.unlink(path)
        if not os.path.exists(path):
            out.append((req, name, digest))
    return out


def download(folder=DOWNLOADS):
    """pip download of the missing pins, hash-checked; an error that says what failed and how to supply the files."""
    todo = missing_wheels(folder)
    if not todo:
        return
    os.makedirs(folder, exist_ok=True)
    req_path = os.path.join(folder, 'requirements.txt')
    with open(req_path, 'w') as f:
        f.writelines(f"{req} --hash=sha256:{digest}\n" for req, _, digest in todo)
    print(f"downloading {len(todo)} pinned wheels from the package registry: {', '.join(r for r, _, _ in todo)}")
    cmd = [sys.executable, '-m', 'pip', 'download', '--no-deps', '--only-binary', ':all:', '--require-hashes',
           '--dest', folder, '-r', req_path]
    p = subprocess.run(cmd, capture_output=True, text=True)
    still = missing_wheels(folder)
    if p.returncode != 0 or still:
        said = '\n'.join((p.stdout + p.stderr).strip().splitlines()[-6:])
        names = '\n'.join(f"  {name}  sha256 {digest}" for _, name, digest in still)
        sys.exit(f"error: could not download the pinned wheels from the package registry (pip exited {p.returncode}; "
                 f"its last lines:\n{said}\n).\nThis needs the package registry (pypi.org, or a mirror pip is set up "
                 f"for) reachable. Offline, copy these files from a machine that has them (its "
                 f"data/pycode/downloads/, or `pip download --no-deps --only-binary :all: REQ` there) into "
                 f"{folder}/ and run this again; each is checked against its sha256:\n{names}")


def read_files(folder=DOWNLOADS):
    """Every *.py member of the pinned wheels, in sorted (wheel, member) order -> (kept, dropped): kept is a list of
    dict(wheel, path, sha256, bytes, data); dropped counts duplicates and files that are not UTF-8."""
    kept, seen = [], set()
    dropped = dict(duplicates=0, not_utf8=0)
    for _, name, _ in sorted(PINS, key=lambda p: p[1]):
        with zipfile.ZipFile(os.path.join(folder, name)) as z:
            for member in sorted(i.filename for i in z.infolist() if i.filename.endswith('.py')):
                data = z.read(member)
                try:
                    data.decode('utf-8')
                except UnicodeDecodeError:
                    dropped['not_utf8'] += 1
                    continue
                digest = hashlib.sha256(data).hexdigest()
                if digest in seen:
                    dropped['duplicates'] += 1
                    continue
                seen.add(digest)
                kept.append(dict(wheel=name, path=member, sha256=digest, bytes=len(data), data=data))
    return kept, dropped


def split_of(digest):
    """'val' for about VAL_PER_MILLE in 1000 files, chosen by their content hash alone."""
    return 'val' if int(digest[:8], 16) % 1000 < VAL_PER_MILLE else 'train'


def tokens(files):
    """The files' bytes, each followed by END, as one uint16 array."""
    parts = []
    for f in files:
        parts.append(np.frombuffer(f['data'], dtype=np.uint8).astype(np.uint16))
        parts.append(np.array([END], dtype=np.uint16))
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.uint16)


def corpus_sha256(train, val):
    h = hashlib.sha256(b'train\n')
    h.update(train.astype('<u2').tobytes())
    h.update(b'val\n')
    h.update(val.astype('<u2').tobytes())
    return h.hexdigest()


def build(folder=DOWNLOADS):
    """-> (train tokens, val tokens, manifest dict)."""
    files, dropped = read_files(folder)
    for f in files:
        f['split'] = split_of(f['sha256'])
    train = tokens([f for f in files if f['split'] == 'train'])
    val = tokens([f for f in files if f['split'] == 'val'])
    manifest = dict(
        corpus_sha256=corpus_sha256(train, val), train_tokens=int(len(train)), val_tokens=int(len(val)),
        vocab_size=VOCAB, tokenizer='byte', end_token=END, val_per_mille=VAL_PER_MILLE, dropped=dropped,
        wheels=[dict(requirement=r, file=n, sha256=d) for r, n, d in PINS],
        files=[{k: f[k] for k in ('wheel', 'path', 'sha256', 'bytes', 'split')} for f in files])
    return train, val, manifest


def manifest_text(manifest):
    """JSON with one line per file and per wheel, so that a diff of two manifests shows the files that differ."""
    head = {k: v for k, v in manifest.items() if k not in ('wheels', 'files')}
    lines = [json.dumps(head)[:-1] + ',']
    for key in ('wheels', 'files'):
        rows = [json.dumps(r) for r in manifest[key]]
        lines.append(f' "{key}": [\n  ' + ',\n  '.join(rows) + '\n ]' + (',' if key == 'wheels' else ''))
    return '\n'.join(lines) + '\n}\n'


def write_atomic(path, write):
    write(path + '.tmp')
    os.replace(path + '.tmp', path)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    ap.add_argument('--write-manifest', action='store_true',
                    help='write manifest.json from this build (only when the pins change on purpose)')
    ap.add_argument('--check', action='store_true', help='rebuild and compare with manifest.json, writing nothing')
    args = ap.parse_args(argv)
    download()
    train, val, manifest = build()
    path = os.path.join(HERE, 'manifest.json')
    if not args.write_manifest:
        if not os.path.exists(path):
            sys.exit(f"error: {path} is missing: it is committed with this script (git checkout it), or write a new "
                     f"one with --write-manifest if the pins changed on purpose")
        with open(path) as f:
            want = json.load(f)['corpus_sha256']
        if want != manifest['corpus_sha256']:
            sys.exit(f"error: this build's corpus sha256 is {manifest['corpus_sha256']}, manifest.json records {want}: "
                     f"the pinned wheels gave other files than when the manifest was written (compare the file "
                     f"lists: python {os.path.relpath(__file__)} --write-manifest, then git diff "
                     f"data/pycode/manifest.json)")
        print(f"corpus sha256 {want}: as manifest.json records")
    if args.check:
        return
    if args.write_manifest:
        write_atomic(path, lambda p: open(p, 'w').write(manifest_text(manifest)))
    write_atomic(os.path.join(HERE, 'train.bin'), lambda p: train.tofile(p))
    write_atomic(os.path.join(HERE, 'val.bin'), lambda p: val.tofile(p))
    meta = dict(vocab_size=VOCAB, tokenizer='byte', corpus_sha256=manifest['corpus_sha256'])
    write_atomic(os.path.join(HERE, 'meta.json'), lambda p: open(p, 'w').write(json.dumps(meta) + '\n'))  # last
    print(f"{len(manifest['files']):,} files ({manifest['dropped']['duplicates']} duplicates and "
          f"{manifest['dropped']['not_utf8']} non-UTF-8 dropped): {len(train):,} train and {len(val):,} val tokens, "
          f"corpus sha256 {manifest['corpus_sha256']}")


if __name__ == '__main__':
    main()
