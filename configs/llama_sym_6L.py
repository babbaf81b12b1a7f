# 6 layers, symmetric attention, K = Q, in the Diff paper's LLaMA-style layer.
include('base_llama.py')
n_layer = 6
variant('sym')
out_dir = 'out/llama_sym_6L'
