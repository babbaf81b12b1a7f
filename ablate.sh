#!/usr/bin/env bash
# Ablation sweep: variants x depths x seeds, one run folder each (runs/<sweep>/<variant>_<depth>_s<seed>/, its output
# in train.log), then report.py's tables in runs/<sweep>/results.md. A finished run (summary.json) is skipped, a
# stopped one (ckpt.pt) resumed, a failed one marked FAILED; Ctrl-C stops every run with its checkpoint. Every
# setting in detail: docs/details.md, "Sweeps".
#
#   PROFILE=demo ./ablate.sh                      # the seed's five at 3L, 100 steps: minutes on a laptop
#   PROFILE=cpu_long SEEDS="1 2 3" ./ablate.sh    # 500 steps at lr 1e-3, 3L: where the variants separate on a CPU
#   VARIANTS="nanogpt diff" DEPTHS=6L ./ablate.sh --dropout=0.1   # extra --key=value go to every run, in a sweep
#                                                 # of their own (runs/shakespeare_full_dropout0.1)
#   LRS="1e-3 3e-3 1e-2" PROFILE=cpu_long VARIANTS="nanogpt gated" ./ablate.sh   # a sweep a rate: <sweep>_lr<rate>
#   SLURM=1 SBATCH_ARGS="--gres=gpu:1 --time=4:00:00" SEEDS="1 2 3" ./ablate.sh   # a Slurm array, one task a run
#
# Settings (environment variables):
#   PROFILE   full | cpu | cpu_long | demo | gpt2 | sink | retrieval | seed_pipeline (default full, where torch
#             sees a GPU); VARIANTS config name stems; DEPTHS e.g. "3L 6L"; SEEDS (default 1337); ARCH nanogpt | llama
#   CAUSAL=0 | LEAK=<bug> | WINDOWS=sequential   without the causal mask, with a masking bug, unshuffled (own sweep)
#   LRS       learning rates, one sweep each, named <sweep>_lr<rate>, its runs with --learning_rate=<rate>
#   SWEEP     the sweep's folder under RUNS_DIR (default runs): <data>_<profile>, + each setting that changes its runs
#   NPROC     processes a run (torchrun); JOBS runs at once; GPUS the GPUs they spread over; WORKER auto | 0 | 1
#   ANALYZE=1 analyze.py (needle_eval.py for retrieval) on each finished run, into its folder
#   SLURM=1   a Slurm job array, one task a run, then report.py (SBATCH_ARGS, SBATCH_REPORT_ARGS, SLURM_MAX)
#   PROGRESS_EVERY seconds between progress lines off a terminal (default 30; 0: none); STOP_GRACE seconds a stopped
#             run has to save before it is killed (default 20); PYTHON the interpreter (default python)
# Exit status: report.py's; 1 when a run or an analysis failed; 2 when a setting is refused (before anything is
# made); 130 when stopped by Ctrl-C or SIGTERM. The sweep itself is sweep.py's (this script is bash 3.2).
set -u
cd "${ABLATE_DIR:-$(dirname "$0")}" || exit 2  # under Slurm, $0 is the scheduler's copy of this script
for a in ${1+"$@"}; do
  case "$a" in -h | --help) sed -n '2,/^set -u/p' ablate.sh | sed '$d; s/^# \{0,1\}//'; exit 0 ;; esac
done
"${PYTHON:-python}" sweep.py check ${1+"$@"} >/dev/null || exit 2
exec "${PYTHON:-python}" sweep.py run ${1+"$@"}
