"""sample.py as a new user meets it: the text it generates, which checkpoint it sampled (the last state or the best
weights, the iteration, the val loss), a bad value named with only the bound it broke, a missing checkpoint's
alternatives that never offer the path that was given, a causal=False model refused, and the tokenizers it decodes
without the dataset. In this process (test_train.script): an interpreter's start and torch's import a test were most
of their time."""
import os
import shutil
import sys

import pytest
import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from test_train import read_log, refused, script, train_cli  # noqa: E402

pytestmark = pytest.mark.usefixtures('one_thread', 'peak_once')  # conftest.py
FLAGS = ('--temperature', '--top_k', '--num_samples', '--max_new_tokens')
SEPARATOR = '\n---------------\n'


@pytest.fixture(scope='module')
def run(tmp_path_factory):
    """A finished 4-step run evaluated at 2 and 4: ckpt.pt is iteration 4, best.pt the lower of the two evals."""
    out = tmp_path_factory.mktemp('run') / 'o'
    train_cli(out, '--max_iters=4', '--eval_interval=2', '--lr_decay_iters=4', '--warmup_iters=1')
    return out


def evals(out):
    return [r for r in read_log(out) if r['kind'] == 'eval']


def sampled_from(p):
    """The line of stderr that says which checkpoint was sampled: the one naming its iteration."""
    return next(line for line in p.stderr.splitlines() if ' iteration ' in line)


def test_sample_py_generates_text(run):
    """stdout is the samples alone (its notes go to stderr): the prompt, then the new characters."""
    p = script('sample.py', f'--out_dir={run}', '--start=ROMEO:', '--num_samples=2', '--max_new_tokens=20',
               '--seed=1')
    assert p.returncode == 0, p.stderr
    samples = p.stdout.split(SEPARATOR)
    assert samples[-1] == '' and len(samples) == 3
    for s in samples[:2]:
        assert s.startswith('ROMEO:') and len(s) == len('ROMEO:') + 20
    assert samples[0] != samples[1]


def test_sample_py_names_the_checkpoint_its_iteration_and_val_loss(run):
    last = evals(run)[-1]
    p = script('sample.py', f'--out_dir={run}', '--num_samples=1', '--max_new_tokens=3')
    assert p.returncode == 0, p.stderr
    line = sampled_from(p)
    assert str(run / 'ckpt.pt') in line and f"iteration {last['iter']}" in line, line
    assert f"{last['val_loss']:.4f}" in line, line
    best = min((e for e in evals(run) if e['iter'] > 0), key=lambda e: e['val_loss'])
    p = script('sample.py', f'--ckpt={run / "best.pt"}', '--num_samples=1', '--max_new_tokens=3')
    assert p.returncode == 0, p.stderr
    line = sampled_from(p)
    assert str(run / 'best.pt') in line and f"iteration {best['iter']}," in line, line
    assert f"{best['val_loss']:.4f}" in line, line


@pytest.mark.parametrize('arg', ['--temperature=0', '--top_k=-1', '--num_samples=0', '--max_new_tokens=-3'])
def test_a_bad_value_names_only_the_bound_it_broke(run, arg):
    p = script('sample.py', f'--out_dir={run}', arg)
    err = p.stderr.strip().splitlines()[-1]
    flag, value = arg.split('=')
    assert p.returncode == 2 and value in err and [f for f in FLAGS if f in err] == [flag], p.stderr


@pytest.mark.parametrize('arg,named', [('--start=FILE:/no/such/prompt', '/no/such/prompt'), ('--start=', '--start'),
                                       ('--device=gpu', "device='gpu'")])
def test_a_bad_prompt_or_device_is_one_line_naming_it(run, arg, named):
    """A missing prompt file and an empty prompt ended in tracebacks; a bad device is named as such, not as a
    checkpoint that cannot be loaded."""
    refused(script('sample.py', f'--out_dir={run}', arg, '--max_new_tokens=2'), named)


def test_a_missing_checkpoint_is_never_offered_back(run, tmp_path):
    other = tmp_path / 'out' / 'other_run'
    other.mkdir(parents=True)
    (other / 'ckpt.pt').write_bytes((run / 'ckpt.pt').read_bytes())
    given = tmp_path / 'out' / 'given_run'
    given.mkdir()
    (given / 'ckpt.pt').write_bytes((run / 'ckpt.pt').read_bytes())  # its ckpt.pt exists, its best.pt does not
    def offered(p):  # the checkpoints and run folders the hint after the ';' names
        return [w.rstrip(':;,') for w in p.stderr.split(';', 1)[1].split() if w.rstrip(':;,').endswith('.pt')
                or w.startswith('out/')]
    p = script('sample.py', f'--ckpt={given / "best.pt"}', cwd=tmp_path)
    refused(p, given / 'best.pt', '--ckpt')
    assert offered(p) == [str(given / 'ckpt.pt')], p.stderr  # what the folder does hold
    (given / 'ckpt.pt').unlink()  # the folder holds nothing now: the runs elsewhere, never the folder given
    p = script('sample.py', f'--out_dir={given}', cwd=tmp_path)
    refused(p, given / 'ckpt.pt', '--out_dir')
    assert offered(p) == ['out/other_run'], p.stderr
    shutil.copytree(run, tmp_path / 'here' / 'out' / 'diff_3L')  # no run given: the runs there are, by folder
    refused(script('sample.py', cwd=tmp_path / 'here'), 'out/diff_3L', '--out_dir')


def test_sample_py_refuses_a_noncausal_model_and_decodes_without_the_dataset(tmp_path):
    out = tmp_path / 'o'
    train_cli(out, '--max_iters=2', '--eval_interval=2', '--causal=False')
    cmd = ['sample.py', f'--out_dir={out}', '--num_samples=1', '--max_new_tokens=5']
    refused(script(*cmd), out / 'ckpt.pt', 'causal=False', '--allow_noncausal')
    assert script(*cmd, '--allow_noncausal').returncode == 0
    # a checkpoint copied to a machine without data/<dataset>/meta.json: it carries its own tokenizer
    ckpt = torch.load(out / 'ckpt.pt', weights_only=True)
    assert ckpt['tokenizer']['tokenizer'] == 'char' and len(ckpt['tokenizer']['itos']) == 65
    ckpt['config']['dataset'] = 'not_on_this_machine'
    torch.save(ckpt, out / 'ckpt.pt')
    p = script(*cmd, '--allow_noncausal', '--start=ROMEO:')
    assert p.returncode == 0 and p.stdout.startswith('ROMEO:'), p.stderr
    del ckpt['tokenizer']  # an older checkpoint of a 65-symbol model, and no meta.json: no GPT-2 BPE guess
    torch.save(ckpt, out / 'ckpt.pt')
    refused(script(*cmd, '--allow_noncausal'), '65', 'not_on_this_machine')


def test_sample_py_decodes_byte_tokens():
    """data/fineweb/prepare.py --tokenizer=byte is a documented dataset; sample.py said it could not decode it."""
    import sample
    encode, decode, _ = sample.tokenizer(dict(tokenizer=dict(tokenizer='byte'), model_args=dict(vocab_size=320),
                                              config=dict(dataset='webdata')))
    assert encode('héllo') == list('héllo'.encode()) and decode(encode('héllo')) == 'héllo'
    assert decode([104, 105, 256, 300]) == 'hi<|endoftext|>\ufffd'
