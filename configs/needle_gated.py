# Needle retrieval, gated attention, elementwise G1.
include('base_needle.py')
variant('gated')
out_dir = 'out/needle_gated'
