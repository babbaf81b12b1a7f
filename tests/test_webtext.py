"""data/fineweb/prepare.py on small folders that the tests write, and the GPT-2 124M configs trained 2 steps each
(shrunk by overrides) on its tokens. tiktoken's GPT-2 encoding needs a download, so these tests use the script's
offline 'byte' tokenizer, a tiktoken Encoding of its own, through the same code path."""
import gzip
import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
from dataset import load_prepare  # noqa: E402
from test_train import cli, one_line, script  # noqa: E402

pytestmark = pytest.mark.usefixtures('one_thread', 'peak_once')  # conftest.py

prep = load_prepare('fineweb')
SCRIPT = os.path.join(ROOT, 'data', 'fineweb', 'prepare.py')
EOT = 256  # the byte tokenizer's end-of-text


def corpus(folder, n=30):
    """n documents in every format the script reads; returns them in the order the script must write them."""
    folder.mkdir(parents=True, exist_ok=True)
    docs = [f"document {i}: " + "the quick brown fox é " * (i % 7 + 1) for i in range(n)]
    k = n // 3
    (folder / 'a.txt').write_text(docs[0])  # a .txt file is one document
    (folder / 'b.jsonl').write_text(''.join(json.dumps({'text': d, 'id': i}) + '\n' for i, d in enumerate(docs[1:k])))
    with gzip.open(folder / 'c.jsonl.gz', 'wt') as f:
        f.write(''.join(json.dumps({'text': d}) + '\n' for d in docs[k:2 * k]))
    (folder / 'sub').mkdir(exist_ok=True)
    (folder / 'sub' / 'd.txt').write_text(docs[-1])  # files are read in sorted order: sub/d.txt after e.parquet
    (folder / 'notes.csv').write_text('not,text\n')  # ignored: not a format the script reads
    rest = docs[2 * k:-1]
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
        pq.write_table(pa.table({'text': rest, 'n': list(range(len(rest)))}), folder / 'e.parquet', row_group_size=4)
    except ImportError:
        (folder / 'e.jsonl').write_text(''.join(json.dumps({'text': d}) + '\n' for d in rest))
    return docs


def run_prepare(*args):
    """data/fineweb/prepare.py --tokenizer=byte args, in this process (test_train.script); its pool's workers are
    forked from it."""
    return script(SCRIPT, '--tokenizer=byte', *args)


def refusal(p, *names):
    """prepare.py's refusal: a failed status and one 'error: ...' line (beside tqdm's bar) naming each of names."""
    errors = [line for line in re.split(r'[\r\n]', p.stderr) if line.startswith('error')]
    assert p.returncode != 0 and len(errors) == 1 and all(str(n) in errors[0] for n in names), p.stderr


def split_docs(path):
    ids = np.fromfile(path, dtype=np.uint16)
    assert ids[-1] == EOT
    ends = np.flatnonzero(ids == EOT)
    return [bytes(ids[a + 1 if a >= 0 else 0:b].astype(np.uint8)).decode() for a, b in zip([-1, *ends[:-1]], ends)]


@pytest.mark.parametrize('workers', [1, 2])
def test_documents_in_order_with_end_of_text_and_every_nth_to_val(tmp_path, workers):
    docs = corpus(tmp_path / 'in')
    out = tmp_path / 'out'
    p = run_prepare('--input', str(tmp_path / 'in'), '--out_dir', str(out), '--val_every=4', f'--workers={workers}')
    assert p.returncode == 0, p.stdout + p.stderr
    assert split_docs(out / 'val.bin') == docs[3::4]
    assert split_docs(out / 'train.bin') == [d for i, d in enumerate(docs) if i % 4 != 3]
    meta = json.load(open(out / 'meta.json'))
    sizes = {s: os.path.getsize(out / f'{s}.bin') // 2 for s in ('train', 'val')}
    assert (meta['train_tokens'], meta['val_tokens'], meta['documents']) == (sizes['train'], sizes['val'], 30)
    assert meta['tokenizer'] == 'byte' and meta['vocab_size'] == 320 and meta['eot_token'] == EOT
    assert '(6 files)' in meta['source'] or '(5 files)' in meta['source']  # not the .csv
    assert sorted(os.listdir(out)) == ['meta.json', 'train.bin', 'val.bin']  # no .tmp left


def test_output_does_not_depend_on_the_number_of_workers(tmp_path):
    corpus(tmp_path / 'in', n=600)
    outs = []
    for w in (1, 3):
        out = tmp_path / f'out{w}'
        p = run_prepare('--input', str(tmp_path / 'in'), '--out_dir', str(out), '--val_every=50', f'--workers={w}')
        assert p.returncode == 0, p.stderr
        outs.append([(out / f).read_bytes() for f in ('train.bin', 'val.bin')])
    assert outs[0] == outs[1]


def test_max_tokens_stops_after_the_document_that_reaches_it(tmp_path):
    docs = corpus(tmp_path / 'in')
    out = tmp_path / 'out'
    assert run_prepare('--input', str(tmp_path / 'in'), '--out_dir', str(out), '--val_every=2',
                       '--max_tokens=500').returncode == 0
    meta = json.load(open(out / 'meta.json'))
    lengths = [len(d.encode()) + 1 for d in docs]  # bytes and end-of-text
    n = next(i + 1 for i in range(len(docs)) if sum(lengths[:i + 1]) >= 500)
    assert meta['documents'] == n and meta['train_tokens'] + meta['val_tokens'] == sum(lengths[:n])
    assert sorted(split_docs(out / 'train.bin') + split_docs(out / 'val.bin')) == sorted(docs[:n])


@pytest.mark.parametrize('case, named', [
    ('missing', ['bad']),
    ('empty', ['bad', '.txt', '.jsonl', '.jsonl.gz', '.parquet']),
    ('no_text', ['bad', '.txt', '.jsonl', '.jsonl.gz', '.parquet']),
    ('bad_jsonl', ['x.jsonl, line 2', "'text'"]),
    ('one_doc', ['--val_every']),
])
def test_bad_input_is_a_clear_error_and_loses_nothing(tmp_path, case, named):
    out = tmp_path / 'out'
    corpus(tmp_path / 'good')
    assert run_prepare('--input', str(tmp_path / 'good'), '--out_dir', str(out), '--val_every=4').returncode == 0
    before = {f: (out / f).read_bytes() for f in os.listdir(out)}
    bad = tmp_path / 'bad'
    if case != 'missing':
        bad.mkdir()
    if case == 'no_text':
        (bad / 'data.csv').write_text('a,b\n')
    if case == 'bad_jsonl':
        (bad / 'x.jsonl').write_text('{"text": "fine"}\n{"body": "no text field"}\n')
    if case == 'one_doc':
        (bad / 'x.txt').write_text('one document only')
    refusal(run_prepare('--input', str(bad), '--out_dir', str(out), '--val_every=4'), *named)
    assert {f: (out / f).read_bytes() for f in os.listdir(out)} == before  # the earlier dataset is untouched


def test_an_encoding_past_uint16_is_refused_before_writing(tmp_path):
    import tiktoken
    big = tiktoken.Encoding('big', pat_str=r"\S+|\s+", mergeable_ranks={bytes([i]): i for i in range(256)},
                            special_tokens={'<|endoftext|>': 70000})
    with pytest.raises(SystemExit, match=r'\b70,000\b'):  # the largest id, which uint16 cannot hold
        prep.prepare(iter(['a', 'b']), big, str(tmp_path / 'out'), 'test')
    assert not (tmp_path / 'out').exists() or os.listdir(tmp_path / 'out') == []


def test_a_stop_half_way_keeps_the_earlier_dataset_whole(tmp_path):
    out = tmp_path / 'out'
    corpus(tmp_path / 'in')
    assert run_prepare('--input', str(tmp_path / 'in'), '--out_dir', str(out), '--val_every=4').returncode == 0
    before = {f: (out / f).read_bytes() for f in os.listdir(out)}

    def docs():  # a corpus interrupted after 600 documents (Ctrl-C)
        for i in range(600):
            yield f'new document {i} ' * 20
        raise KeyboardInterrupt

    for workers in (1, 2):
        with pytest.raises(KeyboardInterrupt):
            prep.prepare(docs(), prep.get_encoding('byte'), str(out), 'test', val_every=4, workers=workers)
        assert {f: (out / f).read_bytes() for f in os.listdir(out)} == before  # no .tmp left, nothing replaced


def test_sigterm_half_way_keeps_the_earlier_dataset_whole(tmp_path):
    """A SIGTERM (a scheduler's stop) while the script tokenises: the earlier dataset stays, the .tmp files go."""
    out = tmp_path / 'out'
    corpus(tmp_path / 'small')
    assert run_prepare('--input', str(tmp_path / 'small'), '--out_dir', str(out), '--val_every=4').returncode == 0
    before = {f: (out / f).read_bytes() for f in os.listdir(out)}
    big = tmp_path / 'big'
    big.mkdir()
    (big / 'x.jsonl').write_text(''.join(json.dumps({'text': f'doc {i} ' * 400}) + '\n' for i in range(20000)))
    proc = subprocess.Popen([sys.executable, SCRIPT, '--tokenizer=byte', '--input', str(big), '--out_dir', str(out),
                             '--workers=2'], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    import time
    t0 = time.time()
    while not (out / 'train.bin.tmp').exists() or (out / 'train.bin.tmp').stat().st_size == 0:
        assert proc.poll() is None and time.time() - t0 < 60, 'the script ended before it could be stopped'
        time.sleep(0.05)
    proc.terminate()
    _, err = proc.communicate(timeout=60)
    assert proc.returncode != 0, err
    assert {f: (out / f).read_bytes() for f in os.listdir(out)} == before


def test_hub_source_streams_through_datasets(tmp_path, monkeypatch):
    """--source reads the hub through `datasets` (optional, imported only there): stubbed here, no network."""
    import types
    calls = []

    def load_dataset(name, config, split, streaming):
        calls.append((name, config, split, streaming))
        return iter([{'text': 'first web page'}, {'text': 'second web page'}, {'text': 'third'}])

    monkeypatch.setitem(sys.modules, 'datasets', types.SimpleNamespace(load_dataset=load_dataset))
    out = tmp_path / 'out'
    prep.main(['--source', 'fineweb-edu', '--tokenizer=byte', '--out_dir', str(out), '--val_every=3', '--workers=1'])
    assert calls == [('HuggingFaceFW/fineweb-edu', 'sample-10BT', 'train', True)]
    assert split_docs(out / 'val.bin') == ['third'] and split_docs(out / 'train.bin') == ['first web page',
                                                                                         'second web page']
    assert json.load(open(out / 'meta.json'))['source'] == 'HuggingFaceFW/fineweb-edu/sample-10BT'
    monkeypatch.setitem(sys.modules, 'datasets', None)  # not installed
    with pytest.raises(SystemExit, match='pip install datasets'):
        prep.main(['--source', 'openwebtext', '--tokenizer=byte', '--out_dir', str(out)])


VARIANTS = ['nanogpt', 'diff', 'diff_sym', 'sym', 'gated', 'softmax1', 'sym_noself']


@pytest.fixture(scope='module')
def web_tokens(tmp_path_factory):
    d = tmp_path_factory.mktemp('web')
    corpus(d / 'in', n=200)
    p = run_prepare('--input', str(d / 'in'), '--out_dir', str(d / 'data'), '--val_every=10')
    assert p.returncode == 0, p.stderr
    return d / 'data'


@pytest.mark.parametrize('variant', VARIANTS)
def test_gpt2_config_trains_two_steps_on_web_tokens(tmp_path, web_tokens, variant):
    """Each 124M config as written (attention, optimiser, accumulation), shrunk in size only, for 2 steps on the
    prepared tokens; --dataset takes a path to a prepared folder."""
    out = tmp_path / 'o'
    shrink = ['--n_layer=2', '--n_embd=48', '--n_head=2', '--block_size=32', '--batch_size=2',
              '--gradient_accumulation_steps=2', '--max_iters=2', '--lr_decay_iters=2', '--warmup_iters=1',
              '--eval_interval=2', '--eval_iters=2', '--device=cpu', '--dtype=float32']
    p = cli(f'configs/{variant}_124M.py', f'--dataset={web_tokens}', *shrink, f'--out_dir={out}')
    assert p.returncode == 0, p.stdout + p.stderr
    s = json.load(open(out / 'summary.json'))
    c = s['config']
    assert s['finished'] and s['iter'] == 2 and np.isfinite(s['final_val_loss'])
    assert c['vocab_size'] == 320 and c['learning_rate'] == 6e-4 and c['beta2'] == 0.95  # meta.json; base_gpt2.py
    assert s['final_val_loss'] < np.log(320) + 0.5  # about uniform over the vocabulary after 2 steps


def test_the_124M_diff_configs_are_laid_out_as_the_paper():
    """configs/diff_124M.py and diff_sym_124M.py halve the number of heads, not the head size: each differential
    head's query/key sub-heads are the baseline's head size (64), its value twice that, and the parameters match the
    baseline's (Diff: + the lambdas and subln weights; Diff+Sym: Sym's, + the same)."""
    import config
    from model import GPT, GPTConfig

    def model(variant):
        cfg = config.parse_config([os.path.join(ROOT, 'configs', f'{variant}_124M.py'), '--vocab_size=50304'])
        return GPTConfig(**{k: cfg[k] for k in config.MODEL_KEYS})

    base, diff, diff_sym, sym = (model(v) for v in ('nanogpt', 'diff', 'diff_sym', 'sym'))
    for d in (diff, diff_sym):
        assert d.attn == 'diff' and d.head_dim == base.head_dim == base.n_embd // base.n_head == 64
        assert d.n_head == base.n_head // 2
    import torch
    with torch.device('meta'):  # shapes only: no 124M weights drawn
        count = {name: GPT(c).get_num_params() for name, c in (('base', base), ('diff', diff), ('diff_sym', diff_sym),
                                                               ('sym', sym))}
    extra = base.n_layer * (4 * 64 + 2 * 64)  # lambda_q1, k1, q2, k2 (64 each) and subln (128) a layer
    assert count['diff'] - count['base'] == extra and count['diff_sym'] - count['sym'] == extra


def test_fineweb_prepare_without_a_source_says_what_to_give_not_argparse_usage():
    """train.py --dataset=fineweb runs data/fineweb/prepare.py with no arguments: it printed argparse's usage; now
    one line says which source to give."""
    p = script(os.path.join(ROOT, 'data', 'fineweb', 'prepare.py'))
    refusal(p, '--input DIR', '--source')
    one_line(p.stderr)
