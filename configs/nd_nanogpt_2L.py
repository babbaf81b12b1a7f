# Needle retrieval with distractors, 2 layers: the nanoGPT baseline (softmax attention).
include('base_needle_distractors.py')
variant('nanogpt')
out_dir = 'out/nd_nanogpt_2L'
