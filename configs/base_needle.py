# Multi-needle retrieval (data/needle): a 2-layer model small enough that every variant trains on one CPU core in
# a few minutes. The loss counts only the answer tokens. Evaluate with needle_eval.py.
# Short records and a larger batch and learning rate than the first version (block 128, batch 32, 1e-3, 1500
# steps), which left every variant at chance; at 3500 steps this one is still at chance at N = 2 (the key-matching
# circuit has not formed; results/needle_cpu.md), so raise max_iters where there is time.
dataset = 'needle'
block_size = 16       # data/needle/prepare.py's default records are 17 tokens
n_layer = 2
n_head = 4
n_embd = 128
bias = False
dropout = 0.0
batch_size = 64
learning_rate = 2e-3
min_lr = 2e-4
warmup_iters = 50
max_iters = lr_decay_iters = 3500
eval_interval = 500
eval_iters = 10
log_interval = 100
