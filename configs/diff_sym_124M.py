# GPT-2 small on web text, Differential attention with K = Q (no key projection: 7.1M fewer parameters).
include('base_gpt2.py')
attn = 'diff'
symmetric = True
out_dir = 'out/diff_sym_124M'
