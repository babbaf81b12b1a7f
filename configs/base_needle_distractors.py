# Multi-needle retrieval with distractors (data/needle_distractors): data/needle's task, but the first queried key
# also sits on 4 earlier needles with other values and the answer is its latest value. The 2-layer baseline of
# base_needle.py (same model and schedule) stops short of the ceiling here (results/needle_cpu.md). Evaluate with
# needle_eval.py; PROFILE=retrieval ANALYZE=1 ./ablate.sh does both.
include('base_needle.py')
dataset = 'needle_distractors'
