# Python code, 12 layers, gated attention (Qiu et al. 2025): elementwise sigmoid gate after SDPA (G1).
include('base_pycode.py')
variant('gated')
out_dir = 'out/pc_gated_12L'
