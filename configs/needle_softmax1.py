# Needle retrieval, softmax-1.
include('base_needle.py')
variant('softmax1')
out_dir = 'out/needle_softmax1'
