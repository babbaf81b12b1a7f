"""
The numerics fingerprint: a refactor changes no number. A few training steps of every sweep family, run through
train.py as a user runs it, must log exactly what the code logged at REFERENCE (the commit before the redesign of
model.py and train.py): every train loss, every eval's train and val loss, every lambda, bit for bit.

Families (CASES): the Shakespeare variants (each row of variants.py with a configs/<name>_3L.py, and diff_gated's
6L), Bigram-Backcopy with OrthoAdam and the headwise gate, needles with Diff V2, the LLaMA-style layer, and two
masking-bug reproductions (model.py's leak=...), each at dropout 0 and 0.2, in float32 and bfloat16 (SETTINGS), on
the CPU, one thread, a tiny shape.

The test runs half of that grid (COMPARED): each case in two settings that between them have both dtypes and both
dropouts, the cases taking the two such pairs in turn, so that each setting is run by half the cases. The whole
grid, 64 runs, was a minute of a CI core, and twice that where the reference had to run too.

Floating point differs between processors (a CPU with bf16 units rounds bfloat16 matmuls otherwise than one
without), so the fixture (tests/fixtures/numerics.json) holds REFERENCE's numbers for the whole grid per processor
kind and torch version. On a machine of a kind it holds the test compares against them; elsewhere it runs the same
steps in the code of REFERENCE, taken from git history into a temporary folder, and compares against that. It never
skips.

  python tests/test_numerics.py record        # this machine's kind into the fixture, from REFERENCE's code
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
GRID = [f'{name}/{setting}' for name in CASES for setting in SETTINGS]
PAIRS = (('float32/dropout0.0', 'bfloat16/dropout0.2'), ('float32/dropout0.2', 'bfloat16/dropout0.0'))
COMPARED = [f'{name}/{setting}' for i, name in enumerate(CASES) for setting in PAIRS[i % 2]]


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


def fingerprint(root, data, out, runs):
    """The runs named ('case/dtype/dropoutP') through `root`'s train.cli in this process, one thread: {run: {key:
    values}}, the values of each logged number in log order (train lines under 'train/...', evals under 'eval/...').
    MFU's peak is a stub: timing it (ten 1024^3 matmuls a start) was half of every run's time, and only the MFU,
    which is not compared, reads it."""
    sys.path.insert(0, root)
    import torch
    import rundir
    import train
    for module in (train, rundir):
        assert os.path.dirname(os.path.abspath(module.__file__)) == os.path.abspath(root), module.__file__
    threads, peak = torch.get_num_threads(), rundir.peak
    torch.set_num_threads(1)
    rundir.peak = lambda device, dtype, threads=None: (1e12, 'a stub of the numerics test')
    logged, cwd = {}, os.getcwd()
    try:
        os.chdir(root)
        for run in runs:
            name, setting = run.split('/', 1)
            config, data_key, flags = CASES[name]
            out_dir = os.path.join(out, run.replace('/', '_'))
            argv = [os.path.join('configs', config + '.py'), *SHAPE, *flags, *SETTINGS[setting],
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
            logged[run] = values
    finally:
        os.chdir(cwd)
        torch.set_num_threads(threads)
        rundir.peak = peak
    return logged


def reference_runs(tmp, data, runs):
    """fingerprint() of REFERENCE's code (git archive into tmp), in a process of its own."""
    ref = os.path.join(tmp, 'reference')
    os.makedirs(ref)
    archive = subprocess.run(['git', '-C', ROOT, 'archive', REFERENCE], capture_output=True)
    assert archive.returncode == 0, (
        f"this machine ({processor()}) is not the fixture's kind, and git archive {REFERENCE} failed, so there is "
        f"nothing to compare with: fetch the history (git fetch --unshallow) ({archive.stderr.decode()[-300:]})")
    subprocess.run(['tar', '-x', '-C', ref], input=archive.stdout, check=True)
    result = os.path.join(tmp, 'reference.json')
    p = subprocess.run([sys.executable, os.path.abspath(__file__), 'run', ref, json.dumps(data), json.dumps(runs),
                        result],
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


def write_fixture(kinds):
    """The fixture, a run a line: [{processor, runs}] of REFERENCE's code."""
    with open(FIXTURE, 'w') as f:
        f.write('{"reference": "%s",\n "kinds": [\n' % REFERENCE)
        f.write(',\n'.join(' {"processor": %s,\n  "runs": {\n' % json.dumps(k['processor'])
                            + ',\n'.join(f'   {json.dumps(run)}: {json.dumps(v)}' for run, v in k['runs'].items())
                            + '}}' for k in kinds) + '\n]}\n')


def recorded():
    """The fixture's runs for this machine's kind of processor, or None where it holds none."""
    with open(FIXTURE) as f:
        fixture = json.load(f)
    assert fixture['reference'] == REFERENCE, f"{FIXTURE} holds {fixture['reference']}'s numbers, not {REFERENCE}'s"
    return next((kind['runs'] for kind in fixture['kinds'] if kind['processor'] == processor()), None)


def test_training_logs_the_reference_numbers_bit_for_bit(tmp_path):
    data = prepare_data(str(tmp_path / 'data'))
    runs = fingerprint(ROOT, data, str(tmp_path / 'runs'), COMPARED)
    expected, against = recorded(), f"the fixture ({processor()})"
    if expected is None:
        expected, against = reference_runs(str(tmp_path), data, COMPARED), f"{REFERENCE}'s code on this machine"
    expected = {run: expected.get(run) for run in COMPARED}
    assert None not in expected.values(), f"{against} lacks runs: {[r for r, v in expected.items() if v is None]}"
    bad = differences(runs, expected)
    assert not bad, (f"{len(bad)} of {len(runs)} runs log other numbers than {against}: a change of arithmetic "
                     f"(see the developers' rule: it goes in a commit of its own, its stale runs named):\n"
                     + '\n'.join(bad))


if __name__ == '__main__':
    if sys.argv[1:2] == ['run']:  # the reference's runs: python tests/test_numerics.py run ROOT DATA RUNS OUT_JSON
        root, data, runs, result = sys.argv[2], json.loads(sys.argv[3]), json.loads(sys.argv[4]), sys.argv[5]
        with tempfile.TemporaryDirectory() as tmp:
            logged = fingerprint(root, data, tmp, runs)
        with open(result, 'w') as f:
            json.dump(logged, f)
    elif sys.argv[1:] == ['record']:
        with tempfile.TemporaryDirectory() as tmp:
            os.environ['XDG_CACHE_HOME'] = tmp  # the CPU peak a run times stays out of the user's cache
            data = prepare_data(os.path.join(tmp, 'data'))
            logged = reference_runs(tmp, data, GRID)
        with open(FIXTURE) as f:
            kinds = [k for k in json.load(f)['kinds'] if k['processor'] != processor()]
        write_fixture(kinds + [dict(processor=processor(), runs=logged)])
        print(f"{FIXTURE}: {len(logged)} runs on {processor()}, beside {len(kinds)} other kinds")
    else:
        sys.exit(__doc__)
