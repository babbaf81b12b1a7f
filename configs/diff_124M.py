# GPT-2 small on web text, Differential attention laid out as the paper's: the baseline's 12 heads of 64 become 6
# differential heads, each two softmax maps over query/key sub-heads of 64 (the baseline's head size) and a value of
# 128, so the parameters match the baseline's (+4,608: the lambdas and the subln weights). The paper halves the
# number of heads, not the head size (microsoft/unilm's README; the seed notes' small models halve the head size
# instead, and their configs, <variant>_3L.py ..., keep that). lambda_init = 0.8 - 0.6 exp(-0.3 (l - 1)), the
# paper's schedule (no seed offset here).
include('base_gpt2.py')
attn = 'diff'
n_head = 6
out_dir = 'out/diff_124M'
