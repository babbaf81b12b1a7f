# 8 layers, Differential attention with K = Q (the seed's Diff+Sym).
include('base_shakespeare_char.py')
n_layer = 8
variant('diff_sym')
out_dir = 'out/diff_sym_8L'
