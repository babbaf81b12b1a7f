# GPT-2 small on web text, Differential attention with K = Q (no key projection: 7.1M fewer parameters), laid out as
# the paper's Differential attention (configs/diff_124M.py): 6 differential heads, query/key sub-heads of 64.
include('base_gpt2.py')
attn = 'diff'
symmetric = True
n_head = 6
out_dir = 'out/diff_sym_124M'
