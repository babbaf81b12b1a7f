# 6 layers, nanoGPT's softmax attention, in the Diff paper's LLaMA-style layer.
include('base_llama.py')
n_layer = 6
variant('nanogpt')
out_dir = 'out/llama_nanogpt_6L'
