"""Fixtures shared by test files that ask for them (pytestmark = pytest.mark.usefixtures(...)); one applies to every
test, own_cache, so that no test writes the user's files outside the repository."""
import functools
import json
import os
import shutil
import subprocess
import sys

import pytest
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope='session', autouse=True)
def own_cache(tmp_path_factory):
    """Every test, and every process it starts, with a cache folder of the session's (XDG_CACHE_HOME): a CPU peak that
    a training run times under the tests' load (hardware.cpu_peak) never lands in the user's ~/.cache, where every
    later run would measure its MFU against it."""
    cache = os.environ.get('XDG_CACHE_HOME')
    os.environ['XDG_CACHE_HOME'] = str(tmp_path_factory.mktemp('xdg_cache'))
    try:
        yield
    finally:
        if cache is None:
            os.environ.pop('XDG_CACHE_HOME', None)
        else:
            os.environ['XDG_CACHE_HOME'] = cache


@pytest.fixture(scope='module')
def one_thread():
    """torch on one thread, in this process and in every process the module's tests start (OMP_NUM_THREADS=1).
    CI runs the tests in two workers on two cores: two threads each left every OpenMP barrier waiting for a core that
    the other worker held (a 50-step tiny run took 73 s with two threads, 2.8 s with one, on a busy machine, at
    8e84444). Runs compared for equality in a test all run under it, in-process or not, so they also take the same
    float path."""
    threads, omp = torch.get_num_threads(), os.environ.get('OMP_NUM_THREADS')
    torch.set_num_threads(1)
    os.environ['OMP_NUM_THREADS'] = '1'
    try:
        yield
    finally:
        torch.set_num_threads(threads)
        if omp is None:
            os.environ.pop('OMP_NUM_THREADS', None)
        else:
            os.environ['OMP_NUM_THREADS'] = omp


@pytest.fixture(scope='module')
def peak_once(tmp_path_factory):
    """The CPU's peak FLOP/s (MFU's denominator, hardware.peak: the best of ten 1024^3 matmuls, up to a second of a
    busy CI core, the highest kept per machine) timed by the module's first training run and reused by the others,
    in this process and in the processes it starts: their cache is a folder of the module's (XDG_CACHE_HOME), so
    that a peak timed under the tests' load never lands in the user's ~/.cache."""
    import rundir
    measure, cache = rundir.peak, os.environ.get('XDG_CACHE_HOME')
    rundir.peak = functools.lru_cache(maxsize=None)(measure)
    os.environ['XDG_CACHE_HOME'] = str(tmp_path_factory.mktemp('cache'))
    try:
        yield
    finally:
        rundir.peak = measure
        if cache is None:
            os.environ.pop('XDG_CACHE_HOME', None)
        else:
            os.environ['XDG_CACHE_HOME'] = cache


@pytest.fixture(scope='module')
def small_needle(tmp_path_factory):
    """data/needle's task as its prepare.py makes it by default (records of 33 tokens, the same vocabulary and needle
    counts), but 64 train and 16 val records, in a folder of their own (train.py's --dataset takes a path): preparing
    data/needle itself writes 200,000 records, a minute or more of a CI core."""
    d = tmp_path_factory.mktemp('needle')
    p = subprocess.run([sys.executable, os.path.join(ROOT, 'data', 'needle', 'prepare.py'), '--n_train=64',
                        '--n_val=16', '--out_dir', str(d)], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0 and json.load(open(d / 'meta.json'))['record_len'] == 33, p.stdout + p.stderr
    return d


@pytest.fixture(scope='session')
def small_bigram_backcopy(tmp_path_factory):
    """-> make(block_size): a folder of Bigram-Backcopy records (data/bigram_backcopy/prepare.py on tiny Shakespeare:
    its 65 characters and BOS, 66 token ids) of block_size + 1 tokens, 64 train and 16 val, made once a session for
    each block size: data/bigram_backcopy's own are 129 tokens long, and preparing them takes seconds."""
    made = {}

    def make(block_size):
        if block_size not in made:
            d = tmp_path_factory.mktemp(f'bigram_backcopy_{block_size}')
            shutil.copy(os.path.join(ROOT, 'data', 'bigram_backcopy', 'prepare.py'), d / 'prepare.py')  # writes beside
            p = subprocess.run([sys.executable, str(d / 'prepare.py'), f'--block_size={block_size}', '--n_train=64',
                                '--n_val=16', '--input', os.path.join(ROOT, 'data', 'shakespeare_char', 'input.txt')],
                               capture_output=True, text=True, timeout=300)
            assert p.returncode == 0 and json.load(open(d / 'meta.json'))['vocab_size'] == 66, p.stdout + p.stderr
            made[block_size] = d
        return made[block_size]
    return make
