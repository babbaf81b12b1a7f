# Python code, 12 layers, softmax-1 trained with OrthoAdam: Kaul et al. 2025's full recipe (claim 5).
include('base_pycode.py')
variant('softmax1_orthoadam')
out_dir = 'out/pc_softmax1_orthoadam_12L'
