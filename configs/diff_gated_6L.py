# 6 layers, Differential attention with the G1 elementwise gate.
include('base_shakespeare_char.py')
n_layer = 6
variant('diff_gated')
out_dir = 'out/diff_gated_6L'
