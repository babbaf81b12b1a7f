# GPT-2 small on web text, K = Q with Reformer's rule: no query attends to its own position (except the first).
include('base_gpt2.py')
variant('sym_noself')
out_dir = 'out/sym_noself_124M'
