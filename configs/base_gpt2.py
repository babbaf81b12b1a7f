# GPT-2 small (124M: 12 layers, 12 heads, n_embd 768, block 1024) on web text (data/fineweb, GPT-2's BPE), as
# nanoGPT's config/train_gpt2.py, with a budget a paper can quote: 2.5B tokens, about Chinchilla's 20 tokens a
# parameter. A step is 12 x 1024 x 40 = 491,520 tokens; gradient_accumulation_steps is the global number of
# micro-batches, divided among torchrun's processes (8 GPUs: 5 each). Each <variant>_124M.py sets the attention.
dataset = 'fineweb'
n_layer = 12
n_head = 12
n_embd = 768
block_size = 1024
bias = False
dropout = 0.0
batch_size = 12
gradient_accumulation_steps = 40
_budget = 2.5e9  # tokens
max_iters = lr_decay_iters = round(_budget / (batch_size * block_size * gradient_accumulation_steps))  # 5086
warmup_iters = 250
learning_rate = 6e-4
min_lr = 6e-5         # learning_rate / 10
beta2 = 0.95
weight_decay = 0.1
eval_interval = 250
eval_iters = 100      # 100 x 12 windows: 1.2M val tokens an evaluation
log_interval = 10
