# GPT-2 small on web text, gated attention (Qiu et al. 2025): elementwise sigmoid gate after SDPA (G1), 7.1M
# more parameters (the gate's 768 x 768 per layer), as the paper adds them.
include('base_gpt2.py')
variant('gated')
out_dir = 'out/gated_124M'
