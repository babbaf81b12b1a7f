"""
What the sweeps are made of, defined once for ablate.sh and report.py: the variants (their names, their labels in
results.md, the seed notes' columns and ours, their prefixed copies) with the comparisons the claims make, and the
keys a resume may change. No torch here: report.py imports this file.
"""
import ast
import os

HERE = os.path.dirname(os.path.abspath(__file__))

# ----------------------------------------------------------------------------- the variants

# Every variant once, for ablate.sh and report.py: its configs are configs/<name>_<depth>.py, its runs
# <name>_<depth>_s<seed>; its label in results.md; a column of the seed notes' table (True, in the seed's order) or
# one of ours (after them). A new variant: a row here, its configs, and its comparisons in PAIRS.
VARIANTS = [
    # name                 label                     the seed's
    ('nanogpt',            'nanogpt',                True),
    ('diff',               'gpt+Diff',               True),
    ('sym',                'gpt+Sym',                True),
    ('diff_sym',           'gpt+Diff+Sym',           True),
    ('norm_sym',           'Norm+Sym',               True),
    ('sym_noself',         'Sym, no self',           False),
    ('gated',              'Gated (G1)',             False),
    ('gated_headwise',     'Gated (G1, headwise)',   False),
    ('softmax1',           'Softmax-1',              False),
    ('diff_gated',         'Diff+Gated',             False),
    ('orthoadam',          'OrthoAdam',              False),
    ('softmax1_orthoadam', 'Softmax-1 + OrthoAdam',  False),
]
# the same variants in other settings, named <prefix><name> and labelled <label prefix><label>: ARCH=llama (the Diff
# paper's RMSNorm/SwiGLU/RoPE layer), PROFILE=sink (bb_: Bigram-Backcopy) and PROFILE=retrieval (nd_: needles with
# distractors)
PREFIXES = {'llama_': 'llama ', 'bb_': 'BB ', 'nd_': 'ND '}
# (reference A, variant B): the gaps B - A that the claims are about, in the order results.md lists them, by measure
PAIRS = dict(
    loss=[('nanogpt', 'diff'), ('sym', 'diff_sym'), ('sym', 'norm_sym'), ('nanogpt', 'sym'), ('nanogpt', 'gated'),
          ('nanogpt', 'softmax1'), ('sym', 'sym_noself'), ('nanogpt', 'gated_headwise'), ('nanogpt', 'orthoadam'),
          ('nanogpt', 'softmax1_orthoadam')],  # final val loss
    lambda_full=[('diff', 'diff_sym')],  # the seed's lambda claim: the distance of lambda_full from 1
    sink=[('nanogpt', 'softmax1'), ('nanogpt', 'gated'), ('nanogpt', 'gated_headwise'), ('nanogpt', 'orthoadam'),
          ('nanogpt', 'softmax1_orthoadam')],  # the sink claims, in analyze.py's measures
    # the retrieval claim, in needle_eval.py's measures (diffv2: configs/needle_diffv2.py, no variant configs)
    needle=[('nanogpt', 'diff'), ('nanogpt', 'sym'), ('nanogpt', 'diff_sym'), ('nanogpt', 'gated'),
            ('nanogpt', 'softmax1'), ('nanogpt', 'diffv2'), ('sym', 'diff_sym')],
)


def with_prefixes(items):
    """items (variant names, or tuples of them) and then their copies under each prefix."""
    def add(p, v):
        return tuple(p + x for x in v) if isinstance(v, tuple) else p + v
    return list(items) + [add(p, v) for p in PREFIXES for v in items]


LABELS = {name: label for name, label, _ in VARIANTS}
LABELS.update({p + v: lp + label for p, lp in PREFIXES.items() for v, label in list(LABELS.items())})


def read_free_on_resume():
    """config.FREE_ON_RESUME, the keys a resume may change (where and how a run is computed, not what it computes),
    read from config.py's text: importing config imports model and torch, which report.py and a Slurm login node
    do without."""
    with open(os.path.join(HERE, 'config.py')) as f:
        tree = ast.parse(f.read())
    for node in tree.body:
        if isinstance(node, ast.Assign) and [getattr(t, 'id', None) for t in node.targets] == ['FREE_ON_RESUME']:
            return ast.literal_eval(node.value)
    raise RuntimeError("config.py has no FREE_ON_RESUME = (...) of literal strings")


FREE_ON_RESUME = read_free_on_resume()
