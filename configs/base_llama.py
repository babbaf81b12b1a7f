# The Diff paper's LLaMA-style layer (pre-RMSNorm, SwiGLU, RoPE) on the seed's Shakespeare setup; the llama_*
# configs set n_layer and the attention, as the plain configs do on base_shakespeare_char.py.
include('base_shakespeare_char.py')
norm = 'rmsnorm'
mlp = 'swiglu'
pos = 'rope'
