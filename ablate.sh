#!/usr/bin/env bash
# Ablation sweep: variants x depths x seeds, one run folder each, then the seed's tables via report.py.
#
#   PROFILE=demo ./ablate.sh                      # the seed's five at 3L, 100 steps: a few minutes on a laptop
#   ./ablate.sh                                   # PROFILE=full: the seed's schedule, a GPU job
#   PROFILE=cpu ./ablate.sh                       # shortened schedule, 3L and 6L, about an hour on 2 CPU cores
#   PROFILE=cpu_long SEEDS="1 2 3" ./ablate.sh    # 500 steps at lr 1e-3, 3L: where the variants separate on a CPU
#   CAUSAL=0 PROFILE=cpu_long ./ablate.sh         # the same runs without the causal mask, in a sweep of their own
#   LEAK=zero_future PROFILE=cpu_long ./ablate.sh # the causal mask with a bug (model.py's leak), a sweep of its own
#   SEEDS="1 2 3" NPROC=4 ./ablate.sh             # three seeds, each run on 4 GPUs with torchrun
#   SEEDS="1 2 3" JOBS=8 ./ablate.sh              # eight runs at a time, spread over every visible GPU
#   SWEEP=shakespeare_full_dropout0.1 VARIANTS="nanogpt diff" DEPTHS=6L ./ablate.sh --dropout=0.1
#                                                 # extra --key=value go to every run, in a sweep of their own
#   PROFILE=gpt2 NPROC=8 ./ablate.sh              # GPT-2 124M on web text (data/fineweb), each run on 8 GPUs
#   PROFILE=sink SEEDS="1 2 3" ANALYZE=1 ./ablate.sh   # the sink claims on Bigram-Backcopy, where the baseline
#                                                 # has a sink (data/bigram_backcopy, results/sink_cpu.md)
#   PROFILE=retrieval SEEDS="1 2 3" ANALYZE=1 ./ablate.sh   # the retrieval claim on needles with distractors,
#                                                 # where the baseline is below 100% (results/needle_cpu.md)
#   SLURM=1 SBATCH_ARGS="--gres=gpu:1 --time=4:00:00" PROFILE=full SEEDS="1 2 3" ./ablate.sh
#                                                 # a Slurm job array: one task a run, then a job for report.py
#
# Environment:
#   PROFILE   full | cpu | cpu_long | demo | gpt2 | sink | retrieval | seed_pipeline  (default full where torch
#                                              sees a GPU; without one, say which. seed_pipeline: the seed author's
#                                              loop, an epoch's worth of windows, 35,000 steps (a GPU job).
#                                              gpt2: configs/<variant>_124M.py on data/fineweb, with
#                                              the configs' own 2.5B-token schedule; sweep fineweb_gpt2. sink:
#                                              configs/bb_<variant>_2L.py on data/bigram_backcopy, with the
#                                              configs' schedule; sweep bigram_backcopy_sink. retrieval:
#                                              configs/nd_<variant>_2L.py on data/needle_distractors;
#                                              sweep needle_distractors_retrieval)
#   CAUSAL    1 | 0                           (default 1; 0 adds --causal=False to every run and names the sweep
#                                              shakespeare_<profile>_noncausal: attention that sees the future)
#   LEAK      none | zero_future | off_by_one | after_norm | time_norm  (default none; else adds
#                                              --causal=False --leak=LEAK and names the sweep
#                                              shakespeare_<profile>_leak_<LEAK>: a masking bug reproduced,
#                                              model.py's GPTConfig.leak; time_norm is Diff's own, so its
#                                              default VARIANTS are diff diff_sym)
#   WINDOWS   random | sequential            (default random; sequential adds --window_order=sequential, an
#                                              unshuffled loader over every stride-1 window, train.py's
#                                              window_order, and _sequential to the sweep's name)
#   VARIANTS  config name stems               (default: the seed's five, then gated softmax1 diff_gated; sink:
#                                              nanogpt softmax1 gated gated_headwise orthoadam softmax1_orthoadam,
#                                              each prefixed with bb_; retrieval: nanogpt diff sym diff_sym
#                                              gated softmax1, each prefixed with nd_)
#   ARCH      nanogpt | llama                 (default nanogpt; llama prefixes each variant with llama_, the
#                                              Diff paper's RMSNorm/SwiGLU/RoPE layer: configs/llama_*_6L.py)
#   DEPTHS    3L 6L 8L                        (default: 3L 6L 8L for full, 3L 6L for cpu)
#   SEEDS     list of seeds                   (default 1337)
#   SWEEP     folder under RUNS_DIR           (default <data>_$PROFILE, + _leak_<LEAK> or _noncausal, + _sequential)
#   RUNS_DIR  where sweeps live               (default runs)
#   NPROC     processes per run (torchrun)    (default 1: plain python)
#   JOBS      runs at once on the machine     (default 1; e.g. 8 for 3-8 layer models on one large GPU)
#   GPUS      GPU indices the runs spread over (default: CUDA_VISIBLE_DEVICES if set, else every GPU nvidia-smi
#                                              lists, else none: no GPU assignment). Slot k of JOBS gets
#                                              CUDA_VISIBLE_DEVICES = the k-th group of NPROC of them, round robin
#   ANALYZE   0 | 1                           (default 0; 1 runs analyze.py on each run this command names once
#                                              it has finished, also on runs finished earlier, where there is a
#                                              ckpt.pt and no analysis.json: the sink and outlier measures in
#                                              analysis.json, without moving checkpoints. retrieval: needle_eval.py
#                                              and needle_eval.json instead. A failed analysis leaves
#                                              FAILED beside summary.json; the next ANALYZE=1 launch retries it)
#   PYTHON    interpreter                     (default python)
#   SLURM     0 | 1                           (default 0; 1 submits the sweep's unfinished runs as a Slurm job
#                                              array, one run a task (each this script again, on one run), and
#                                              a report.py job after it; JOBS and GPUS are then Slurm's to set)
#   SBATCH_ARGS          sbatch options for each run's task, e.g. "--partition=gpu --gres=gpu:1 --time=2:00:00"
#   SBATCH_REPORT_ARGS   sbatch options for the report job (default: SBATCH_ARGS)
#   SLURM_MAX            at most this many tasks at once (sbatch --array=...%SLURM_MAX)
# Each run is configs/<variant>_<depth>.py in runs/<sweep>/<variant>_<depth>_s<seed>/, its console output in
# train.log there. A run with summary.json is skipped; one with ckpt.pt is resumed; a failed run is reported,
# marked with a FAILED file (its exit status) and the sweep goes on. Ctrl-C or SIGTERM stops every run in
# progress within a step or an evaluation batch, each saving its checkpoint: stopped, not failed. A pair with no
# config file (e.g. diff_gated_3L) is skipped. The sweep ends with report.py, which writes runs/<sweep>/results.md;
# then the exit status is 1 if any run or analysis failed (so a script or CI can tell), else report.py's.
set -u
cd "${ABLATE_DIR:-$(dirname "$0")}"  # under Slurm, $0 is the scheduler's copy of this script
# a task of a Slurm array submitted by SLURM=1 below: it runs line SLURM_ARRAY_TASK_ID of the list of runs
# written at submission (ABLATE_RUNS), and only that run
TASK=
[ -n "${ABLATE_RUNS:-}" ] && [ -n "${SLURM_ARRAY_TASK_ID:-}" ] && TASK=$SLURM_ARRAY_TASK_ID

PYTHON=${PYTHON:-python}
if [ -z "${PROFILE:-}" ] && ! "$PYTHON" -c 'import sys, torch; sys.exit(not torch.cuda.is_available())' 2>/dev/null
then
  echo "ablate.sh: torch sees no GPU here, and the default PROFILE=full is the seed's 5000-step schedule, hours a" \
       "run on a CPU. Pick PROFILE=demo (minutes), PROFILE=cpu_long or PROFILE=cpu, or say PROFILE=full to run" \
       "it anyway" >&2
  exit 2
fi
PROFILE=${PROFILE:-full}
NPROC=${NPROC:-1}
case "$NPROC" in
  ''|*[!0-9]*|0) echo "ablate.sh: NPROC=$NPROC must be a whole number of processes a run, 1 or more" >&2; exit 2 ;;
esac
JOBS=${JOBS:-1}
case "$JOBS" in ''|*[!0-9]*|0) echo "ablate.sh: JOBS=$JOBS must be a whole number of runs at once, 1 or more" >&2; exit 2 ;; esac
ANALYZE=${ANALYZE:-0}
case "$ANALYZE" in 0|1) ;; *) echo "ablate.sh: ANALYZE=$ANALYZE is not one of: 0 1" >&2; exit 2 ;; esac
SEEDS=${SEEDS:-1337}
for s in $SEEDS; do  # a comma list (SEEDS=1,2) would name one folder nanogpt_3L_s1,2
  case "$s" in *[!0-9]*) echo "ablate.sh: SEEDS=\"$SEEDS\" must be whole numbers separated by spaces, e.g." \
                              "SEEDS=\"1 2 3\"" >&2; exit 2 ;; esac
done
[ "$PROFILE" = demo ] && VARIANTS=${VARIANTS:-"nanogpt diff sym diff_sym norm_sym"}  # the seed's five
[ "$PROFILE" = gpt2 ] && VARIANTS=${VARIANTS:-"nanogpt diff diff_sym sym gated softmax1 sym_noself"}
[ "$PROFILE" = sink ] && VARIANTS=${VARIANTS:-"nanogpt softmax1 gated gated_headwise orthoadam softmax1_orthoadam"}
[ "$PROFILE" = retrieval ] && VARIANTS=${VARIANTS:-"nanogpt diff sym diff_sym gated softmax1"}
[ "${LEAK:-}" = time_norm ] && VARIANTS=${VARIANTS:-"diff diff_sym"}  # the bug is in Diff's subln
VARIANTS=${VARIANTS:-"nanogpt diff sym diff_sym norm_sym gated softmax1 diff_gated"}
case "${ARCH:-nanogpt}" in
  nanogpt) case "$PROFILE" in
             sink)      VARIANTS=$(for v in $VARIANTS; do printf 'bb_%s ' "$v"; done) ;;
             retrieval) VARIANTS=$(for v in $VARIANTS; do printf 'nd_%s ' "$v"; done) ;;
           esac ;;
  llama)   VARIANTS=$(for v in $VARIANTS; do printf 'llama_%s ' "$v"; done) ;;
  *)       echo "ablate.sh: ARCH=$ARCH is not one of: nanogpt llama" >&2; exit 2 ;;
esac
case "$PROFILE" in
  full) DEPTHS=${DEPTHS:-"3L 6L 8L"}
        SCHEDULE=(--max_iters=5000 --lr_decay_iters=5000 --warmup_iters=100 --dropout=0.2
                  --eval_interval=250 --eval_iters=200 --log_interval=10) ;;
  cpu)  DEPTHS=${DEPTHS:-"3L 6L"}
        SCHEDULE=(--max_iters=150 --lr_decay_iters=150 --warmup_iters=15 --dropout=0.0
                  --eval_interval=50 --eval_iters=10 --log_interval=10 --device=cpu) ;;
  # nanoGPT's shakespeare_char learning rate (1e-3, min 1e-4) on 500 steps: about 8 minutes a 3-layer run on
  # 2 CPU cores in bf16 (about twice that in fp32), far enough past the bigram plateau (2.5) for variants to differ
  cpu_long) DEPTHS=${DEPTHS:-"3L"}
        SCHEDULE=(--max_iters=500 --lr_decay_iters=500 --warmup_iters=50 --learning_rate=1e-3 --min_lr=1e-4
                  --dropout=0.0 --eval_interval=100 --eval_iters=20 --log_interval=10 --device=cpu) ;;
  # a first look at the workflow on a laptop: the seed's five at 3L, 100 steps at batch 16 (about half a minute
  # a run on 2 CPU cores); too short for the variants to separate
  demo) DEPTHS=${DEPTHS:-"3L"}
        SCHEDULE=(--max_iters=100 --lr_decay_iters=100 --warmup_iters=10 --learning_rate=1e-3 --min_lr=1e-4
                  --batch_size=16 --dropout=0.0 --eval_interval=50 --eval_iters=5 --log_interval=10) ;;
  # the seed author's loop as far as it is published (results/seed_table_explained.md, session 12): as many windows
  # as one epoch over every stride-1 window of the whole text at batch 32 (35,000 steps, ~280 passes over the train
  # split), lr 3e-4, dropout 0.1. Assumed where unpublished: a constant lr and plain Adam (no weight decay, beta2
  # 0.999, no clipping), as a generated training loop has them. Its losses on the training text (report.py's
  # "train (eval)") go beside the seed's table; a GPU job, about 16 hours a 3-layer run on a CPU core
  seed_pipeline) DEPTHS=${DEPTHS:-"3L 6L 8L"}
        SCHEDULE=(--max_iters=35000 --decay_lr=False --learning_rate=3e-4 --weight_decay=0.0 --beta2=0.999
                  --grad_clip=0.0 --dropout=0.1 --eval_interval=2500 --eval_iters=200 --log_interval=10) ;;
  # GPT-2 small on web text: the configs hold the schedule (a 2.5B-token budget, configs/base_gpt2.py)
  gpt2) DEPTHS=${DEPTHS:-"124M"}; SCHEDULE=() ;;
  # the sink claims where the baseline has a sink: Bigram-Backcopy (data/bigram_backcopy), 2 layers; the
  # configs (configs/bb_*_2L.py) hold the schedule, a few minutes a run on one CPU core
  sink) DEPTHS=${DEPTHS:-"2L"}; SCHEDULE=() ;;
  # the retrieval claim where the baseline misses: needles with distractors (data/needle_distractors), 2 layers;
  # the configs (configs/nd_*_2L.py) hold the schedule, about 2 minutes a run on one CPU core
  retrieval) DEPTHS=${DEPTHS:-"2L"}; SCHEDULE=() ;;
  *)    echo "ablate.sh: PROFILE=$PROFILE is not one of: full cpu cpu_long demo gpt2 sink retrieval seed_pipeline" >&2
        exit 2 ;;
esac
case "$PROFILE" in  # the sweep's prefix, and what ANALYZE=1 runs on each finished run
  gpt2) DATA=fineweb ;; sink) DATA=bigram_backcopy ;; retrieval) DATA=needle_distractors ;; *) DATA=shakespeare ;;
esac
if [ "$PROFILE" = retrieval ]; then ANALYZER=needle_eval.py; ANALYSIS=needle_eval.json
else ANALYZER=analyze.py; ANALYSIS=analysis.json; fi
# the sweep's name says every setting that changes what its runs are: <data>_<profile>[_leak_<LEAK> or
# _noncausal][_sequential], so that no two kinds of run share a folder (a re-launch would skip or resume the other)
SUFFIX=
LEAK=${LEAK:-none}
case "$LEAK" in
  none) ;;
  zero_future|off_by_one|after_norm|time_norm) SCHEDULE+=(--causal=False --leak="$LEAK"); SUFFIX+=_leak_$LEAK ;;
  *) echo "ablate.sh: LEAK=$LEAK is not one of: none zero_future off_by_one after_norm time_norm" >&2; exit 2 ;;
esac
case "${CAUSAL:-1}" in
  1) ;;
  0) if [ "$LEAK" = none ]; then SCHEDULE+=(--causal=False); SUFFIX+=_noncausal; fi ;;  # a leak is non-causal
  *) echo "ablate.sh: CAUSAL=$CAUSAL is not one of: 1 0" >&2; exit 2 ;;
esac
case "${WINDOWS:-random}" in
  random) ;;
  sequential) case "$PROFILE" in
                sink|retrieval) echo "ablate.sh: WINDOWS=sequential walks a token stream; PROFILE=$PROFILE trains" \
                                     "on fixed-length records" >&2; exit 2 ;;
              esac
              SCHEDULE+=(--window_order=sequential); SUFFIX+=_sequential ;;
  *) echo "ablate.sh: WINDOWS=$WINDOWS is not one of: random sequential" >&2; exit 2 ;;
esac
# a name in VARIANTS or DEPTHS that no config file has is a typo, not a pair to leave out (as diff_gated_3L is)
for v in $VARIANTS; do
  compgen -G "configs/${v}_*.py" >/dev/null || {
    echo "ablate.sh: VARIANTS has '$v', but there is no configs/${v}_<depth>.py; the variants:" \
         "$(ls configs | sed -n 's/_[0-9]*[LM]\.py$//p' | sort -u | tr '\n' ' ')" >&2; exit 2; }
done
for d in $DEPTHS; do
  compgen -G "configs/*_$d.py" >/dev/null || {
    echo "ablate.sh: DEPTHS has '$d', but there is no configs/<variant>_$d.py; the depths:" \
         "$(ls configs | sed -n 's/.*_\([0-9]*[LM]\)\.py$/\1/p' | sort -u | tr '\n' ' ')" >&2; exit 2; }
done
SWEEP=${SWEEP:-${DATA}_$PROFILE$SUFFIX}
ROOT=${RUNS_DIR:-runs}/$SWEEP
# The settings its runs share: the profile's schedule and the extra --key=value (the last of a key wins, as in
# train.py), less the keys that only say where and how a run is computed (train.py's FREE_ON_RESUME, which a test
# keeps equal to this list). Kept in $ROOT/sweep_settings; a launch with other settings is refused, since
# report.py averages a cell's runs as seeds of one setting, and would skip a finished run made with others.
FREE_KEYS="out_dir init_from eval_only device dtype compile compile_mode cuda_graph wandb_log wandb_project
           wandb_run_name wandb_mode log_interval always_save_checkpoint ckpt_interval resume_strict"
FREE=" $(echo $FREE_KEYS) "  # on one line
for a in "$@"; do  # what the sweep sets per run
  case "$a" in
    --seed=*|--out_dir=*|--init_from=*)
      echo "ablate.sh: ${a%%=*} is the sweep's to set (each run's seed comes from SEEDS, its folder and resume from" \
           "the sweep): drop it from the extra arguments" >&2; exit 2 ;;
  esac
done
# every config of the sweep with the profile's schedule and the extra arguments, checked as train.py checks them
# (keys, types, ranges, the model), before the sweep keeps anything: a typo (--dropuot=0.1) stops here, not in each
# run after sweep_settings has recorded it (a sweep that refuses its corrected command)
CONFIGS=()
for depth in $DEPTHS; do for variant in $VARIANTS; do
  [ -f "configs/${variant}_${depth}.py" ] && CONFIGS+=("configs/${variant}_${depth}.py")
done; done
"$PYTHON" -c '
import sys
n = sys.argv.index("--")
try:
    import train
except ImportError as e:  # e.g. a Slurm login node without the environment: the runs check them
    print(f"ablate.sh: the arguments are not checked here ({e}); each run checks them", file=sys.stderr)
    sys.exit(0)
for cfg in sys.argv[1:n]:
    try:
        train.parse_config([cfg, *sys.argv[n + 1:]])
    except (ValueError, OSError) as e:
        sys.exit(f"ablate.sh: {cfg} with the extra arguments and the profile'"'"'s schedule: {e}")
' "${CONFIGS[@]}" -- "${SCHEDULE[@]}" "$@" >/dev/null || exit 2  # (a config's notes on stdout: once a run)
mkdir -p "$ROOT"
declare -A SETTING=()
for a in "${SCHEDULE[@]}" "$@"; do
  k=${a%%=*}; k=${k#--}
  [[ "$FREE" == *" $k "* ]] || SETTING[$k]=$a
done
settings=$(for k in "${!SETTING[@]}"; do echo "${SETTING[$k]}"; done | LC_ALL=C sort)
if [ ! -f "$ROOT/sweep_settings" ]; then  # a new sweep, or one made before this file: this command's settings
  # ln creates the file whole and only where it is absent, so of two launches at once the first wins and the
  # second is compared with it below (a check-then-write let both pass with different settings)
  # (mktemp: a name of its own even where launches on several Slurm nodes share the folder)
  tmp=$(mktemp "$ROOT/.sweep_settings.XXXXXX") || exit 2
  echo "$settings" > "$tmp"
  ln "$tmp" "$ROOT/sweep_settings" 2>/dev/null ||
    [ -f "$ROOT/sweep_settings" ] || mv "$tmp" "$ROOT/sweep_settings"  # no hard links here
  rm -f "$tmp"
fi
if [ "$settings" != "$(cat "$ROOT/sweep_settings")" ]; then
  echo "ablate.sh: $ROOT holds runs made with other settings than this command's:" >&2
  diff <(cat "$ROOT/sweep_settings") <(echo "$settings") | sed -n 's/^</  the sweep:   /p; s/^>/  this command:/p' >&2
  echo "  Name a new sweep (SWEEP=<name>), or re-launch with the sweep's settings." >&2
  exit 2
fi
# present while a Ctrl-C or SIGTERM stops the sweep (or this Slurm task): the runs that end then were stopped
STOPPING=$ROOT/.stopping${TASK:+.$TASK}
rm -f "$STOPPING"
BUSY=$ROOT/.busy.$$  # the runs another process was training (its lock on the run folder): left to it
rm -f "$BUSY"

# the sweep's runs, "config folder seed", seed by seed: a sweep stopped half-way leaves whole tables for its first
# seeds. A pair with no config file (e.g. diff_gated_3L) is left out.
RUNS=()
for seed in $SEEDS; do
  for depth in $DEPTHS; do
    for variant in $VARIANTS; do
      cfg=configs/${variant}_${depth}.py
      [ -f "$cfg" ] && RUNS+=("$cfg $ROOT/${variant}_${depth}_s$seed $seed")
    done
  done
done

if [ "${SLURM:-0}" = 1 ] && [ -z "$TASK" ]; then
  # one array task per unfinished run, listed in a file that task k reads line k of; each task is this script
  # again, with the same environment and arguments
  command -v sbatch >/dev/null || { echo "ablate.sh: SLURM=1, but there is no sbatch here" >&2; exit 2; }
  list=$ROOT/.slurm_runs.$(date +%Y%m%d-%H%M%S).$$
  for run in "${RUNS[@]}"; do read -r _ dir _ <<< "$run"; [ -f "$dir/summary.json" ] || echo "$run"; done > "$list"
  n=$(wc -l < "$list")
  if [ "$n" -eq 0 ]; then
    rm -f "$list"; echo "ablate.sh: every run of $ROOT has finished"; exec "$PYTHON" report.py "$ROOT"
  fi
  # shellcheck disable=SC2086  # SBATCH_ARGS holds several options
  job=$(sbatch --parsable --array="0-$((n - 1))${SLURM_MAX:+%$SLURM_MAX}" --job-name="ablate_$SWEEP" --chdir="$PWD" \
        --output="$ROOT/slurm-%A_%a.out" --export=ALL,ABLATE_RUNS="$list",ABLATE_DIR="$PWD",PROFILE="$PROFILE" \
        ${SBATCH_ARGS:-} ablate.sh "$@") || { rm -f "$list"; exit 1; }
  job=${job%%;*}
  # shellcheck disable=SC2086
  report=$(sbatch --parsable --dependency=afterany:"$job" --job-name="report_$SWEEP" --chdir="$PWD" \
           --output="$ROOT/slurm-report-%j.out" ${SBATCH_REPORT_ARGS:-${SBATCH_ARGS:-}} \
           --wrap="$PYTHON report.py $ROOT") || exit 1
  echo "ablate.sh: submitted $n run(s) of ${#RUNS[@]} as Slurm array job $job (tasks 0-$((n - 1)), $list), and" \
       "report.py as job ${report%%;*} after it. Logs: $ROOT/slurm-${job}_<task>.out; the same command again" \
       "resubmits whatever has not finished (stopped runs resume from their checkpoint)."
  exit 0
fi
if [ -n "$TASK" ]; then  # Slurm gives the task its GPUs (CUDA_VISIBLE_DEVICES), and runs tasks side by side
  run=$(sed -n "$((TASK + 1))p" "$ABLATE_RUNS" 2>/dev/null)
  [ -n "$run" ] || { echo "ablate.sh: Slurm task $TASK has no line in $ABLATE_RUNS" >&2; exit 2; }
  RUNS=("$run"); JOBS=1
fi

folders() {  # dir seeds: the run folders of an entry (a group's dir holds {seed}, its seeds a comma list)
  local s; for s in ${2//,/ }; do echo "${1//\{seed\}/$s}"; done
}

if [ "$NPROC" -gt 1 ]; then LAUNCH=(torchrun --standalone --nproc_per_node="$NPROC"); else LAUNCH=("$PYTHON"); fi

# the GPUs: each of the JOBS slots gets its own group of NPROC of them (round robin when there are fewer GPUs than
# slots), so a sweep fills every GPU of the machine rather than stacking its runs on GPU 0
if [ -z "${GPUS:-}" ]; then
  if [ -n "${CUDA_VISIBLE_DEVICES+set}" ]; then GPUS=${CUDA_VISIBLE_DEVICES//,/ }  # set, even empty (no GPU), wins
  elif command -v nvidia-smi >/dev/null 2>&1; then
    GPUS=$(nvidia-smi --query-gpu=index --format=csv,noheader 2>/dev/null | grep -xE '[0-9]+') || GPUS=
  fi
fi
read -r -a GPU_LIST <<< "$(echo ${GPUS:-})"
if [ ${#GPU_LIST[@]} -gt 0 ] && [ "$NPROC" -gt ${#GPU_LIST[@]} ]; then
  echo "ablate.sh: NPROC=$NPROC processes a run, but only ${#GPU_LIST[@]} GPU(s): ${GPU_LIST[*]}" >&2; exit 2
fi
slot_gpus() {  # slot -> its comma-separated GPU indices
  local i out=()
  for ((i = 0; i < NPROC; i++)); do out+=("${GPU_LIST[$(( ($1 * NPROC + i) % ${#GPU_LIST[@]} ))]}"); done
  local IFS=,; echo "${out[*]}"
}
[ ${#GPU_LIST[@]} -gt 0 ] && echo "GPUs ${GPU_LIST[*]}: $JOBS slot(s) of $NPROC process(es), each on its own GPUs"
slots=()  # the job running in each slot

run_one() {  # cfg dir seed [extra args]: one run, or a group of seeds (BATCH_SEEDS: dir holds {seed}, seed is a
            # comma list) as one process; the exit status in a FAILED file of each folder if it fails
  local cfg=$1 dir=$2 seed=$3 resume=() t0 rc d dirs logs=() who=() ok=0; shift 3
  read -r -a dirs <<< "$(folders "$dir" "$seed" | tr '\n' ' ')"
  # a run in progress (another launch of this sweep, a Slurm task still running): train.py would refuse it. (A
  # group's folders were checked when it was formed.)
  if [ -f "$dir/.lock" ] && command -v flock >/dev/null && ! flock -n "$dir/.lock" true 2>/dev/null; then
    echo "busy   $dir: another process is training it ($(cat "$dir/.lock" 2>/dev/null)); left to it"
    echo "$dir" >> "$BUSY"; return 0
  fi
  # a stop that came before this run's python (the trap's pkill found no child to signal): do not start it
  [ -f "$STOPPING" ] && { echo "stopped $dir: not started"; return 130; }
  for d in "${dirs[@]}"; do mkdir -p "$d"; rm -f "$d/FAILED"; logs+=("$d/train.log"); done
  # strict: the checkpoint's settings must be this command's (a folder copied from another sweep, or a sweep made
  # before sweep_settings, would otherwise resume under the new ones, and its record would hide it)
  [ -f "$dir/ckpt.pt" ] && resume=(--init_from=resume --resume_strict=True)
  if [ ${#dirs[@]} -gt 1 ]; then who=(--seeds="${seed//,/ }"); echo "run    $dir (seeds ${seed//,/ }, one model)"
  else who=(--seed="$seed"); echo "run    $dir ${resume[*]}"; fi
  t0=$(date +%s)
  # default INT/TERM dispositions again (the job's subshell ignores them), so a stop during python's start is not
  # lost; train.py then installs its own handler, which saves a checkpoint. A group's output goes to each of its
  # folders' train.log (tee ignores the stop, inheriting the subshell's dispositions)
  if [ ${#dirs[@]} -eq 1 ]; then
    ( trap - INT TERM; exec "${LAUNCH[@]}" train.py "$cfg" "${SCHEDULE[@]}" "${who[@]}" --out_dir="$dir" \
        "${resume[@]}" "$@" ) >>"$dir/train.log" 2>&1 </dev/null
    rc=$?
  else
    ( trap - INT TERM; exec "${LAUNCH[@]}" train.py "$cfg" "${SCHEDULE[@]}" "${who[@]}" --out_dir="$dir" \
        "$@" ) 2>&1 </dev/null | tee -a "${logs[@]}" >/dev/null
    rc=${PIPESTATUS[0]}
  fi
  # stopped, not failed: train.py's 130, or any exit while the sweep stops (torchrun exits 1 after a stop)
  if [ $rc -ne 0 ] && { [ $rc -eq 130 ] || [ -f "$STOPPING" ]; }; then
    echo "stopped $dir: $(grep -ho 'stopped at iteration [0-9]*' "${logs[0]}" | tail -n 1)"
    return 130
  fi
  if [ $rc -eq 75 ]; then  # train.py: out_dir locked by another run (where flock above is missing, or a race)
    echo "busy   $dir: another process is training it; left to it"; printf '%s\n' "${dirs[@]}" >> "$BUSY"
    return 0
  fi
  if [ $rc -ne 0 ]; then
    for d in "${dirs[@]}"; do echo "$rc" > "$d/FAILED"; done
    echo "FAILED $dir (exit $rc): tail of ${logs[0]}:"; tail -n 5 "${logs[0]}" | sed 's/^/         /'
    return $rc
  fi
  echo "done   $dir in $(( $(date +%s) - t0 ))s"
  [ "$ANALYZE" = 1 ] || return 0
  for d in "${dirs[@]}"; do  # not after a stop
    [ -f "$d/summary.json" ] && { analyze_one "$d" || ok=$?; }
  done
  return $ok
}

analysis_current() {  # dir: its $ANALYSIS exists and is of the run's last checkpoint (not of best.pt, say)
  [ -f "$1/$ANALYSIS" ] && "$PYTHON" -c 'import json, sys
a, s = (json.load(open(p)) for p in sys.argv[1:])
sys.exit(a.get("iter", s["iter"]) != s["iter"])' "$1/$ANALYSIS" "$1/summary.json" 2>/dev/null
}

analyze_one() {  # dir: $ANALYZER (analyze.py; needle_eval.py for retrieval) on the run's ckpt.pt, into analyze.log
  local dir=$1 rc
  rm -f "$dir/FAILED"
  # default INT/TERM dispositions again (the job's subshell ignores them): a stopped sweep stops its analyses too
  ( trap - INT TERM; exec "$PYTHON" "$ANALYZER" --out_dir="$dir" ) >"$dir/analyze.log" 2>&1 </dev/null
  rc=$?
  if [ $rc -ne 0 ] && [ -f "$STOPPING" ]; then
    echo "stopped $dir: $ANALYZER; a re-launch with ANALYZE=1 runs it again"
    return 130
  fi
  if [ $rc -ne 0 ]; then
    echo "$rc" > "$dir/FAILED"
    echo "FAILED $dir: $ANALYZER (exit $rc): tail of $dir/analyze.log:"
    tail -n 3 "$dir/analyze.log" | sed 's/^/         /'
  else
    echo "analyzed $dir"
  fi
  return $rc
}

# Ctrl-C or SIGTERM: train.py saves a checkpoint of each run in progress (the TERM is passed on to runs in the
# background); the sweep stops, and a re-launch resumes them
trap 'trap "" INT TERM; touch "$STOPPING"
      echo "ablate.sh: stopping: $(jobs -rp | wc -l) run(s) in progress save a checkpoint at the end of their step"
      for p in $(jobs -p); do pkill -TERM -P "$p"; done; wait; rm -f "$STOPPING" "$BUSY"
      echo "ablate.sh: interrupted; re-launch the same command to continue"; exit 130' INT TERM
skipped=0; launched=(); analyzed=()  # runs started, and finished runs analyzed now
start=$(date +%s)
for run in "${RUNS[@]}"; do
  read -r cfg dir seed <<< "$run"
  if [ -f "$dir/summary.json" ]; then
    echo "skip   $dir (finished)"; skipped=$((skipped + 1))
    [ "$ANALYZE" = 1 ] && ! analysis_current "$dir" || continue
    # e.g. a committed run copied back without its checkpoint
    [ -f "$dir/ckpt.pt" ] || { echo "         no ckpt.pt, so no analysis"; continue; }
    job=(analyze_one "$dir"); analyzed+=("$dir")
  else
    job=(run_one "$cfg" "$dir" "$seed" "$@"); launched+=($(folders "$dir" "$seed"))
  fi
  # JOBS runs at once (a small model leaves most of a GPU idle between its kernel launches). Each runs in the
  # background, also for JOBS=1, so that a signal reaches the trap above while the sweep waits
  while [ "$(jobs -rp | wc -l)" -ge "$JOBS" ]; do wait -n; done
  running=" $(jobs -rp | tr '\n' ' ')"
  for ((slot = 0; slot < JOBS; slot++)); do [[ "$running" == *" ${slots[$slot]:-none} "* ]] || break; done
  if [ ${#GPU_LIST[@]} -gt 0 ]; then
    ( trap '' INT TERM; export CUDA_VISIBLE_DEVICES; CUDA_VISIBLE_DEVICES=$(slot_gpus "$slot"); "${job[@]}" ) &
  else
    ( trap '' INT TERM; "${job[@]}" ) &
  fi
  slots[$slot]=$!
done
wait
# a FAILED file beside summary.json: the run finished and its analysis failed
failed=0; failed_an=0
for dir in "${launched[@]}" "${analyzed[@]}"; do
  [ -f "$dir/FAILED" ] || continue
  [ -f "$dir/summary.json" ] && failed_an=$((failed_an + 1)) || failed=$((failed + 1))
done
busy=0; [ -f "$BUSY" ] && busy=$(wc -l < "$BUSY"); rm -f "$BUSY"
done_=$(( ${#launched[@]} - failed - busy ))
[ "$ANALYZE" = 1 ] && skipped="$skipped skipped (${#analyzed[@]} of them analyzed now)" || skipped="$skipped skipped"
echo "sweep $ROOT: $done_ run, $skipped, $failed failed, $busy busy elsewhere, $(( $(date +%s) - start ))s"
report_rc=0
[ -z "$TASK" ] && { "$PYTHON" report.py "$ROOT"; report_rc=$?; }  # a Slurm task: the report job renders it
if [ $failed -gt 0 ]; then
  echo "ablate.sh: $failed run(s) failed (see FAILED above and their train.log); re-launch to retry them" >&2
fi
if [ $failed_an -gt 0 ]; then
  echo "ablate.sh: $ANALYZER failed on $failed_an finished run(s) (see analyze.log); re-launch with ANALYZE=1" >&2
fi
[ $((failed + failed_an)) -gt 0 ] && exit 1
exit $report_rc
