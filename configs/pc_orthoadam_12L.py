# Python code, 12 layers, softmax attention trained with OrthoAdam (Adam in a fixed random rotated basis).
include('base_pycode.py')
variant('orthoadam')
out_dir = 'out/pc_orthoadam_12L'
