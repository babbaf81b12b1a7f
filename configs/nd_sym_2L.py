# Needle retrieval with distractors, 2 layers: symmetric attention (K = Q).
include('base_needle_distractors.py')
variant('sym')
out_dir = 'out/nd_sym_2L'
