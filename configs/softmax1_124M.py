# GPT-2 small on web text, softmax-1 (Kaul et al. 2025): exp(x_i) / (1 + sum_j exp(x_j)), no new parameters.
include('base_gpt2.py')
variant('softmax1')
out_dir = 'out/softmax1_124M'
