"""What a new user meets: a model field added to GPTConfig, a config left out, a stop during start-up, a vocabulary that
does not fit the data, a resume with another variant's config, a run's record of its code, a stable MFU, progress
in a log file and in a terminal, float16 on a CPU, a damaged checkpoint, a missing include, a misspelt dataset and an
offline BPE prepare."""
import hashlib
import io
import json
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
import dataset  # noqa: E402
import hardware  # noqa: E402
import rundir  # noqa: E402
import train  # noqa: E402
from checkpoint import load_checkpoint  # noqa: E402
from test_train import TINY, cli, read_log, script, train_cli  # noqa: E402

pytestmark = pytest.mark.usefixtures('one_thread', 'peak_once')  # conftest.py


@pytest.fixture(scope='module', autouse=True)
def shakespeare_char():
    dataset.ensure_data('shakespeare_char')


@pytest.fixture(scope='module')
def run(tmp_path_factory):
    """A finished 4-step run to resume and sample from (its checkpoint is copied, never changed)."""
    out = tmp_path_factory.mktemp('run') / 'o'
    train_cli(out, '--max_iters=4', '--eval_interval=4', '--lr_decay_iters=8')
    return out


def bigram_backcopy(to, block_size):
    """Bigram-Backcopy records (data/bigram_backcopy/prepare.py on tiny Shakespeare: its 65 characters and BOS, 66
    token ids) of block_size + 1 tokens, a few of them, in a folder of their own."""
    d = to / 'bigram_backcopy'
    d.mkdir(parents=True)
    shutil.copy(os.path.join(ROOT, 'data', 'bigram_backcopy', 'prepare.py'), d / 'prepare.py')
    p = subprocess.run([sys.executable, str(d / 'prepare.py'), f'--block_size={block_size}', '--n_train=64',
                        '--n_val=16', '--input', os.path.join(ROOT, 'data', 'shakespeare_char', 'input.txt')],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0 and json.load(open(d / 'meta.json'))['vocab_size'] == 66, p.stderr
    return d


def copy_run(run, to, edit=None):
    """A copy of the run's folder, its ckpt.pt passed through edit(ckpt) first."""
    to.mkdir()
    ckpt = torch.load(run / 'ckpt.pt', map_location='cpu', weights_only=True)
    if edit:
        edit(ckpt)
    torch.save(ckpt, to / 'ckpt.pt')
    (to / 'log.jsonl').write_bytes((run / 'log.jsonl').read_bytes())
    return to


def sample(out):
    return script('sample.py', f'--out_dir={out}', '--num_samples=1', '--max_new_tokens=5', '--device=cpu')


def test_a_checkpoint_of_older_code_takes_a_new_fields_default(run, tmp_path):
    """A GPTConfig field the checkpoint lacks (here rope_theta, as if it were added after the run) takes its default:
    the resume trains on and sample.py samples."""
    old = copy_run(run, tmp_path / 'old', lambda c: c['model_args'].pop('rope_theta'))
    p = train_cli(old, '--max_iters=6', '--eval_interval=4', '--lr_decay_iters=8', '--init_from=resume')
    assert load_checkpoint(str(old / 'ckpt.pt'))[1]['iter_num'] == 6, p.stderr
    assert sample(old).returncode == 0


@pytest.mark.parametrize('what', ['field', 'weight'])
def test_a_checkpoint_of_newer_code_is_one_line_naming_what_this_code_lacks(run, tmp_path, what):
    def edit(c):
        if what == 'field':
            c['model_args']['qk_norm'] = True
        else:
            c['model'] = dict(c['model'], **{'transformer.h.0.attn.q_norm.weight': torch.ones(8)})
    new = copy_run(run, tmp_path / 'new', edit)
    name = 'qk_norm' if what == 'field' else 'transformer.h.0.attn.q_norm.weight'
    for p in (train_cli(new, '--max_iters=6', '--init_from=resume', check=False), sample(new)):
        assert p.returncode == 1 and name in p.stderr and 'Traceback' not in p.stderr, p.stderr
        assert len(p.stderr.strip().splitlines()) == 1 or p.stderr.count('error') == 1, p.stderr


def test_no_config_is_refused_naming_the_configs(tmp_path):
    """Without a config file and without a model shape, the defaults are GPT-2 small's 85M parameters, hours a step
    on a CPU: refused before anything is made, naming a config to use."""
    p = cli(f'--out_dir={tmp_path / "o"}')
    assert p.returncode == 1 and 'configs/diff_sym_6L.py' in p.stderr and 'Traceback' not in p.stderr, p.stderr
    assert not (tmp_path / 'o').exists()


def test_a_stop_during_start_up_lands_within_seconds(tmp_path):
    """Ctrl-C while the run is still starting (here in its causality check, a few seconds of forwards of a larger
    model) stops it at once: nothing is trained yet, so there is nothing to save."""
    out = tmp_path / 'o'
    p = subprocess.Popen([sys.executable, 'train.py', *TINY, '--n_layer=6', '--n_embd=256', '--block_size=256',
                          '--batch_size=32', f'--out_dir={out}'], cwd=ROOT, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, env=dict(os.environ, PYTHONUNBUFFERED='1'))
    while 'tokens per iteration' not in p.stdout.readline():  # set up: the causality check comes next
        assert p.poll() is None, p.stderr.read()
    time.sleep(0.5)
    t0 = time.time()
    p.send_signal(signal.SIGINT)
    err = p.communicate(timeout=60)[1]
    assert time.time() - t0 < 5 and p.returncode == 130, err
    assert 'before the first step' in err and not (out / 'ckpt.pt').exists() and not (out / 'log.jsonl').exists()


def test_vocab_size_is_checked_against_the_data_and_the_checkpoint(run, tmp_path):
    p = train_cli(tmp_path / 'v', '--vocab_size=10', '--max_iters=2', check=False)
    assert p.returncode == 1 and "vocab_size=10 is below dataset 'shakespeare_char''s 65 token ids" in p.stderr
    assert 'IndexError' not in p.stderr and not (tmp_path / 'v').exists()
    # a Shakespeare run resumed on Bigram-Backcopy's data (66 ids), as a refused resume's advice (--dataset=...) does:
    # records of the run's block_size + 1 tokens, so that the vocabulary is all that does not fit
    data = bigram_backcopy(tmp_path, 32)
    bb = copy_run(run, tmp_path / 'bb')
    p = train_cli(bb, f'--dataset={data}', '--max_iters=6', '--init_from=resume', check=False)
    assert p.returncode == 1 and 'vocab_size=65' in p.stderr and f"'{data}' holds 66 token ids" in p.stderr, p.stderr
    assert 'IndexError' not in p.stderr and load_checkpoint(str(bb / 'ckpt.pt'))[1]['iter_num'] == 4, p.stderr


def test_a_resume_on_another_dataset_names_its_vocabulary_before_its_block_size(run, tmp_path):
    """The refusal above, where the other dataset's records also need another block_size (data/bigram_backcopy's
    are 129 tokens: --block_size=128, as the refused resume's advice gives): the vocabulary is named first, since
    dropping --block_size, as a refusal of the changed model key would advise, cannot make the data fit."""
    data = bigram_backcopy(tmp_path, 16)
    bb = copy_run(run, tmp_path / 'bb')
    p = train_cli(bb, f'--dataset={data}', '--block_size=16', '--max_iters=6', '--init_from=resume', check=False)
    assert p.returncode == 1 and 'vocab_size=65' in p.stderr and f"'{data}' holds 66 token ids" in p.stderr, p.stderr


def test_a_resume_refuses_another_variants_config_file(run, tmp_path):
    """The same rule wherever a model key comes from: configs/diff_3L.py on a nanogpt run is refused, as
    --attn=diff on the command line is."""
    out = copy_run(run, tmp_path / 'o')
    p = cli('configs/diff_3L.py', *TINY, f'--out_dir={out}', '--max_iters=6', '--init_from=resume')
    assert p.returncode == 1 and "attn='softmax'" in p.stderr and "gives bias=False, attn='diff'" in p.stderr, p.stderr
    assert load_checkpoint(str(out / 'ckpt.pt'))[1]['iter_num'] == 4


def test_a_run_records_its_code_and_a_stable_mfu_peak(run, tmp_path):
    """summary.json and ckpt.pt hold the commit and whether the tree was dirty; MFU's peak is stated once for a run
    and kept across its resume (a CPU's peak timed anew at each resume moved one run's MFU from 23% to 50% at
    d6d1cf7)."""
    s = json.load(open(run / 'summary.json'))
    ckpt = load_checkpoint(str(run / 'ckpt.pt'))[1]
    head = subprocess.run(['git', 'rev-parse', 'HEAD'], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    assert s['code'] == ckpt['code'] and s['code']['commit'] == head and isinstance(s['code']['dirty'], bool)
    peak = s['mfu_peak_flops']
    assert peak > 0 and ckpt['timing']['peak_flops'] == peak
    out = copy_run(run, tmp_path / 'o', lambda c: c['timing'].update(peak_flops=1e12))  # as if timed at 1 TFLOP/s
    train_cli(out, '--max_iters=6', '--eval_interval=4', '--lr_decay_iters=8', '--init_from=resume')
    assert json.load(open(out / 'summary.json'))['mfu_peak_flops'] == 1e12
    line = [r for r in read_log(out) if r['kind'] == 'train' and r['iter'] == 6][0]
    model = load_checkpoint(str(out / 'ckpt.pt'))[0]
    assert line['mfu'] == pytest.approx(model.flops_per_token(32) * line['tokens_per_sec'] / 1e12)  # against it


def test_progress_lines_when_the_output_is_not_a_terminal(tmp_path, monkeypatch, capsys):
    """Where no bar shows it (a sweep's train.log), a line says how far the run is, with an ETA, every
    PROGRESS_EVERY seconds: in training and inside an evaluation."""
    monkeypatch.setattr(rundir.RunLog, 'PROGRESS_EVERY', 0.0)
    assert train.main([*TINY, f'--out_dir={tmp_path / "o"}', '--max_iters=3', '--eval_interval=3',
                       '--eval_iters=3', '--log_interval=10']) == 0
    out = capsys.readouterr().out
    assert 'progress: iteration 3/3, ETA 0s' in out, out
    assert 'progress: evaluation at iteration 3, batch 6/6' in out, out


def test_a_resume_refuses_a_config_that_leaves_the_checkpoints_model_keys_at_their_defaults(tmp_path):
    """A Diff+Sym run resumed with the nanoGPT config (which sets no attention key: all are its defaults) or the Sym
    config (symmetric=True, attn left at softmax) went on training the Diff+Sym model; now each key that differs is
    named. Its own config resumes it bit-exact, as a straight run."""
    common = [*TINY, '--max_iters=6', '--lr_decay_iters=6', '--eval_interval=3']
    straight, split = tmp_path / 'straight', tmp_path / 'split'
    cli('configs/diff_sym_3L.py', *common, f'--out_dir={straight}', check=True)
    cli('configs/diff_sym_3L.py', *common, f'--out_dir={split}', '--max_iters=3', check=True)
    for other, named in (('nanogpt_3L', ("attn='diff'", 'symmetric=True', 'lambda_init_depth_offset=1')),
                         ('sym_3L', ("attn='diff'", 'lambda_init_depth_offset=1'))):
        p = cli(f'configs/{other}.py', *common, f'--out_dir={split}', '--init_from=resume')
        assert p.returncode == 1 and all(k in p.stderr for k in named), p.stderr
        assert "--attn='diff'" in p.stderr and 'Traceback' not in p.stderr, p.stderr  # what to give instead
    assert load_checkpoint(str(split / 'ckpt.pt'))[1]['iter_num'] == 3  # nothing trained
    cli('configs/diff_sym_3L.py', *common, f'--out_dir={split}', '--init_from=resume', check=True)
    for a, b in zip(load_checkpoint(str(straight / 'ckpt.pt'))[0].parameters(),
                    load_checkpoint(str(split / 'ckpt.pt'))[0].parameters()):
        assert torch.equal(a, b)


def test_float16_on_a_cpu_is_refused_naming_the_dtypes_that_work(tmp_path):
    """--dtype=float16 on a CPU sat 7 minutes in its first evaluation (fceb1ab): refused before anything is made."""
    p = train_cli(tmp_path / 'o', '--max_iters=2', '--dtype=float16', check=False)
    assert p.returncode == 1 and "dtype='float16' on a CPU" in p.stderr and '--dtype=float32' in p.stderr, p.stderr
    assert len(p.stderr.strip().splitlines()) == 1 and not (tmp_path / 'o').exists()


def test_a_damaged_checkpoint_says_what_to_do_and_not_torchs_weights_only_advice(run, tmp_path):
    """torch's text for an unreadable file advised weights_only=False (arbitrary code, and no mend for a damaged
    file); now the resume names what is left: an earlier copy, best.pt's weights, a new run."""
    out = copy_run(run, tmp_path / 'o')
    (out / 'best.pt').write_bytes((run / 'best.pt').read_bytes())
    (out / 'ckpt.pt').write_bytes(os.urandom(3000))
    p = train_cli(out, '--max_iters=6', '--init_from=resume', check=False)
    assert p.returncode == 1 and 'not a readable checkpoint' in p.stderr and 'weights_only' not in p.stderr, p.stderr
    assert 'best.pt' in p.stderr and '--init_from=scratch with another --out_dir' in p.stderr, p.stderr
    assert len(p.stderr.strip().splitlines()) == 1
    p = sample(out)
    assert p.returncode != 0 and 'weights_only' not in p.stderr and 'best.pt' in p.stderr, p.stderr
    # a damaged best.pt points to ckpt.pt, not to itself
    (out / 'ckpt.pt').write_bytes((run / 'ckpt.pt').read_bytes())
    (out / 'best.pt').write_bytes(os.urandom(3000))
    p = script('sample.py', f'--ckpt={out / "best.pt"}', '--num_samples=1', '--max_new_tokens=2', '--device=cpu')
    assert p.returncode != 0 and "or the run's ckpt.pt" in p.stderr and "or the run's best.pt" not in p.stderr, p.stderr


def test_a_missing_include_names_the_including_file_and_line(tmp_path):
    """[Errno 2] named the missing file only: now the including file and its line, that include paths are relative
    to it, and what was probably meant (a close name; for a config copied out of configs/, the path back to it)."""
    (tmp_path / 'typo.py').write_text("n_layer = 2\ninclude('../configs/base_shakespeare_charr.py')\n")
    shutil.copy(os.path.join(ROOT, 'configs', 'nanogpt_3L.py'), tmp_path / 'copied.py')
    p = cli(tmp_path / 'typo.py', f'--out_dir={tmp_path / "o"}')
    assert p.returncode == 1 and f'{tmp_path / "typo.py"}, line 2' in p.stderr, p.stderr
    assert 'relative to the including file' in p.stderr and 'Errno' not in p.stderr, p.stderr
    p = cli(tmp_path / 'copied.py', f'--out_dir={tmp_path / "o"}')
    rel = os.path.relpath(os.path.join(ROOT, 'configs', 'base_shakespeare_char.py'), tmp_path)
    assert p.returncode == 1 and 'copied.py, line 2' in p.stderr and f"include('{rel}')" in p.stderr, p.stderr
    assert not (tmp_path / 'o').exists()


class Terminal(io.StringIO):
    def isatty(self):
        return True


def test_a_terminal_shows_evaluation_progress_on_its_bar(tmp_path, monkeypatch):
    """With a tqdm bar the progress lines are off, and the bar counts iterations only: an evaluation left it still.
    Now the bar's postfix says which batch of the evaluation it is at."""
    term = Terminal()
    monkeypatch.setattr(sys, 'stderr', term)
    assert train.main([*TINY, f'--out_dir={tmp_path / "o"}', '--max_iters=2', '--eval_interval=2',
                       '--eval_iters=3']) == 0
    assert 'evaluation at iteration 0, batch 1/6' in term.getvalue(), term.getvalue()
    assert 'progress:' not in term.getvalue()


def test_a_cpus_mfu_peak_is_the_highest_timed_on_the_machine_and_named(tmp_path, monkeypatch, capsys):
    """A CPU's peak used as timed moved with the load (0.057 to 0.437 TFLOP/s for one config, at fceb1ab); timed once
    and kept, a figure timed on a busy machine stayed (0.056 against 0.149 quiet: every later run logged an MFU of
    139%). Now each start times it and the cache keeps the highest per CPU, thread count and dtype: a slower timing
    never lowers it, a faster one raises it; the log and summary.json say so."""
    monkeypatch.setenv('XDG_CACHE_HOME', str(tmp_path / 'cache'))
    timings = iter([0.5e11, 1e11, 0.7e11, 9e11, 2e11, 1e11])  # busy first, then quiet, then busy again
    monkeypatch.setattr(hardware, 'time_matmul', lambda dtype: next(timings))
    monkeypatch.setattr(rundir, 'peak', hardware.peak)  # not the module's once-timed peak (conftest)
    assert [hardware.peak('cpu', 'float32')[0] for _ in range(3)] == [0.5e11, 1e11, 1e11]
    threads = torch.get_num_threads()
    torch.set_num_threads(threads + 1)  # another thread count is another peak
    try:
        assert hardware.peak('cpu', 'float32')[0] == 9e11
    finally:
        torch.set_num_threads(threads)
    assert hardware.peak('cpu', 'float32')[0] == 2e11  # this thread count's figure, raised
    assert train.main([*TINY, f'--out_dir={tmp_path / "o"}', '--max_iters=2', '--eval_interval=2']) == 0
    s = json.load(open(tmp_path / 'o' / 'summary.json'))
    path = str(tmp_path / 'cache' / 'attn-gpt' / 'cpu_peak_flops.json')
    assert s['mfu_peak_flops'] == 2e11 and 'the highest of its timings' in s['mfu_peak_source']
    assert path in s['mfu_peak_source']
    assert f"MFU against 0.2 TFLOP/s (this CPU's float32 matmul peak" in capsys.readouterr().out
    assert len(json.load(open(path))) == 2


def test_a_misspelt_dataset_gets_a_did_you_mean(tmp_path):
    p = train_cli(tmp_path / 'o', '--dataset=shakespeare_chr', check=False)
    assert p.returncode == 1 and 'did you mean shakespeare_char?' in p.stderr, p.stderr
    assert not (tmp_path / 'o').exists()


def test_an_offline_bpe_prepare_names_the_missing_tiktoken_file_and_leaves_no_lock(tmp_path, monkeypatch, capfd):
    """data/shakespeare/prepare.py offline with an empty tiktoken cache: its error names the file the cache lacks and
    how to supply it; train.py's line no longer suggests --input FILE (no help there), and the folder keeps no
    .prepare.lock."""
    for name in ('shakespeare', 'shakespeare_char'):
        (tmp_path / name).mkdir()
        shutil.copy(os.path.join(ROOT, 'data', name, 'prepare.py'), tmp_path / name / 'prepare.py')
    monkeypatch.setattr(dataset, 'data_dir', lambda name: str(tmp_path / name))
    monkeypatch.setenv('PYTHONPATH', ROOT)  # the copied prepare.py finds dataset.py
    monkeypatch.setenv('TIKTOKEN_CACHE_DIR', str(tmp_path / 'empty_cache'))
    monkeypatch.setenv('HTTPS_PROXY', 'http://127.0.0.1:9')  # offline: nothing listens there
    with pytest.raises(FileNotFoundError) as e:
        dataset.ensure_data('shakespeare')
    assert 'failed' in str(e.value) and '--input' not in str(e.value)
    err = capfd.readouterr().err
    url = 'https://openaipublic.blob.core.windows.net/gpt-2/encodings/main/vocab.bpe'
    assert f"cache ({tmp_path / 'empty_cache'}) lacks the gpt2 encoding's {url}" in err, err
    assert 'TIKTOKEN_CACHE_DIR=DIR' in err and hashlib.sha1(url.encode()).hexdigest() in err, err
    assert sorted(os.listdir(tmp_path / 'shakespeare')) == ['prepare.py']
