# 3 layers, symmetric attention (K = Q) with Reformer's rule: no query attends to its own position.
include('base_shakespeare_char.py')
n_layer = 3
symmetric = True
mask_self = True
out_dir = 'out/sym_noself_3L'
