# The CPU gate of the outlier claim (claim 5): the baseline alone at the smallest shape that could show emergence, on one CPU thread
# for under an hour (results/pycode_gate_cpu). Width d = 256, the smallest documented case's (the LessWrong run),
# since kurtosis across channels is a statement about the d channels; depth 6, half of it, and 128-token windows
# of 8, so that the hour holds many Adam steps (6000 steps of 1,024 tokens: 6.1M tokens), Adam's per-channel
# updates being the suspected cause. Everything else is base_pycode.py's: lr 2e-3, no weight decay, BOS.
include('base_pycode.py')
n_layer = 6
variant('nanogpt')
block_size = 128
batch_size = 8
max_iters = lr_decay_iters = 6000
warmup_iters = 100
eval_interval = 500
eval_iters = 10
log_interval = 50
outlier_interval = 100
ckpt_interval = 500
out_dir = 'out/pc_nanogpt_6L_cpu'
