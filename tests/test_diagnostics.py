"""analyze.py's metrics on inputs whose answer is known, OrthoAdam, and analyze.py end to end."""
import copy
import json
import math
import os
import sys

import pytest
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
import analyze  # noqa: E402
import dataset  # noqa: E402
import hardware  # noqa: E402
from checkpoint import load_checkpoint  # noqa: E402
from model import GPT, GPTConfig  # noqa: E402
from orthoadam import OrthoAdam, haar_orthogonal, rotate  # noqa: E402
from test_train import cli, refused, script  # noqa: E402

pytestmark = pytest.mark.usefixtures('one_thread', 'peak_once')  # conftest.py


# --- metrics on constructed inputs

def test_first_token_metrics_on_forced_attention():
    T = 8
    w = torch.zeros(2, 3, T, T)
    w[..., 0] = 1.0  # every query attends only to token 0
    mean, per_head = analyze.first_token_attention(w)
    assert mean == 1.0 and analyze.first_token_heads(per_head) == 1.0
    w = torch.tril(torch.ones(T, T))
    w = (w / w.sum(-1, keepdim=True)).expand(2, 4, T, T)  # uniform causal: query i gives 1/(i+1) to token 0
    mean, per_head = analyze.first_token_attention(w)
    assert mean == pytest.approx(sum(1 / (i + 1) for i in range(1, T)) / (T - 1))
    assert analyze.first_token_heads(per_head) == 1.0  # key 0 is seen by every query, so it gets the most
    w = torch.eye(T).expand(1, 2, T, T)  # each query attends to itself
    mean, per_head = analyze.first_token_attention(w)
    assert mean == 0.0 and analyze.first_token_heads(per_head) == 0.0


def test_gu_sink_metric_counts_heads_above_the_threshold():
    """Gu et al.: the share of heads whose mean weight on token 0 (over queries >= 1) exceeds 0.3."""
    T = 6
    w = torch.zeros(1, 4, T, T)
    for h, share in enumerate((0.9, 0.31, 0.29, 0.0)):  # heads giving token 0 these weights, the rest to the query
        w[0, h, :, 0] = share
        w[0, h] += torch.eye(T) * (1 - share)
    _, per_head = analyze.first_token_attention(w)
    assert analyze.sink_heads(per_head) == 0.5  # 0.9 and 0.31
    assert analyze.sink_heads(per_head, eps=0.95) == 0.0 and analyze.sink_heads(per_head, eps=0.0) == 0.75
    # a head can have token 0 as its most attended key and still not be a sink by this measure (uniform causal)
    u = torch.tril(torch.ones(T, T))
    _, per_head = analyze.first_token_attention((u / u.sum(-1, keepdim=True))[None, None])
    assert analyze.first_token_heads(per_head) == 1.0 and analyze.sink_heads(per_head) == 0.0


def test_uniform_first_token_reference_under_each_mask():
    """The reference a sink is read against: what uniform weights over each query's allowed keys give token 0."""
    T = 8
    causal = torch.ones(T, T, dtype=torch.bool).tril()
    assert analyze.uniform_first_token(causal) == pytest.approx(sum(1 / (t + 1) for t in range(1, T)) / (T - 1))
    assert analyze.uniform_first_token(torch.ones(T, T, dtype=torch.bool)) == pytest.approx(1 / T)
    # causal without the diagonal (sym_noself): query t >= 1 sees keys 0..t-1
    noself = causal & ~torch.eye(T, dtype=torch.bool)
    assert analyze.uniform_first_token(noself) == pytest.approx(sum(1 / t for t in range(1, T)) / (T - 1))
    # equal to first_token_attention of the uniform weights themselves
    w = causal.float() / causal.sum(-1, keepdim=True)
    assert analyze.first_token_attention(w[None, None])[0] == pytest.approx(analyze.uniform_first_token(causal))


@pytest.mark.parametrize('causal,mask_self', [(True, False), (False, False), (True, True), (False, True)])
def test_uniform_attention_measures_at_its_reference(causal, mask_self):
    """All keys equal: every query spreads its weight evenly over the keys it may see, so the measured first-token
    attention equals the reference analyze.py writes beside it, under each mask."""
    torch.manual_seed(0)
    m = GPT(GPTConfig(block_size=16, vocab_size=11, n_layer=2, n_head=2, n_embd=16, bias=True, causal=causal,
                      mask_self=mask_self)).eval()
    with torch.no_grad():
        for blk in m.transformer.h:
            blk.attn.k_proj.weight.zero_()
    x = torch.randint(0, 11, (2, 16))
    res = analyze.analyze(m, [(x, x)])
    for r in res['layers'] + [res['overall']]:
        assert r['first_token_attention'] == pytest.approx(r['first_token_uniform'], rel=1e-4)
    expected = {(True, False): sum(1 / (t + 1) for t in range(1, 16)) / 15, (False, False): 1 / 16,
                (True, True): sum(1 / t for t in range(1, 16)) / 15, (False, True): 1 / 15}[causal, mask_self]
    assert res['overall']['first_token_uniform'] == pytest.approx(expected)


def test_first_token_attention_through_a_model_forced_onto_token_0():
    """Constant queries, and keys that are large only at position 0: every head attends to token 0."""
    torch.manual_seed(0)
    m = GPT(GPTConfig(block_size=16, vocab_size=11, n_layer=1, n_head=2, n_embd=16, bias=True)).eval()
    with torch.no_grad():
        m.transformer.wpe.weight[0, 0] = 50.0  # position 0 has a large feature 0 (about 3.9 after LayerNorm)
        a = m.transformer.h[0].attn
        a.q_proj.weight.zero_()
        a.q_proj.bias.fill_(1.0)
        a.k_proj.weight.zero_()
        a.k_proj.weight[:, 0] = 30.0
    x = torch.randint(0, 11, (2, 16))
    res = analyze.analyze(m, [(x, x)])['layers'][0]
    assert res['first_token_heads'] == 1.0 and res['sink_heads'] == 1.0
    assert res['first_token_attention'] > 0.99
    with torch.no_grad():
        a.k_proj.weight.zero_()  # all keys equal: uniform causal attention, token 0 gets 1/(i+1) from query i
    res = analyze.analyze(m, [(x, x)])['layers'][0]
    assert res['first_token_attention'] == pytest.approx(sum(1 / (i + 1) for i in range(1, 16)) / 15, rel=1e-4)
    assert res['sink_heads'] == 0.0  # 0.22 on token 0: below Gu's 0.3


def test_massive_activation_ratio_through_a_model():
    """The largest |activation| of a block's output over its median |activation|: a planted massive channel makes
    it large, and it is the max over layers overall."""
    torch.manual_seed(0)
    m = GPT(GPTConfig(block_size=16, vocab_size=11, n_layer=2, n_head=2, n_embd=16, bias=True)).eval()
    x = torch.randint(0, 11, (2, 16))
    before = analyze.analyze(m, [(x, x)])
    with torch.no_grad():
        m.transformer.h[1].mlp.c_proj.bias[3] = 1000.0  # one channel of layer 2's output, at every position
    after = analyze.analyze(m, [(x, x)])
    assert before['layers'][1]['massive_ratio'] < 20 and after['layers'][1]['massive_ratio'] > 500
    assert after['layers'][0]['massive_ratio'] == before['layers'][0]['massive_ratio']
    assert after['overall']['massive_ratio'] == after['layers'][1]['massive_ratio']
    hidden = []
    h = m.transformer.h[1].register_forward_hook(lambda mod, i, o: hidden.append(o[0] if isinstance(o, tuple) else o))
    m(x)
    h.remove()
    ratio = (hidden[0].abs().max() / hidden[0].abs().median()).item()
    assert after['layers'][1]['massive_ratio'] == pytest.approx(ratio, rel=1e-5)


def test_kurtosis_of_a_gaussian_and_of_an_outlier():
    torch.manual_seed(0)
    assert analyze.kurtosis(torch.randn(64, 4096)) == pytest.approx(3.0, abs=0.1)
    laplace = torch.distributions.Laplace(0.0, 1.0).sample((64, 4096))
    assert analyze.kurtosis(laplace) == pytest.approx(6.0, abs=0.3)
    assert analyze.kurtosis(torch.rand(64, 4096)) == pytest.approx(1.8, abs=0.02)  # uniform: 9/5
    # +-1 in equal numbers has kurtosis exactly 1 (the minimum), whatever each row's scale; across the other axis,
    # where the rows' scales 1..64 differ, it would not be 1
    signs = torch.tensor([1.0, -1.0]).repeat(512)[torch.randperm(1024)]
    assert analyze.kurtosis(signs * torch.arange(1.0, 65.0)[:, None]) == pytest.approx(1.0, abs=1e-12)
    # the mean of the rows' kurtoses (1 and ~6), not one pooled over rows of different scales (~6)
    assert analyze.kurtosis(torch.cat((signs.expand(32, -1), 10 * laplace[:32, :1024]))) == pytest.approx(3.5, abs=0.2)
    x = torch.randn(16, 1024)
    x[:, 7] = 100.0  # a massive-activation channel
    assert analyze.kurtosis(x) > 500


def test_effective_rank_of_a_rank_r_product():
    torch.manual_seed(0)
    for r in (1, 4, 16):
        a, b = torch.randn(64, r, dtype=torch.float64), torch.randn(r, 64, dtype=torch.float64)
        u, _ = torch.linalg.qr(a)
        v, _ = torch.linalg.qr(b.t())
        m = u @ v.t()  # rank r, equal singular values: effective rank exactly r
        assert analyze.effective_rank(m[None]) == pytest.approx(r, rel=1e-4)
        assert analyze.effective_rank((a @ b)[None]) <= r + 1e-6
    assert analyze.effective_rank(torch.eye(32)[None]) == pytest.approx(32)


def test_quantization_of_grid_weights_changes_nothing():
    torch.manual_seed(0)
    for bits in (8, 4):
        qmax = 2 ** (bits - 1) - 1
        scale = torch.rand(5, 1) + 0.1
        q = torch.randint(-qmax, qmax + 1, (5, 9)).float()
        q[:, 0] = qmax  # each row reaches the absmax, so the scale is recovered exactly
        w = q * scale
        assert torch.allclose(analyze.quantize_weight(w, bits), w, atol=1e-6)
    w = torch.randn(4, 64)
    err8 = (analyze.quantize_weight(w, 8) - w).abs().max()
    err4 = (analyze.quantize_weight(w, 4) - w).abs().max()
    assert 0 < err8 < err4 and err4 <= (w.abs().amax(1) / 7 / 2).max() + 1e-6  # half a step at most


def test_gate_statistics_of_a_gate_set_by_its_bias():
    """gate_proj with zero weight: the gate is sigmoid(bias) at every position, so its mean, the fraction of scores
    below 0.1 and its spread across query positions (0) are known; an input-dependent gate has a spread."""
    torch.manual_seed(0)
    m = GPT(GPTConfig(block_size=16, vocab_size=11, n_layer=2, n_head=4, n_embd=16, bias=True, gate='elementwise'))
    with torch.no_grad():
        for blk in m.transformer.h:
            blk.attn.gate_proj.weight.zero_()
            blk.attn.gate_proj.bias.copy_(torch.tensor([-3.0, -1.0, 2.0, 2.0]).repeat(4))  # sigmoid: 0.047, 0.269, 0.881
        m.transformer.h[1].attn.gate_proj.weight.normal_(0.0, 1.0)  # layer 2: the gate depends on the input
    x = torch.randint(0, 11, (2, 16))
    first, second = analyze.analyze(m.eval(), [(x, x)])['layers']
    sig = lambda z: 1 / (1 + math.exp(-z))  # noqa: E731
    assert first['gate_mean'] == pytest.approx((sig(-3) + sig(-1) + 2 * sig(2)) / 4, rel=1e-6)
    assert first['gate_below_0_1'] == 0.25
    assert first['gate_std_over_queries'] == pytest.approx(0.0, abs=1e-7)
    assert second['gate_std_over_queries'] > 0.05


def _on_power_of_2_grid(w, qmax):
    """w rounded to a per-row grid s * [-qmax, qmax] with s a power of 2 and each row reaching qmax * s: absmax
    quantization with that qmax then reproduces it exactly."""
    s = torch.exp2(torch.floor(torch.log2(w.abs().amax(1, keepdim=True) / qmax)))
    q = (w / s).round().clamp(-qmax, qmax)
    q[:, 0] = qmax
    return q * s


def test_quantization_penalty_on_weights_on_the_int8_grid():
    """Every Linear weight on an int8 grid: int8 rounding changes nothing (penalty exactly 0), int4 rounding does,
    by as much as an independent round-to-nearest int4 quantizer says."""
    torch.manual_seed(0)
    m = GPT(GPTConfig(block_size=16, vocab_size=11, n_layer=2, n_head=4, n_embd=32, bias=True)).eval()
    linears = [mod for mod in m.modules() if isinstance(mod, torch.nn.Linear)]
    with torch.no_grad():
        for lin in linears:
            lin.weight.copy_(_on_power_of_2_grid(torch.randn_like(lin.weight) * 0.3, 127))  # far from uniform
    batches = [(x, x) for x in torch.randint(0, 11, (2, 4, 16))]
    q = analyze.quantization(m, batches)
    assert q['loss_penalty_int8'] == 0.0 and q['ppl_penalty_int8'] == 0.0
    ref = copy.deepcopy(m)
    with torch.no_grad():
        for lin in (mod for mod in ref.modules() if isinstance(mod, torch.nn.Linear)):
            step = lin.weight.abs().amax(1, keepdim=True) / 7
            lin.weight.copy_(torch.clamp(torch.round(lin.weight / step), -7, 7) * step)
        loss4 = sum(ref(x, y)[1].item() for x, y in batches) / len(batches)
        loss_fp = sum(m(x, y)[1].item() for x, y in batches) / len(batches)
    assert q['loss_fp'] == pytest.approx(loss_fp, rel=1e-6)  # the model itself was left as it was
    assert abs(loss4 - loss_fp) > 1e-3
    assert q['loss_penalty_int4'] == pytest.approx(loss4 - loss_fp, rel=1e-3)


# --- OrthoAdam

def _grads(shapes, steps, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [[torch.randn(s, generator=g) for s in shapes] for _ in range(steps)]


def _run(opt_fn, shapes, grads):
    torch.manual_seed(1)
    params = [torch.nn.Parameter(torch.randn(s)) for s in shapes]
    opt = opt_fn(params)
    for gs in grads:
        for p, g in zip(params, gs):
            p.grad = g.clone()
        opt.step()
    return params, opt


def test_orthoadam_with_identity_rotations_is_adam_and_differs_otherwise():
    shapes = [(6, 5), (5,), (3, 4, 2)]
    grads = _grads(shapes, 5)
    kw = dict(lr=1e-2, betas=(0.9, 0.99), eps=1e-8, weight_decay=0.1)
    ref, _ = _run(lambda ps: torch.optim.AdamW(ps, **kw), shapes, grads)

    def identity(ps):
        opt = OrthoAdam(ps, **kw)
        for p in ps:  # initialise, then replace every rotation with the identity
            opt._init_state(p, 0)
            opt.state[p]['rotations'] = [torch.eye(n) for n in p.shape]
        return opt
    same, _ = _run(identity, shapes, grads)
    for a, b in zip(ref, same):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
    rotated, opt = _run(lambda ps: OrthoAdam(ps, **kw), shapes, grads)
    for a, b in zip(ref, rotated):
        assert (a - b).abs().max() > 1e-4  # a rotation that Adam does not commute with changes the steps


def test_rotations_are_orthogonal_and_rotating_back_restores_the_basis():
    g = torch.Generator().manual_seed(0)
    q = haar_orthogonal(16, g)
    torch.testing.assert_close(q @ q.t(), torch.eye(16), atol=1e-5, rtol=0)
    assert not torch.allclose(q.abs(), torch.eye(16))  # dense, not a signed permutation
    x = torch.randn(16, 8, 16)
    rots = [q, None, haar_orthogonal(16, g)]
    torch.testing.assert_close(rotate(rotate(x, rots), rots, transpose=True), x, atol=1e-5, rtol=0)
    # a matrix is rotated as Q_0 G Q_1^T
    G = torch.randn(16, 16)
    torch.testing.assert_close(rotate(G, [q, rots[2]]), q @ G @ rots[2].t(), atol=1e-5, rtol=1e-5)


def test_orthoadam_leaves_long_axes_unrotated_and_state_round_trips():
    p = torch.nn.Parameter(torch.randn(40, 8))
    opt = OrthoAdam([p], lr=1e-3, max_dim=16)
    p.grad = torch.randn(40, 8)
    opt.step()
    rots = opt.state[p]['rotations']
    assert rots[0].numel() == 0 and rots[1].shape == (8, 8)
    p2 = torch.nn.Parameter(p.detach().clone())
    opt2 = OrthoAdam([p2], lr=1e-3, max_dim=16)
    opt2.load_state_dict(copy.deepcopy(opt.state_dict()))  # as if through torch.save / torch.load
    g = torch.randn(40, 8)
    p.grad, p2.grad = g.clone(), g.clone()
    opt.step()
    opt2.step()
    assert torch.equal(p, p2)  # resume is exact: the rotations travel with the state


def test_orthoadam_training_run_lowers_the_loss(tmp_path):
    out = tmp_path / 'o'
    p = cli('--n_layer=2', '--n_head=4', '--n_embd=64', '--block_size=32', '--batch_size=8', '--device=cpu',
            '--dtype=float32', '--optimizer=orthoadam', '--max_iters=40', '--lr_decay_iters=40', '--learning_rate=3e-3',
            '--eval_interval=40', '--eval_iters=4', '--log_interval=10', '--warmup_iters=4', '--softmax1=True',
            f'--out_dir={out}')
    assert p.returncode == 0, p.stderr
    evals = [json.loads(l) for l in open(out / 'log.jsonl') if '"eval"' in l]
    assert evals[0]['val_loss'] > 4.0 and evals[-1]['val_loss'] < 3.3, evals


# --- analyze.py end to end

def test_analyze_end_to_end_on_a_tiny_gated_checkpoint(tmp_path):
    out = tmp_path / 'o'
    assert cli('--n_layer=2', '--n_head=4', '--n_embd=64', '--block_size=32', '--batch_size=4', '--device=cpu',
               '--dtype=float32', '--max_iters=2', '--eval_interval=2', '--eval_iters=1', '--gate=headwise',
               '--attn=diff', f'--out_dir={out}').returncode == 0
    p = script('analyze.py', f'--out_dir={out}', '--eval_iters=2', '--batch_size=2')
    assert p.returncode == 0, p.stderr
    res = json.load(open(out / 'analysis.json'))
    assert [r['layer'] for r in res['layers']] == [1, 2]
    assert all('gate_mean' in r for r in res['layers'])  # the metrics' values: the tests on known inputs above
    q = res['quantization']
    assert abs(q['loss_penalty_int8']) <= abs(q['loss_penalty_int4']) + 1e-3
    assert [line.split('|')[1].strip() for line in p.stdout.splitlines() if line.startswith('| 1 |')] == ['1']
    # default arguments: full precision, so the numbers are those analyze.py always gave (fp32, no autocast)
    assert res['dtype'] == 'float32'
    model, _ = load_checkpoint(str(out / 'ckpt.pt'), res['device'])
    val = dataset.load_split('shakespeare_char', 'val', {})
    batches = [dataset.get_batch(val, dataset.batch_rng(1337, 3, k), 2, 32, res['device']) for k in range(2)]
    expected = dict(analyze.analyze(model, batches), quantization=analyze.quantization(model, batches))
    assert _numbers(res['layers']) == pytest.approx(_numbers(expected['layers']), rel=1e-6)
    assert _numbers(res['quantization']) == pytest.approx(_numbers(expected['quantization']), rel=1e-6)
    # --ckpt picks best.pt, whose measures go beside the run's (report.py reads analysis.json, ckpt.pt's), not over
    # them; --device and --dtype pick where and how the model runs
    before = (out / 'analysis.json').read_bytes()
    p = script('analyze.py', f'--ckpt={out}/best.pt', '--eval_iters=2', '--batch_size=2', '--device=cpu',
               '--dtype=bfloat16')
    assert p.returncode == 0, p.stderr
    assert (out / 'analysis.json').read_bytes() == before
    bf16 = json.load(open(out / 'analysis_best.json'))
    assert (bf16['device'], bf16['dtype'], bf16['checkpoint']) == ('cpu', 'bfloat16', f'{out}/best.pt')
    assert bf16['quantization']['loss_fp'] == pytest.approx(expected['quantization']['loss_fp'], abs=0.05)
    assert bf16['quantization']['loss_fp'] != expected['quantization']['loss_fp']  # it did run in bf16
    refused(script('analyze.py', f'--out_dir={tmp_path}/none'), f'{tmp_path}/none/ckpt.pt')
    # no batches to measure, and a checkpoint taken to a machine without its dataset: one line each, no traceback
    refused(script('analyze.py', f'--out_dir={out}', '--eval_iters=0'), '--eval_iters', '--batch_size', code=2)
    ckpt = torch.load(out / 'ckpt.pt', weights_only=True)
    ckpt['config']['dataset'] = str(tmp_path / 'elsewhere')
    torch.save(ckpt, out / 'ckpt.pt')
    refused(script('analyze.py', f'--out_dir={out}', '--eval_iters=1'), tmp_path / 'elsewhere')


def _numbers(d):
    """The numbers of a (nested) dict or list, flattened in order."""
    if isinstance(d, dict):
        return [x for k in sorted(d) for x in _numbers(d[k])]
    if isinstance(d, list):
        return [x for v in d for x in _numbers(v)]
    return [d]


# --- the processor

def test_cpu_info_reads_the_bf16_units(tmp_path):
    """A Zen 4 line with AVX512-BF16, and an AVX2-only one: the flags decide bf16, not the model name."""
    line = 'processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel\t\t: 17\nmodel name\t: AMD EPYC\n'
    zen4, avx2 = tmp_path / 'zen4', tmp_path / 'avx2'
    zen4.write_text(line + 'flags\t\t: fpu avx2 avx512f avx512_bf16\n\nprocessor\t: 1\nflags\t\t: fpu\n')
    avx2.write_text(line + 'flags\t\t: fpu avx2 fma\n')
    info = hardware.cpu_info(str(zen4))
    assert (info['name'], info['family'], info['model'], info['bf16']) == ('AMD EPYC', '25', '17', ['avx512_bf16'])
    assert hardware.cpu_info(str(avx2))['bf16'] == []
    assert hardware.cpu_info(str(tmp_path / 'absent'))['bf16'] == []
