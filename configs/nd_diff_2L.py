# Needle retrieval with distractors, 2 layers: Differential attention (V1).
include('base_needle_distractors.py')
attn = 'diff'
out_dir = 'out/nd_diff_2L'
