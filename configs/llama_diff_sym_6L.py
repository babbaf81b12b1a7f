# 6 layers, Differential attention with K = Q, in the Diff paper's LLaMA-style layer.
include('base_llama.py')
n_layer = 6
attn = 'diff'
symmetric = True
lambda_init_depth_offset = 1
out_dir = 'out/llama_diff_sym_6L'
