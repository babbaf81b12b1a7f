# 6 layers, Differential attention (V1), in the Diff paper's LLaMA-style layer.
include('base_llama.py')
n_layer = 6
variant('diff')
out_dir = 'out/llama_diff_6L'
