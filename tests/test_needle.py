"""The needle-retrieval generator, its attention metric, and train + needle_eval end to end."""
import json
import os
import shutil
import sys

import numpy as np
import pytest
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
import needle_eval  # noqa: E402
from checkpoint import load_checkpoint  # noqa: E402
from dataset import load_prepare  # noqa: E402
from test_train import cli, refused, script  # noqa: E402

pytestmark = pytest.mark.usefixtures('one_thread', 'peak_once')  # conftest.py

needle = load_prepare('needle')  # data/needle/prepare.py, the generator

KW = dict(n_keys=16, n_values=16, n_filler=16)


@pytest.mark.parametrize('n', [1, 3, 6])
@pytest.mark.parametrize('depth', [None, 0.0, 0.5, 1.0])
def test_records_put_needles_where_asked_and_answers_are_right(n, depth):
    rng = np.random.default_rng(0)
    keys, values, filler, pairs = needle.vocab(**KW)
    assert len(pairs) == 0  # two-token needles: no pair tokens
    for _ in range(20):
        tok, mask, info = needle.make_record(rng, 65, n, 2, depth=depth, **KW)
        hay = info['haystack_len']
        assert hay == 65 - 1 - 4 and tok[hay] == needle.SEP
        pos = info['needle_pos']
        assert len(set(pos)) == n and all(p % 2 == 0 and p + 1 < hay for p in pos)
        assert np.isin(tok[pos], keys).all() and np.isin(tok[pos + 1], values).all()
        assert len(set(tok[pos])) == n  # keys are distinct within a record
        other = np.setdiff1d(np.arange(hay), np.concatenate([pos, pos + 1]))
        assert np.isin(tok[other], filler).all()  # the rest of the haystack is filler
        for j, q in zip(info['queried'], info['query_pos']):
            assert tok[q] == tok[pos[j]] and tok[q + 1] == tok[pos[j] + 1]  # query key, then its value
        assert mask.sum() == 2 and (np.nonzero(mask)[0] == info['query_pos'] + 1).all()
        if depth is not None:
            slots = hay // 2
            assert pos[info['queried'][0]] == 2 * round(depth * (slots - 1))


@pytest.mark.parametrize('depth', [None, 0.0, 1.0])
def test_fused_needles_are_one_token_per_pair(depth):
    """--fused: a needle is the token of its (key, value) pair, at any haystack position; the queries and answers
    are the same key and value tokens as in the two-token layout."""
    rng = np.random.default_rng(1)
    keys, values, filler, pairs = needle.vocab(**KW, fused=True)
    assert len(pairs) == 16 * 16 and pairs[0] == filler[-1] + 1
    for _ in range(50):
        tok, mask, info = needle.make_record(rng, 33, 5, 3, depth=depth, **KW, fused=True)
        hay, pos = info['haystack_len'], info['needle_pos']
        assert info['needle_width'] == 1 and hay == 33 - 1 - 6 and len(set(pos)) == 5 and (pos < hay).all()
        assert np.isin(tok[pos], pairs).all()
        assert np.isin(np.delete(tok[:hay], pos), filler).all()
        k_of, v_of = (tok[pos] - pairs[0]) // 16, (tok[pos] - pairs[0]) % 16  # pair (i, j) = pairs[i * 16 + j]
        assert len(set(k_of)) == 5
        for j, q in zip(info['queried'], info['query_pos']):
            assert tok[q] == keys[k_of[j]] and tok[q + 1] == values[v_of[j]] and mask[q + 1] == 1
        if depth is not None:
            assert pos[info['queried'][0]] == round(depth * (hay - 1))


@pytest.mark.parametrize('fused', [True, False])
@pytest.mark.parametrize('depth', [None, 0.0, 0.5, 1.0])
def test_distractors_share_the_first_key_come_earlier_and_the_answer_is_the_latest_value(depth, fused):
    """distractors=D: D more needles with the first queried needle's key and other values, all before it; the
    other needles keep distinct keys; the query's answer is the latest value of its key."""
    rng = np.random.default_rng(2)
    keys, values, filler, pairs = needle.vocab(**KW, fused=fused)
    L, D = (33, 4) if fused else (65, 3)
    for _ in range(50):
        tok, mask, info = needle.make_record(rng, L, 5, 4, depth=depth, **KW, fused=fused, distractors=D)
        hay, pos, dpos, w = info['haystack_len'], info['needle_pos'], info['distractor_pos'], info['needle_width']
        assert len(pos) == 5 and len(dpos) == D and len(set(pos) | set(dpos)) == 5 + D
        kv = lambda p: (((tok[p] - pairs[0]) // 16, (tok[p] - pairs[0]) % 16) if fused  # noqa: E731
                        else (tok[p] - keys[0], tok[p + 1] - values[0]))
        first = pos[info['queried'][0]]
        key, value = kv(first)
        assert all(kv(p)[0] == key and kv(p)[1] != value and p < first for p in dpos)
        assert len({kv(p)[0] for p in pos}) == 5  # the needles proper: distinct keys
        covered = np.concatenate([pos, dpos] + ([] if fused else [pos + 1, dpos + 1]))
        assert np.isin(np.delete(tok[:hay], covered), filler).all()
        q = info['query_pos'][0]
        assert tok[q] == keys[key] and tok[q + 1] == values[value] and mask[q + 1] == 1
        if depth is not None:
            slots = hay // w
            assert first == w * (D + round(depth * (slots - 1 - D)))


def test_distractors_change_nothing_when_zero_and_too_many_is_an_error():
    a = needle.make_record(np.random.default_rng(3), 33, 4, 4, **KW, fused=True)
    b = needle.make_record(np.random.default_rng(3), 33, 4, 4, **KW, fused=True, distractors=0)
    assert (a[0] == b[0]).all() and len(b[2]['distractor_pos']) == 0
    with pytest.raises(ValueError, match=r'\b6\b.*\b20\b'):  # the needles and distractors named
        needle.make_record(np.random.default_rng(3), 33, 6, 4, **KW, fused=True, distractors=20)


def test_needle_distractors_prepare_writes_its_own_folder(tmp_path):
    """data/needle_distractors/prepare.py: data/needle's generator with 4 distractors, written beside itself."""
    for name in ('needle', 'needle_distractors'):
        (tmp_path / name).mkdir()
        shutil.copy(os.path.join(ROOT, 'data', name, 'prepare.py'), tmp_path / name / 'prepare.py')
    p = script(tmp_path / 'needle_distractors' / 'prepare.py', '--n_train=200', '--n_val=20')
    assert p.returncode == 0, p.stderr
    meta = json.load(open(tmp_path / 'needle_distractors' / 'meta.json'))
    assert meta['distractors'] == 4 and meta['record_len'] == 33 and 'out_dir' not in meta
    assert not (tmp_path / 'needle' / 'train.bin').exists()
    tok = np.fromfile(tmp_path / 'needle_distractors' / 'train.bin', dtype=np.uint16).reshape(-1, 33)
    pairs0 = 1 + 16 * 3
    assert len(tok) == 200 and ((tok[:, :24] >= pairs0).sum(1) >= 2 + 4).all()  # needles + distractors


def test_queries_are_drawn_with_replacement():
    """With distinct queries the last answer would be the one value not yet asked for (an elimination shortcut
    needing no key matching); drawn with replacement, at N = 2 the second query repeats the first half the time."""
    rng = np.random.default_rng(0)
    same = [len(set(needle.make_record(rng, 17, 2, 2, **KW)[2]['queried'])) == 1 for _ in range(2000)]
    assert 0.45 < np.mean(same) < 0.55


def test_build_draws_needle_counts_from_min_to_max():
    args = needle.get_args(['--min_needles=2', '--max_needles=4', '--block_size=24', '--n_queries=4'])
    _, _, _, pairs = needle.vocab(args.n_keys, args.n_values, args.n_filler, args.fused)
    tok, mask = needle.build(np.random.default_rng(0), 600, args)
    hay = args.block_size - 2 * args.n_queries
    counts = np.isin(tok[:, :hay], pairs).sum(1)  # the default needles are fused: one pair token each
    assert set(counts) == {2, 3, 4} and (mask.sum(1) == 4).all()
    with pytest.raises(SystemExit):
        needle.get_args(['--min_needles=3', '--max_needles=2'])


@pytest.mark.parametrize('args', [['--max_needles', '30'], ['--n_queries', '20'], ['--n_queries', '0']])
def test_prepare_refuses_records_that_cannot_hold_the_task_and_makes_its_out_dir(tmp_path, args):
    """Settings a record cannot hold ended in a ValueError traceback from deep inside; a new --out_dir in a
    FileNotFoundError."""
    prepare = os.path.join(ROOT, 'data', 'needle', 'prepare.py')
    refused(script(prepare, *args, '--out_dir', tmp_path / 'x'), ' '.join(args) if args[1] != '0' else args[0],
            code=2)
    assert not (tmp_path / 'x').exists()  # refused before anything is written
    p = script(prepare, '--n_train=50', '--n_val=10', '--out_dir', tmp_path / 'new' / 'd')
    assert p.returncode == 0 and (tmp_path / 'new' / 'd' / 'meta.json').exists(), p.stderr


def test_prepare_is_deterministic_and_splits_are_disjoint(tmp_path):
    d = tmp_path / 'needle'
    d.mkdir()
    shutil.copy(os.path.join(ROOT, 'data', 'needle', 'prepare.py'), d / 'prepare.py')
    # a tiny space (5,120 distinct records), so that train and val collide and the filter has work to do
    args = ['--block_size=12', '--n_train=3000', '--n_val=300', '--min_needles=1', '--max_needles=1', '--n_keys=2',
            '--n_values=2', '--n_filler=2', '--n_queries=1', '--no-fused']
    for run in ('a', 'b'):
        assert script(d / 'prepare.py', *args).returncode == 0
        os.rename(d / 'val.bin', d / f'val_{run}.bin')
        os.rename(d / 'train.bin', d / f'train_{run}.bin')
    assert (d / 'train_a.bin').read_bytes() == (d / 'train_b.bin').read_bytes()
    assert (d / 'val_a.bin').read_bytes() == (d / 'val_b.bin').read_bytes()
    tr = np.fromfile(d / 'train_a.bin', dtype=np.uint16).reshape(-1, 13)
    va = np.fromfile(d / 'val_a.bin', dtype=np.uint16).reshape(-1, 13)
    assert 0 < len(va) < 300  # some val records were dropped as duplicates of train records
    assert not ({r.tobytes() for r in tr} & {r.tobytes() for r in va})
    meta = json.load(open(d / 'meta.json'))
    assert meta['record_len'] == 13 and meta['vocab_size'] == 1 + 2 + 2 + 2
    m = np.fromfile(d / 'val_mask.bin', dtype=np.uint8).reshape(-1, 13)
    assert m.shape == va.shape and (m.sum(1) == 1).all()


def test_default_task_matches_base_config_and_eval_grid():
    # train.py needs block_size = record_len - 1, so the base config must follow prepare.py's defaults
    args = needle.get_args([])
    ns = {}
    exec(open(os.path.join(ROOT, 'configs', 'base_needle.py')).read(), ns)
    assert ns['block_size'] == args.block_size
    # every needle count up to max_needles fits the default haystack, so needle_eval's grid can be built
    rng = np.random.default_rng(0)
    for n in range(1, args.max_needles + 1):
        for depth in (0.0, 0.5, 1.0):
            tok, mask, info = needle.make_record(rng, args.block_size + 1, n, args.n_queries, args.n_keys,
                                                 args.n_values, args.n_filler, depth)
            assert len(tok) == args.block_size + 1 and mask.sum() == args.n_queries
    # N = 2 is in the default grid: the count at which retrieval (not copying the only value) is first tested
    assert needle_eval.default_needles(args.max_needles)[:2] == [1, 2]


def test_attention_split_on_hand_built_maps():
    T, hay = 12, 8
    needle_pos, queried, query_pos = np.array([2, 6]), np.array([1]), np.array([9])
    w = torch.zeros(2, T, T)
    w[0, 9, 6], w[0, 9, 7] = 0.5, 0.25      # head 0: 0.75 on the answer needle (positions 6, 7)
    w[0, 9, 0], w[0, 9, 9] = 0.125, 0.125   # 0.125 on filler (noise), 0.125 on itself (not haystack)
    w[1, 9, 2] = 1.0                        # head 1: all on the other needle (noise)
    ans, noise, share = needle_eval.attention_split(w, needle_pos, queried, query_pos, hay)
    assert ans == pytest.approx((0.75 + 0.0) / 2) and noise == pytest.approx((0.125 + 1.0) / 2)
    assert share == pytest.approx((0.75 / 0.875 + 0.0) / 2)  # a softmax row: answer / (answer + noise)
    # a Diff row, A1 - lambda A2: signed weights. Plain sums cancel (answer 0.7, noise 0.0 here), the share does not
    d = torch.zeros(1, T, T)
    d[0, 9, 6], d[0, 9, 0], d[0, 9, 1], d[0, 9, 2] = 0.7, 0.2, -0.3, 0.1
    ans, noise, share = needle_eval.attention_split(d, needle_pos, queried, query_pos, hay, needle_width=1)
    assert ans == pytest.approx(0.7) and noise == pytest.approx(0.0, abs=1e-7)
    assert share == pytest.approx(0.7 / (0.7 + 0.2 + 0.3 + 0.1))
    assert needle_eval.attention_split(torch.zeros(1, T, T), needle_pos, queried, query_pos, hay)[2] == 0.0


def test_distractor_share_and_stale_values_on_hand_built_records():
    """The distractors' share of the first query's absolute weight on the haystack (a Diff row's signs do not
    cancel), and the values a stale answer would name, decoded from fused pair tokens or read after a key."""
    T, hay, query_pos = 12, 8, np.array([9])
    d = torch.zeros(2, T, T)
    d[0, 9, 1], d[0, 9, 3], d[0, 9, 6] = 0.3, -0.2, 0.5     # head 0: distractors at 1 and 3, the answer at 6
    d[1, 9, 6] = 1.0                                         # head 1: all on the answer
    share = needle_eval.haystack_share(d, np.array([1, 3]), query_pos, hay, needle_width=1)
    assert share == pytest.approx((0.5 / 1.0 + 0.0) / 2)
    meta = dict(n_keys=16, n_values=16, n_filler=16, fused=True)
    keys, values, filler, pairs = needle.vocab(16, 16, 16, fused=True)
    tok = np.array(filler[:1].tolist() * 10)
    tok[1], tok[3] = pairs[5 * 16 + 2], pairs[5 * 16 + 9]   # distractors: key 5 with values 2 and 9
    tok[6], tok[7] = pairs[5 * 16 + 4], pairs[3 * 16 + 9]   # needles: the answer (value 4), key 3 with value 9
    info = dict(distractor_pos=np.array([1, 3]), needle_pos=np.array([6, 7]))
    assert needle_eval.stale_values(tok, info, meta) == {int(values[2])}  # 9 is another needle's value too
    tok2 = np.array(filler[:1].tolist() * 10)
    tok2[2], tok2[3], tok2[6], tok2[7] = keys[5], values[4], keys[5], values[8]
    info2 = dict(distractor_pos=np.array([2]), needle_pos=np.array([6]))
    assert needle_eval.stale_values(tok2, info2, dict(meta, fused=False)) == {int(values[4])}


def test_evaluate_with_distractors_reports_the_stale_rate_and_the_three_shares():
    """On distractor records (an untrained model is enough): a stale answer is a wrong one, so the stale rate is at
    most 1 - accuracy, and the answer, distractor and unrelated shares of |w| on the haystack add up to 1."""
    from model import GPT, GPTConfig
    torch.manual_seed(0)
    meta = dict(record_len=33, n_queries=4, n_keys=16, n_values=16, n_filler=16, fused=True, distractors=4)
    model = GPT(GPTConfig(n_layer=2, n_head=2, n_embd=32, block_size=32, vocab_size=305, attn='diff')).eval()
    grid = needle_eval.evaluate(model, meta, [2, 5], [0.0, 1.0], 20, seed=1)
    for cell in grid.values():
        assert 0 <= cell['stale_rate'] <= 1 - cell['accuracy'] + 1e-9
        assert cell['answer_share'] + cell['distractor_share'] + cell['unrelated_share'] == pytest.approx(1.0)
        assert 0 < cell['distractor_share'] < 1 and 0 < cell['unrelated_share'] < 1


def test_train_and_eval_end_to_end(tmp_path, monkeypatch, small_needle):
    out = tmp_path / 'o'
    # the config's task (data/needle's default records), from a folder of a few of them
    p = cli(os.path.join(ROOT, 'configs', 'needle_diffv2.py'), f'--dataset={small_needle}', '--max_iters=3',
            '--eval_interval=3', '--eval_iters=1', '--batch_size=4', '--device=cpu', f'--out_dir={out}')
    assert p.returncode == 0, p.stdout + p.stderr
    evals = [json.loads(l) for l in open(out / 'log.jsonl') if '"eval"' in l]
    assert 2.5 < evals[0]['val_loss'] < 6  # only answers count: about ln(32 values) once the values are found
    p = script('needle_eval.py', '--out_dir', out, '--n_eval=4', '--needles', '1', '2', '--depths', '0', '1')
    assert p.returncode == 0, p.stderr
    res = json.load(open(out / 'needle_eval.json'))
    assert len(res['cells']) == 4
    for c in res['cells']:
        assert 0 <= c['accuracy'] <= 1 and -1 <= c['answer_attention'] <= 1 and 0 <= c['answer_share'] <= 1
    assert '| o |' in p.stdout
    # default arguments: full precision, the numbers needle_eval.py always gave (fp32, no autocast)
    assert res['dtype'] == 'float32'
    model, ckpt = load_checkpoint(str(out / 'ckpt.pt'), res['device'])
    meta = json.load(open(small_needle / 'meta.json'))
    grid = needle_eval.evaluate(model.eval(), meta, [1, 2], [0.0, 1.0], 4, 1, res['device'])
    for c in res['cells']:
        expected = grid[(c['needles'], c['depth'])]
        assert [c[k] for k in expected] == pytest.approx(list(expected.values()), rel=1e-6)
    # --ckpt_name picks best.pt in each run folder, its results beside the run's (needle_eval_best.json), not over
    # them; --device and --dtype pick where and how the model runs; sample.py's --ckpt is not taken for --ckpt_name
    best_iter = min(evals, key=lambda e: e['val_loss'])['iter']
    before = (out / 'needle_eval.json').read_bytes()
    p = script('needle_eval.py', '--out_dir', out, '--n_eval=4', '--needles', '1', '2', '--depths', '0', '1',
               '--ckpt_name=best.pt', '--device=cpu', '--dtype=bfloat16')
    assert p.returncode == 0, p.stderr
    assert (out / 'needle_eval.json').read_bytes() == before
    res = json.load(open(out / 'needle_eval_best.json'))
    assert (res['checkpoint'], res['iter'], res['device'], res['dtype']) == (str(out / 'best.pt'), best_iter, 'cpu',
                                                                             'bfloat16')
    refused(script('needle_eval.py', '--out_dir', out, f'--ckpt={out}/best.pt'), f'--ckpt={out}/best.pt', code=2)
    # a needle count the data cannot hold, and data prepared again for another record length: errors that say so
    # (a traceback, and a silent evaluation of 17-token records by a model of 33, before), nothing written
    before = (out / 'needle_eval.json').read_bytes()
    refused(script('needle_eval.py', '--out_dir', out, '--needles', '99'), '--needles', '[99]')
    monkeypatch.setattr(sys, 'argv', ['needle_eval.py', '--out_dir', str(out)])
    for changed, match in [(dict(record_len=17), r'\b33\b.*\b17\b'),  # what the model has, what the data has
                           (dict(n_keys=8, vocab_size=meta['vocab_size'] - 8), r'n_keys 16\b.*\b8\b.*vocab_size')]:
        monkeypatch.setattr(needle_eval, 'load_meta', lambda d: dict(meta, **changed))
        with pytest.raises(SystemExit, match=match):
            needle_eval.main()
    assert (out / 'needle_eval.json').read_bytes() == before
    # more needles than training saw (max_needles), as many as a record holds: the length-generalisation probe
    monkeypatch.undo()
    assert meta['max_needles'] < 8 <= needle_eval.needle.max_needles(meta['record_len'], meta['n_queries'],
                                                                      meta['n_keys'])
    p = script('needle_eval.py', '--out_dir', out, '--n_eval=2', '--needles', '8', '--depths', '0')
    assert p.returncode == 0, p.stderr
    assert json.load(open(out / 'needle_eval.json'))['needles'] == [8]


def test_attention_figure_labels_whole_layers(monkeypatch, small_needle):
    pytest.importorskip('matplotlib')
    from dataset import load_meta
    from model import GPT, GPTConfig
    meta = load_meta(str(small_needle))  # data/needle's default task
    model = GPT(GPTConfig(n_layer=3, n_head=2, n_embd=16, block_size=meta['record_len'] - 1,
                          vocab_size=meta['vocab_size'])).eval()
    figs = []
    monkeypatch.setattr(needle_eval, 'save_figure', lambda fig, path: figs.append(fig))
    assert needle_eval.heatmap(model, meta, 'unused.png', seed=1)
    ax = figs[0].axes[0]
    assert [t.get_text() for t in ax.get_yticklabels()] == ['1', '2', '3'] and len(figs[0].axes) == 2
