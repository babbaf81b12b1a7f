# Python code, 12 layers, Differential attention (V1; lambda_init by depth, the Diff paper's rule): claim 9, whether
# Diff has fewer activation outliers than the baseline (configs/pc_nanogpt_12L.py) in the setting built to grow them.
include('base_pycode.py')
attn = 'diff'
out_dir = 'out/pc_diff_12L'
