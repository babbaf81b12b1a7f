"""
Every attention variant once: its name, its label in the tables, its flags, and whether it is a column of the seed
notes' table. A plain dict; sweeps, reports, the benchmark, the findings and the tests all read it.

  name    configs/<name>_<depth>.py, runs <name>_<depth>_s<seed>, ablate.sh's VARIANTS
  label   how report.py's and the findings' tables name it
  flags   the config keys that make it, over the setting's base config (model.py's GPTConfig flags; `optimizer`
          is train.py's). A setting may add its own (configs/diff_124M.py lays Diff out as the paper's GPT-2 does)
  seed    a column of the seed notes' table (docs/seed_notes.md), in their order; False: one of ours, after them

A new variant: its idea in model.py, a row here, its configs, its tests (docs/adding_a_variant.md).
No torch here: a Slurm login node that submits a sweep may have none.
"""

VARIANTS = {
    # name                label                    flags                                                 seed's
    'nanogpt':            dict(label='nanogpt', flags={}, seed=True),
    'diff':               dict(label='gpt+Diff', flags=dict(attn='diff', lambda_init_depth_offset=1), seed=True),
    'sym':                dict(label='gpt+Sym', flags=dict(symmetric=True), seed=True),
    'diff_sym':           dict(label='gpt+Diff+Sym', flags=dict(attn='diff', symmetric=True,
                                                                lambda_init_depth_offset=1), seed=True),
    'norm_sym':           dict(label='Norm+Sym', flags=dict(attn='cosine', symmetric=True), seed=True),
    'sym_noself':         dict(label='Sym, no self', flags=dict(symmetric=True, mask_self=True), seed=False),
    'gated':              dict(label='Gated (G1)', flags=dict(gate='elementwise'), seed=False),
    'gated_headwise':     dict(label='Gated (G1, headwise)', flags=dict(gate='headwise'), seed=False),
    'softmax1':           dict(label='Softmax-1', flags=dict(softmax1=True), seed=False),
    'diff_gated':         dict(label='Diff+Gated', flags=dict(attn='diff', lambda_init_depth_offset=1,
                                                              gate='elementwise'), seed=False),
    'orthoadam':          dict(label='OrthoAdam', flags=dict(optimizer='orthoadam'), seed=False),
    'softmax1_orthoadam': dict(label='Softmax-1 + OrthoAdam', flags=dict(softmax1=True, optimizer='orthoadam'),
                               seed=False),
}

# the seed notes' five, in their table's order
SEED_VARIANTS = [name for name, v in VARIANTS.items() if v['seed']]

# the same variants in other settings, named <prefix><name> and labelled <label prefix><label>: ARCH=llama (the Diff
# paper's RMSNorm/SwiGLU/RoPE layer), PROFILE=sink (bb_: Bigram-Backcopy), PROFILE=retrieval (nd_: needles with
# distractors) and the Python-source corpus (pc_: data/pycode, configs/base_pycode.py)
PREFIXES = {'llama_': 'llama ', 'bb_': 'BB ', 'nd_': 'ND ', 'pc_': 'PC '}

LABELS = {name: v['label'] for name, v in VARIANTS.items()}
LABELS.update({p + name: lp + label for p, lp in PREFIXES.items() for name, label in list(LABELS.items())})
