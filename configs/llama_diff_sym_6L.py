# 6 layers, Differential attention with K = Q, in the Diff paper's LLaMA-style layer.
include('base_llama.py')
n_layer = 6
variant('diff_sym')
out_dir = 'out/llama_diff_sym_6L'
