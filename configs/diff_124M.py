# GPT-2 small on web text, Differential attention: 12 heads, each two softmax maps over q/k halves of 32 and a
# value of 64, so the parameters match the baseline's (+2,304: the lambdas and the subln weights), as the paper
# matches them. lambda_init = 0.8 - 0.6 exp(-0.3 (l - 1)), the paper's schedule (no seed offset here).
include('base_gpt2.py')
attn = 'diff'
out_dir = 'out/diff_124M'
