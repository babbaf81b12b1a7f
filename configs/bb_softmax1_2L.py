# Bigram-Backcopy, 2 layers, softmax-1 (Kaul et al. 2025): a row may put its weight on nothing instead of BOS.
include('base_bigram_backcopy.py')
variant('softmax1')
out_dir = 'out/bb_softmax1_2L'
