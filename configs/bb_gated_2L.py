# Bigram-Backcopy, 2 layers, gated attention (Qiu et al. 2025): elementwise sigmoid gate after SDPA (G1).
include('base_bigram_backcopy.py')
variant('gated')
out_dir = 'out/bb_gated_2L'
