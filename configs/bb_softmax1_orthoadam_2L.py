# Bigram-Backcopy, 2 layers, softmax-1 trained with OrthoAdam: Kaul et al. 2025's full recipe.
include('base_bigram_backcopy.py')
variant('softmax1_orthoadam')
out_dir = 'out/bb_softmax1_orthoadam_2L'
