# GPT-2 small on web text, the nanoGPT baseline attention (configs/base_gpt2.py).
include('base_gpt2.py')
variant('nanogpt')
out_dir = 'out/nanogpt_124M'
