# GPT-2 small on web text, symmetric attention (K = Q: no key projection, 7.1M fewer parameters).
include('base_gpt2.py')
variant('sym')
out_dir = 'out/sym_124M'
