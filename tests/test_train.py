"""train.py, sample.py and the data scripts, end to end on tiny models and the real Shakespeare text (CPU)."""
import contextlib
import io
import json
import multiprocessing
import os
import re
import runpy
import shlex
import shutil
import signal
import subprocess
import sys
import time
import traceback

import numpy as np
import pytest
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
import config  # noqa: E402
import cuda_graph  # noqa: E402
import dataset  # noqa: E402
import hardware  # noqa: E402
import processes  # noqa: E402
import rundir  # noqa: E402
import train  # noqa: E402
from checkpoint import load_checkpoint  # noqa: E402
from model import GPT, GPTConfig  # noqa: E402

pytestmark = pytest.mark.usefixtures('one_thread', 'peak_once')  # conftest.py

TINY = ['--n_layer=2', '--n_head=4', '--n_embd=64', '--block_size=32', '--batch_size=8', '--device=cpu',
        '--compile=False', '--dtype=float32', '--eval_iters=2', '--log_interval=1', '--warmup_iters=2']


def run_train(out_dir, *args, check=True, env=None):
    cmd = [sys.executable, os.path.join(ROOT, 'train.py'), *TINY, f'--out_dir={out_dir}', *args]
    p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, env=env, timeout=600)
    if check:
        assert p.returncode == 0, p.stdout + p.stderr
    return p


def read_log(out_dir):
    with open(os.path.join(out_dir, 'log.jsonl')) as f:
        return [json.loads(l) for l in f if l.strip()]


def in_process(main, argv, cwd=None):
    """`sys.exit(main())` of a script, run in this process (no interpreter start, no torch import): its exit status,
    stdout and stderr as subprocess.run gives them. SystemExit's message goes to stderr with status 1, as Python
    prints it; an uncaught exception's traceback too, with status 1, so that 'Traceback' in stderr still shows one.
    argv: the script's sys.argv. Not for runs that get a signal (the handler writes to the stdout's file number)."""
    out, err = io.StringIO(), io.StringIO()
    old_argv, old_cwd = sys.argv, os.getcwd()
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}  # a script may set its own
    sys.argv = [str(a) for a in argv]
    try:
        if cwd is not None:
            os.chdir(cwd)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main()
            except SystemExit as e:
                code = e.code
            except Exception:  # noqa: BLE001: what the interpreter does with it
                traceback.print_exc()
                code = 1
    finally:
        sys.argv = old_argv
        os.chdir(old_cwd)
        for sig, handler in handlers.items():
            signal.signal(sig, handler)
    if code is None:
        code = 0
    elif not isinstance(code, int):
        print(code, file=err)
        code = 1
    return subprocess.CompletedProcess(argv, code, out.getvalue(), err.getvalue())


def script(path, *args, cwd=ROOT):
    """`python path args` in this process: the script's __main__ block, through runpy."""
    path = os.path.join(ROOT, path)

    def main():  # a script that ends without sys.exit exits 0
        runpy.run_path(path, run_name='__main__')
    return in_process(main, [path, *args], cwd=cwd)


def cli(*argv, check=False):
    """`python train.py argv` in this process: train.cli, what train.py's __main__ runs (sys.exit(cli(argv)))."""
    argv = [str(a) for a in argv]
    p = in_process(lambda: train.cli(argv), ['train.py', *argv], cwd=ROOT)
    if check:
        assert p.returncode == 0, p.stdout + p.stderr
    return p


def train_cli(out_dir, *args, check=True):
    """run_train in this process (for a test that is not about the process: its start, a signal, the environment)."""
    return cli(*TINY, f'--out_dir={out_dir}', *args, check=check)


def stub(tmp_path, body=''):
    """train.py's command line with `body` run first (e.g. a patch that poisons one rank's loss)."""
    path = tmp_path / 'train_stub.py'
    path.write_text(f"import os, signal, sys\nsys.path.insert(0, {ROOT!r})\nimport train, model\n{body}\n"
                    f"if __name__ == '__main__':\n    sys.exit(train.cli(sys.argv[1:]))\n")
    return str(path)


def free_port():
    """A TCP port on this machine that nothing listens on, for a process group's rendezvous (MASTER_PORT)."""
    import socket
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def forked(body, argv, env=None):
    """train.cli(argv) in a process of its own, forked from this one: without an interpreter's start and a torch
    import (seconds each), and on one thread. It sets `env`, runs `body` (a stub's patch, with os, signal, sys, train
    and model at hand) and exits with train.cli's status, as stub() does. -> the started multiprocessing.Process;
    what it prints goes to this process's stdout and stderr (capfd)."""
    import model
    import torch._dynamo  # noqa: F401: an optimizer's first step imports it; here, once, not once a process

    def run():
        torch.set_num_threads(1)
        os.environ.update(env or {}, OMP_NUM_THREADS='1')
        exec(body, dict(os=os, signal=signal, sys=sys, train=train, model=model))
        sys.exit(train.cli([str(a) for a in argv]))
    p = multiprocessing.get_context('fork').Process(target=run)
    p.start()
    return p


def finished(*procs, timeout=300):
    """The exit statuses of forked processes, once they end (killed after `timeout` s: None)."""
    for p in procs:
        p.join(timeout)
        if p.exitcode is None:
            p.kill()
    return [p.exitcode for p in procs]


def forked_ranks(body, argv, world=2, env=None):
    """torchrun's ranks without torchrun: `world` forked processes (forked) with torchrun's environment (RANK,
    LOCAL_RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT) besides `env`. -> their exit statuses, by rank."""
    port = free_port()
    return finished(*[forked(body, argv, dict(env or {}, RANK=str(r), LOCAL_RANK=str(r), WORLD_SIZE=str(world),
                                              MASTER_ADDR='127.0.0.1', MASTER_PORT=str(port)))
                      for r in range(world)])


def wait_for_training(out, timeout=180):
    """Until log.jsonl has a training line: the run is past its step-0 eval and has trained a step."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        if (out / 'log.jsonl').exists() and any(r['kind'] == 'train' for r in read_log(out)):
            return
        time.sleep(0.2)
    raise TimeoutError(f'{out}: no training line in log.jsonl after {timeout} s')


def one_line(text, *names):
    """A message a user can act on: one line (no traceback), naming each of `names` (the key, its value, a path, the
    flag that fixes it)."""
    lines = text.strip().splitlines()
    assert len(lines) == 1 and all(str(n) in lines[0] for n in names), (names, text)


def refused(p, *names, code=1):
    """A script's refusal as its command line gives it: exit status `code`, and as the last line of stderr (above it
    only the run's notes, or argparse's usage) its one-line error ('error: ...', argparse's 'prog.py: error: ...', not
    a traceback's last line) naming each of `names`."""
    assert p.returncode == code, p.stdout + p.stderr
    last = p.stderr.strip().splitlines()[-1]
    assert re.match(r'(\S+\.py: )?error\b', last) and all(str(n) in last for n in names), (names, p.stderr)


@pytest.fixture(scope='module')
def run2(tmp_path_factory):
    """A finished run of 2 steps (TINY, evals at 0 and 2) to sample from and read; a test that changes it copies it."""
    out = tmp_path_factory.mktemp('run2') / 'o'
    train_cli(out, '--max_iters=2', '--eval_interval=2')
    return out


@pytest.fixture(scope='session', autouse=True)
def shakespeare_char():
    """The character-level data must be prepared (CI copies input.txt into data/shakespeare_char/)."""
    dataset.ensure_data('shakespeare_char')


# --- configuration

def test_config_file_include_and_overrides(tmp_path):
    (tmp_path / 'base.py').write_text("n_layer = 3\nlearning_rate = 1e-3\nimport math as _m\n")
    (tmp_path / 'cell.py').write_text("include('base.py')\nattn = 'diff'\nn_head = 4\n")
    cfg = config.parse_config([str(tmp_path / 'cell.py'), '--n_layer=5', '--learning_rate=1',
                              '--wandb_run_name=a=b', '--n_kv_head=None', '--lambda_init=0.5'])
    assert (cfg['n_layer'], cfg['attn'], cfg['n_head']) == (5, 'diff', 4)
    assert cfg['learning_rate'] == 1.0 and isinstance(cfg['learning_rate'], float)  # int accepted for a float
    assert cfg['wandb_run_name'] == 'a=b'  # values may contain '='
    assert cfg['n_kv_head'] is None and cfg['lambda_init'] == 0.5


def config_error(argv):
    """parse_config's refusal of argv: its message, one line."""
    with pytest.raises(ValueError) as e:
        config.parse_config(argv)
    one_line(str(e.value))
    return str(e.value)


def test_config_errors(tmp_path):
    """Each refusal names the key as given and what was meant: the closest key, the file and line, the fix."""
    assert re.search(r"'learnig_rate'.*\blearning_rate\b", config_error(['--learnig_rate=1e-3']))
    assert 'n_layer=2.5' in config_error(['--n_layer=2.5']) and "symmetric='yes'" in config_error(['--symmetric=yes'])
    assert all(f"'{d}'" in config_error(['--dtype=fp8']) for d in config.CHOICES['dtype'])
    (tmp_path / 'bad.py').write_text("n_layr = 3\n")
    assert re.search(r"bad\.py, line 1\b.*'n_layr'.*\bn_layer\b", config_error([str(tmp_path / 'bad.py')]))
    assert str(tmp_path / 'nope.py') in config_error([str(tmp_path / 'nope.py')])
    # a space for the '=' (it was read as a missing config file '2'): the fix, as a whole flag
    assert '--max_iters=2' in config_error(['configs/nanogpt_3L.py', '--max_iters', '2'])
    assert "'--compile'" in config_error(['--compile', '--max_iters=2'])


def test_overrides_win_wherever_they_stand_and_config_file_errors_name_their_line(tmp_path):
    """`--max_iters=2 configs/x.py` means what `configs/x.py --max_iters=2` means (usage: files first, then
    overrides); a typo inside a config file is one line naming the file, the line and Python's error."""
    cfg = config.parse_config(['--n_layer=5', '--max_iters=2', os.path.join(ROOT, 'configs', 'diff_sym_6L.py')])
    assert (cfg['n_layer'], cfg['max_iters'], cfg['attn']) == (5, 2, 'diff')  # the base config sets max_iters
    (tmp_path / 'syntax.py').write_text("n_layer = 3\nbatch_size = 4 +\n")
    assert 'syntax.py, line 2: SyntaxError' in config_error([str(tmp_path / 'syntax.py')])
    (tmp_path / 'name.py').write_text("n_layer = 3\nn_head = heads\n")
    assert re.search(r"name\.py, line 2: NameError\b.*'heads'", config_error([str(tmp_path / 'name.py')]))
    refused(cli(tmp_path / 'name.py'), 'name.py, line 2')


def test_a_leak_in_a_causal_run_says_to_set_causal_false():
    assert re.search(r"leak='zero_future'.*--causal=False", config_error(['--leak=zero_future']))
    assert config.parse_config(['--leak=off_by_one', '--causal=False'])['leak'] == 'off_by_one'


def test_every_config_key_is_in_the_docs_config_tables():
    """Config keys are documented in one place: a row of docs/config.md's tables names each key train.py accepts."""
    with open(os.path.join(ROOT, 'docs', 'config.md')) as f:
        first_cells = [line.split('|')[1] for line in f if line.startswith('|')]
    named = {k for cell in first_cells for k in re.findall(r'`([a-z_0-9]+)`', cell)}
    assert sorted(k for k in config.DEFAULTS if k not in named) == []


def test_learning_rate_schedule():
    cfg = dict(config.DEFAULTS, learning_rate=1.0, min_lr=0.1, warmup_iters=10, lr_decay_iters=110)
    assert train.get_lr(0, cfg) == 1 / 11 and train.get_lr(9, cfg) == 10 / 11  # linear warmup: (it + 1) / 11
    assert train.get_lr(10, cfg) == 1.0  # the peak, where the cosine starts
    assert train.get_lr(60, cfg) == pytest.approx((1.0 + 0.1) / 2, abs=1e-12)  # the midpoint of the decay
    assert train.get_lr(110, cfg) == pytest.approx(0.1, abs=1e-12) and train.get_lr(111, cfg) == 0.1  # the floor
    assert train.get_lr(10 ** 6, cfg) == 0.1
    assert all(train.get_lr(it, dict(cfg, decay_lr=False)) == 1.0 for it in (0, 5, 60, 200))


def test_cli_reports_config_error_without_traceback(tmp_path):
    refused(train_cli(tmp_path / 'o', '--attn=difff', check=False), "attn='difff'", "'diff'")
    assert not (tmp_path / 'o').exists()


# --- training

def test_short_run_learns_and_writes_logs(tmp_path):
    out = tmp_path / 'o'
    train_cli(out, '--max_iters=200', '--lr_decay_iters=200', '--learning_rate=5e-3', '--min_lr=5e-4',
              '--eval_interval=100', '--eval_iters=10', '--attn=diff', '--log_interval=25', '--batch_size=16',
              '--block_size=64')
    log = read_log(out)
    evals = [r for r in log if r['kind'] == 'eval']
    assert [e['iter'] for e in evals] == [0, 100, 200]
    assert evals[0]['val_loss'] > 4.0  # ~ln(65) = 4.17 at initialisation
    # well below, and below the ~2.85 of character frequencies alone: it learned context
    assert evals[-1]['val_loss'] < 2.75, evals
    trains = [r for r in log if r['kind'] == 'train']
    assert [r['iter'] for r in trains] == [25, 50, 75, 100, 125, 150, 175, 200]
    for r in trains:
        assert r['tokens_per_sec'] > 0 and r['lr'] > 0
        assert {'lambda/L1/full', 'lambda/L2/lambda_1', 'lambda/L2/lambda_2', 'lambda/L1/init'} <= set(r)
    s = json.load(open(out / 'summary.json'))
    assert s['finished'] and s['iter'] == 200
    assert s['final_val_loss'] == evals[-1]['val_loss'] and s['best_val_loss'] == min(e['val_loss'] for e in evals)
    assert s['config']['attn'] == 'diff' and s['n_params'] > 0 and s['tokens_per_sec'] > 0
    assert s['peak_memory_mb'] > 0 and s['wall_time_s'] > 0
    assert [r['layer'] for r in s['lambda_table']] == [1, 2]
    assert s['lambda_table'][1]['lambda_init'] == pytest.approx(0.8 - 0.6 * 2.718281828 ** -0.3)
    # the final model's lambdas (ckpt.pt holds its weights), from the formula on its lambda vectors
    weights = torch.load(out / 'ckpt.pt', weights_only=True)['model']
    for r in s['lambda_table']:
        vec = lambda n: weights[f"transformer.h.{r['layer'] - 1}.attn.{n}"].double()  # noqa: E731
        l1 = torch.exp(vec('lambda_q1') @ vec('lambda_k1')).item()
        l2 = torch.exp(vec('lambda_q2') @ vec('lambda_k2')).item()
        l_init = 0.8 - 0.6 * torch.exp(torch.tensor(-0.3 * (r['layer'] - 1), dtype=torch.float64)).item()
        assert (r['lambda_1'], r['lambda_2']) == pytest.approx((l1, l2), rel=1e-6)
        assert r['lambda_full'] == pytest.approx(l1 - l2 + l_init, abs=1e-6)


TIMING = ('tokens_per_sec', 'ms_per_iter', 'mfu')


def main_stopped_at(out_dir, stop_at, *args):
    """train.main in this process, sent SIGTERM during the training step that ends at iteration `stop_at` (one
    micro-batch per step), so the stop saves the checkpoint at exactly that iteration."""
    import model as model_mod
    forward, calls, armed = model_mod.GPT.forward, [], []

    def forward_then_sigterm(self, idx, targets=None, **kw):
        calls.append(self.training)
        if armed and self.training and sum(calls) == stop_at:
            os.kill(os.getpid(), signal.SIGTERM)  # handled by the run's processes.Stop, as a real SIGTERM
        return forward(self, idx, targets, **kw)
    guard = train.check_causal

    def guard_then_count(*a, **k):  # the causality check's forwards come first: count training's from zero
        guard(*a, **k)
        calls.clear()
        armed.append(True)
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    model_mod.GPT.forward, train.check_causal = forward_then_sigterm, guard_then_count
    try:
        return train.main([*TINY, f'--out_dir={out_dir}', *args])
    finally:
        model_mod.GPT.forward, train.check_causal = forward, guard
        for sig, h in handlers.items():
            signal.signal(sig, h)


STOP_RUN = ['--max_iters=8', '--lr_decay_iters=8', '--eval_interval=4']


@pytest.fixture(scope='module')
def straight(tmp_path_factory):
    """The uninterrupted run that the stopped and resumed runs must reproduce."""
    out = tmp_path_factory.mktemp('straight')
    assert train.main([*TINY, *STOP_RUN, f'--out_dir={out}']) == 0
    return out


@pytest.mark.parametrize('stop_at,always_save', [(4, 'False'), (8, 'True')])  # an eval iteration; max_iters
def test_stop_at_an_eval_iteration_then_resume_gives_the_uninterrupted_log(tmp_path, straight, stop_at,
                                                                           always_save):
    common = [*TINY, *STOP_RUN, f'--always_save_checkpoint={always_save}']
    split = tmp_path / 'split'
    assert main_stopped_at(split, stop_at, *common[len(TINY):]) == 130
    _, ckpt = load_checkpoint(str(split / 'ckpt.pt'))
    assert ckpt['iter_num'] == stop_at
    assert not (split / 'summary.json').exists()  # stopped before its eval at max_iters: not finished
    assert train.main([*common, f'--out_dir={split}', '--init_from=resume']) == 0
    assert load_checkpoint(str(split / 'ckpt.pt'))[1]['last_eval']['iter'] == 8  # ckpt.pt holds the final eval
    a, b = read_log(straight), read_log(split)
    assert [(r['iter'], r['kind']) for r in a] == [(r['iter'], r['kind']) for r in b]  # each eval exactly once
    for ra, rb in zip(a, b):
        assert {k: v for k, v in ra.items() if k not in TIMING} == {k: v for k, v in rb.items() if k not in TIMING}
    sa, sb = json.load(open(straight / 'summary.json')), json.load(open(split / 'summary.json'))
    assert sb['finished'] and sb['final_eval_iter'] == 8
    for k in ('final_train_loss', 'final_val_loss', 'best_val_loss'):
        assert sa[k] == sb[k], k


def test_best_pt_holds_the_lowest_val_loss_and_ckpt_pt_the_last_state(tmp_path):
    out = tmp_path / 'o'
    # a learning rate high enough that the val loss goes down and up again
    train_cli(out, '--max_iters=8', '--eval_interval=1', '--learning_rate=0.03', '--decay_lr=False',
              '--always_save_checkpoint=False')
    evals = [r for r in read_log(out) if r['kind'] == 'eval']
    best = min(evals, key=lambda r: r['val_loss'])
    assert 0 < best['iter'] < 8  # neither the initial model nor the last state: the files must differ
    mb, best_ckpt = load_checkpoint(str(out / 'best.pt'))
    ml, last_ckpt = load_checkpoint(str(out / 'ckpt.pt'))
    assert best_ckpt['iter_num'] == best['iter'] and best_ckpt['best_val_loss'] == best['val_loss']
    assert 'optimizer' not in best_ckpt  # weights for sampling and evaluation; ckpt.pt is the one to resume
    assert last_ckpt['iter_num'] == 8 and 'optimizer' in last_ckpt
    assert not torch.equal(mb.lm_head.weight, ml.lm_head.weight)
    os.rename(out / 'ckpt.pt', tmp_path / 'moved.pt')
    with pytest.raises(FileExistsError, match=re.escape(str(out / 'best.pt'))):  # nor may a scratch run replace it
        train.main([*TINY, f'--out_dir={out}', '--max_iters=2'])
    assert load_checkpoint(str(out / 'best.pt'))[1]['iter_num'] == best['iter']


def test_scratch_refuses_to_overwrite_a_checkpoint(tmp_path, run2):
    out = tmp_path / 'o'
    shutil.copytree(run2, out)
    before = (out / 'ckpt.pt').read_bytes()
    refused(train_cli(out, '--max_iters=2', check=False), out / 'ckpt.pt', '--init_from=resume')
    assert (out / 'ckpt.pt').read_bytes() == before
    refused(train_cli(tmp_path / 'none', '--init_from=resume', check=False), tmp_path / 'none' / 'ckpt.pt')


SIGTERM_AT_5 = '''
step = train.Run.train_step
def step_then_sigterm(run):
    if run.iter_num == 5 and run.start_iter == 0:  # SIGTERM, during the step from iteration 5 to 6
        os.kill(os.getpid(), signal.SIGTERM)
    return step(run)
train.Run.train_step = step_then_sigterm
'''


def test_a_sigterm_saves_and_the_resume_command_it_prints_continues_the_run_exactly(tmp_path, capfd):
    """SIGTERM during training, in a process of its own (all the resume has is ckpt.pt): exit 130, ckpt.pt at the
    step it stopped at, not finished. The command it prints (the folder alone: every setting comes back from
    ckpt.pt), typed as printed in train.py's folder, resumes it there, and the run ends with the log and the weights
    of the run trained straight: dropout's masks, Diff's lambdas and the data order come back too."""
    common = ['--max_iters=8', '--lr_decay_iters=8', '--eval_interval=4', '--dropout=0.1', '--attn=diff',
              '--symmetric=True']
    straight, split = tmp_path / 'straight', tmp_path / 'split'
    assert finished(forked(SIGTERM_AT_5, [*TINY, f'--out_dir={split}', *common])) == [130]
    assert load_checkpoint(str(split / 'ckpt.pt'))[1]['iter_num'] == 6 and not (split / 'summary.json').exists()
    typed = next(line for line in capfd.readouterr().out.splitlines() if '--init_from=resume' in line)
    argv = shlex.split(typed[typed.index('python train.py'):])
    assert argv[2:] == [f'--out_dir={split}', '--init_from=resume'], typed
    cli(*argv[2:], check=True)
    train_cli(straight, *common)
    a, b = read_log(straight), read_log(split)
    assert [(r['iter'], r['kind']) for r in a] == [(r['iter'], r['kind']) for r in b]  # each line once
    for ra, rb in zip(a, b):
        assert {k: v for k, v in ra.items() if k not in TIMING} == {k: v for k, v in rb.items() if k not in TIMING}
    for (n, x), y in zip(load_checkpoint(str(straight / 'ckpt.pt'))[0].state_dict().items(),
                         load_checkpoint(str(split / 'ckpt.pt'))[0].state_dict().values()):
        assert torch.equal(x, y), n


def test_a_resume_of_a_missing_out_dir_offers_the_run_folders_beside_it_never_itself(tmp_path, run2):
    """--out_dir=out/diff_sym_6l for out/diff_sym_6L: the did-you-mean names the folder in its own case, and as
    typed it resumes that run. A folder without ckpt.pt (a committed run's record) is never offered for itself."""
    runs = tmp_path / 'out'
    shutil.copytree(run2, runs / 'diff_sym_6L')
    shutil.copytree(run2, runs / 'nanogpt_6L')
    offered = lambda p: [w.rstrip('?,;.') for w in p.stderr.split() if w.startswith('--out_dir=')]  # noqa: E731
    p = cli(*TINY, f'--out_dir={runs / "diff_sym_6l"}', '--init_from=resume', '--max_iters=2')
    refused(p)
    assert offered(p) == [f'--out_dir={runs / "diff_sym_6L"}'], p.stderr
    assert cli(*TINY, offered(p)[0], '--init_from=resume', '--max_iters=3', '--lr_decay_iters=3').returncode == 0
    (runs / 'nanogpt_6L' / 'ckpt.pt').unlink()  # a record: summary.json and log.jsonl, no checkpoint
    p = cli(*TINY, f'--out_dir={runs / "nanogpt_6L"}', '--init_from=resume', '--max_iters=4', '--lr_decay_iters=4')
    refused(p, runs / 'nanogpt_6L' / 'ckpt.pt')
    listed = [w.rstrip(',;.') for w in p.stderr.split(';', 1)[1].split() if w.startswith(str(runs))]
    assert listed == [str(runs / 'diff_sym_6L')], p.stderr  # the folder with a checkpoint, not the record itself


def ignore_sigint():
    """What a non-interactive shell does to a command it starts in the background (`cmd &`)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def test_a_background_job_hears_sigint_and_saves(tmp_path):
    """Started as a background job (SIGINT ignored, as a non-interactive shell's `cmd &` has it), a run in training
    gets SIGINT from another process: its own handler hears it all the same, and it stops with 130 and ckpt.pt."""
    out = tmp_path / 'o'
    p = subprocess.Popen([sys.executable, os.path.join(ROOT, 'train.py'), *TINY, f'--out_dir={out}',
                          '--max_iters=1000000', '--eval_interval=1000000'], cwd=ROOT, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True, preexec_fn=ignore_sigint)
    try:
        wait_for_training(out)
    finally:
        p.send_signal(signal.SIGINT)
        said = p.communicate(timeout=300)[0]
    assert p.returncode == 130 and load_checkpoint(str(out / 'ckpt.pt'))[1]['iter_num'] > 0, said
    assert not (out / 'summary.json').exists()


def signal_in(monkeypatch, owner, name, sig, nth=1, after=False):
    """owner.name (a function train.py calls) sends `sig` to this process at its nth call, as it begins (or, after,
    once it has returned); -> the numbers of the calls that ran to their end after the signal was sent."""
    fn, calls, sent, ended = getattr(owner, name), [], [], []

    def with_signal(*a, **k):
        calls.append(1)
        if len(calls) == nth and not after:
            sent.append(os.kill(os.getpid(), sig))
        n, value = len(calls), fn(*a, **k)
        if sent:
            ended.append(n)
        if n == nth and after:
            sent.append(os.kill(os.getpid(), sig))
        return value
    monkeypatch.setattr(owner, name, with_signal)
    return ended


def test_a_signal_during_start_up_ends_the_run_at_once_with_nothing_written(tmp_path, monkeypatch):
    """Ctrl-C while the run still starts (here as its causality check begins: seconds of forwards for a large model):
    nothing is trained, so nothing is saved, and the stop lands at once: the check never finishes. Exit 130, one
    line."""
    ended = signal_in(monkeypatch, train, 'check_causal', signal.SIGINT)
    p = train_cli(tmp_path / 'o', '--max_iters=4', check=False)
    lines = p.stderr.strip().splitlines()  # the run's note (its size), then the stop
    assert p.returncode == 130 and ended == [] and len(lines) == 2 and 'SIGINT' in lines[1], p.stdout + p.stderr
    assert not (tmp_path / 'o' / 'ckpt.pt').exists() and not (tmp_path / 'o' / 'log.jsonl').exists()


def test_a_signal_during_an_evaluation_stops_at_its_batch_and_the_resume_evaluates(tmp_path, straight, monkeypatch):
    """SIGTERM in the evaluation at iteration 4 (its first batch; 2 a split, 2 splits): the stop lands at the end of
    that batch; ckpt.pt is iteration 4, its eval not logged, and the resume evaluates it once, as the straight run
    did."""
    ended = signal_in(monkeypatch, train, 'batch_losses', signal.SIGTERM, nth=5)  # 4 at iteration 0
    out = tmp_path / 'o'
    assert train.main([*TINY, *STOP_RUN, f'--out_dir={out}']) == 130
    assert ended == [5]  # the batch in progress, and no other
    assert load_checkpoint(str(out / 'ckpt.pt'))[1]['iter_num'] == 4
    assert [r['iter'] for r in read_log(out) if r['kind'] == 'eval'] == [0]
    monkeypatch.undo()
    assert train.main([*TINY, *STOP_RUN, f'--out_dir={out}', '--init_from=resume']) == 0
    assert [(r['iter'], r['kind']) for r in read_log(out)] == [(r['iter'], r['kind']) for r in read_log(straight)]


def test_a_signal_in_the_final_writes_finds_the_run_finished_and_is_heard(tmp_path, monkeypatch):
    """SIGINT after the last step's poll, as summary.json is written: the run is finished and saved, and the exit
    status still says it was stopped (130)."""
    signal_in(monkeypatch, train, 'write_summary', signal.SIGINT, after=True)
    out = tmp_path / 'o'
    assert train.main([*TINY, '--max_iters=2', '--eval_interval=2', f'--out_dir={out}']) == 130
    assert json.load(open(out / 'summary.json'))['finished']
    assert load_checkpoint(str(out / 'ckpt.pt'))[1]['iter_num'] == 2


def test_nonfinite_loss_stops_and_keeps_last_good_checkpoint(tmp_path, monkeypatch, capsys):
    out = tmp_path / 'o'
    train_cli(out, '--max_iters=4', '--eval_interval=4')
    good = (out / 'ckpt.pt').read_bytes()
    import model as model_mod
    forward = model_mod.GPT.forward

    def poisoned(self, idx, targets=None):
        logits, loss = forward(self, idx, targets)
        if self.training and poisoned.calls >= 2:  # the third training micro-batch: the step to iteration 7
            loss = loss * float('nan')
        poisoned.calls += self.training
        return logits, loss
    poisoned.calls = 0
    monkeypatch.setattr(model_mod.GPT, 'forward', poisoned)
    guard = train.check_causal

    def guard_then_count(*a, **k):  # the causality check's forwards run first: count training's from zero
        guard(*a, **k)
        poisoned.calls = 0
    monkeypatch.setattr(train, 'check_causal', guard_then_count)
    with pytest.raises(FloatingPointError, match=r'\biteration 7\b'):
        train.main([*TINY, f'--out_dir={out}', '--max_iters=12', '--eval_interval=4', '--init_from=resume'])
    assert (out / 'ckpt.pt').read_bytes() == good


def test_a_model_that_sees_later_tokens_stops_before_training(tmp_path, monkeypatch):
    """The causality check runs training's forward before the first step: a planted leak (an SDPA call whose
    is_causal is dropped) stops the run with an error naming the first leaking position, and nothing is written."""
    import model as model_mod
    from causality import CausalityError
    from torch.nn import functional as F
    sdpa = F.scaled_dot_product_attention
    monkeypatch.setattr(model_mod.F, 'scaled_dot_product_attention',
                        lambda *a, **k: sdpa(*a, **{**k, 'is_causal': False}))
    out = tmp_path / 'o'
    with pytest.raises(CausalityError, match='position 0'):
        train.main([*TINY, f'--out_dir={out}', '--max_iters=2'])
    assert not (out / 'ckpt.pt').exists() and not (out / 'log.jsonl').exists()
    monkeypatch.undo()
    train_cli(tmp_path / 'nc', '--max_iters=2', '--causal=False')  # no check where the model is not causal


def test_eval_only_evaluates_a_checkpoint_off_the_schedule_and_writes_nothing(tmp_path):
    out = tmp_path / 'o'
    assert main_stopped_at(out, 3, '--max_iters=10', '--eval_interval=2') == 130  # a checkpoint at iteration 3
    before = {f: (out / f).read_bytes() for f in ('ckpt.pt', 'log.jsonl', 'best.pt')}
    p = train_cli(out, '--max_iters=10', '--eval_interval=2', '--init_from=resume', '--eval_only=True')
    assert 'step 3:' in p.stdout, p.stdout  # the eval line, of the checkpoint's iteration
    p = train_cli(out, '--init_from=resume', '--eval_only=True')  # the run's schedule need not be repeated
    assert 'step 3:' in p.stdout, p.stdout
    assert {f: (out / f).read_bytes() for f in before} == before and not (out / 'summary.json').exists()


def test_resuming_a_finished_run_trains_and_rewrites_nothing(tmp_path, run2):
    """A finished run resumed at its own max_iters (ablate.sh skips it; a hand-typed resume need not) exits 0 and
    leaves every file as it was: no summary with this process's timings or a batch_size it never trained with."""
    out = tmp_path / 'o'
    shutil.copytree(run2, out)
    files = ('summary.json', 'ckpt.pt', 'best.pt', 'log.jsonl')
    before = {f: (out / f).read_bytes() for f in files}
    train_cli(out, '--max_iters=2', '--eval_interval=2', '--init_from=resume', '--batch_size=4')
    assert {f: (out / f).read_bytes() for f in files} == before
    p = train_cli(out, '--max_iters=3', '--eval_interval=2', '--init_from=resume')  # extended: it trains on
    assert json.load(open(out / 'summary.json'))['iter'] == 3


def test_a_stopped_and_resumed_run_reports_the_whole_run_s_time_and_tokens(tmp_path):
    """ckpt.pt keeps the timings of the processes before it, so summary.json's wall time and tokens/s are the
    whole run's, not its last part's."""
    out = tmp_path / 'split'
    assert main_stopped_at(out, 4, *STOP_RUN) == 130
    first = torch.load(out / 'ckpt.pt', weights_only=True)['timing']
    assert first['train_tokens'] > 0 and first['train_time'] > 0 and first['wall_time'] > 0
    assert train.main([*TINY, *STOP_RUN, f'--out_dir={out}', '--init_from=resume']) == 0
    whole = torch.load(out / 'ckpt.pt', weights_only=True)['timing']
    summary = json.load(open(out / 'summary.json'))
    assert whole['train_tokens'] > first['train_tokens'] and summary['wall_time_s'] > first['wall_time']
    assert summary['tokens_per_sec'] == pytest.approx(whole['train_tokens'] / whole['train_time'])


def test_resume_past_max_iters_is_an_error(tmp_path):
    out = tmp_path / 'o'
    train_cli(out, '--max_iters=4', '--eval_interval=2')
    refused(train_cli(out, '--max_iters=2', '--eval_interval=2', '--init_from=resume', check=False), 'iteration 4',
            'max_iters=2')


DDP_KILLED_AT_8 = '''
import rundir
rundir.peak = lambda device, dtype, threads: (1e12, 'a stub')  # MFU against a known peak
step = train.Run.train_step
def step_or_die(run):
    if run.iter_num == 8:  # a hard kill of every rank (a lost node): no handler runs, nothing is saved
        os.kill(os.getpid(), 9)
    return step(run)
train.Run.train_step = step_or_die
'''


def test_ddp_two_processes_equal_one_with_double_accumulation(tmp_path, monkeypatch):
    """Two processes of one micro-batch each (ranks as torchrun starts them: forked_ranks) train as one process of
    two. Their eval at 0 is one process's
    (eval_iters=3: rank 0 evaluates batches 0 and 2, rank 1 batch 1; with eval_group=2 each rank has one group, rank
    1's filled up with a copy whose loss is dropped), and so is each step's logged loss (the mean over every
    micro-batch of every rank). ckpt_interval's save is collective (the weights' finiteness check), so every rank
    must reach it at the same steps: killed at iteration 8, the run has ckpt.pt at 6, and one process resumed from it
    ends with the weights of the one-process run."""
    common = ['--max_iters=10', '--lr_decay_iters=10', '--eval_interval=100', '--dropout=0.1', '--attn=diff',
              '--gradient_accumulation_steps=2', '--eval_iters=3', '--ckpt_interval=3']
    one, two = tmp_path / 'one', tmp_path / 'two'
    monkeypatch.setattr(rundir, 'peak', lambda device, dtype, threads: (1e12, 'a stub'))
    assert train.main([*TINY, f'--out_dir={one}', *common]) == 0  # on one thread, as each rank (OMP_NUM_THREADS)
    assert forked_ranks(DDP_KILLED_AT_8, [*TINY, f'--out_dir={two}', *common, '--eval_group=2']) == [-9, -9]
    assert load_checkpoint(str(two / 'ckpt.pt'))[1]['iter_num'] == 6
    la, lb = read_log(one), read_log(two)
    assert [(r['iter'], r['kind']) for r in lb] == [(r['iter'], r['kind']) for r in la[:len(lb)]] and len(lb) == 9
    for ra, rb in zip(la, lb):
        key = 'loss' if ra['kind'] == 'train' else 'val_loss'
        assert ra[key] == pytest.approx(rb[key], abs=1e-5), (ra, rb)
    # MFU on a CPU: the ranks share one processor, so the whole step's FLOPs over the peak of all their threads (a
    # rank's share over a one-thread peak read 32% against one process's 17% at 77cf1f7)
    flops = load_checkpoint(str(one / 'ckpt.pt'))[0].flops_per_token(32)
    for r in la + lb:
        if r['kind'] == 'train':
            assert r['mfu'] == pytest.approx(flops * r['tokens_per_sec'] / 1e12, rel=1e-9)
    train_cli(two, *common, '--init_from=resume')  # one process, the same micro-batches
    ma, mb = (load_checkpoint(str(d / 'ckpt.pt'))[0] for d in (one, two))
    for (n, a), b in zip(ma.state_dict().items(), mb.state_dict().values()):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6, msg=n)


def test_ddp_rejects_indivisible_accumulation():
    env = dict(os.environ, RANK='0', LOCAL_RANK='0', WORLD_SIZE='2', MASTER_ADDR='127.0.0.1', MASTER_PORT='29599')
    # fails before any process group is joined, so a single process can check the message
    with pytest.raises(ValueError, match=r'gradient_accumulation_steps=3\b.*--gradient_accumulation_steps=4'):
        old = dict(os.environ)
        os.environ.update(env)
        try:
            train.main([*TINY, '--gradient_accumulation_steps=3', '--out_dir=/nonexistent'])
        finally:
            os.environ.clear()
            os.environ.update(old)


@pytest.mark.parametrize('major,expected', [(7, 'float16'), (8, 'bfloat16')])  # V100/T4; A100 and later
def test_dtype_auto_on_cuda_takes_bf16_only_where_the_gpu_has_it(monkeypatch, major, expected):
    # the CUDA queries of torch.cuda.is_bf16_supported, stubbed: a GPU of compute capability `major`, on which
    # (as on a real V100) a bf16 tensor can be created, through emulation
    monkeypatch.setattr(torch.version, 'hip', None)
    monkeypatch.setattr(torch.cuda, 'is_available', lambda: True)
    monkeypatch.setattr(torch.cuda, 'current_device', lambda: 0)
    monkeypatch.setattr(torch.cuda, 'get_device_properties', lambda d: type('Props', (), dict(major=major))())
    monkeypatch.setattr(torch.cuda, '_check_bf16_tensor_supported', lambda d: True)
    assert hardware.pick_dtype('auto', 'cuda') == expected
    assert hardware.pick_dtype('float32', 'cuda') == 'float32'


@pytest.mark.parametrize('vendor,flags,expected', [
    ('AuthenticAMD', ['avx512_bf16'], 'bfloat16'),              # a Zen 4 EPYC: bf16 1.5x faster (454827c)
    ('GenuineIntel', ['avx512_bf16'], 'float32'),               # a Xeon VM with AMX hidden: bf16 1.7x slower (1ddecd2)
    ('GenuineIntel', ['amx_bf16', 'avx512_bf16'], 'bfloat16'),  # AMX
    ('AuthenticAMD', [], 'float32'),                            # AVX2 only: bf16 is emulated
])
def test_dtype_auto_on_cpu_takes_bf16_only_where_it_is_the_fast_path(monkeypatch, vendor, flags, expected):
    """A rule on the flags and the vendor, the same in every process: a timing at start-up (tried first) picked
    bf16 in one process and fp32 in another of the same sweep when the machine was busy."""
    monkeypatch.setattr(hardware, 'cpu_info', lambda: dict(vendor=vendor, bf16=flags))
    assert hardware.pick_dtype('auto', 'cpu') == expected
    assert hardware.pick_dtype('bfloat16', 'cpu') == 'bfloat16'  # an explicit dtype is never second-guessed


def test_cpu_info_reads_the_vendor(tmp_path):
    f = tmp_path / 'cpuinfo'
    f.write_text('processor\t: 0\nvendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel\t\t: 207\n'
                 'flags\t\t: fpu avx512_bf16\n')
    assert (hardware.cpu_info(str(f))['vendor'], hardware.cpu_info(str(f))['bf16']) == ('GenuineIntel', ['avx512_bf16'])


def _rank_dtype(rank, port, out):
    """One DDP rank of setup_processes with dtype=auto, on a 'node' whose processor picks rank 1 bf16, rank 0 fp32;
    then its vote on a stop that rank 1 alone heard, and on the next step's, which none did."""
    import torch.distributed as dist
    os.environ.update(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE='2', MASTER_ADDR='127.0.0.1',
                      MASTER_PORT=str(port))
    processes.pick_dtype = lambda dtype, device_type: ['float32', 'bfloat16'][rank]
    env = processes.setup_processes(config.parse_config(['--device=cpu', '--gradient_accumulation_steps=2']))
    try:
        with processes.Stop() as stop:
            stop.signum = signal.SIGTERM if rank == 1 else None
            votes = [stop.agreed(env)]
            stop.signum = None
            votes.append(stop.agreed(env))
        with open(os.path.join(out, f'rank{rank}'), 'w') as f:
            f.write(f"{env.dtype} {type(env.autocast).__name__} {votes}")
    finally:
        dist.destroy_process_group()


def test_ddp_ranks_train_in_rank0s_dtype_and_stop_at_the_same_step(tmp_path):
    """setup_processes: nodes whose processors differ still train in one precision, rank 0's, autocast included.
    A stop heard by one rank is every rank's at the same poll (processes.Stop.agreed), so no rank is left waiting in
    the next step's all-reduce for one that stopped."""
    import socket
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        port = s.getsockname()[1]
    # forked: two ranks of their own without an interpreter's start and a torch import each (spawn's seconds)
    torch.multiprocessing.start_processes(_rank_dtype, args=(port, str(tmp_path)), nprocs=2, start_method='fork')
    assert [(tmp_path / f'rank{r}').read_text() for r in (0, 1)] == ['float32 nullcontext [True, False]'] * 2


# --- the GPU step (commit 4cbe1a7, 2026-11-24), what the CPU can check: the CUDA-graph path itself is in tests/test_cuda.py

def test_cuda_graph_refuses_what_a_replay_cannot_do_and_auto_runs_eagerly_there(tmp_path):
    """cuda_graph=True is refused with the reason where a replay cannot run; None (auto, the default) runs eagerly
    there and says why on a GPU; on a CPU it is off and summary.json says so."""
    with pytest.raises(ValueError, match=r"cuda_graph=True\b.*\bcpu\b.*--cuda_graph"):
        train.main([*TINY, f'--out_dir={tmp_path / "o"}', '--cuda_graph=True'])
    assert not (tmp_path / 'o').exists()
    assert all(f"'{m}'" in config_error(['--compile_mode=fast']) for m in config.CHOICES['compile_mode'])
    gpu = dict(ddp=False, rank=0, local_rank=0, world=1, device='cuda', device_type='cuda', dtype='bfloat16',
               autocast=contextlib.nullcontext(), compile=False, accum=1)
    cfg = config.parse_config([])
    assert cfg['cuda_graph'] is None  # auto
    assert cuda_graph.cuda_graph_refusal(cfg, processes.Env(**gpu)) is None  # one GPU, AdamW, bf16: captured
    for over, env_over, why in [({}, dict(ddp=True, world=2), "DDP"), (dict(optimizer='orthoadam'), {}, "AdamW"),
                                ({}, dict(dtype='float16'), "GradScaler"),
                                (dict(compile_mode='reduce-overhead'), dict(compile=True), "use one of the two"),
                                ({}, dict(device='cpu', device_type='cpu'), "not a CUDA device")]:
        assert why in cuda_graph.cuda_graph_refusal(dict(cfg, **over), processes.Env(**dict(gpu, **env_over)))
    assert train.main([*TINY, f'--out_dir={tmp_path / "auto"}', '--max_iters=2', '--eval_interval=2']) == 0
    assert json.load(open(tmp_path / 'auto' / 'summary.json'))['cuda_graph'] is False


@pytest.mark.parametrize('data,over', [
    ('shakespeare_char', dict(attn='diff')),
    ('shakespeare_char', dict(attn='diff', symmetric=True, causal=False, leak='zero_future')),
    ('shakespeare_char', dict(attn='cosine', symmetric=True)),
    ('shakespeare_char', dict(softmax1=True, leak='off_by_one', causal=False)),
    ('shakespeare_char', dict(gate='elementwise', dropout=0.2)),  # dropout: off in evaluation
    ('bigram_backcopy', dict(attn='diff', leak='time_norm', causal=False)),  # records
    ('needle', dict(attn='diffv2', n_kv_head=2)),  # records whose targets are the answers only (y = -1 elsewhere)
])
def test_evaluation_in_groups_gives_the_loss_of_one_batch_at_a_time(data, over, request):
    """estimate_loss with eval_group 1, 3 (7 batches: groups of 3, 3 and 1 filled up to 3) and 8 (one group of 7) gives,
    to fp32 rounding, the mean over eval_iters batches of the model's own mean loss on each (F.cross_entropy with
    ignore_index=-1): the number evaluation always gave. The leaks are in: none mixes batches (time_norm normalises
    over a sequence's positions)."""
    if data == 'needle':
        data = str(request.getfixturevalue('small_needle'))  # conftest.py: records of 33 tokens
    elif data == 'bigram_backcopy':
        data = str(request.getfixturevalue('small_bigram_backcopy')(32))  # likewise
    args = ['--n_layer=2', '--n_head=2', '--n_embd=32', '--block_size=32', '--batch_size=4', '--device=cpu',
            '--dtype=float32', '--compile=False', f'--dataset={data}', '--eval_iters=7', '--seed=3']
    args += [f'--{k}={v}' for k, v in over.items()]
    cfg = config.parse_config(args)
    env = processes.setup_processes(cfg)
    splits, _, n_tokens = train.setup_data(cfg, 'cpu')
    cfg['vocab_size'] = cfg['vocab_size'] or n_tokens
    torch.manual_seed(0)
    model = GPT(GPTConfig(**{k: cfg[k] for k in config.MODEL_KEYS})).eval()
    with torch.no_grad():
        want = [np.mean([model(*dataset.get_batch(split, dataset.batch_rng(3, 1, s, k), 4, cfg['block_size'],
                                                  'cpu'))[1].item() for k in range(7)])
                for s, split in enumerate(splits)]
    for group in (1, 3, 8):
        cfg['eval_group'] = group
        batches = train.eval_batches(cfg, env, splits, cfg['vocab_size'])
        assert [len(ks) for _, ks, _, _ in batches] == {1: [1] * 7, 3: [3, 3, 1], 8: [7]}[group] * 2
        assert all(X.shape[0] == 4 * max(len(k) for _, k, _, _ in batches) for _, _, X, _ in batches)
        if data.endswith('needle'):  # masked targets: each batch's mean is over its own targets
            assert all((Y == -1).any() and (Y != -1).any() for _, _, _, Y in batches)
        got = train.estimate_loss(cfg, env, model, batches)
        assert got['train'] == pytest.approx(want[0], rel=2e-6) and got['val'] == pytest.approx(want[1], rel=2e-6)


def test_eval_group_auto_is_one_on_a_cpu_and_fills_a_gpu_within_its_bounds():
    """eval_group=0: 1 on a CPU (larger batches were slower there); on CUDA as many batches as keep a forward
    within 2^16 tokens and 2^28 bytes of float logits."""
    cfg = config.parse_config(['--batch_size=32', '--block_size=256'])
    env = lambda kind: processes.Env(False, 0, 0, 1, kind, kind, 'float32', contextlib.nullcontext(), False, 1)
    assert dataset.eval_group(cfg, env('cpu'), 65) == 1
    assert dataset.eval_group(cfg, env('cuda'), 65) == 8  # the seed's 3-layer model: 8 x 8192 tokens
    assert dataset.eval_group(dict(cfg, batch_size=12, block_size=1024), env('cuda'), 50304) == 1  # GPT-2 124M
    assert dataset.eval_group(dict(cfg, eval_group=5), env('cpu'), 65) == 5  # set: as set
    assert 'eval_group=-1' in config_error(['--eval_group=-1'])


def test_training_step_never_waits_for_the_device(tmp_path, monkeypatch):
    """A step a CUDA graph can capture, and one that never stalls the GPU queue: nothing in train_step reads a
    tensor's value on the host (.item(), bool(), float(), .tolist(), .numpy()). Logging reads the loss every
    log_interval steps, outside the step."""
    step = train.Run.train_step

    def no_reads(*a, **k):
        def refuse(self, *_, **__):
            raise AssertionError("train_step read a tensor's value on the host")
        with monkeypatch.context() as m:
            for name in ('item', '__bool__', '__float__', '__int__', 'tolist', 'numpy'):
                m.setattr(torch.Tensor, name, refuse)
            return step(*a, **k)
    monkeypatch.setattr(train.Run, 'train_step', no_reads)
    for extra in ([], ['--gradient_accumulation_steps=2', '--dropout=0.1', '--attn=diff']):
        out = tmp_path / f'o{len(extra)}'
        assert train.main([*TINY, f'--out_dir={out}', '--max_iters=4', '--eval_interval=4', *extra]) == 0
        assert [r['iter'] for r in read_log(out) if r['kind'] == 'train'] == [1, 2, 3, 4]


def test_a_tensor_learning_rate_set_in_place_equals_a_float_one():
    """cuda_graph's AdamW reads lr from a tensor that set_lr fills in place (a captured step keeps the tensor's
    address); over a changing schedule its weights equal those of the float-lr AdamW, up to the tensor's float32
    rounding of the learning rate."""
    models = [GPT(GPTConfig(n_layer=1, n_head=2, n_embd=32, block_size=16, vocab_size=65)) for _ in range(2)]
    models[1].load_state_dict(models[0].state_dict())
    opts = [m.configure_optimizers(0.1, 1e-3, (0.9, 0.99), capturable=c) for m, c in zip(models, (False, True))]
    assert isinstance(opts[1].param_groups[0]['lr'], torch.Tensor) and not torch.is_tensor(opts[0].param_groups[0]['lr'])
    lr_tensor = opts[1].param_groups[0]['lr']
    x = torch.randint(0, 65, (4, 16))
    cfg = dict(config.DEFAULTS, learning_rate=1e-2, min_lr=1e-3, warmup_iters=2, lr_decay_iters=8)
    for it in range(8):
        for m, o in zip(models, opts):
            train.set_lr(o, train.get_lr(it, cfg))
            _, loss = m(x, x)
            loss.backward()
            o.step()
            o.zero_grad(set_to_none=True)
    assert opts[1].param_groups[0]['lr'] is lr_tensor and lr_tensor.item() == pytest.approx(train.get_lr(7, cfg))
    for a, b in zip(models[0].parameters(), models[1].parameters()):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)  # an update is ~1e-3


SEEDS_RUN = [*TINY, '--max_iters=6', '--lr_decay_iters=6', '--eval_interval=3', '--attn=diff', '--grad_clip=0.5',
             '--learning_rate=1e-3', '--gradient_accumulation_steps=2']


# --- checkpoints, wandb, sampling

def test_bad_checkpoints_give_clear_errors(tmp_path, run2):
    """A missing, a truncated and a foreign file: each error is one line naming the file."""
    out = run2
    data = (out / 'ckpt.pt').read_bytes()
    (tmp_path / 'trunc.pt').write_bytes(data[:len(data) // 2])
    torch.save({'model': {}, 'model_args': {}}, tmp_path / 'foreign.pt')
    for name, error in (('missing.pt', FileNotFoundError), ('trunc.pt', ValueError), ('foreign.pt', ValueError)):
        with pytest.raises(error) as e:
            load_checkpoint(str(tmp_path / name))
        one_line(str(e.value), tmp_path / name)
    model, ckpt = load_checkpoint(str(out / 'ckpt.pt'))
    assert ckpt['iter_num'] == 2 and model.config.n_embd == 64


def test_wandb_offline_gets_per_layer_lambdas(tmp_path, monkeypatch):
    """A real run with wandb, in a process of its own, offline by wandb's own environment variable and without an API
    key: its .wandb file (protobuf records) names every per-layer lambda key. Then the values, through a stand-in."""
    pytest.importorskip('wandb')
    out = tmp_path / 'o'
    env = {k: v for k, v in os.environ.items() if not k.startswith('WANDB_')}
    env.update(WANDB_MODE='offline', WANDB_SILENT='true', WANDB_DIR=str(tmp_path), HOME=str(tmp_path))
    run_train(out, '--max_iters=4', '--eval_interval=2', '--attn=diff', '--wandb_log=True', '--wandb_run_name=t',
              env=env)
    files = list((out / 'wandb').glob('offline-run-*/run-*.wandb'))
    assert len(files) == 1
    data = files[0].read_bytes()
    for layer in (1, 2):
        for k in ('full', 'lambda_1', 'lambda_2', 'init'):
            assert f'lambda/L{layer}/{k}'.encode() in data
    assert b'val_loss' in data and b'tokens_per_sec' in data

    # the values: the same as log.jsonl, at the same steps (a stand-in wandb module records the calls)
    logged = []

    class FakeRun:
        id = 'fake'
        summary = {}

        def log(self, d, step):
            logged.append(dict(d, iter=step))

        def finish(self):
            pass
    fake = type(sys)('wandb')
    fake.init = lambda **kw: FakeRun()
    monkeypatch.setitem(sys.modules, 'wandb', fake)
    out2 = tmp_path / 'o2'
    train.main([*TINY, f'--out_dir={out2}', '--max_iters=4', '--eval_interval=2', '--attn=diff', '--wandb_log=True'])
    log = read_log(out2)
    assert len(logged) == len(log) == 7  # 4 train lines and evals at 0, 2, 4
    for w, r in zip(logged, log):
        assert w['iter'] == r['iter'] and w['lambda/L2/full'] == r['lambda/L2/full']


@pytest.mark.parametrize('device', ['gpu', 'CPU', 'xpu', 'cuda:one'])
def test_a_device_that_is_not_one_is_refused_naming_the_choices(device):
    with pytest.raises(ValueError, match=r"'auto'.*'cpu'.*'cuda'.*'cuda:1'.*'mps'"):
        hardware.resolve_device(device)
    with pytest.raises(ValueError, match=re.escape(f"'{device}'")):
        processes.setup_processes(config.parse_config([f'--device={device}']))  # before any data or model


# --- what a new user trips over

@pytest.mark.parametrize('arg,named', [('--max_iters=-5', ['max_iters=-5']), ('--batch_size=0', ['batch_size=0']),
                                       ('--beta2=1.5', ['beta2=1.5']), ('--n_embd=30', ['n_embd=30', 'n_head'])])
def test_out_of_range_values_are_config_errors(arg, named):
    msg = config_error([arg])
    assert all(n in msg for n in named), msg


def test_cli_errors_help_and_warnings_need_no_traceback(tmp_path, monkeypatch):
    monkeypatch.delenv('COLUMNS', raising=False)

    def not_a_terminal(*a):  # stdout is a pipe, as under subprocess.run: the help takes its default width
        raise OSError('not a terminal')
    monkeypatch.setattr(os, 'get_terminal_size', not_a_terminal)
    p = cli('--help')
    monkeypatch.undo()
    assert p.returncode == 0 and 'learning_rate=0.0003' in p.stdout and "docs/config.md" in p.stdout
    assert len(p.stdout.splitlines()) <= 25  # one screen
    out = tmp_path / 'new'
    for arg, named in (('--device=cuda', "'cuda'"), ('--dataset=no_such_data', "'no_such_data'")):
        refused(train_cli(out, '--max_iters=2', arg, check=False), named)
        assert not out.exists()  # a failed start leaves no empty out_dir behind
    p = train_cli(out, '--max_iters=3', '--lr_decay_iters=200', '--eval_interval=3')
    assert any('lr_decay_iters=200' in line and 'max_iters=3' in line for line in p.stdout.splitlines()), p.stdout


def test_resume_continues_the_run_with_its_own_settings_and_changes_only_the_keys_named(tmp_path):
    """A resume took the command's config and refused every training key that differed from the run's until each
    was typed again; now it takes the run's own settings from ckpt.pt, and the command line changes only the keys
    it names. A config file's training keys that differ are named in one line, and the run's are kept."""
    out = tmp_path / 'o'
    train_cli(out, '--max_iters=4', '--lr_decay_iters=30', '--eval_interval=2', '--learning_rate=0.003')
    # nothing but the folder and a longer schedule: the run's batch_size 8, eval_interval 2, learning_rate 0.003 go on
    p = cli(f'--out_dir={out}', '--init_from=resume', '--max_iters=6', check=True)
    assert re.search(r'\bmax_iters\b\D+4\D+6\b', p.stdout), p.stdout  # the key that changes, from, to
    s = json.load(open(out / 'summary.json'))
    assert s['iter'] == 6 and s['config']['batch_size'] == 8 and s['config']['learning_rate'] == 0.003
    assert s['config']['eval_interval'] == 2 and s['config']['lr_decay_iters'] == 30
    assert [e['iter'] for e in read_log(out) if e.get('kind') == 'eval'] == [0, 2, 4, 6]
    # a config file that says otherwise: named in one line, the run's kept; the command line's key changes the run
    cfg = tmp_path / 'other.py'
    cfg.write_text("batch_size = 32\nlr_decay_iters = 200\n")
    shape = ['--n_layer=2', '--n_head=4', '--n_embd=64', '--block_size=32']  # a config file pins the model keys
    p = cli(cfg, *shape, f'--out_dir={out}', '--max_iters=8', '--lr_decay_iters=60', '--init_from=resume', check=True)
    line = [x for x in p.stdout.splitlines() if 'batch_size=32' in x]  # the file's key, named in one line
    assert len(line) == 1 and 'batch_size=8' in line[0] and str(cfg) in line[0], p.stdout
    s = json.load(open(out / 'summary.json'))
    assert s['iter'] == 8 and s['config']['batch_size'] == 8 and s['config']['lr_decay_iters'] == 60
    # a model key asked for is refused, not ignored with a warning (the run went on under the checkpoint's dropout)
    refused(train_cli(out, '--max_iters=10', '--init_from=resume', '--dropout=0.1', check=False), 'dropout=0.0',
            'dropout=0.1', '--dropout')
    assert load_checkpoint(str(out / 'ckpt.pt'))[1]['iter_num'] == 8


def test_a_resume_from_the_folder_alone_keeps_the_runs_bos_and_dataset(tmp_path):
    """The run's bos and dataset come back from ckpt.pt before they are checked: a bos=True run resumed with nothing
    but its folder is not refused as if asked to drop its BOS token (the default bos=False)."""
    out = tmp_path / 'o'
    train_cli(out, '--max_iters=2', '--lr_decay_iters=4', '--eval_interval=2', '--bos=True')
    cli(f'--out_dir={out}', '--init_from=resume', '--max_iters=4', check=True)
    s = json.load(open(out / 'summary.json'))
    assert s['iter'] == 4 and s['config']['bos'] is True and s['config']['dataset'] == 'shakespeare_char'
    refused(cli(f'--out_dir={out}', '--init_from=resume', '--max_iters=6', '--bos=False'), 'bos')  # asked: refused


def test_resuming_a_finished_run_with_another_models_config_names_the_mismatch(run2, tmp_path):
    """A finished run resumed with another variant's config said "nothing to train" (exit 0); the model keys are
    checked first now, so the mismatch is named."""
    out = tmp_path / 'o'
    shutil.copytree(run2, out)
    refused(cli('configs/diff_3L.py', *TINY, f'--out_dir={out}', '--max_iters=2', '--init_from=resume'),
            "attn='diff'")


def test_resume_refuses_a_changed_bos_and_eval_only_needs_a_checkpoint(tmp_path):
    """bos adds a token id the model was or was not built with: changing it on resume ended in an IndexError deep
    in the embedding, even given on purpose, and with eval_only. eval_only from scratch scored untrained weights as if a run's; on
    a checkpoint it evaluates whatever the schedule given, even one that ends before the checkpoint."""
    out = tmp_path / 'o'
    train_cli(out, '--max_iters=4', '--eval_interval=2')
    refused(train_cli(out, '--max_iters=6', '--eval_interval=2', '--init_from=resume', '--bos=True', check=False),
            'bos', '--bos=False')
    assert load_checkpoint(str(out / 'ckpt.pt'))[1]['iter_num'] == 4
    refused(train_cli(out, '--init_from=resume', '--eval_only=True', '--bos=True', check=False), 'bos', '--bos=False')
    refused(train_cli(tmp_path / 'new', '--eval_only=True', check=False), 'eval_only', '--init_from=resume')
    assert not (tmp_path / 'new').exists()
    p = train_cli(out, '--max_iters=2', '--init_from=resume', '--eval_only=True')
    assert 'step 4:' in p.stdout, p.stdout
    # with nothing but the folder, eval_only evaluates as the run did (its batch_size 8 and eval_iters 2, not the
    # defaults 12 and 200): the losses it logged at step 4
    p = cli(f'--out_dir={out}', '--init_from=resume', '--eval_only=True', '--device=cpu', '--dtype=float32')
    assert p.returncode == 0, p.stderr
    last = [e for e in read_log(out) if e.get('kind') == 'eval'][-1]
    assert last['iter'] == 4 and (f"step 4: train loss {last['train_loss']:.4f}, val loss {last['val_loss']:.4f}"
                                  in p.stdout), p.stdout
    refused(train_cli(tmp_path / 'r', '--pos=rope', '--rope_theta=-1', check=False), 'rope_theta=-1')


def test_resume_strict_refuses_even_a_change_given_on_the_command_line(tmp_path):
    """ablate.sh passes every schedule key and the seed on the command line, so a run folder copied from another
    sweep, or one of a sweep older than sweep_settings, resumed under the new settings as if on purpose; with
    resume_strict=True (ablate.sh sets it) only the run's own settings continue it."""
    out = tmp_path / 'o'
    train_cli(out, '--max_iters=4', '--lr_decay_iters=8', '--eval_interval=2')
    p = train_cli(out, '--max_iters=8', '--lr_decay_iters=8', '--eval_interval=2', '--learning_rate=0.03',
                  '--seed=7', '--init_from=resume', '--resume_strict=True', check=False)
    refused(p, 'resume_strict=True', 'seed=1337', 'seed=7', 'learning_rate=0.03')
    assert load_checkpoint(str(out / 'ckpt.pt'))[1]['iter_num'] == 4  # nothing trained
    ckpt = torch.load(out / 'ckpt.pt', weights_only=True)  # as if a run of 8 steps had stopped at step 4
    ckpt['config']['max_iters'] = 8
    torch.save(ckpt, out / 'ckpt.pt')
    (out / 'summary.json').unlink()
    train_cli(out, '--max_iters=8', '--lr_decay_iters=8', '--eval_interval=2', '--init_from=resume',
              '--resume_strict=True', '--log_interval=2')  # its own settings (and a free key changed): it goes on
    assert json.load(open(out / 'summary.json'))['iter'] == 8


# --- data

def _copy_prepare(tmp_path, name):
    d = tmp_path / 'data'
    for sub in ('shakespeare_char', name):
        (d / sub).mkdir(parents=True, exist_ok=True)
        shutil.copy(os.path.join(ROOT, 'data', sub, 'prepare.py'), d / sub / 'prepare.py')
    return d / name


def test_char_prepare_split_and_errors(tmp_path, monkeypatch):
    d = _copy_prepare(tmp_path, 'shakespeare_char')
    src = os.path.join(ROOT, 'data', 'shakespeare_char', 'input.txt')
    p = script(d / 'prepare.py', '--input', src)
    assert p.returncode == 0, p.stderr
    import numpy as np
    tr, va = np.fromfile(d / 'train.bin', dtype=np.uint16), np.fromfile(d / 'val.bin', dtype=np.uint16)
    assert (len(tr), len(va)) == (1003854, 111540)
    meta = json.load(open(d / 'meta.json'))
    assert meta['vocab_size'] == 65 and ''.join(meta['itos'][i] for i in tr[:5]) == open(src).read()[:5]
    p = script(d / 'prepare.py', '--input', tmp_path / 'nope.txt')
    assert p.returncode != 0 and str(tmp_path / 'nope.txt') in p.stderr, p.stderr
    # a failed download says how to pass a local file
    (d / 'input.txt').unlink()
    mod = runpy.run_path(str(d / 'prepare.py'), run_name='not_main')
    mod['fetch_text'].__globals__['URL'] = 'http://127.0.0.1:9/input.txt'
    with pytest.raises(SystemExit, match='--input'):
        mod['fetch_text'](None)
    assert not (d / 'input.txt').exists()


# --- bos: a fixed beginning-of-sequence token at position 0 (commit fae9fc6, 2026-11-24: the first sink setting)

def test_bos_batches_put_the_token_at_position_0_and_shift_the_text():
    tokens = np.arange(1000, dtype=np.uint16) % 60
    plain = dict(tokens=tokens, record_len=None, mask=None)
    x, y = dataset.get_batch(dict(plain, bos=60), np.random.default_rng(0), 16, 8, 'cpu')
    assert (x[:, 0] == 60).all() and (y != 60).all()
    assert torch.equal(x[:, 1:], y[:, :-1])  # the text shifted by one after bos: y[t] follows x[..t]
    for b in range(16):  # y is a window of the text
        start = int(np.flatnonzero(tokens[:-7] == y[b, 0].item())[0])
        assert torch.equal(y[b] % 60, torch.from_numpy((start + np.arange(8)) % 60).long())
    x0, y0 = dataset.get_batch(plain, np.random.default_rng(0), 16, 8, 'cpu')
    assert (x0[:, 0] != 60).all()  # without bos, nothing changes


def test_bos_run_has_one_more_token_and_samples_with_it(tmp_path, small_needle):
    out = tmp_path / 'o'
    train_cli(out, '--max_iters=2', '--eval_interval=2', '--bos=True')
    ckpt = torch.load(out / 'ckpt.pt', weights_only=True)
    assert ckpt['model_args']['vocab_size'] == 66 and ckpt['tokenizer']['bos'] == 65
    p = script('sample.py', f'--out_dir={out}', '--start=ROMEO:', '--num_samples=1', '--max_new_tokens=40', '--seed=1')
    assert p.returncode == 0, p.stderr
    text = p.stdout.split('\n---------------\n')[0]
    assert text.startswith('ROMEO:') and len(text) == len('ROMEO:') + 40  # bos is neither printed nor sampled
    refused(train_cli(tmp_path / 'n', '--max_iters=2', '--bos=True', f'--dataset={small_needle}', '--block_size=32',
                      check=False), 'bos=True', str(small_needle))
    refused(train_cli(tmp_path / 'v', '--max_iters=2', '--bos=True', '--vocab_size=65', check=False),
            'vocab_size=65', '66')


# --- window_order='sequential': a reproduction of an unshuffled stride-1 loader (commit 73fc5a5, 2026-11-24)

def test_sequential_windows_walk_the_stream_in_order_and_wrap():
    tokens = np.arange(100, dtype=np.uint16)
    plain = dict(tokens=tokens, record_len=None, mask=None)
    x, y = dataset.get_batch(plain, np.random.default_rng(0), 4, 8, 'cpu', start=90)
    starts = x[:, 0].tolist()
    assert starts == [90, 91, 0, 1]  # 92 windows of 8 + 1 tokens fit in 100 tokens: start 92 wraps to 0
    for b in range(4):
        assert torch.equal(x[b], torch.arange(starts[b], starts[b] + 8))
        assert torch.equal(y[b], x[b] + 1)
    xb, yb = dataset.get_batch(dict(plain, bos=200), np.random.default_rng(0), 4, 8, 'cpu', start=92)
    assert (xb[:, 0] == 200).all() and yb[:, 0].tolist() == [92, 0, 1, 2]  # with bos, 93 windows of 8 fit
    assert torch.equal(yb[0], torch.arange(92, 100))
    x1, _ = dataset.get_batch(plain, np.random.default_rng(0), 4, 8, 'cpu')
    x2, _ = dataset.get_batch(plain, np.random.default_rng(0), 4, 8, 'cpu', start=None)
    assert torch.equal(x1, x2) and x1[:, 0].tolist() != starts  # random windows are unchanged


def test_sequential_micro_batches_tile_the_stream_across_ranks_and_steps():
    cfg = dict(window_order='sequential', batch_size=8)
    n = 4  # e.g. 2 ranks x 2 micro-batches: micro-batch g = rank * accum + m
    got = [dataset.sequential_start(cfg, it, g, n) for it in range(3) for g in range(n)]
    assert got == [8 * k for k in range(12)]  # every window once, in order, whatever the split into processes
    assert dataset.sequential_start(dict(cfg, window_order='random'), 5, 1, n) is None


def test_sequential_training_steps_take_consecutive_windows(tmp_path, monkeypatch):
    """Through the trainer: with 2 micro-batches a step, the training batches start at 0, 8, 16, 24, ... (batch
    8), each batch the 8 windows after the last, while evaluation keeps random windows (start None)."""
    seen = []
    orig = train.get_batch

    def record(data, rng, batch_size, block_size, device, start=None):
        x, y = orig(data, rng, batch_size, block_size, device, start)
        seen.append((start, x[:, 0].tolist()))
        return x, y
    monkeypatch.setattr(train, 'get_batch', record)  # training's batches
    monkeypatch.setattr(dataset, 'get_batch', record)  # evaluation's (dataset.eval_batches)
    monkeypatch.setattr(train, 'check_causal', lambda *a, **k: None)
    train.main([*TINY, f'--out_dir={tmp_path / "o"}', '--max_iters=3', '--eval_interval=3', '--eval_iters=1',
                '--gradient_accumulation_steps=2', '--window_order=sequential'])
    starts = [s for s, _ in seen if s is not None]
    assert starts == [0, 8, 16, 24, 32, 40]  # 3 steps x 2 micro-batches
    tokens = dataset.load_split('shakespeare_char', 'train', dataset.load_meta('shakespeare_char'))['tokens']
    for s, first in seen:
        if s is not None:  # each window's first token is the text at its start
            assert first == [int(tokens[i]) for i in range(s, s + 8)]
    # evaluation's batches, random windows: one per split, made at the first eval (0) and kept for the one at 3
    assert sum(s is None for s, _ in seen) == 2


def test_sequential_run_trains_and_refuses_records(tmp_path, small_needle):
    out = tmp_path / 'o'
    train_cli(out, '--max_iters=3', '--eval_interval=3', '--window_order=sequential')
    assert json.load(open(out / 'summary.json'))['config']['window_order'] == 'sequential'
    refused(train_cli(tmp_path / 'n', '--max_iters=2', '--window_order=sequential', f'--dataset={small_needle}',
                      check=False), "window_order='sequential'", str(small_needle))
    refused(train_cli(tmp_path / 'x', '--max_iters=2', '--window_order=shuffled', check=False),
            "window_order='shuffled'", '--window_order=random')


def test_generate_keeps_bos_at_position_0_when_it_crops():
    torch.manual_seed(0)
    m = GPT(GPTConfig(block_size=8, vocab_size=12, n_layer=1, n_head=2, n_embd=16)).eval()
    seen = []
    orig = m.forward
    m.forward = lambda idx, targets=None: (seen.append(idx.clone()), orig(idx, targets))[1]
    with torch.no_grad():
        y = m.generate(torch.tensor([[11, 3, 4]]), 20, bos=11)
    assert all(s[0, 0].item() == 11 and s.size(1) <= 8 for s in seen) and seen[-1].size(1) == 8
    assert torch.equal(seen[-1][0, 1:], y[0, -8:-1])  # the latest 7 tokens after bos
    assert (y[0, 1:] != 11).all()  # never sampled


@pytest.mark.parametrize('bos', [None, 65])
def test_batches_gathered_on_the_device_equal_the_host_gather(bos):
    """A split held resident (on the GPU in training; forced here on the CPU) gives the same batches as the host's
    gather from the memmap: the same pure function of (seed, iteration), random and sequential windows, with and
    without a bos token."""
    meta = dataset.load_meta('shakespeare_char')
    host = dataset.load_split('shakespeare_char', 'train', meta, bos)
    held = dataset.load_split('shakespeare_char', 'train', meta, bos, resident=True)
    assert host['resident'] is None and held['resident'] is not None
    for start in (None, 0, len(host['tokens']) - 40):
        a = dataset.get_batch(host, dataset.batch_rng(3, 0, 7, 1), 5, 32, 'cpu', start)
        b = dataset.get_batch(held, dataset.batch_rng(3, 0, 7, 1), 5, 32, 'cpu', start)
        for u, v in zip(a, b):
            assert u.dtype == v.dtype == torch.int64 and torch.equal(u, v) and u.is_contiguous()
        GPT(GPTConfig(n_layer=1, n_head=2, n_embd=16, block_size=32, vocab_size=66))(*b)  # a batch the model takes
    assert not torch.equal(a[0], dataset.get_batch(host, dataset.batch_rng(4, 0, 7, 1), 5, 32, 'cpu')[0])
