"""
The sweeps' profiles and names: what ablate.sh's PROFILE= runs (a schedule, the depths, variants and data), and the
folder name that says every setting changing what a sweep's runs compute. One table, read by sweep.py (the sweep),
report.py (the ablate.sh line that makes a sweep's runs again) and evidence/claims.py. No torch here.
"""
import re
from dataclasses import dataclass

from provenance import FREE_ON_RESUME


@dataclass(frozen=True)
class Profile:
    schedule: str  # the train.py arguments of every run ('': the configs hold the schedule)
    depths: str    # DEPTHS' default
    variants: str = ''  # VARIANTS' default where not DEFAULT_VARIANTS
    data: str = 'shakespeare'  # the sweep's name: <data>_<profile>...
    prefix: str = ''           # its configs: configs/<prefix><variant>_<depth>.py (with ARCH=nanogpt)
    records: bool = False      # trains on fixed-length records, so no WINDOWS=sequential
    analyzer: str = 'analyze.py'   # what ANALYZE=1 runs on each finished run,
    analysis: str = 'analysis.json'  # and the file it writes there


DEFAULT_VARIANTS = 'nanogpt diff sym diff_sym norm_sym gated softmax1 diff_gated'  # the seed's five, then ours
# the seed notes' batch, context and lr where a Shakespeare schedule does not set them: configs/base_shakespeare_char.py
# switches to a laptop schedule without CUDA, and a sweep's runs never depend on that switch
SEED = '--batch_size=32 --block_size=256 --learning_rate=3e-4 --min_lr=3e-5 '
PROFILES = dict(
    # the seed notes' schedule, a GPU job: graphed (cuda_graph auto), not compiled: 1.96 ms a 3-layer step against
    # 1.35 compiled too (H200, results/bench_gpu.md), 3 s of a run against 40-60 s of compiling a process
    full=Profile(SEED + '--max_iters=5000 --lr_decay_iters=5000 --warmup_iters=100 --dropout=0.2 --eval_interval=250 '
                 '--eval_iters=200 --log_interval=10 --compile=False', '3L 6L 8L'),
    cpu=Profile(SEED + '--max_iters=150 --lr_decay_iters=150 --warmup_iters=15 --dropout=0.0 --eval_interval=50 '
                '--eval_iters=10 --log_interval=10 --device=cpu', '3L 6L'),
    # nanoGPT's shakespeare_char lr (1e-3, min 1e-4), 500 steps: 8 minutes a 3L run on 2 CPU cores in bf16
    # (c2b503b), past the bigram plateau (2.5) far enough for variants to differ
    cpu_long=Profile('--batch_size=32 --block_size=256 --max_iters=500 --lr_decay_iters=500 --warmup_iters=50 '
                     '--learning_rate=1e-3 --min_lr=1e-4 --dropout=0.0 --eval_interval=100 --eval_iters=20 '
                     '--log_interval=10 --device=cpu', '3L'),
    # a first look on a laptop, too short for the variants to separate; an evaluation every 10 steps: 11 points a curve
    demo=Profile('--block_size=256 --max_iters=100 --lr_decay_iters=100 --warmup_iters=10 --learning_rate=1e-3 '
                 '--min_lr=1e-4 --batch_size=16 --dropout=0.0 --eval_interval=10 --eval_iters=5 --log_interval=10',
                 '3L', 'nanogpt diff sym diff_sym norm_sym'),
    # GPT-2 small on web text: the configs hold the schedule (a 2.5B-token budget, configs/base_gpt2.py)
    gpt2=Profile('', '124M', 'nanogpt diff diff_sym sym gated softmax1 sym_noself', data='fineweb'),
    # the sink claims where the baseline has a sink: Bigram-Backcopy, 2 layers, the configs' schedule
    sink=Profile('', '2L', 'nanogpt softmax1 gated gated_headwise orthoadam softmax1_orthoadam',
                 data='bigram_backcopy', prefix='bb_', records=True),
    # the retrieval claim where the baseline misses: needles with distractors, 2 layers, the configs' schedule
    retrieval=Profile('', '2L', 'nanogpt diff sym diff_sym gated softmax1', data='needle_distractors', prefix='nd_',
                      records=True, analyzer='needle_eval.py', analysis='needle_eval.json'),
    # the seed author's loop as far as it is published (results/seed_table_explained.md): one epoch's windows at
    # batch 32 (35,000 steps), lr 3e-4, dropout 0.1; assumed where unpublished: a constant lr and plain Adam
    seed_pipeline=Profile('--batch_size=32 --block_size=256 --min_lr=3e-5 --max_iters=35000 --decay_lr=False '
                          '--learning_rate=3e-4 --weight_decay=0.0 --beta2=0.999 --grad_clip=0.0 --dropout=0.1 '
                          '--eval_interval=2500 --eval_iters=200 --log_interval=10 --compile=False', '3L 6L 8L'),
)
LEAKS = ('zero_future', 'off_by_one', 'after_norm', 'time_norm')  # model.py's GPTConfig.leak, but 'none'


def key_value(arg):
    """(key, value) of --key=value (value None without '=')."""
    key, _, value = arg.partition('=')
    return (key[2:] if key.startswith('--') else key), (value if '=' in arg else None)


def changed_by(schedule, args):
    """{key: value} of the extra --key=value that change what the runs compute (not FREE_ON_RESUME's, nor the
    schedule's own values), in the order given, the last of a key winning."""
    given, out = dict(key_value(a) for a in schedule), {}
    for key, value in map(key_value, args):
        out.pop(key, None)
        if key not in FREE_ON_RESUME and given.get(key) != value:
            out[key] = value or ''
    return out


def args_suffix(changed):
    """_<key><value> each, the end of a sweep's name (--max_iters=10: _max_iters10; other characters become -)."""
    return ''.join('_' + key + re.sub(r'[^A-Za-z0-9.+-]+', '-', value) for key, value in changed.items())


def sweep_name(profile, leak='none', causal=True, sequential=False, changed=None):
    """<data>_<profile>[_leak_<LEAK> or _noncausal][_sequential][_<key><value>...], so that no two kinds of run share
    a folder (a re-launch would skip or resume the other); changed: changed_by()'s extra arguments."""
    suffix = f'_leak_{leak}' if leak != 'none' else '' if causal else '_noncausal'
    return (f'{PROFILES[profile].data}_{profile}{suffix}' + ('_sequential' if sequential else '')
            + args_suffix(changed or {}))
