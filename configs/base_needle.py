# Multi-needle retrieval (data/needle): a 2-layer model small enough that every variant trains on one CPU core in
# a few minutes. The loss counts only the answer tokens. Evaluate with needle_eval.py.
# The default task (fused needles, 2-6 per record, 4 queries) is learned by the baseline within a few hundred
# steps; evals every 100 steps give the curve from which results/needle_cpu.md reads when each model learns it.
dataset = 'needle'
block_size = 32       # data/needle/prepare.py's default records are 33 tokens
n_layer = 2
n_head = 4
n_embd = 128
bias = False
dropout = 0.0
batch_size = 64
learning_rate = 2e-3
min_lr = 2e-4
warmup_iters = 50
max_iters = lr_decay_iters = 1000
eval_interval = 100
eval_iters = 10
log_interval = 100
