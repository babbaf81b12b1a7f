"""The outlier measures of claim 5 against planted outliers: kurtosis and max/median |activation| (analyze.py's
emergence_stats, outlier_record, and train.py's outlier_interval that logs them), the W8A8 penalty (w8a8_copy), the
pinned corpus (data/pycode/prepare.py) and the CPU gate's page, re-rendered from its committed run files."""
import copy
import hashlib
import json
import os
import sys
import zipfile

import numpy as np
import pytest
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
import analyze  # noqa: E402
from dataset import load_prepare  # noqa: E402
from model import GPT, GPTConfig  # noqa: E402
from test_train import read_log, train_cli  # noqa: E402

pytestmark = pytest.mark.usefixtures('one_thread', 'peak_once')  # conftest.py

C = 64  # channels of the test models


def one_hot_kurtosis(c):
    """Kurtosis (no -3) across c channels of a vector that is zero but for one channel: m4 / m2^2 of a*e_k
    = ((c - 1)^3 + 1) / (c (c - 1)) = (c^2 - 3c + 3) / (c - 1): 62.02 for c = 64, the most any vector can have."""
    return (c * c - 3 * c + 3) / (c - 1)


def test_emergence_stats_on_constructed_states():
    g = torch.Generator().manual_seed(0)
    h = torch.randn(4, 16, C, generator=g)
    plain = analyze.emergence_stats([h])[0]
    assert 2.5 < plain['kurtosis_first'] < 4 and 2.7 < plain['kurtosis_rest'] < 3.3  # Gaussian: 3
    assert plain['massive_ratio'] < 8  # the largest of 4096 normals over the median |N(0,1)| (0.674): ~4/0.674
    h0 = h.clone()
    h0[:, 0] = 0
    h0[:, 0, 5] = 1000.0  # token 0 carries everything in one channel: a sink token's massive activation
    planted = analyze.emergence_stats([h0])[0]
    assert planted['kurtosis_first'] == pytest.approx(one_hot_kurtosis(C), rel=1e-9)
    assert planted['kurtosis_rest'] == pytest.approx(plain['kurtosis_rest'], rel=1e-9)  # the rest untouched
    assert planted['max_activation'] == 1000.0 and planted['massive_ratio'] > 1000


def tiny_model(seed=0, layers=2):
    torch.manual_seed(seed)
    return GPT(GPTConfig(n_layer=layers, n_head=4, n_embd=C, block_size=32, vocab_size=32, bias=False, dropout=0.0))


def plant_channel(model, c=7, scale=200.0, token=None):
    """A massive residual channel: every token's embedding (or one token's, e.g. a BOS) gets `scale` in channel c."""
    with torch.no_grad():
        rows = slice(None) if token is None else token
        model.transformer.wte.weight[rows, c] += scale
    return model


def test_outlier_record_sees_a_planted_channel_and_keeps_the_mode():
    x = torch.randint(0, 31, (4, 32), generator=torch.Generator().manual_seed(1))
    x[:, 0] = 31  # a fixed first token, as bos=True gives
    plain = tiny_model()
    plain.train()
    rec = analyze.outlier_record(plain, x)
    assert plain.training  # put back as it was
    assert set(rec) >= {f'outliers/L{i}/{k}' for i in (1, 2) for k in
                        ('kurtosis_first', 'kurtosis_rest', 'max_activation', 'median_activation', 'massive_ratio')}
    assert rec['outliers/max_massive_ratio'] < 20 and rec['outliers/max_kurtosis_rest'] < 10
    everywhere = analyze.outlier_record(plant_channel(tiny_model()), x)
    assert everywhere['outliers/max_massive_ratio'] > 1000 and everywhere['outliers/max_kurtosis_rest'] > 50
    first = analyze.outlier_record(plant_channel(tiny_model(), token=31), x)  # only the first token's embedding
    assert first['outliers/max_kurtosis_first'] > 50 and first['outliers/max_kurtosis_rest'] < 10
    assert first['outliers/max_massive_ratio'] > 1000  # max over the batch: token 0's channel
    assert max(first[f'outliers/L{i}/kurtosis_first'] for i in (1, 2)) == first['outliers/max_kurtosis_first']


@pytest.fixture(scope='module')
def trained():
    """A 2-layer model fitted for 60 steps to a fixed cyclic sequence, so that its loss depends on its attention and
    quantization noise shows in the loss: (model, calibration batches, batches), made once; a test that changes the
    model changes a copy."""
    model = tiny_model(seed=3)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.0)
    g = torch.Generator().manual_seed(2)
    seq = torch.randperm(31, generator=g)
    for _ in range(60):
        start = torch.randint(0, 31, (16,), generator=g)
        idx = seq[(start[:, None] + torch.arange(33)) % 31]
        _, loss = model(idx[:, :-1], idx[:, 1:].contiguous())
        opt.zero_grad()
        loss.backward()
        opt.step()
    batches = []
    for k in range(6):
        start = torch.randint(0, 31, (16,), generator=g)
        idx = seq[(start[:, None] + torch.arange(33)) % 31]
        batches.append((idx[:, :-1], idx[:, 1:].contiguous()))
    return model.eval(), batches[:3], batches[3:]


def plant_equivalent_outlier(model, c=11, gain=100.0):
    """An outlier input channel that leaves the function as it was: each block's ln_1 and ln_2 gains in channel c
    times gain, and the columns c of the Linears that read them (q/k/v, the MLP's c_fc) divided by it. Those Linears'
    inputs now hold a channel `gain` times the others, as massive activations do, while the full-precision output
    is unchanged."""
    with torch.no_grad():
        for blk in model.transformer.h:
            blk.ln_1.weight[c] *= gain
            blk.ln_2.weight[c] *= gain
            for lin in (blk.attn.q_proj, blk.attn.k_proj, blk.attn.v_proj, blk.mlp.c_fc):
                lin.weight[:, c] /= gain
    return model


def test_quantize_tensor_rounds_to_the_grid_and_clips():
    x = torch.linspace(-2, 2, 101)
    q = analyze.quantize_tensor(x, 1.0, bits=8)
    assert (q.abs() <= 1.0 + 1e-6).all() and q[0] == -1.0 and q[-1] == 1.0  # beyond the range: clipped
    inside = x.abs() <= 1
    assert ((q - x)[inside].abs() <= 0.5 / 127 + 1e-7).all()  # half a step of absmax / 127
    assert torch.allclose(q * 127, (q * 127).round(), atol=1e-4)  # on the grid


def test_w8a8_penalty_rises_with_a_planted_outlier_channel(trained):
    model, calib, batches = trained
    planted = plant_equivalent_outlier(copy.deepcopy(model))
    plain_q, planted_q = ({**analyze.quantization(m, batches), **analyze.w8a8_penalty(m, batches, calib)}
                          for m in (model, planted))
    assert planted_q['loss_fp'] == pytest.approx(plain_q['loss_fp'], abs=1e-4)  # the same function in fp32
    assert plain_q['loss_fp'] < 0.1  # it learned the sequence (uniform: ln 32 = 3.47)
    # W8A8: the outlier channel sets the per-tensor range of the q/k/v inputs, and the other channels round away
    # (measured at 0439e43: 0.018 against 1e-6, at a full-precision loss of 0.003)
    assert planted_q['loss_penalty_w8a8'] > 100 * max(plain_q['loss_penalty_w8a8'], 1e-5)
    assert planted_q['loss_penalty_w8a8'] > 0.005
    # per-channel int8 weights alone barely see it (a column divided by 100 costs only its own rounding)
    assert planted_q['loss_penalty_int8'] < planted_q['loss_penalty_w8a8'] / 100
    assert planted_q['ppl_penalty_w8a8'] == pytest.approx(np.exp(planted_q['loss_w8a8']) - np.exp(planted_q['loss_fp']))


def test_activation_ranges_are_the_calibration_maxima(trained):
    model, calib, _ = trained
    ranges = analyze.activation_ranges(model, calib)
    seen = {}
    hooks = [m.register_forward_pre_hook(lambda mod, inp, n=n: seen.setdefault(n, []).append(inp[0].abs().max()))
             for n, m in model.named_modules() if isinstance(m, torch.nn.Linear)]
    with torch.no_grad():
        for x, y in calib:
            model(x, y)
    for hk in hooks:
        hk.remove()
    assert set(ranges) == set(seen) and 'lm_head' in ranges
    for n in ranges:
        assert ranges[n] == pytest.approx(max(v.item() for v in seen[n]))


def test_train_logs_outliers_every_interval_and_the_corpus_hash(tmp_path):
    out = tmp_path / 'run'
    train_cli(out, '--max_iters=4', '--lr_decay_iters=4', '--eval_interval=4', '--outlier_interval=2')
    recs = [r for r in read_log(out) if r.get('kind') == 'outliers']
    assert [r['iter'] for r in recs] == [2, 4]
    for r in recs:
        assert r['outliers/max_kurtosis_first'] == max(r[f'outliers/L{i}/kurtosis_first'] for i in (1, 2))
        assert all(np.isfinite(v) for k, v in r.items() if k.startswith('outliers/'))
    summary = json.load(open(out / 'summary.json'))
    assert 'corpus_sha256' in summary and summary['config']['outlier_interval'] == 2


# --- the pinned corpus

def fake_wheel(path, files):
    with zipfile.ZipFile(path, 'w') as z:
        for name, data in files.items():
            z.writestr(zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0)), data)  # the same bytes at any time
    return hashlib.sha256(open(path, 'rb').read()).hexdigest()


def corpus_in(folder):
    a = {'pkg/a.py': b'x = 1\n', 'pkg/b.py': b'def f():\n    return 2\n', 'pkg/data.txt': b'not python',
         'pkg/latin.py': 'y = "\xe9"\n'.encode('latin-1')}
    b = {'other/c.py': b'x = 1\n', 'other/d.py': b'class D:\n    pass\n'}  # c.py duplicates a.py
    os.makedirs(folder)
    return [('a==1', 'a-1-py3-none-any.whl', fake_wheel(os.path.join(folder, 'a-1-py3-none-any.whl'), a)),
            ('b==1', 'b-1-py3-none-any.whl', fake_wheel(os.path.join(folder, 'b-1-py3-none-any.whl'), b))]


def test_corpus_dedups_splits_by_content_and_hashes_the_same_anywhere(tmp_path, monkeypatch):
    prep = load_prepare('pycode')
    pins = corpus_in(tmp_path / 'one')
    assert corpus_in(tmp_path / 'two') == pins  # the same bytes in another folder
    monkeypatch.setattr(prep, 'PINS', pins)
    monkeypatch.setattr(prep, 'VAL_PER_MILLE', 500)
    train, val, man = prep.build(str(tmp_path / 'one'))
    train2, val2, man2 = prep.build(str(tmp_path / 'two'))
    assert man == man2 and (train == train2).all() and (val == val2).all()  # no path of the folder in it
    assert [f['path'] for f in man['files']] == ['pkg/a.py', 'pkg/b.py', 'other/d.py']  # sorted, c.py a duplicate
    assert man['dropped'] == dict(duplicates=1, not_utf8=1)
    for f in man['files']:
        assert f['split'] == ('val' if int(f['sha256'][:8], 16) % 1000 < 500 else 'train')
    assert (train == prep.END).sum() + (val == prep.END).sum() == 3  # one END after each file
    assert len(train) + len(val) == sum(f['bytes'] for f in man['files']) + 3
    assert man['corpus_sha256'] == prep.corpus_sha256(train, val)
    monkeypatch.setattr(prep, 'VAL_PER_MILLE', 0)
    assert prep.build(str(tmp_path / 'one'))[2]['corpus_sha256'] != man['corpus_sha256']  # another split, other hash


def test_corpus_offline_error_says_what_and_how(tmp_path, monkeypatch, capsys):
    prep = load_prepare('pycode')
    monkeypatch.setattr(prep, 'PINS', [('no-such-package-for-these-tests==0.0.1', 'nope-0.0.1-py3-none-any.whl',
                                        '0' * 64)])
    for var in ('HTTPS_PROXY', 'HTTP_PROXY', 'https_proxy', 'http_proxy'):
        monkeypatch.setenv(var, 'http://127.0.0.1:9')  # nothing listens there: offline
    monkeypatch.setenv('PIP_RETRIES', '0')
    monkeypatch.setenv('PIP_DEFAULT_TIMEOUT', '3')
    with pytest.raises(SystemExit) as e:
        prep.download(str(tmp_path / 'dl'))
    msg = str(e.value)
    assert 'nope-0.0.1-py3-none-any.whl' in msg
    assert '0' * 64 in msg and str(tmp_path / 'dl') in msg  # the file, its sha256 and where to put it


def test_the_committed_manifest_matches_its_pins():
    prep = load_prepare('pycode')
    with open(os.path.join(ROOT, 'data', 'pycode', 'manifest.json')) as f:
        man = json.load(f)
    assert [(w['requirement'], w['file'], w['sha256']) for w in man['wheels']] == prep.PINS
    assert man['train_tokens'] + man['val_tokens'] == sum(f['bytes'] for f in man['files']) + len(man['files'])
    assert sum(f['split'] == 'val' for f in man['files']) == sum(prep.split_of(f['sha256']) == 'val'
                                                                 for f in man['files'])


# --- the CPU gate's page

def curve_of(k0, ratio):
    return [(100 * (i + 1), dict(kurtosis_first=a, kurtosis_rest=3.0, max_activation=10.0, massive_ratio=b))
            for i, (a, b) in enumerate(zip(k0, ratio))]


def test_gate_outcome_reads_a_curve_by_its_fixed_rule():
    flat = curve_of([3.1, 2.9, 3.0, 3.2, 3.0], [6, 7, 6, 6, 7])
    assert analyze.gate_outcome(flat, 5000) == 'below emergence at 5,000 tokens'
    one = curve_of([3, 3, 3, 3, 3], [6, 8, 12, 20, 40])  # max/median rises, token-0 kurtosis does not: not both
    assert analyze.gate_outcome(one, 5000) == 'below emergence at 5,000 tokens'
    both = curve_of([3, 5, 9, 15, 20], [6, 8, 12, 20, 40])
    assert analyze.gate_outcome(both, 5000) == 'rising at 5,000 tokens, below the precondition'
    there = curve_of([3, 5, 9, 15, 51], [6, 8, 12, 20, 101])
    assert analyze.gate_outcome(there, 5000) == 'emerged by 5,000 tokens'
    edge = curve_of([3, 5, 9, 15, 50], [6, 8, 12, 20, 101])  # "> 50", not ">= 50"
    assert analyze.gate_outcome(edge, 5000).startswith('rising')
    assert analyze.trend([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]) == (1.5, 9.5)  # the first and last fifth: 2 points each


GATE = os.path.join(ROOT, 'results', 'pycode_gate_cpu')


def test_the_gate_page_is_rendered_from_its_runs():
    """results/pycode_gate_cpu/emergence.md is analyze.emergence_page of the committed run: a hand edit fails."""
    with open(os.path.join(GATE, 'emergence.md')) as f:
        assert f.read() == analyze.emergence_page(GATE)


def test_the_gate_run_is_pinned_and_clean():
    run = analyze.gate_run(GATE)
    s = json.load(open(os.path.join(run, 'summary.json')))
    with open(os.path.join(ROOT, 'data', 'pycode', 'manifest.json')) as f:
        assert s['corpus_sha256'] == json.load(f)['corpus_sha256']  # the corpus the manifest pins
    assert s['finished'] and s['code']['dirty'] is False and s['machine']['cpu']['threads'] == 1
    assert not [f for f in os.listdir(run) if f.endswith('.pt')]



def test_claims_precondition_is_the_gates_and_needs_both():
    sys.path.insert(0, os.path.join(ROOT, 'evidence'))  # claims.py's folder, where it is there; else the root's
    import claims
    assert (claims.OUTLIER_KURTOSIS, claims.OUTLIER_RATIO) == (analyze.OUTLIER_KURTOSIS, analyze.OUTLIER_RATIO)
    _, file, has = claims.NEEDS['outliers_pc']

    def analysis(k0, ratio):
        return dict(layers=[dict(kurtosis_first=3.0), dict(kurtosis_first=k0)], overall=dict(massive_ratio=ratio))
    assert file == 'analysis.json' and has(analysis(51, 101))
    assert not has(analysis(50, 1000)) and not has(analysis(1000, 100)) and not has(analysis(3, 3))
