# Needle retrieval with distractors, 2 layers: gated attention (G1: elementwise sigmoid gate after SDPA).
include('base_needle_distractors.py')
variant('gated')
out_dir = 'out/nd_gated_2L'
