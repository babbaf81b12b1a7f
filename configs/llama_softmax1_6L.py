# 6 layers, softmax-1, in the Diff paper's LLaMA-style layer.
include('base_llama.py')
n_layer = 6
variant('softmax1')
out_dir = 'out/llama_softmax1_6L'
