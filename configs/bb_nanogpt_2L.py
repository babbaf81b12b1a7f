# Bigram-Backcopy, 2 layers, nanoGPT's softmax attention: the baseline that grows a sink on BOS.
include('base_bigram_backcopy.py')
variant('nanogpt')
out_dir = 'out/bb_nanogpt_2L'
