# 3 layers, softmax-1 (Kaul et al. 2025).
include('base_shakespeare_char.py')
n_layer = 3
variant('softmax1')
out_dir = 'out/softmax1_3L'
