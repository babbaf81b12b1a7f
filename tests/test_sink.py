"""The Bigram-Backcopy task (data/bigram_backcopy), the setting in which the baseline grows a sink: its records
obey the task's two rules, its loss floor is the exact predictor's loss, every sink config builds on it, and the
baseline trains and is analysed end to end."""
import glob
import json
import os
import shutil
import sys

import numpy as np
import pytest
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
import config  # noqa: E402
from dataset import load_prepare  # noqa: E402
from model import GPT, GPTConfig  # noqa: E402
from test_train import cli, refused, script  # noqa: E402

pytestmark = pytest.mark.usefixtures('one_thread', 'peak_once')  # conftest.py

bb = load_prepare('bigram_backcopy')  # data/bigram_backcopy/prepare.py, the generator
TEXT = 'the quick brown fox jumps over the lazy dog. ' * 40 + 'sphinx of black quartz, judge my vow!\n' * 20


def small_chain(k=3):
    return bb.chain(TEXT, k)


def test_triggers_are_the_most_frequent_characters_and_rows_are_distributions():
    chars, triggers, P, first = small_chain()
    counts = {c: TEXT.count(c) for c in chars}
    top = sorted(counts.values(), reverse=True)[:3]
    assert sorted(counts[chars[i]] for i in triggers) == sorted(top) and ' ' == chars[triggers[0]]
    assert np.allclose(P.sum(1), 1) and np.isclose(first.sum(), 1) and (first[triggers] == 0).all()
    # P is the text's bigram: 'q' is always followed by 'u'
    assert P[chars.index('q'), chars.index('u')] == 1


def test_records_follow_the_copy_rule_and_the_bigram_otherwise():
    chars, triggers, P, first = small_chain()
    x, copied = bb.make_records(np.random.default_rng(0), 300, 40, triggers, P, first)
    V = len(chars)
    assert (x[:, 0] == V).all() and (x[:, 1:] < V).all()            # BOS first, and only there
    assert not np.isin(x[:, 1], triggers).any()                      # x_1 is never a trigger
    t = np.arange(1, 40)
    trig = np.isin(x[:, 1:-1], triggers) & (t >= 2)                  # x_t a trigger, t >= 2
    assert (copied[:, 2:] == trig).all() and copied[:, :2].sum() == 0
    assert (x[:, 2:][trig] == x[:, :-2][trig]).all()                 # x_{t+1} = x_{t-1}
    assert trig.mean() > 0.1                                         # the copy is a large part of the task
    steps = ~trig
    assert (P[x[:, 1:-1][steps], x[:, 2:][steps]] > 0).all()        # every other step is a bigram transition


def test_loss_floor_is_the_exact_predictors_cross_entropy():
    chars, triggers, P, first = small_chain()
    x, copied = bb.make_records(np.random.default_rng(1), 4000, 64, triggers, P, first)
    logP = np.log(np.where(P > 0, P, 1))
    ce = np.where(copied[:, 2:], 0.0, -logP[x[:, 1:-1], x[:, 2:]])  # exact: the copy is certain
    empirical = (ce.sum() - np.log(first[x[:, 1]]).sum()) / (ce.size + len(x))
    assert bb.loss_floor(x, copied, P, first) == pytest.approx(empirical, abs=0.01)
    assert 0.05 < empirical < np.log(len(chars))  # neither certain nor uniform


def prepare(tmp_path, *args):
    d = tmp_path / 'bigram_backcopy'
    d.mkdir(exist_ok=True)
    shutil.copy(os.path.join(ROOT, 'data', 'bigram_backcopy', 'prepare.py'), d / 'prepare.py')
    (tmp_path / 'text.txt').write_text(TEXT)
    return d, script(d / 'prepare.py', f'--input={tmp_path / "text.txt"}', *args)


def test_prepare_writes_records_masks_and_meta_deterministically(tmp_path):
    d, p = prepare(tmp_path, '--block_size=16', '--n_train=50', '--n_val=10')
    assert p.returncode == 0, p.stderr
    first = {f: (d / f).read_bytes() for f in ('train.bin', 'val.bin')}
    meta = json.load(open(d / 'meta.json'))
    assert meta['record_len'] == 17 and meta['vocab_size'] == len(set(TEXT)) + 1 == meta['bos'] + 1
    assert meta['itos'][meta['bos']] == '<s>' and meta['triggers'][0] == ' ' and 0 < meta['loss_floor'] < 3
    tr = np.fromfile(d / 'train.bin', dtype=np.uint16).reshape(-1, 17)
    m = np.fromfile(d / 'train_mask.bin', dtype=np.uint8).reshape(-1, 17)
    assert tr.shape == (50, 17) and (tr[:, 0] == meta['bos']).all()
    assert (m[:, 0] == 0).all() and (m[:, 1:] == 1).all()            # every token after BOS is a target
    assert not glob.glob(str(d / '*.tmp'))
    assert prepare(tmp_path, '--block_size=16', '--n_train=50', '--n_val=10')[1].returncode == 0
    assert first == {f: (d / f).read_bytes() for f in first}         # a pure function of --seed


@pytest.mark.parametrize('args, named', [(['--k=0'], '--k 0'), (['--block_size=2'], '--block_size 2'),
                                         (['--input=/nonexistent.txt'], '--input /nonexistent.txt')])
def test_prepare_refuses_bad_arguments_and_writes_nothing(tmp_path, args, named):
    d, p = prepare(tmp_path, *args, '--n_train=5', '--n_val=5')
    refused(p, named, code=2)
    assert sorted(os.listdir(d)) == ['prepare.py']


def test_every_sink_config_builds_and_one_trains_and_is_analysed(tmp_path):
    """Every configs/bb_*.py is a model and optimizer of the task (two of them train in tests/test_numerics.py); the
    baseline trains, analyze.py measures it, sample.py samples it."""
    d, p = prepare(tmp_path, '--block_size=16', '--n_train=64', '--n_val=16')
    assert p.returncode == 0, p.stderr
    cfgs = sorted(glob.glob(os.path.join(ROOT, 'configs', 'bb_*.py')))
    names = {os.path.basename(c)[3:-3] for c in cfgs}
    assert {'nanogpt_2L', 'softmax1_2L', 'gated_2L', 'gated_headwise_2L', 'orthoadam_2L',
            'softmax1_orthoadam_2L'} <= names
    shape = [f'--dataset={d}', '--block_size=16', '--batch_size=4', '--device=cpu', '--n_embd=32']
    for cfg in cfgs:
        c = config.parse_config([cfg, *shape])
        model = GPT(GPTConfig(**{k: c[k] for k in config.MODEL_KEYS if k != 'vocab_size'}, vocab_size=66))
        model.configure_optimizers(c['weight_decay'], c['learning_rate'], (c['beta1'], c['beta2']), c['optimizer'],
                                   c['orthoadam_max_dim'], c['seed'])
    out = tmp_path / 'bb_nanogpt_2L'
    run = cli(os.path.join(ROOT, 'configs', 'bb_nanogpt_2L.py'), *shape, '--max_iters=2', '--eval_interval=2',
              '--eval_iters=1', f'--out_dir={out}')
    assert run.returncode == 0, run.stdout + run.stderr
    a = script('analyze.py', f'--out_dir={out}', '--eval_iters=1', '--batch_size=4')
    assert a.returncode == 0, a.stderr
    res = json.load(open(out / 'analysis.json'))
    # the checkpoint names the dataset's BOS: sample.py starts the prompt with it and never samples it
    assert torch.load(out / 'ckpt.pt', weights_only=False)['tokenizer']['bos'] == len(set(TEXT))
    smp = script('sample.py', f'--out_dir={out}', '--start=the', '--num_samples=2', '--max_new_tokens=40', '--top_k=0')
    assert smp.returncode == 0, smp.stderr
    samples = smp.stdout.split('---------------\n')[:-1]
    assert len(samples) == 2 and all(x.startswith('the') and set(x) <= set(TEXT) for x in samples)  # no '<s>'
    # the position-0 key every record starts with is BOS: uniform weights would give it mean_t 1 / (t + 1)
    assert res['overall']['first_token_uniform'] == pytest.approx(np.mean(1 / np.arange(2, 17)), rel=1e-6)
    assert 0 <= res['overall']['sink_heads'] <= 1
