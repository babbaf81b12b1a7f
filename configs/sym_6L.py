# 6 layers, symmetric attention, K = Q.
include('base_shakespeare_char.py')
n_layer = 6
variant('sym')
out_dir = 'out/sym_6L'
