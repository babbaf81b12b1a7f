"""sample.py as a new user meets it: it says which checkpoint it sampled (the last state or the best weights, the
iteration, the val loss), a bad value names only the bound it broke, and a missing checkpoint's alternatives never
offer the path that was given."""
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TINY = ['--n_layer=1', '--n_head=2', '--n_embd=16', '--block_size=16', '--batch_size=2', '--eval_iters=1',
        '--log_interval=1', '--device=cpu', '--dtype=float32', '--compile=False']
FLAGS = ('--temperature', '--top_k', '--num_samples', '--max_new_tokens')


def script(*args, cwd=ROOT):
    return subprocess.run([sys.executable, os.path.join(ROOT, args[0]), *args[1:]], cwd=cwd, capture_output=True,
                          text=True, timeout=300, env=dict(os.environ, OMP_NUM_THREADS='1'))


@pytest.fixture(scope='module')
def run(tmp_path_factory):
    """A finished 4-step run evaluated at 2 and 4: ckpt.pt is iteration 4, best.pt the lower of the two evals."""
    out = tmp_path_factory.mktemp('run') / 'o'
    p = script('train.py', 'configs/nanogpt_3L.py', *TINY, f'--out_dir={out}', '--max_iters=4', '--eval_interval=2',
               '--lr_decay_iters=4', '--warmup_iters=1')
    assert p.returncode == 0, p.stderr
    return out


def evals(out):
    import json
    return [r for r in map(json.loads, open(out / 'log.jsonl')) if r.get('kind') == 'eval']


def test_sample_py_names_the_checkpoint_its_iteration_and_val_loss(run):
    last = evals(run)[-1]
    p = script('sample.py', f'--out_dir={run}', '--num_samples=1', '--max_new_tokens=3')
    assert p.returncode == 0, p.stderr
    line = next(s for s in p.stderr.splitlines() if s.startswith('sampling'))
    assert f"{run / 'ckpt.pt'} (the last saved state): iteration {last['iter']}" in line
    assert f"val loss {last['val_loss']:.4f}" in line
    assert 'sampling' not in p.stdout  # the samples alone on stdout
    best = min((e for e in evals(run) if e['iter'] > 0), key=lambda e: e['val_loss'])
    p = script('sample.py', f'--ckpt={run / "best.pt"}', '--num_samples=1', '--max_new_tokens=3')
    assert p.returncode == 0, p.stderr
    line = next(s for s in p.stderr.splitlines() if s.startswith('sampling'))
    assert '(the weights of the lowest val loss)' in line and f"iteration {best['iter']}," in line
    assert f"val loss {best['val_loss']:.4f}" in line


@pytest.mark.parametrize('arg', ['--temperature=0', '--top_k=-1', '--num_samples=0', '--max_new_tokens=-3'])
def test_a_bad_value_names_only_the_bound_it_broke(run, arg):
    p = script('sample.py', f'--out_dir={run}', arg)
    assert p.returncode == 2 and 'Traceback' not in p.stderr, p.stderr
    flag = arg.split('=')[0]
    err = p.stderr.strip().splitlines()[-1]
    assert f"{flag} must be" in err and arg.split('=')[1] in err, err
    assert not [f for f in FLAGS if f != flag and f in err], err


def test_a_missing_checkpoint_is_never_offered_back(run, tmp_path):
    other = tmp_path / 'out' / 'other_run'
    other.mkdir(parents=True)
    (other / 'ckpt.pt').write_bytes((run / 'ckpt.pt').read_bytes())
    given = tmp_path / 'out' / 'given_run'
    given.mkdir()
    (given / 'ckpt.pt').write_bytes((run / 'ckpt.pt').read_bytes())  # its ckpt.pt exists, its best.pt does not
    p = script('sample.py', f'--ckpt={given / "best.pt"}', cwd=tmp_path)
    assert p.returncode == 1 and 'no checkpoint at' in p.stderr, p.stderr
    hint = p.stderr.split(';', 1)[1]
    assert str(given / 'ckpt.pt') in hint and '--ckpt' in hint  # what the folder does hold
    assert str(given / 'best.pt') not in hint
    (given / 'ckpt.pt').unlink()  # the folder holds nothing now: the runs elsewhere, never the folder given
    p = script('sample.py', f'--out_dir={given}', cwd=tmp_path)
    hint = p.stderr.split(';', 1)[1]
    assert p.returncode == 1 and 'out/other_run' in hint and 'given_run' not in hint, p.stderr
