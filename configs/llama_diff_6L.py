# 6 layers, Differential attention (V1), in the Diff paper's LLaMA-style layer.
include('base_llama.py')
n_layer = 6
attn = 'diff'
lambda_init_depth_offset = 1
out_dir = 'out/llama_diff_6L'
