# Needle retrieval, symmetric attention, K = Q.
include('base_needle.py')
variant('sym')
out_dir = 'out/needle_sym'
