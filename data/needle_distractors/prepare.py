"""
Multi-needle retrieval with distractors: data/needle's task, where the first queried key also occurs on
--distractors earlier needles with other values, and the answer is the key's latest value (a key-value store
that was overwritten). Finding a needle that matches the query is no longer enough: attention must pick the
latest of several matches, which a 2-layer softmax model does only in part. It gives the retrieval claim
(results/claims.md row 7) a baseline below the ceiling, where every variant otherwise scores 100%.

$ python data/needle_distractors/prepare.py          # data/needle's defaults (block 32, 2-6 fused needles), 4 distractors

Any option of data/needle/prepare.py may be given; the files go into this folder unless --out_dir says otherwise.
needle_eval.py reads `distractors` from meta.json and draws its evaluation records the same way.
"""
import importlib.util
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
DISTRACTORS = 4

if __name__ == '__main__':
    spec = importlib.util.spec_from_file_location('needle_prepare', os.path.join(HERE, '..', 'needle', 'prepare.py'))
    needle = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(needle)
    needle.main(['--distractors', str(DISTRACTORS), '--out_dir', HERE, *sys.argv[1:]])
