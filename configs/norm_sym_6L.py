# 6 layers, the seed's Norm+Sym: w_ij = 1 + cos(q_i, q_j), row-normalised.
include('base_shakespeare_char.py')
n_layer = 6
variant('norm_sym')
out_dir = 'out/norm_sym_6L'
