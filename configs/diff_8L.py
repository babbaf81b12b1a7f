# 8 layers, Differential attention (V1), lambda_init as the seed's table.
include('base_shakespeare_char.py')
n_layer = 8
variant('diff')
out_dir = 'out/diff_8L'
