"""train.py under faults: NaN on any rank, stops under torchrun, one rank's error, a full disk, two runs in one
folder, a torn log; docs/details.md's "What survives what" sums them up. Each test fails without its fix (commit
89750e4 on, 2026-11-24)."""
import json
import math
import multiprocessing
import os
import re
import shutil
import signal
import subprocess
import sys
import time

import pytest
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
import checkpoint  # noqa: E402
import dataset  # noqa: E402
import rundir  # noqa: E402
import train  # noqa: E402
from checkpoint import load_checkpoint  # noqa: E402
from test_train import (TIMING, TINY, finished, forked, forked_ranks, read_log, refused, stub,  # noqa: E402
                        train_cli, wait_for_training)

pytestmark = pytest.mark.usefixtures('one_thread', 'peak_once')  # conftest.py

ENV1 = dict(os.environ, OMP_NUM_THREADS='1')
TORCHRUN = [sys.executable, '-m', 'torch.distributed.run', '--standalone', '--nproc_per_node=2']


@pytest.fixture(scope='module', autouse=True)
def shakespeare_char():
    dataset.ensure_data('shakespeare_char')


def finite_checkpoint(path):
    """A checkpoint whose weights and recorded losses are all finite."""
    m, ckpt = load_checkpoint(str(path))
    losses = [v for k, v in ckpt['last_eval'].items() if k.endswith('loss')] + [ckpt['best_val_loss']]
    return all(torch.isfinite(p).all() for p in m.parameters()) and all(math.isfinite(v) for v in losses)


def no_nan_in_log(out):
    return all(math.isfinite(v) for r in read_log(out) for v in r.values() if isinstance(v, float))


# --- 1. nothing non-finite is saved or logged

def test_a_diverging_run_saves_no_nan_checkpoint(tmp_path):
    out = tmp_path / 'o'
    # diff: its lambdas, logged from the updated weights, must not carry the NaN into log.jsonl either
    refused(train_cli(out, '--max_iters=4', '--eval_interval=1', '--learning_rate=1e30', '--attn=diff', check=False))
    for name in ('ckpt.pt', 'best.pt'):
        assert not (out / name).exists() or finite_checkpoint(out / name), name
    assert no_nan_in_log(out)


POISON_RANK1_AT_2 = '''
forward, step = model.GPT.forward, train.Run.train_step
def poisoned_step(run):
    if run.env.rank == 1 and run.iter_num == 2:  # rank 1's loss is NaN at iteration 2, rank 0's is not
        model.GPT.forward = lambda self, idx, targets=None: (lambda o: (o[0], o[1] * float('nan')))(
            forward(self, idx, targets))
    try:
        return step(run)
    finally:
        model.GPT.forward = forward
train.Run.train_step = poisoned_step
'''


def test_nan_on_another_rank_stops_every_rank_before_the_save(tmp_path, capfd):
    """Rank 1's loss is NaN in the step from iteration 2 to 3; the eval at 3 comes before any log step. Every rank
    stops there naming iteration 3, as the log would, and no checkpoint is written with the NaN weights that the
    all-reduce spread."""
    out = tmp_path / 'o'
    codes = forked_ranks(POISON_RANK1_AT_2, [*TINY, f'--out_dir={out}', '--max_iters=6', '--eval_interval=3',
                                             '--log_interval=100', '--gradient_accumulation_steps=2'])
    err = capfd.readouterr().err
    assert codes == [1, 1] and err.count('iteration 3') == 1, err  # every rank leaves; named once, by rank 0
    assert not (out / 'ckpt.pt').exists() and not (out / 'best.pt').exists()
    assert no_nan_in_log(out)


# --- 2. a stop under torchrun reaches every rank within a step

MARK_AT_5 = '''
step = train.Run.train_step
def step_and_mark(run):
    if run.iter_num == 5 and run.env.master:  # in training, and no log step for 100000 more
        open(os.environ['MARK'], 'w').close()
    return step(run)
train.Run.train_step = step_and_mark
'''


def test_sigterm_to_torchrun_saves_within_seconds_and_the_run_resumes(tmp_path):
    """torchrun passes its SIGTERM to each worker; the ranks agree to stop at the same step (one all-reduce of their
    flags) and rank 0 saves ckpt.pt there, within the grace torchrun gives them before a SIGKILL; the command it
    prints is torchrun's. Then the run resumes from it."""
    out, mark = tmp_path / 'o', tmp_path / 'training'
    p = subprocess.Popen([*TORCHRUN, stub(tmp_path, MARK_AT_5), *TINY, f'--out_dir={out}', '--max_iters=1000000',
                          '--eval_interval=1000000', '--log_interval=100000', '--gradient_accumulation_steps=2'],
                         cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         env=dict(ENV1, MARK=str(mark)))
    deadline = time.time() + 300
    while not mark.exists() and p.poll() is None and time.time() < deadline:
        time.sleep(0.1)
    p.send_signal(signal.SIGTERM)
    output = p.communicate(timeout=120)[0]
    _, ckpt = load_checkpoint(str(out / 'ckpt.pt'))
    assert ckpt['iter_num'] >= 5 and not (out / 'summary.json').exists(), output
    assert f"torchrun --standalone --nproc_per_node=2 train.py --out_dir={out} --init_from=resume" in output, output
    n = ckpt['iter_num'] + 2
    train_cli(out, f'--max_iters={n}', '--eval_interval=1000000', '--gradient_accumulation_steps=2',
              '--init_from=resume')
    assert load_checkpoint(str(out / 'ckpt.pt'))[1]['iter_num'] == n


# --- 3. an error on rank 0 alone: every rank leaves with one message

RECORD_ERRORS = '''
main = train.main
def recording_main(argv):  # each rank writes down the error it left with
    try:
        return main(argv)
    except Exception as e:
        with open(os.environ['ERRORS_DIR'] + f"/rank{os.environ['RANK']}", 'w') as f:
            f.write(f"{type(e).__name__}: {e}")
        raise
train.main = recording_main
'''


def test_an_error_found_by_rank_0_ends_every_rank_with_one_message(tmp_path, capfd):
    """A scratch run into a folder with a checkpoint: rank 0 finds it before any collective; every rank must leave
    with that error (not wait in a collective for rank 0, or die there with a gloo error), printed once."""
    out = tmp_path / 'o'
    train_cli(out, '--max_iters=2', '--eval_interval=2')
    capfd.readouterr()
    codes = forked_ranks(RECORD_ERRORS, [*TINY, f'--out_dir={out}', '--max_iters=2', '--gradient_accumulation_steps=2'],
                         env=dict(ERRORS_DIR=str(tmp_path)))
    text = ''.join(capfd.readouterr())
    assert codes == [1, 1] and text.count('--init_from=resume') == 1, text  # its fix, printed once
    for rank in (0, 1):  # each with rank 0's error, not one of its own in a collective
        assert (tmp_path / f'rank{rank}').read_text().startswith('FileExistsError: '), text


# --- 4. a full disk or an unwritable out_dir

def test_a_full_disk_keeps_the_run_resumable_and_leaves_no_tmp(tmp_path):
    out = tmp_path / 'o'
    out.mkdir()
    os.symlink('/dev/full', out / 'ckpt.pt.tmp')  # every write of ckpt.pt fails with ENOSPC
    refused(train_cli(out, '--max_iters=4', '--eval_interval=2', check=False), out / 'ckpt.pt')
    assert not os.path.lexists(out / 'ckpt.pt.tmp')  # the partial file is removed
    assert not (out / 'best.pt').exists()  # ckpt.pt first: never a best.pt without its ckpt.pt
    train_cli(out, '--max_iters=4', '--eval_interval=2')  # so the run can simply start again


def test_a_stop_between_ckpt_and_best_is_mended_on_resume(tmp_path):
    out = tmp_path / 'o'
    out.mkdir()
    os.symlink('/dev/full', out / 'best.pt.tmp')  # ckpt.pt at iteration 2 is written, then best.pt fails
    refused(train_cli(out, '--max_iters=4', '--eval_interval=2', check=False), out / 'best.pt')
    _, ckpt = load_checkpoint(str(out / 'ckpt.pt'))
    assert ckpt['iter_num'] == 2 and not (out / 'best.pt').exists()
    train_cli(out, '--max_iters=4', '--eval_interval=2', '--init_from=resume')
    evals = [r for r in read_log(out) if r['kind'] == 'eval']
    best = min(evals, key=lambda r: r['val_loss'])
    _, b = load_checkpoint(str(out / 'best.pt'))
    assert (b['iter_num'], b['best_val_loss']) == (best['iter'], best['val_loss'])


def test_an_out_dir_that_cannot_be_made_or_written_is_a_clear_error(tmp_path, monkeypatch):
    (tmp_path / 'file').write_text('x')
    refused(train_cli(tmp_path / 'file' / 'run', '--max_iters=2', check=False), tmp_path / 'file' / 'run')
    monkeypatch.setattr(rundir.os, 'access', lambda path, mode: False)  # a read-only folder (tests run as root)
    with pytest.raises(rundir.RunError, match=re.escape(str(tmp_path / 'ro'))):
        train.main([*TINY, f'--out_dir={tmp_path / "ro"}', '--max_iters=2'])


KILL_AT_8 = '''
step = train.Run.train_step
def step_or_die(run):
    if run.iter_num == 8:  # a hard kill (the OOM killer, a lost node): no handler runs, nothing is saved
        os.kill(os.getpid(), 9)
    return step(run)
train.Run.train_step = step_or_die
'''


# an eval at 4 and 8 that does not improve (lr 0) writes no ckpt.pt with always_save_checkpoint=False: ckpt_interval's
# save must then come after the eval, or the resume would evaluate (and log) iteration 8 twice
NO_EVAL_SAVE = ['--eval_interval=4', '--always_save_checkpoint=False', '--learning_rate=0', '--decay_lr=False']


@pytest.mark.parametrize('interval,extra,saved_at', [(3, [], 6), (2, NO_EVAL_SAVE, 8)])
def test_a_hard_kill_loses_at_most_ckpt_interval_steps_and_the_resume_is_exact(tmp_path, interval, extra, saved_at):
    """SIGKILL at iteration 8 of 10: with ckpt_interval=3 (evals at 0 and 10) ckpt.pt holds iteration 6, and the
    resume logs what an uninterrupted run logs, each line once (the log's lines past the checkpoint are dropped and
    redone)."""
    run = ['--max_iters=10', '--lr_decay_iters=10', '--eval_interval=100', f'--ckpt_interval={interval}', *extra]
    straight, killed = tmp_path / 'straight', tmp_path / 'killed'
    assert finished(forked(KILL_AT_8, [*TINY, f'--out_dir={killed}', *run])) == [-signal.SIGKILL]
    assert max(r['iter'] for r in read_log(killed)) == 8  # logged past the checkpoint
    assert load_checkpoint(str(killed / 'ckpt.pt'))[1]['iter_num'] == saved_at
    train_cli(straight, *run)  # what the killed and resumed run must log
    train_cli(killed, *run, '--init_from=resume')
    a, b = read_log(straight), read_log(killed)
    assert [(r['iter'], r['kind']) for r in a] == [(r['iter'], r['kind']) for r in b]
    for ra, rb in zip(a, b):
        assert {k: v for k, v in ra.items() if k not in TIMING} == {k: v for k, v in rb.items() if k not in TIMING}


# --- 5. two runs in one out_dir

def test_a_second_run_into_a_busy_out_dir_is_refused_naming_the_holder(tmp_path):
    out = tmp_path / 'o'
    first = forked('', [*TINY, f'--out_dir={out}', '--max_iters=1000000', '--eval_interval=1000000'])
    try:
        wait_for_training(out)
        p = train_cli(out, '--max_iters=2', '--seed=2', check=False)  # here: the lock is the other process's
        refused(p, f'pid {first.pid}', code=75)
    finally:
        first.terminate()  # SIGTERM
    assert finished(first) == [130]
    assert not (out / '.lock').exists()  # released at the end
    assert load_checkpoint(str(out / 'ckpt.pt'))[1]['config']['seed'] == 1337  # the first run's, untouched


# --- 6. a torn last line in log.jsonl

def test_a_torn_last_log_line_is_dropped_and_other_corruption_named(tmp_path):
    out = tmp_path / 'o'
    train_cli(out, '--max_iters=4', '--eval_interval=2')
    good = (out / 'log.jsonl').read_text()
    with open(out / 'log.jsonl', 'a') as f:
        f.write('{"iter": 5, "kind": "tr')
    train_cli(out, '--max_iters=6', '--eval_interval=2', '--init_from=resume')
    log = read_log(out)
    assert [r['iter'] for r in log][:len(good.splitlines())] == [json.loads(l)['iter'] for l in good.splitlines()]
    assert log[-1]['iter'] == 6
    # a whole last line that lost only its newline is kept, and the next line does not run into it
    (out / 'log.jsonl').write_text((out / 'log.jsonl').read_text().rstrip('\n'))
    train_cli(out, '--max_iters=7', '--eval_interval=2', '--init_from=resume')
    assert [(r['iter'], r['kind']) for r in read_log(out)][-3:] == [(6, 'eval'), (7, 'train'), (7, 'eval')]
    lines = (out / 'log.jsonl').read_text().splitlines()
    lines[2] = lines[2][:10]  # corruption that is not at the end
    (out / 'log.jsonl').write_text('\n'.join(lines) + '\n')
    refused(train_cli(out, '--max_iters=9', '--eval_interval=2', '--init_from=resume', check=False),
            out / 'log.jsonl', 'line 3')


# --- 7. smaller ones

def test_main_restores_the_signal_handlers_and_survives_a_clock_jump(tmp_path, monkeypatch):
    before = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    monkeypatch.setattr(rundir.time, 'time', lambda: 1e9)  # a frozen (or jumping) wall clock
    assert train.main([*TINY, f'--out_dir={tmp_path / "o"}', '--max_iters=3', '--eval_interval=3']) == 0
    assert {s: signal.getsignal(s) for s in before} == before


def test_a_dataset_without_its_meta_json_is_prepared_again(tmp_path, monkeypatch):
    """prepare.py writes meta.json last; a run that finds the .bin files but no meta.json must not go on with the
    default vocab_size."""
    d = tmp_path / 'data' / 'toy'
    d.mkdir(parents=True)
    (d / 'prepare.py').write_text("import json, os\nimport numpy as np\nh = os.path.dirname(__file__)\n"
                                  "np.zeros(100, np.uint16).tofile(os.path.join(h, 'train.bin'))\n"
                                  "np.zeros(100, np.uint16).tofile(os.path.join(h, 'val.bin'))\n"
                                  "json.dump({'vocab_size': 7}, open(os.path.join(h, 'meta.json'), 'w'))\n")
    monkeypatch.setattr(dataset, 'data_dir', lambda name: str(tmp_path / 'data' / name))
    import numpy as np
    np.zeros(100, np.uint16).tofile(d / 'train.bin')
    np.zeros(100, np.uint16).tofile(d / 'val.bin')  # as if prepare.py were still at work
    dataset.ensure_data('toy')
    assert dataset.load_meta('toy')['vocab_size'] == 7


def test_a_dataset_folder_without_meta_json_is_refused_not_taken_for_gpt2(tmp_path):
    """A folder of .bin files alone used to train a 50,304-token model and save a GPT-2 tokenizer for it: now it
    is refused, naming what is missing and what a meta.json holds; and a meta.json without vocab_size too."""
    import numpy as np
    d = tmp_path / 'bins'
    d.mkdir()
    for split in ('train', 'val'):
        np.zeros(100, np.uint16).tofile(d / f'{split}.bin')
    with pytest.raises(FileNotFoundError, match=r'meta\.json.*prepare\.py.*"vocab_size": 50304'):
        dataset.ensure_data(str(d))
    (d / 'meta.json').write_text('{"tokenizer": "gpt2"}')
    dataset.ensure_data(str(d))  # whole now
    with pytest.raises(ValueError, match=r'meta\.json.*\bvocab_size\b'):
        train.setup_data(train.parse_config([f'--dataset={d}', '--block_size=8']))


def test_what_a_run_folder_holds_is_kept(tmp_path, monkeypatch):
    """A scratch run into a folder of results/ (summary.json and log.jsonl, no checkpoints) used to empty its log
    and replace its summary; eval_only with wandb_log rewrote the run's wandb summary; a write killed half-way
    left its .tmp file for good."""
    out = tmp_path / 'o'
    train_cli(out, '--max_iters=2', '--eval_interval=2')
    record = tmp_path / 'record'
    record.mkdir()
    for name in ('summary.json', 'log.jsonl'):
        shutil.copy(out / name, record / name)
    refused(train_cli(record, '--max_iters=2', check=False), record / 'summary.json')
    assert (record / 'log.jsonl').read_bytes() == (out / 'log.jsonl').read_bytes()
    monkeypatch.setattr(rundir, 'start_wandb', lambda *a: pytest.fail('eval_only started wandb'))
    assert train.main([*TINY, f'--out_dir={out}', '--init_from=resume', '--eval_only=True', '--wandb_log=True']) == 0
    (out / 'ckpt.pt.tmp').write_bytes(b'half a checkpoint')
    (out / 'notes.tmp').write_text('a file of the user')
    train_cli(out, '--max_iters=3', '--eval_interval=2', '--lr_decay_iters=3', '--init_from=resume')
    assert not (out / 'ckpt.pt.tmp').exists() and (out / 'notes.tmp').exists()


def test_training_a_finished_run_further_keeps_its_summary_aside_until_it_ends(tmp_path):
    """--max_iters above a finished run's end: its summary.json becomes summary_at_<iter>.json, so that a kill
    during the extension leaves a run that ablate.sh resumes and report.py lists as unfinished, not the old end."""
    out = tmp_path / 'o'
    run = ['--max_iters=4', '--lr_decay_iters=10', '--eval_interval=100']
    train_cli(out, *run)
    before = json.load(open(out / 'summary.json'))
    killed = forked(KILL_AT_8, [*TINY, f'--out_dir={out}', *run, '--max_iters=10', '--ckpt_interval=2',
                                '--init_from=resume'])
    assert finished(killed) == [-signal.SIGKILL]
    assert not (out / 'summary.json').exists() and json.load(open(out / 'summary_at_4.json')) == before
    train_cli(out, *run, '--max_iters=10', '--init_from=resume')
    assert json.load(open(out / 'summary.json'))['iter'] == 10 and (out / 'summary_at_4.json').exists()


def test_an_extension_that_fails_before_its_first_checkpoint_leaves_the_finished_run_finished(tmp_path):
    """A finished run trained further with a learning rate that diverges at once: the error stops it before any
    checkpoint, so ckpt.pt is still the finished run's, and so must its summary.json be (it was renamed at the
    start, which left report.py with no finished run and ablate.sh resuming it)."""
    out = tmp_path / 'o'
    train_cli(out, '--max_iters=3', '--lr_decay_iters=3', '--eval_interval=3')
    before = (out / 'summary.json').read_bytes()
    refused(train_cli(out, '--init_from=resume', '--max_iters=6', '--lr_decay_iters=6', '--eval_interval=100',
                      '--learning_rate=1e12', '--warmup_iters=0', check=False))
    assert (out / 'summary.json').read_bytes() == before and not list(out.glob('summary_at_*'))
    assert load_checkpoint(str(out / 'ckpt.pt'))[1]['iter_num'] == 3



def test_an_extension_whose_first_checkpoint_write_fails_leaves_the_finished_run_finished(tmp_path, monkeypatch):
    """A full disk at the extension's first ckpt.pt: the write fails, ckpt.pt is still the finished run's, and so
    is its summary.json (it was set aside before the write, which left the run unfinished)."""
    out = tmp_path / 'o'
    assert train.main([*TINY, f'--out_dir={out}', '--max_iters=3', '--lr_decay_iters=6', '--eval_interval=3']) == 0
    before = (out / 'summary.json').read_bytes()
    write = checkpoint.atomic_write

    def full_disk(path, fn):
        if os.path.basename(path) == 'ckpt.pt':
            raise OSError(28, 'No space left on device')
        return write(path, fn)
    monkeypatch.setattr(checkpoint, 'atomic_write', full_disk)
    with pytest.raises(rundir.RunError, match=re.escape(str(out / 'ckpt.pt'))):
        train.main([*TINY, f'--out_dir={out}', '--max_iters=6', '--lr_decay_iters=6', '--eval_interval=3',
                    '--ckpt_interval=1', '--init_from=resume'])
    assert (out / 'summary.json').read_bytes() == before and not list(out.glob('summary_at_*'))
    assert load_checkpoint(str(out / 'ckpt.pt'))[1]['iter_num'] == 3


def test_a_scratch_run_keeps_the_log_of_an_earlier_run_without_its_checkpoint(tmp_path):
    """A folder holding log.jsonl and no ckpt.pt (a run killed before its first checkpoint, or a committed
    unfinished run copied back to be resumed): a run from scratch there used to empty that log; it is kept
    beside, named by the last step it logged, and the console says so."""
    out = tmp_path / 'o'
    train_cli(out, '--max_iters=4', '--eval_interval=2')
    earlier = (out / 'log.jsonl').read_bytes()
    for name in ('ckpt.pt', 'best.pt', 'summary.json'):
        (out / name).unlink()
    p = train_cli(out, '--max_iters=2', '--eval_interval=2')
    assert (out / 'log_until_4.jsonl').read_bytes() == earlier and 'log_until_4.jsonl' in p.stdout, p.stdout
    assert max(r['iter'] for r in read_log(out)) == 2  # the new run's own log
    (out / 'summary.json').unlink(), (out / 'ckpt.pt').unlink(), (out / 'best.pt').unlink()
    train_cli(out, '--max_iters=2', '--eval_interval=2')  # again: the second earlier log does not replace the first
    assert (out / 'log_until_4.jsonl').read_bytes() == earlier and (out / 'log_until_2.jsonl').exists()


def test_runs_that_start_at_once_prepare_their_dataset_once(tmp_path):
    """ablate.sh JOBS=4 on a dataset not yet prepared: every run used to start its own prepare.py, writing the same
    files at once; now one prepares under a lock on the folder and the others find it done."""
    d = tmp_path / 'toy'
    d.mkdir()
    (d / 'prepare.py').write_text("import json, os, time\nimport numpy as np\nh = os.path.dirname(__file__)\n"
                                  "open(os.path.join(h, 'calls'), 'a').write('x')\ntime.sleep(1)\n"
                                  "np.zeros(100, np.uint16).tofile(os.path.join(h, 'train.bin'))\n"
                                  "np.zeros(100, np.uint16).tofile(os.path.join(h, 'val.bin'))\n"
                                  "json.dump({'vocab_size': 7}, open(os.path.join(h, 'meta.json'), 'w'))\n")
    fork = multiprocessing.get_context('fork')  # processes of their own, without an interpreter's start each
    procs = [fork.Process(target=dataset.ensure_data, args=(str(d),)) for _ in range(3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=120)
    assert [p.exitcode for p in procs] == [0, 0, 0]
    assert (d / 'calls').read_text() == 'x' and dataset.load_meta(str(d))['vocab_size'] == 7
