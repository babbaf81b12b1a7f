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

# The full schedule is a GPU job. Without a GPU, a laptop schedule of the same model, so that a first run finishes
# in minutes and still learns: a quarter of the tokens a step (batch 16 x context 128), 300 steps at learning rate
# 2e-3 decaying to 2e-4, a smaller eval, no dropout (on a CPU it costs more than the matmuls, and
# it does not matter this far from overfitting). Its time and val loss are the committed run
# results/quickstart_cpu/ (the README renders them). Command-line keys still win, so the full schedule on a CPU is
#   --batch_size=32 --block_size=256 --learning_rate=3e-4 --min_lr=3e-5 --max_iters=5000 --lr_decay_iters=5000
#   --warmup_iters=100 --dropout=0.2 --eval_interval=250 --eval_iters=200
# ablate.sh's Shakespeare profiles pass batch, context and schedule explicitly, so a sweep never depends on this.
import torch as _torch
if not _torch.cuda.is_available():
    print("configs/base_shakespeare_char.py: no CUDA, so the laptop schedule (see that file)")
    batch_size = 16
    block_size = 128
    learning_rate = 2e-3
    min_lr = 2e-4
    max_iters = lr_decay_iters = 300
    warmup_iters = 20
    dropout = 0.0
    eval_interval = 100
    eval_iters = 10
