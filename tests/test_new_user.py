"""What a new user meets: a model field added to GPTConfig, a config left out, a stop during start-up, a vocabulary that
does not fit the data, a resume with another variant's config, a run's record of its code, a stable MFU, progress
in a log file and in a terminal, float16 on a CPU, a damaged checkpoint, a missing include, a misspelt dataset and an
offline BPE prepare."""
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys

import pytest
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
import dataset  # noqa: E402
import hardware  # noqa: E402
import rundir  # noqa: E402
import train  # noqa: E402
from checkpoint import load_checkpoint  # noqa: E402
from test_train import TINY, cli, one_line, read_log, refused, script, train_cli  # noqa: E402

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
        refused(p, name)


def test_no_config_is_refused_naming_the_configs(tmp_path):
    """Without a config file and without a model shape, the defaults are GPT-2 small's 85M parameters, hours a step
    on a CPU: refused before anything is made, naming a config to use."""
    refused(cli(f'--out_dir={tmp_path / "o"}'), 'configs/diff_sym_6L.py')
    assert not (tmp_path / 'o').exists()


def test_vocab_size_is_checked_against_the_data_and_the_checkpoint(run, tmp_path, small_bigram_backcopy):
    refused(train_cli(tmp_path / 'v', '--vocab_size=10', '--max_iters=2', check=False), 'vocab_size=10',
            "'shakespeare_char'", '65')
    assert not (tmp_path / 'v').exists()
    # a Shakespeare run resumed on Bigram-Backcopy's data (66 ids), as a refused resume's advice (--dataset=...) does:
    # records of the run's block_size + 1 tokens, so that the vocabulary is all that does not fit
    data = small_bigram_backcopy(32)
    bb = copy_run(run, tmp_path / 'bb')
    refused(train_cli(bb, f'--dataset={data}', '--max_iters=6', '--init_from=resume', check=False), 'vocab_size=65',
            f"'{data}'", '66')
    assert load_checkpoint(str(bb / 'ckpt.pt'))[1]['iter_num'] == 4


def test_a_resume_on_another_dataset_names_its_vocabulary_before_its_block_size(run, tmp_path,
                                                                                 small_bigram_backcopy):
    """The refusal above, where the other dataset's records also need another block_size (--block_size=16 for
    these records of 17 tokens, as the refused resume's advice gives): the vocabulary is named first, since
    dropping --block_size, as a refusal of the changed model key would advise, cannot make the data fit."""
    data = small_bigram_backcopy(16)
    bb = copy_run(run, tmp_path / 'bb')
    p = train_cli(bb, f'--dataset={data}', '--block_size=16', '--max_iters=6', '--init_from=resume', check=False)
    refused(p, 'vocab_size=65', f"'{data}'", '66')


def test_a_resume_refuses_another_variants_config_file(run, tmp_path):
    """The same rule wherever a model key comes from: configs/diff_3L.py on a nanogpt run is refused, as
    --attn=diff on the command line is."""
    out = copy_run(run, tmp_path / 'o')
    refused(cli('configs/diff_3L.py', *TINY, f'--out_dir={out}', '--max_iters=6', '--init_from=resume'),
            "attn='softmax'", "attn='diff'", 'bias=False')
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
    out = capsys.readouterr().out.splitlines()
    assert any('iteration 3/3' in line for line in out), out  # training's, and each evaluation's batches (2 x 3)
    assert any('iteration 3' in line and 'batch 6/6' in line for line in out), out


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
        refused(cli(f'configs/{other}.py', *common, f'--out_dir={split}', '--init_from=resume'), *named,
                "--attn='diff'")  # what to give instead
    assert load_checkpoint(str(split / 'ckpt.pt'))[1]['iter_num'] == 3  # nothing trained
    cli('configs/diff_sym_3L.py', *common, f'--out_dir={split}', '--init_from=resume', check=True)
    for a, b in zip(load_checkpoint(str(straight / 'ckpt.pt'))[0].parameters(),
                    load_checkpoint(str(split / 'ckpt.pt'))[0].parameters()):
        assert torch.equal(a, b)


def test_float16_on_a_cpu_is_refused_naming_the_dtypes_that_work(tmp_path):
    """--dtype=float16 on a CPU sat 7 minutes in its first evaluation (fceb1ab): refused before anything is made."""
    p = train_cli(tmp_path / 'o', '--max_iters=2', '--dtype=float16', check=False)
    refused(p, "dtype='float16'", '--dtype=float32', '--dtype=bfloat16')
    one_line(p.stderr)
    assert not (tmp_path / 'o').exists()


def test_a_damaged_checkpoint_says_what_to_do_and_not_torchs_weights_only_advice(run, tmp_path):
    """torch's text for an unreadable file advised weights_only=False (arbitrary code, and no mend for a damaged
    file); now the resume names what is left: an earlier copy, best.pt's weights, a new run."""
    out = copy_run(run, tmp_path / 'o')
    (out / 'best.pt').write_bytes((run / 'best.pt').read_bytes())
    (out / 'ckpt.pt').write_bytes(os.urandom(3000))
    p = train_cli(out, '--max_iters=6', '--init_from=resume', check=False)  # one line: not torch's text
    refused(p, out / 'ckpt.pt', 'best.pt', '--init_from=scratch', '--out_dir')
    one_line(p.stderr)
    refused(sample(out), out / 'ckpt.pt', 'best.pt')
    # a damaged best.pt points to ckpt.pt, the file there is
    (out / 'ckpt.pt').write_bytes((run / 'ckpt.pt').read_bytes())
    (out / 'best.pt').write_bytes(os.urandom(3000))
    p = script('sample.py', f'--ckpt={out / "best.pt"}', '--num_samples=1', '--max_new_tokens=2', '--device=cpu')
    refused(p, out / 'best.pt', 'ckpt.pt')


def test_a_missing_include_names_the_including_file_and_line(tmp_path):
    """[Errno 2] named the missing file only: now the including file and its line, that include paths are relative
    to it, and what was probably meant (a close name; for a config copied out of configs/, the path back to it)."""
    (tmp_path / 'typo.py').write_text("n_layer = 2\ninclude('../configs/base_shakespeare_charr.py')\n")
    shutil.copy(os.path.join(ROOT, 'configs', 'nanogpt_3L.py'), tmp_path / 'copied.py')
    refused(cli(tmp_path / 'typo.py', f'--out_dir={tmp_path / "o"}'), f'{tmp_path / "typo.py"}, line 2',
            f'{tmp_path}/../configs/base_shakespeare_charr.py', f'({tmp_path})')  # the path looked for, from where
    rel = os.path.relpath(os.path.join(ROOT, 'configs', 'base_shakespeare_char.py'), tmp_path)
    refused(cli(tmp_path / 'copied.py', f'--out_dir={tmp_path / "o"}'), 'copied.py, line 2', f"include('{rel}')")
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
    assert any('iteration 0' in part and 'batch 1/6' in part for part in term.getvalue().split('\r')), term.getvalue()


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
    assert s['mfu_peak_flops'] == 2e11 and path in s['mfu_peak_source']  # the figure, and where it is kept
    assert '0.2 TFLOP/s' in capsys.readouterr().out
    assert len(json.load(open(path))) == 2


def test_a_misspelt_dataset_gets_a_did_you_mean(tmp_path):
    refused(train_cli(tmp_path / 'o', '--dataset=shakespeare_chr', check=False), "'shakespeare_chr'",
            'shakespeare_char?')
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
    with pytest.raises(FileNotFoundError, match='shakespeare'):
        dataset.ensure_data('shakespeare')
    err = capfd.readouterr().err
    url = 'https://openaipublic.blob.core.windows.net/gpt-2/encodings/main/vocab.bpe'
    assert f"cache ({tmp_path / 'empty_cache'}) lacks the gpt2 encoding's {url}" in err, err
    assert 'TIKTOKEN_CACHE_DIR=DIR' in err and hashlib.sha1(url.encode()).hexdigest() in err, err
    assert sorted(os.listdir(tmp_path / 'shakespeare')) == ['prepare.py']
