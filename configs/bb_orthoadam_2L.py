# Bigram-Backcopy, 2 layers, softmax attention trained with OrthoAdam (Kaul et al. 2025, orthoadam.py).
include('base_bigram_backcopy.py')
variant('orthoadam')
out_dir = 'out/bb_orthoadam_2L'
