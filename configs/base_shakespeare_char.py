# The seed notes' Shakespeare setup (docs/seed_notes.md, note 001): nanoGPT's character-level tiny Shakespeare with
# n_embd 256, 8 heads, block 256, batch 32, learning rate 3e-4; nanoGPT's shakespeare_char schedule otherwise
# (5000 iterations, dropout 0.2, beta2 0.99, eval every 250). Each cell config sets n_layer and the attention.
dataset = 'shakespeare_char'
batch_size = 32
block_size = 256
n_embd = 256
n_head = 8
bias = False          # nanoGPT's train.py default
dropout = 0.2
learning_rate = 3e-4
min_lr = 3e-5         # learning_rate / 10, as Chinchilla
beta2 = 0.99          # a little higher than 0.95 because the batches are small
warmup_iters = 100
max_iters = 5000
lr_decay_iters = 5000
eval_interval = 250
eval_iters = 200
log_interval = 10
# The diff configs set lambda_init_depth_offset = 1 to reproduce the seed's lambda_init column: layer 1 starts at
# lambda_init 0.356, not the Diff paper's 0.2 (docs/config.md's "Model keys"; the README's "Attention variants").

# The full schedule is a GPU job. Without a GPU, a shortened schedule with the same architecture, so that a
# first run finishes in minutes: fewer iterations, a smaller eval, and no dropout (on CPU it costs more than the
# matmuls, and it does not matter this far from overfitting). Command-line keys still win, so the full schedule
# on a CPU is
#   --max_iters=5000 --lr_decay_iters=5000 --warmup_iters=100 --dropout=0.2 --eval_interval=250 --eval_iters=200
# ablate.sh passes its profile's schedule explicitly, so a sweep never depends on this switch.
import torch as _torch
if not _torch.cuda.is_available():
    print("configs/base_shakespeare_char.py: no CUDA, so the shortened CPU schedule (see that file)")
    max_iters = lr_decay_iters = 200
    warmup_iters = 20
    dropout = 0.0
    eval_interval = 100
    eval_iters = 20
