# 6 layers, gated attention (Qiu et al. 2025): elementwise sigmoid gate after SDPA (G1).
include('base_shakespeare_char.py')
n_layer = 6
variant('gated')
out_dir = 'out/gated_6L'
