# Python source code (data/pycode: pinned PyPI wheels as UTF-8 bytes), 12 layers at d = 256: the setting
# in which a pre-LN baseline trained with Adam at a high learning rate and no weight decay should grow massive
# activations and a first-token sink (Activated-AI, "Adam Optimizer Causes Privileged Basis", LessWrong: 12 layers,
# d = 256, pre-LN with per-channel gains, Adam lr 2e-3, no weight decay, 32k tokens a step, ~200M tokens; He et al.
# 2024: a pre-LN GPT-2 on Python code). Each cell sets only the attention or the optimizer. A fixed BOS at position 0
# of every window, where the sink forms; sequence 256 as Kaul et al. 2025.
dataset = 'pycode'
bos = True
block_size = 256
n_layer = 12
n_head = 4            # head dim 64
n_embd = 256
bias = False          # LayerNorm keeps its per-channel gains (the privileged basis Adam acts on)
dropout = 0.0
batch_size = 64       # 64 x 256 = 16,384 tokens a step, half the LessWrong run's: twice the Adam steps for the tokens
                      # one GPU call holds, since the CPU gate's outliers grew with steps at 1,024 tokens a step
optimizer = 'adamw'
learning_rate = 2e-3
min_lr = 2e-4
weight_decay = 0.0    # none, as the LessWrong run: decay would pull the large gains back
beta2 = 0.99
warmup_iters = 100
# 3000 x 16,384 = 49M tokens a run, sized for five runs at once in one short GPU window; the LessWrong run's
# kurtosis grew over ~200M tokens, so a run here may end before its emergence; its outlier curves (outlier_interval)
# say where it stands
max_iters = lr_decay_iters = 3000
eval_interval = 500
eval_iters = 20
log_interval = 50
outlier_interval = 100  # token-0 / rest kurtosis and max/median |activation| into log.jsonl (measures.outlier_record)
