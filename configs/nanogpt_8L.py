# 8 layers, nanoGPT's softmax attention.
include('base_shakespeare_char.py')
n_layer = 8
variant('nanogpt')
out_dir = 'out/nanogpt_8L'
