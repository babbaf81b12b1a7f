"""The CUDA path: every variant on a GPU against the same model on the CPU, fused kernels, compile, bf16, and
train.py/sample.py/analyze.py end to end. Skipped where no GPU is present (CI); run them on one with
`python -m pytest tests/test_cuda.py`."""
import contextlib
import io
import json
import os
import subprocess
import sys

import pytest
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
import dataset  # noqa: E402
from causality import check_causal  # noqa: E402
from model import GPT, GPTConfig  # noqa: E402

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")

VARIANTS = {
    'nanogpt': {}, 'diff': dict(attn='diff', lambda_init_depth_offset=1), 'sym': dict(symmetric=True),
    'diff_sym': dict(attn='diff', symmetric=True), 'norm_sym': dict(attn='cosine', symmetric=True),
    'sym_noself': dict(symmetric=True, mask_self=True), 'gated': dict(gate='elementwise'),
    'gated_headwise_value': dict(gate='headwise', gate_pos='value'), 'softmax1': dict(softmax1=True),
    'diff_gated': dict(attn='diff', gate='elementwise'), 'diff_softmax1': dict(attn='diff', softmax1=True),
    'diffv2': dict(attn='diffv2', n_kv_head=2), 'gqa_rope': dict(n_kv_head=2, pos='rope', norm='rmsnorm', mlp='swiglu'),
}


def make(variant, **over):
    torch.manual_seed(0)
    cfg = dict(block_size=64, vocab_size=65, n_layer=2, n_head=4, n_embd=64, bias=False)
    cfg.update(VARIANTS[variant], **over)
    return GPT(GPTConfig(**cfg))


def batch(B=4, T=64, seed=1):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, 65, (B, T), generator=g), torch.randint(0, 65, (B, T), generator=g)


def loss_and_grads(model, x, y):
    model.zero_grad(set_to_none=True)
    _, loss = model(x, y)
    loss.backward()
    return loss.detach().double().cpu(), [p.grad.detach().double().cpu() for p in model.parameters()]


def rel(a, b):
    return ((a - b).norm() / b.norm().clamp_min(1e-30)).item()


@pytest.fixture(autouse=True)
def no_tf32():
    """Full fp32 matmuls, so a GPU result can be held to fp32 tolerances against the CPU."""
    old = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    yield
    torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = old


@pytest.mark.parametrize('causal', [True, False])
@pytest.mark.parametrize('variant', sorted(VARIANTS))
def test_every_variant_on_cuda_equals_the_cpu_in_fp32(variant, causal):
    if variant == 'sym_noself' and not causal:
        pytest.skip("covered causally")
    model = make(variant, causal=causal)
    x, y = batch()
    l_cpu, g_cpu = loss_and_grads(model, x, y)
    l_gpu, g_gpu = loss_and_grads(model.cuda(), x.cuda(), y.cuda())
    assert rel(l_gpu, l_cpu) < 1e-5
    worst = max(rel(a, b) for a, b in zip(g_gpu, g_cpu))
    assert worst < 1e-3, worst


@pytest.mark.parametrize('variant', sorted(VARIANTS))
def test_bf16_autocast_on_cuda_stays_near_fp32(variant):
    model = make(variant).cuda()
    x, y = (t.cuda() for t in batch())
    l32, _ = loss_and_grads(model, x, y)
    with torch.autocast('cuda', dtype=torch.bfloat16):
        l16, g16 = loss_and_grads(model, x, y)
    assert abs(l16 - l32) / l32 < 2e-2 and all(torch.isfinite(g).all() for g in g16)


@pytest.mark.parametrize('variant', ['nanogpt', 'diff', 'sym', 'diff_sym', 'gated', 'softmax1', 'diff_softmax1'])
def test_softmax_family_takes_a_fused_sdpa_kernel_on_cuda(variant):
    """With the math fallback disallowed, forward and backward in bf16 still run: a fused kernel was taken."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    model = make(variant).cuda()
    x, y = (t.cuda() for t in batch())
    with sdpa_kernel([SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.CUDNN_ATTENTION]), \
            torch.autocast('cuda', dtype=torch.bfloat16):
        loss, grads = loss_and_grads(model, x, y)
    assert torch.isfinite(loss) and all(torch.isfinite(g).all() for g in grads)


@pytest.mark.parametrize('variant', ['nanogpt', 'diff_sym', 'gated', 'softmax1'])
def test_compile_on_cuda_equals_eager(variant):
    model = make(variant).cuda()
    x, y = (t.cuda() for t in batch())
    l_eager, g_eager = loss_and_grads(model, x, y)
    l_comp, g_comp = loss_and_grads(torch.compile(model), x, y)
    assert rel(l_comp, l_eager) < 1e-5
    assert max(rel(a, b) for a, b in zip(g_comp, g_eager)) < 1e-3


def sweep_models():
    """Every model a sweep or config runs (ablate.sh's variants under every profile and ARCH, each
    configs/<variant>_<depth>.py at its smallest depth in layers, the needle configs with diffv2) and the seed's five
    under each masking bug (LEAK=, time_norm: Diff's own), as (name, model keys, optimizer)."""
    import glob
    import re
    from config import MODEL_KEYS, parse_config
    from profiles import LEAKS
    smallest = {}  # each variant's config at its smallest depth in layers (3L before 6L; 124M only where alone)
    for path in glob.glob(os.path.join(ROOT, 'configs', '*.py')):
        m = re.match(r'(.+)_(\d+)(L|M)\.py$|(needle_.+)\.py$', os.path.basename(path))
        if m:
            key = (m[3] == 'M', int(m[2])) if m[1] else (False, 0)
            name = m[1] or m[4]
            if name not in smallest or key < smallest[name][0]:
                smallest[name] = (key, path)
    runs = [(name, [path]) for name, (_, path) in sorted(smallest.items())]
    for leak in LEAKS:
        for v in ('diff', 'diff_sym') if leak == 'time_norm' else ('nanogpt', 'diff', 'sym', 'diff_sym', 'norm_sym'):
            runs.append((f'{v}+{leak}', [os.path.join(ROOT, 'configs', f'{v}_3L.py'), '--causal=False',
                                         f'--leak={leak}']))
    out = []
    with contextlib.redirect_stdout(io.StringIO()):  # the configs' notes
        for name, args in runs:
            cfg = parse_config(args)
            out.append((name, {k: cfg[k] for k in MODEL_KEYS}, cfg['optimizer']))
    return out


SWEEP_MODELS = sweep_models()


@pytest.mark.parametrize('name,keys,optimizer', SWEEP_MODELS, ids=[m[0] for m in SWEEP_MODELS])
def test_cuda_graph_captures_every_sweep_model_and_replays_its_eager_steps(name, keys, optimizer):
    """cuda_graph (auto in every sweep): each model a sweep runs, at a tiny size in fp32 without dropout, trains 6
    steps through CudaGraphs (3 eager warm-ups, a capture, replays) with the losses and weights of 6 eager steps, and
    its grouped eval forward (train.batch_losses, captured) gives the eager per-batch losses. OrthoAdam's step is not
    captured: auto leaves it eager, and the reason says so."""
    import config
    import processes
    import train
    from cuda_graph import CudaGraphs, cuda_graph_refusal
    cfg = config.parse_config(['--batch_size=4', '--block_size=64', f'--optimizer={optimizer}'])
    env = processes.Env(False, 0, 0, 1, 'cuda', 'cuda', 'float32', contextlib.nullcontext(), False, 1)
    if optimizer != 'adamw':
        assert 'AdamW' in cuda_graph_refusal(cfg, env)
        return
    assert cuda_graph_refusal(cfg, env) is None
    keys = dict(keys, n_layer=2, n_head=4, n_embd=64, block_size=64, vocab_size=70, dropout=0.0,
                n_kv_head=keys['n_kv_head'] and 2)
    models = []
    for _ in range(2):
        torch.manual_seed(0)
        models.append(GPT(GPTConfig(**keys)).cuda())
    opts = [m.configure_optimizers(0.1, 1e-3, (0.9, 0.99), capturable=graphed) for m, graphed in
            zip(models, (False, True))]
    graphs, scaler = CudaGraphs(cfg, env), torch.amp.GradScaler('cuda', enabled=False)
    losses = ([], [])
    for it in range(6):
        xy = [tuple(t.cuda() for t in batch(4, 64, seed=it))]
        xy = [(x % 70, y % 70) for x, y in xy]
        losses[0].append(train.step(models[0], opts[0], scaler, xy, 1, 1.0, contextlib.nullcontext()).item())
        run = lambda b: train.step(models[1], opts[1], scaler, b, 1, 1.0, contextlib.nullcontext())
        losses[1].append(graphs.step(run, xy, reseed=lambda: None).item())
    assert graphs.train_graph is not None  # captured, and replayed from step 4 on
    assert max(abs(a - b) for a, b in zip(*losses)) < 1e-4, losses
    for a, b in zip(models[0].parameters(), models[1].parameters()):
        assert (a - b).abs().max().item() < 1e-3
    X = torch.cat([batch(4, 64, seed=10 + k)[0] for k in range(3)]).cuda() % 70
    models[1].eval()
    with torch.no_grad():
        eager = torch.stack([models[1](X[4 * k:4 * k + 4], X[4 * k:4 * k + 4])[1] for k in range(3)])
        grouped = graphs.eval_loss(lambda x, y: train.batch_losses(env, models[1], x, y, 3), X, X)
    assert (grouped - eager).abs().max().item() < 1e-5


def test_dropout_on_cuda_is_random_in_training_and_off_in_eval():
    model = make('diff_sym', dropout=0.2).cuda()
    x, y = (t.cuda() for t in batch())
    model.train()
    a, b = (model(x, y)[1].item() for _ in range(2))
    model.eval()
    c, d = (model(x, y)[1].item() for _ in range(2))
    assert a != b and c == d


@pytest.mark.parametrize('variant', ['nanogpt', 'diff', 'diff_sym', 'gated', 'softmax1', 'diffv2'])
def test_check_causal_passes_on_cuda(variant):
    model = make(variant).cuda().eval()
    check_causal(model, 65, 64, 'cuda')


def run(script, *args):
    p = subprocess.run([sys.executable, os.path.join(ROOT, script), *args], cwd=ROOT, capture_output=True,
                       text=True, timeout=900)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    return p.stdout


def test_train_resume_sample_and_analyze_on_cuda(tmp_path):
    """The defaults a GPU user gets: device and dtype auto (bf16 on Ampere or newer), torch.compile on, the step and
    eval forward graphed (cuda_graph auto)."""
    dataset.ensure_data('shakespeare_char')
    out = str(tmp_path / 'run')
    tiny = ['configs/diff_sym_3L.py', '--n_embd=64', '--n_head=4', '--block_size=64', '--batch_size=8',
            '--eval_interval=10', '--eval_iters=2', '--log_interval=5', '--warmup_iters=2', f'--out_dir={out}',
            '--dropout=0.2']
    run('train.py', *tiny, '--max_iters=10', '--lr_decay_iters=20')
    s = json.load(open(os.path.join(out, 'summary.json')))
    assert s['device'].startswith('cuda') and s['compile'] is True and s['cuda_graph'] is True
    assert s['dtype'] == ('bfloat16' if torch.cuda.is_bf16_supported() else 'float16')
    run('train.py', *tiny, '--max_iters=20', '--lr_decay_iters=20', '--init_from=resume')
    s = json.load(open(os.path.join(out, 'summary.json')))
    assert s['iter'] == 20 and s['finished'] and len(s['lambda_table']) == 3
    text = run('sample.py', f'--out_dir={out}', '--num_samples=1', '--max_new_tokens=50', '--device=cuda')
    assert len(text.strip()) > 0
    run('analyze.py', f'--out_dir={out}', '--device=cuda', '--dtype=bfloat16', '--eval_iters=2', '--batch_size=4')
    a = json.load(open(os.path.join(out, 'analysis.json')))
    assert a['device'].startswith('cuda') and a['iter'] == 20 and len(a['layers']) == 3


def train_losses(out):
    """The training losses a run logged (log_interval=1: every step), in order."""
    return [r['loss'] for r in map(json.loads, open(os.path.join(out, 'log.jsonl')))
            if r.get('kind') == 'train']


def graph_run(tmp_path, name, *args):
    dataset.ensure_data('shakespeare_char')
    out = str(tmp_path / name)
    run('train.py', 'configs/nanogpt_3L.py', '--n_embd=64', '--n_head=4', '--block_size=64', '--batch_size=8',
        '--eval_interval=10', '--eval_iters=3', '--log_interval=1', '--warmup_iters=2', '--max_iters=20',
        '--lr_decay_iters=20', '--dtype=float32', '--compile=False', '--cuda_graph=False', f'--out_dir={out}',
        *args)  # eager unless args say --cuda_graph=True (auto would graph the eager runs too)
    return out


@pytest.mark.parametrize('accum,compiled', [(1, False), (2, False), (2, True)])
def test_cuda_graph_step_equals_the_eager_step(tmp_path, accum, compiled):
    """cuda_graph=True: 3 eager warm-up steps, then 17 replays of the captured step, whose losses, evals and final
    weights match the eager run's (fp32, no dropout; the learning rate changes every step, read from the tensor).
    compiled: the captured step runs inductor's kernels (compile=True, the CUDA default)."""
    args = (f'--gradient_accumulation_steps={accum}', '--dropout=0.0')
    eager = graph_run(tmp_path, 'eager', *args)
    graphed = graph_run(tmp_path, 'graphed', *args, '--cuda_graph=True', f'--compile={compiled}')
    a, b = train_losses(eager), train_losses(graphed)
    tol = 1e-3 if compiled else 1e-4  # inductor's fused kernels sum in another order
    assert len(a) == len(b) == 20
    assert max(abs(x - y) for x, y in zip(a, b)) < tol
    sa, sb = (json.load(open(os.path.join(d, 'summary.json'))) for d in (eager, graphed))
    assert abs(sa['final_val_loss'] - sb['final_val_loss']) < tol
    wa, wb = (torch.load(os.path.join(d, 'ckpt.pt'), map_location='cpu')['model'] for d in (eager, graphed))
    assert max((wa[k].float() - wb[k].float()).abs().max().item() for k in wa) < 1e-3


def test_cuda_graph_dropout_masks_and_resume(tmp_path):
    """With dropout the replayed step is a pure function of (seed, iteration): two runs log the same losses, one
    stopped at 10 and resumed (new warm-up, new capture) logs them too, and with accumulation 1 they are the eager
    step's masks."""
    a = graph_run(tmp_path, 'a', '--dropout=0.2', '--cuda_graph=True')
    eager = graph_run(tmp_path, 'eager', '--dropout=0.2')
    b = graph_run(tmp_path, 'b', '--dropout=0.2', '--cuda_graph=True', '--max_iters=10')
    graph_run(tmp_path, 'b', '--dropout=0.2', '--cuda_graph=True', '--init_from=resume')
    la, lb, le = train_losses(a), train_losses(b), train_losses(eager)
    assert len(la) == len(lb) == 20
    assert max(abs(x - y) for x, y in zip(la, lb)) < 1e-4
    assert max(abs(x - y) for x, y in zip(la, le)) < 1e-4


@pytest.mark.parametrize('dtype', ['bfloat16', 'float32'])
def test_compile_mode_reduce_overhead_trains(tmp_path, dtype):
    """torch.compile's CUDA graphs reuse their outputs: the causality check copies the logits it keeps."""
    out = graph_run(tmp_path, 'ro', '--compile=True', '--compile_mode=reduce-overhead', f'--dtype={dtype}')
    s = json.load(open(os.path.join(out, 'summary.json')))
    assert s['finished'] and s['final_val_loss'] < 4.2



def test_a_small_split_is_held_on_the_gpu_and_gives_the_hosts_batches():
    """On CUDA tiny Shakespeare is held on the device (dataset.load_split) and its batches are gathered there: the
    same batches as the host's gather, with and without a bos token."""
    dataset.ensure_data('shakespeare_char')
    meta = dataset.load_meta('shakespeare_char')
    for bos in (None, 65):
        held = dataset.load_split('shakespeare_char', 'train', meta, bos, device='cuda')
        host = dataset.load_split('shakespeare_char', 'train', meta, bos)
        assert held['resident'] is not None and held['resident'].is_cuda and host['resident'] is None
        for start in (None, 5):
            a = dataset.get_batch(held, dataset.batch_rng(1, 0, 3, 0), 8, 64, 'cuda', start)
            b = dataset.get_batch(host, dataset.batch_rng(1, 0, 3, 0), 8, 64, 'cuda', start)
            assert all(u.is_cuda and u.is_contiguous() and torch.equal(u, v) for u, v in zip(a, b))
