# 6 layers, nanoGPT's softmax attention.
include('base_shakespeare_char.py')
n_layer = 6
variant('nanogpt')
out_dir = 'out/nanogpt_6L'
