# Bigram-Backcopy, 2 layers, gated attention (Qiu et al. 2025): one sigmoid gate per head after SDPA (G1).
include('base_bigram_backcopy.py')
variant('gated_headwise')
out_dir = 'out/bb_gated_headwise_2L'
