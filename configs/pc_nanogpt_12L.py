# Python code, 12 layers, nanoGPT's softmax attention trained with AdamW: the baseline that should grow outliers.
include('base_pycode.py')
variant('nanogpt')
out_dir = 'out/pc_nanogpt_12L'
