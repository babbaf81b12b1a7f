# Needle retrieval, nanoGPT's softmax attention.
include('base_needle.py')
variant('nanogpt')
out_dir = 'out/needle_nanogpt'
