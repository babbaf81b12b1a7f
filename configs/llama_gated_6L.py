# 6 layers, gated attention, elementwise G1, in the Diff paper's LLaMA-style layer.
include('base_llama.py')
n_layer = 6
variant('gated')
out_dir = 'out/llama_gated_6L'
