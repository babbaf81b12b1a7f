"""
The numerics fingerprint: a refactor changes no number. A few training steps of every sweep family, run through
train.py as a user runs it, must log exactly what the code logged at REFERENCE (the commit before the redesign of
model.py and train.py): every train loss, every eval's train and val loss, every lambda, bit for bit.

Families (CASES): the Shakespeare variants (each row of variants.py with a configs/<name>_3L.py, and diff_gated's
6L), Bigram-Backcopy with OrthoAdam and the headwise gate, needles with Diff V2, the LLaMA-style layer, and two
masking-bug reproductions (model.py's leak=...), each at dropout 0 and 0.2, in float32 and bfloat16 (SETTINGS), on
the CPU, one thread, a tiny shape.

Floating point differs between processors (a CPU with bf16 units rounds bfloat16 matmuls otherwise than one
without), so the fixture (tests/fixtures/numerics.json) records the processor kind and torch version it was made
on. On a machine of that kind the test compares against the fixture; elsewhere it runs the same steps in the code
of REFERENCE, taken from git history into a temporary folder, and compares against that. It never skips.

  python tests/test_numerics.py record        # the fixture, from the working tree (only at REFERENCE's arithmetic)
"""
import contextlib
import io
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIXTURE = os.path.join(ROOT, 'tests', 'fixtures', 'numerics.json')
REFERENCE = '647b1d6'  # the arithmetic of a570e70, before model.py and train.py were redesigned

SHAPE = ['--n_layer=2', '--n_embd=32', '--n_head=2', '--batch_size=4', '--device=cpu', '--compile=False',
         '--max_iters=3', '--lr_decay_iters=3', '--warmup_iters=1', '--learning_rate=1e-3', '--min_lr=1e-4',
         '--log_interval=1', '--eval_interval=3', '--eval_iters=1', '--wandb_log=False']
SHAKESPEARE = ['nanogpt_3L', 'diff_3L', 'sym_3L', 'diff_sym_3L', 'norm_sym_3L', 'sym_noself_3L', 'gated_3L',
               'softmax1_3L', 'diff_gated_6L']
# name: (config file, dataset folder key, extra flags)
CASES = {**{name: (name, 'shakespeare_char', ['--block_size=16']) for name in SHAKESPEARE},
         'bb_orthoadam_2L': ('bb_orthoadam_2L', 'bigram_backcopy', ['--block_size=16']),
         'bb_gated_headwise_2L': ('bb_gated_headwise_2L', 'bigram_backcopy', ['--block_size=16']),
         'needle_diffv2': ('needle_diffv2', 'needle', []),  # block 32: the needle records' length
         'llama_diff_6L': ('llama_diff_6L', 'shakespeare_char', ['--block_size=16']),
         'llama_sym_6L': ('llama_sym_6L', 'shakespeare_char', ['--block_size=16']),
         'leak_zero_future': ('nanogpt_3L', 'shakespeare_char', ['--block_size=16', '--causal=False',
                                                                 '--leak=zero_future']),
         'leak_time_norm': ('diff_3L', 'shakespeare_char', ['--block_size=16', '--causal=False', '--leak=time_norm'])}
SETTINGS = {f'{dtype}/dropout{p}': [f'--dtype={dtype}', f'--dropout={p}']
            for dtype in ('float32', 'bfloat16') for p in ('0.0', '0.2')}
TIMING = ('tokens_per_sec', 'ms_per_iter', 'mfu')  # the clock's, not the arithmetic's


def processor():
    """What decides the CPU's float path: its bf16 units (AMX, AVX512-BF16, or neither) and torch's version."""
    import torch
    flags = open('/proc/cpuinfo').read().split() if os.path.exists('/proc/cpuinfo') else []
    kind = next((f for f in ('amx_bf16', 'avx512_bf16', 'avx512f', 'avx2') if f in flags), platform.machine())
    return dict(cpu=kind, machine=platform.machine(), torch=torch.__version__)


def prepare_data(where):
    """The datasets, small, in `where` (no download: Bigram-Backcopy's bigram is tiny Shakespeare's input.txt);
    -> {dataset key: absolute folder}."""
    shakespeare = os.path.join(ROOT, 'data', 'shakespeare_char')
    text = os.path.join(shakespeare, 'input.txt')
    assert os.path.exists(text), f"{text} is missing (tiny Shakespeare; data/shakespeare_char/prepare.py fetches it)"
    bb = os.path.join(where, 'bigram_backcopy')
    os.makedirs(bb)
    shutil.copy(os.path.join(ROOT, 'data', 'bigram_backcopy', 'prepare.py'), bb)  # it writes beside itself
    for cmd in ([os.path.join(bb, 'prepare.py'), f'--input={text}', '--block_size=16', '--n_train=64', '--n_val=16'],
                [os.path.join(ROOT, 'data', 'needle', 'prepare.py'), '--n_train=64', '--n_val=16',
                 f'--out_dir={os.path.join(where, "needle")}']):
        p = subprocess.run([sys.executable, *cmd], capture_output=True, text=True, timeout=300)
        assert p.returncode == 0, p.stdout + p.stderr
    sys.path.insert(0, ROOT)
    import dataset
    dataset.ensure_data('shakespeare_char')
    return dict(shakespeare_char=shakespeare, bigram_backcopy=bb, needle=os.path.join(where, 'needle'))


def fingerprint(root, data, out):
    """Every case in every setting through `root`'s train.cli in this process, one thread: {run: {key: values}}, the
    values of each logged number in log order (train lines under 'train/...', evals under 'eval/...')."""
    sys.path.insert(0, root)
    import torch
    import train
    assert os.path.dirname(os.path.abspath(train.__file__)) == os.path.abspath(root), train.__file__
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    runs, cwd = {}, os.getcwd()
    try:
        os.chdir(root)
        for name, (config, data_key, flags) in CASES.items():
            for setting, setting_flags in SETTINGS.items():
                run = f'{name}/{setting}'
                out_dir = os.path.join(out, run.replace('/', '_'))
                argv = [os.path.join('configs', config + '.py'), *SHAPE, *flags, *setting_flags,
                        f'--dataset={data[data_key]}', f'--out_dir={out_dir}']
                said = io.StringIO()
                with contextlib.redirect_stdout(said), contextlib.redirect_stderr(said):
                    code = train.cli(argv)
                assert code == 0, f"{run}: train.py {' '.join(argv)} exited {code}:\n{said.getvalue()}"
                values = {}
                with open(os.path.join(out_dir, 'log.jsonl')) as f:
                    for line in map(json.loads, f):
                        for k, v in line.items():
                            if k not in ('iter', 'kind', *TIMING) and isinstance(v, (int, float)):
                                values.setdefault(f"{line['kind']}/{k}", []).append(v)
                runs[run] = values
    finally:
        os.chdir(cwd)
        torch.set_num_threads(threads)
    return runs


def reference_runs(tmp, data):
    """fingerprint() of REFERENCE's code (git archive into tmp), in a process of its own."""
    ref = os.path.join(tmp, 'reference')
    os.makedirs(ref)
    archive = subprocess.run(['git', '-C', ROOT, 'archive', REFERENCE], capture_output=True)
    assert archive.returncode == 0, (
        f"this machine ({processor()}) is not the fixture's kind, and git archive {REFERENCE} failed, so there is "
        f"nothing to compare with: fetch the history (git fetch --unshallow) ({archive.stderr.decode()[-300:]})")
    subprocess.run(['tar', '-x', '-C', ref], input=archive.stdout, check=True)
    result = os.path.join(tmp, 'reference.json')
    p = subprocess.run([sys.executable, os.path.abspath(__file__), 'run', ref, json.dumps(data), result],
                       capture_output=True, text=True, timeout=1200, env={**os.environ, 'OMP_NUM_THREADS': '1'})
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    with open(result) as f:
        return json.load(f)


def differences(runs, expected):
    """One line per run whose numbers differ from the expected ones, naming the first differing number."""
    lines = []
    for run in sorted(set(runs) | set(expected)):
        got, want = runs.get(run), expected.get(run)
        if got == want:
            continue
        if got is None or want is None:
            lines.append(f"{run}: {'not run now' if got is None else 'not in the reference'}")
            continue
        for key in sorted(set(got) | set(want)):
            if got.get(key) != want.get(key):
                lines.append(f"{run}: {key} is {got.get(key)}, the reference logged {want.get(key)}")
                break
    return lines


def test_training_logs_the_reference_numbers_bit_for_bit(tmp_path):
    with open(FIXTURE) as f:
        fixture = json.load(f)
    data = prepare_data(str(tmp_path / 'data'))
    runs = fingerprint(ROOT, data, str(tmp_path / 'runs'))
    if fixture['processor'] == processor():
        expected, against = fixture['runs'], f"the fixture ({fixture['processor']})"
    else:
        expected, against = reference_runs(str(tmp_path), data), f"{REFERENCE}'s code on this machine"
    assert set(expected) == {f'{n}/{s}' for n in CASES for s in SETTINGS}  # every case and setting compared
    bad = differences(runs, expected)
    assert not bad, (f"{len(bad)} of {len(runs)} runs log other numbers than {against}: a change of arithmetic "
                     f"(see the developers' rule: it goes in a commit of its own, its stale runs named):\n"
                     + '\n'.join(bad))


if __name__ == '__main__':
    if sys.argv[1:2] == ['run']:  # the reference's runs: python tests/test_numerics.py run ROOT DATA_JSON OUT_JSON
        root, data, result = sys.argv[2], json.loads(sys.argv[3]), sys.argv[4]
        with tempfile.TemporaryDirectory() as tmp:
            runs = fingerprint(root, data, tmp)
        with open(result, 'w') as f:
            json.dump(runs, f)
    elif sys.argv[1:] == ['record']:
        with tempfile.TemporaryDirectory() as tmp:
            os.environ['XDG_CACHE_HOME'] = tmp  # the CPU peak a run times stays out of the user's cache
            data = prepare_data(os.path.join(tmp, 'data'))
            runs = fingerprint(ROOT, data, os.path.join(tmp, 'runs'))
        os.makedirs(os.path.dirname(FIXTURE), exist_ok=True)
        with open(FIXTURE, 'w') as f:
            f.write('{"processor": %s,\n "reference": "%s",\n "runs": {\n' % (json.dumps(processor()), REFERENCE))
            f.write(',\n'.join(f'  {json.dumps(run)}: {json.dumps(v)}' for run, v in runs.items()) + '\n}}\n')
        print(f"{FIXTURE}: {len(runs)} runs")
    else:
        sys.exit(__doc__)
