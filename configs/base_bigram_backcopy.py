# Bigram-Backcopy (data/bigram_backcopy, Guo et al. 2024): BOS, then a character Markov chain in which the
# 3 most frequent characters copy the token before them. The setting in which a small baseline grows an
# attention sink on BOS, for the sink and outlier claims (results/sink_cpu.md). Each cell sets the attention.
# One head a layer, as Guo et al.'s models, and a high learning rate, Gu et al.'s lever: at lr 1e-3 no layer
# reached 10x the uniform first-token reference, with 4 heads a layer or 1, in up to 2400 steps (results/sink_cpu.md).
dataset = 'bigram_backcopy'
block_size = 128      # data/bigram_backcopy/prepare.py's default records are BOS + 128 tokens
n_layer = 2
n_head = 1
n_embd = 128
bias = False
dropout = 0.0
batch_size = 64
learning_rate = 3e-3
min_lr = 3e-4
beta2 = 0.99
warmup_iters = 50
max_iters = lr_decay_iters = 1000
eval_interval = 200
eval_iters = 10
log_interval = 50
