# Needle retrieval with distractors, 2 layers: softmax-1 (Kaul et al.).
include('base_needle_distractors.py')
variant('softmax1')
out_dir = 'out/nd_softmax1_2L'
