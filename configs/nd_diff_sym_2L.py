# Needle retrieval with distractors, 2 layers: Differential attention with K = Q.
include('base_needle_distractors.py')
attn = 'diff'
symmetric = True
out_dir = 'out/nd_diff_sym_2L'
