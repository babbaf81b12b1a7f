# 8 layers, symmetric attention, K = Q.
include('base_shakespeare_char.py')
n_layer = 8
variant('sym')
out_dir = 'out/sym_8L'
