# 3 layers, Differential attention (V1), lambda_init as the seed's table.
include('base_shakespeare_char.py')
n_layer = 3
variant('diff')
out_dir = 'out/diff_3L'
