# Python code, 12 layers, softmax-1 (exp(x_i) / (1 + sum_j exp(x_j))): a head can attend to nothing.
include('base_pycode.py')
variant('softmax1')
out_dir = 'out/pc_softmax1_12L'
