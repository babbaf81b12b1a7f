#!/usr/bin/env bash
# Ablation sweep: variants x depths x seeds, one run folder each, then the seed's tables via report.py.
#
#   PROFILE=demo ./ablate.sh                      # the seed's five at 3L, 100 steps: a few minutes on a laptop
#   ./ablate.sh                                   # PROFILE=full: the seed's schedule, a GPU job
#   PROFILE=cpu ./ablate.sh                       # shortened schedule, 3L and 6L, about an hour on 2 CPU cores
#   PROFILE=cpu_long SEEDS="1 2 3" ./ablate.sh    # 500 steps at lr 1e-3, 3L: where the variants separate on a CPU
#   CAUSAL=0 PROFILE=cpu_long ./ablate.sh         # the same runs without the causal mask, in a sweep of their own
#   LEAK=zero_future PROFILE=cpu_long ./ablate.sh # the causal mask with a bug (model.py's leak), a sweep of its own
#   SEEDS="1 2 3" NPROC=4 ./ablate.sh             # three seeds, each run on 4 GPUs (torchrun, via processes.py)
#   SEEDS="1 2 3" JOBS=8 ./ablate.sh              # eight runs at a time, spread over every visible GPU
#   VARIANTS="nanogpt diff" DEPTHS=6L ./ablate.sh --dropout=0.1
#                                                 # extra --key=value go to every run, in a sweep of their own
#                                                 # (runs/shakespeare_full_dropout0.1; the first line says which)
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
#                                              sees a GPU; without one, say which. On a GPU every run is CUDA graphs
#                                              where it can be (train.py's cuda_graph auto); full and seed_pipeline
#                                              without torch.compile. seed_pipeline: the seed author's
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
#   SWEEP     folder under RUNS_DIR           (default <data>_$PROFILE, + _leak_<LEAK> or _noncausal, + _sequential,
#                                              + _<key><value> for each extra --key=value that changes what the runs
#                                              compute: --max_iters=10 gives shakespeare_demo_max_iters10)
#   RUNS_DIR  where sweeps live               (default runs)
#   NPROC     processes per run (torchrun)    (default 1: plain python; more: python processes.py, torchrun)
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
#   STOP_GRACE seconds a stopped run has to save its checkpoint and end before it is killed (default 20)
#   WORKER    auto | 0 | 1                    (default auto: 1 where the runs go to a CUDA device (GPUS names one and
#                                              no --device=cpu or mps), one process a run (NPROC=1) and not a Slurm
#                                              task; else 0). 1: the runs are dealt round robin, in the sweep's order,
#                                              to JOBS worker processes (worker.py), each running its share back to
#                                              back through train.py's code: the imports and the CUDA context are
#                                              paid once a worker, not once a run (on an H200 a run's own process
#                                              spent 10-11 s before its clock, against 71-126 s of its training,
#                                              five full-schedule 3-layer runs at once). 0: a process a run, JOBS at
#                                              once. A CPU keeps 0: there the imports (a few seconds) are small
#                                              beside a run of minutes, and a crash ends one run, not a worker's
#                                              share. With WORKER=1 ANALYZE's analyses run after the worker's runs
#   SLURM     0 | 1                           (default 0; 1 submits the sweep's unfinished runs as a Slurm job
#                                              array, one run a task (each this script again, on one run), and
#                                              a report.py job after it; JOBS and GPUS are then Slurm's to set)
#   SBATCH_ARGS          sbatch options for each run's task, e.g. "--partition=gpu --gres=gpu:1 --time=2:00:00"
#   SBATCH_REPORT_ARGS   sbatch options for the report job (default: SBATCH_ARGS)
#   SLURM_MAX            at most this many tasks at once (sbatch --array=...%SLURM_MAX)
#   PROGRESS_EVERY       seconds between progress lines when the output is not a terminal (default 30; 0: none).
#                        On a terminal one line at the bottom, redrawn each second. Either says the runs finished,
#                        running and left, each running run's iteration and ETA (from its log.jsonl) and the sweep's
#                        ETA (sweep.py progress)
# Each run is configs/<variant>_<depth>.py in runs/<sweep>/<variant>_<depth>_s<seed>/, its console output in
# train.log there. A run with summary.json is skipped; one with ckpt.pt is resumed; a failed run is reported,
# marked with a FAILED file (its exit status) and the sweep goes on. Ctrl-C or SIGTERM stops every run in
# progress within a step or an evaluation batch, each saving its checkpoint: stopped, not failed. A pair with no
# config file (e.g. diff_gated_3L) of a default variant is left out (the first line says so); a variant VARIANTS
# names without a config at any of DEPTHS is refused before anything is made. The sweep ends with report.py, which
# writes runs/<sweep>/results.md; then the exit status is 1 if any run or analysis failed (so a script or CI can
# tell), else report.py's.
# WORKER=1 keeps all of this: each run's train.log, FAILED, the skip, the resume, the stop (a worker's run in
# progress saves its checkpoint and the worker starts no other), the report and the exit status.
# Exit 2: a setting refused before anything ran (said on stderr); 130: stopped by Ctrl-C or SIGTERM.
# The checks, the profiles and variants, the list of runs, sweep_settings and the Slurm submission are sweep.py's.
# Portable bash (macOS's 3.2: no associative arrays, no wait -n; flock only where there is one).
set -u
cd "${ABLATE_DIR:-$(dirname "$0")}"  # under Slurm, $0 is the scheduler's copy of this script
PYTHON=${PYTHON:-python}

# The environment and every config with the profile's schedule and the extra arguments, checked as train.py checks
# them before the sweep keeps anything (a config's notes on stdout: once a run). Then the sweep as shell assignments,
# its settings kept in sweep_settings (or refused): ROOT, NPROC, JOBS, ANALYZE, ANALYZER, ANALYSIS, SLURM, TASK (the
# id of a Slurm array task, which runs one run of the list written at submission), WORKER (checked: auto, 0 or 1),
# SCHEDULE, and the runs, seed by seed: RUN_CFG, RUN_DIR, RUN_SEED
"$PYTHON" sweep.py check "$@" >/dev/null || exit 2
plan=$("$PYTHON" sweep.py plan "$@") || exit 2
eval "$plan"
echo "ablate.sh: $NOTE"
if [ "$SLURM" = 1 ] && [ -z "$TASK" ]; then exec "$PYTHON" sweep.py submit "$@"; fi
# torch.compile starts a pool of Inductor compile workers in each run, as many as the machine has cores: JOBS runs at
# once share the cores instead (unless TORCHINDUCTOR_COMPILE_THREADS is set)
if [ "$JOBS" -gt 1 ] && [ -z "${TORCHINDUCTOR_COMPILE_THREADS:-}" ]; then
  cores=$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 1)
  export TORCHINDUCTOR_COMPILE_THREADS=$(( cores / JOBS > 1 ? cores / JOBS : 1 ))
fi

# on a terminal, sweep.py progress keeps one line at the bottom: each of this script's lines clears it first
LINE_START=; [ -t 1 ] && LINE_START=$(printf '\r\033[K')
say() { printf '%s%s\n' "$LINE_START" "$*"; }

# present while a Ctrl-C or SIGTERM stops the sweep (or this Slurm task): the runs that end then were stopped
STOPPING=$ROOT/.stopping${TASK:+.$TASK}
rm -f "$STOPPING"
BUSY=$ROOT/.busy.$$  # the runs another process was training (its lock on the run folder): left to it
rm -f "$BUSY"

# NPROC > 1: torchrun through processes.py, whose stop exits 130 as train.py's does (torchrun's own exits 1)
if [ "$NPROC" -gt 1 ]; then LAUNCH=("$PYTHON" processes.py --standalone --nproc_per_node="$NPROC"); else LAUNCH=("$PYTHON"); fi

# the GPUs: each of the JOBS slots gets its own group of NPROC of them (round robin when there are fewer GPUs than
# slots), so a sweep fills every GPU of the machine rather than stacking its runs on GPU 0
if [ -z "${GPUS:-}" ]; then
  if [ -n "${CUDA_VISIBLE_DEVICES+set}" ]; then GPUS=${CUDA_VISIBLE_DEVICES//,/ }  # set, even empty (no GPU), wins
  elif command -v nvidia-smi >/dev/null 2>&1; then
    GPUS=$(nvidia-smi --query-gpu=index --format=csv,noheader 2>/dev/null | grep -xE '[0-9]+') || GPUS=
  fi
fi
GPU_LIST=(${GPUS:-})
if [ ${#GPU_LIST[@]} -gt 0 ] && [ "$NPROC" -gt ${#GPU_LIST[@]} ]; then
  echo "ablate.sh: NPROC=$NPROC processes a run, but only ${#GPU_LIST[@]} GPU(s): ${GPU_LIST[*]}" >&2; exit 2
fi
slot_gpus() {  # slot -> its comma-separated GPU indices
  local i out=()
  for ((i = 0; i < NPROC; i++)); do out+=("${GPU_LIST[$(( ($1 * NPROC + i) % ${#GPU_LIST[@]} ))]}"); done
  local IFS=,; echo "${out[*]}"
}
[ ${#GPU_LIST[@]} -gt 0 ] && echo "GPUs ${GPU_LIST[*]}: $JOBS slot(s) of $NPROC process(es), each on its own GPUs"
# WORKER=auto (sweep.py checked the value): 1 where the runs go to a CUDA device, each one process, outside a Slurm task
if [ "$WORKER" = auto ]; then
  WORKER=0 device=auto
  for a in ${SCHEDULE[@]+"${SCHEDULE[@]}"} ${1+"$@"}; do case "$a" in --device=*) device=${a#--device=} ;; esac; done
  case "$device" in
    cpu | mps*) ;;
    *) [ ${#GPU_LIST[@]} -gt 0 ] && [ "$NPROC" = 1 ] && [ -z "$TASK" ] && WORKER=1 ;;
  esac
fi
[ "$WORKER" = 1 ] && echo "ablate.sh: the runs go to $JOBS worker process(es) (worker.py), each running its share" \
                           "back to back (WORKER=0: a process a run)"
LANES=$ROOT/.worker.$$  # WORKER=1: worker k's runs in $LANES.k.runs (worker.py's list), their folders in .k.todo,
                        # and every folder it analyses after them in .k.dirs

run_one() {  # cfg dir seed [extra args]: one run; its exit status in a FAILED file if it fails
  local cfg=$1 dir=$2 seed=$3 resume= t0 rc; shift 3
  # a run in progress (another launch of this sweep, a Slurm task still running): left to its process. flock asks
  # its lock before anything is written; without flock (macOS), train.py refuses it (exit 75, below)
  if [ -f "$dir/.lock" ] && command -v flock >/dev/null && ! flock -n "$dir/.lock" true 2>/dev/null; then
    say "busy   $dir: another process is training it ($(cat "$dir/.lock" 2>/dev/null)); left to it"
    echo "$dir" >> "$BUSY"; return 0
  fi
  # a stop that came before this run's python (the trap's pkill found no child to signal): do not start it
  [ -f "$STOPPING" ] && { say "stopped $dir: not started"; return 130; }
  mkdir -p "$dir"; rm -f "$dir/FAILED"
  # strict: the checkpoint's settings must be this command's (a folder copied from another sweep, or a sweep made
  # before sweep_settings, would otherwise resume under the new ones, and its record would hide it)
  [ -f "$dir/ckpt.pt" ] && resume="--init_from=resume --resume_strict=True"
  say "run    $dir $resume"
  touch "$dir/train.log"  # sweep.py progress: running from now (its python takes seconds to write anything)
  t0=$(date +%s)
  # default INT/TERM dispositions again (the job's subshell ignores them), so a stop during python's start is not
  # lost; train.py then installs its own handler, which saves a checkpoint. (${a[@]+"${a[@]}"}: an empty SCHEDULE
  # is unbound to bash 3.2's set -u)
  ( trap - INT TERM; exec "${LAUNCH[@]}" train.py "$cfg" ${SCHEDULE[@]+"${SCHEDULE[@]}"} --seed="$seed" \
      --out_dir="$dir" $resume "$@" ) >>"$dir/train.log" 2>&1 </dev/null
  rc=$?
  # stopped, not failed: train.py's 130, or any exit while the sweep stops (a bare torchrun exits 1 after one)
  if [ $rc -ne 0 ] && { [ $rc -eq 130 ] || [ -f "$STOPPING" ]; }; then
    say "stopped $dir: $(grep -o 'stopped at iteration [0-9]*' "$dir/train.log" | tail -n 1)"
    return 130
  fi
  if [ $rc -eq 75 ]; then  # train.py: out_dir locked by another run (where there is no flock, or a race)
    say "busy   $dir: another process is training it; left to it"; echo "$dir" >> "$BUSY"
    return 0
  fi
  if [ $rc -ne 0 ]; then
    echo "$rc" > "$dir/FAILED"
    say "FAILED $dir (exit $rc): tail of $dir/train.log:"; tail -n 5 "$dir/train.log" | sed 's/^/         /'
    return $rc
  fi
  say "done   $dir in $(( $(date +%s) - t0 ))s"
  [ "$ANALYZE" = 1 ] && [ -f "$dir/summary.json" ] || return 0  # not after a stop
  analyze_one "$dir"
}

deal() {  # i [extra args]: run i of the sweep to the next worker's list (WORKER=1), with run_one's arguments
  local i=$1 dir=${RUN_DIR[$1]} k=$(( dealt % JOBS )) resume=; shift
  dealt=$((dealt + 1))
  if [ -f "$dir/.lock" ] && command -v flock >/dev/null && ! flock -n "$dir/.lock" true 2>/dev/null; then
    say "busy   $dir: another process is training it ($(cat "$dir/.lock" 2>/dev/null)); left to it"
    echo "$dir" >> "$BUSY"; return 0
  fi
  [ -f "$dir/ckpt.pt" ] && resume="--init_from=resume --resume_strict=True"  # strict: as run_one's
  # shell quoting, which worker.py splits as a shell would
  { printf '%q ' "${RUN_CFG[$i]}" ${SCHEDULE[@]+"${SCHEDULE[@]}"} "--seed=${RUN_SEED[$i]}" "--out_dir=$dir" $resume \
      ${1+"$@"}; echo; } >> "$LANES.$k.runs"
  echo "$dir" >> "$LANES.$k.todo"; echo "$dir" >> "$LANES.$k.dirs"
}

worker_line() {  # one line of a worker's stdout as this script's own (worker.py's header lists them)
  local line=$1 dir rest
  case "$line" in
    "worker: run "*)
      dir=${line#worker: run *: }; rest=
      [ "${dir% (resumed)}" != "$dir" ] && rest=" --init_from=resume --resume_strict=True"
      dir=${dir% (resumed)}; echo "$dir" > "$current"
      say "run    $dir$rest" ;;
    "worker: done "*)
      rest=${line#worker: done }; dir=${rest% in *}; rm -f "$current"
      say "done   $dir in ${rest##* in }" ;;
    "worker: FAILED "*)
      rest=${line#worker: FAILED }; dir=${rest% (exit *}; rm -f "$current"
      if [ -f "$STOPPING" ]; then  # any exit while the sweep stops: stopped, not failed (as run_one)
        rm -f "$dir/FAILED"; say "stopped $dir"
      else
        say "FAILED $dir (${rest##* (}: tail of $dir/train.log:"
        tail -n 5 "$dir/train.log" | sed 's/^/         /'
      fi ;;
    "worker: busy "*)
      dir=${line#worker: busy }; rm -f "$current"; echo "$dir" >> "$BUSY"
      say "busy   $dir: another process is training it; left to it" ;;
    "worker: stopped; "*) say "stopped: ${line#worker: stopped; } by this worker" ;;
    "worker: stopped "*)
      dir=${line#worker: stopped }; rm -f "$current"
      say "stopped $dir: $(grep -o 'stopped at iteration [0-9]*' "$dir/train.log" | tail -n 1)" ;;
    "worker: "*" run(s) finished"*) ;;  # this script counts its own
    *) say "         $line" ;;  # the worker's own words (an error before or between runs)
  esac
}

run_lane() {  # k: worker k (WORKER=1): its runs in one worker.py, then ANALYZE's analyses of its folders
  local current=$LANES.$1.current dir rc
  if [ -s "$LANES.$1.runs" ]; then
    if [ -f "$STOPPING" ]; then say "stopped: $(( $(wc -l < "$LANES.$1.todo") )) run(s) not started"; return 130; fi
    # default INT/TERM dispositions for the worker (this subshell and the loop reading it ignore them), so a stop
    # during its start is not lost; the loop turns its lines into this script's
    ( trap - INT TERM; exec "$PYTHON" worker.py "$LANES.$1.runs" ) 2>&1 </dev/null |
      while IFS= read -r line; do worker_line "$line"; done
    rc=${PIPESTATUS[0]}
    # a run the worker neither finished, failed, left nor stopped (it crashed, was killed, or never got to it): FAILED
    # with the worker's exit status, so that the sweep says so and a re-launch runs it again
    while [ ! -f "$STOPPING" ] && IFS= read -r dir; do
      [ -f "$dir/summary.json" ] || [ -f "$dir/FAILED" ] || { [ -f "$BUSY" ] && grep -qxF -- "$dir" "$BUSY"; } &&
        continue
      mkdir -p "$dir" && echo "$rc" > "$dir/FAILED"
      say "FAILED $dir: its worker ended (exit $rc) before this run did; see $dir/train.log"
    done < "$LANES.$1.todo"
  fi
  [ "$ANALYZE" = 1 ] && [ -f "$LANES.$1.dirs" ] || return 0
  while IFS= read -r dir; do  # a run finished now, or one finished earlier without a current analysis
    [ -f "$STOPPING" ] && return 130
    [ -f "$dir/summary.json" ] && [ -f "$dir/ckpt.pt" ] || continue  # failed, stopped or busy: nothing to analyse
    "$PYTHON" sweep.py analyzed "$ANALYSIS" "$dir" && continue
    analyze_one "$dir"
  done < "$LANES.$1.dirs"
}

analyze_one() {  # dir: $ANALYZER (analyze.py; needle_eval.py for retrieval) on the run's ckpt.pt, into analyze.log
  local dir=$1 rc
  rm -f "$dir/FAILED"
  # default INT/TERM dispositions again (the job's subshell ignores them): a stopped sweep stops its analyses too
  ( trap - INT TERM; exec "$PYTHON" "$ANALYZER" --out_dir="$dir" ) >"$dir/analyze.log" 2>&1 </dev/null
  rc=$?
  if [ $rc -ne 0 ] && [ -f "$STOPPING" ]; then
    say "stopped $dir: $ANALYZER; a re-launch with ANALYZE=1 runs it again"
    return 130
  fi
  if [ $rc -ne 0 ]; then
    echo "$rc" > "$dir/FAILED"
    say "FAILED $dir: $ANALYZER (exit $rc): tail of $dir/analyze.log:"
    tail -n 3 "$dir/analyze.log" | sed 's/^/         /'
  else
    say "analyzed $dir"
  fi
  return $rc
}

descendants() {  # pid ...: the pids of every process under them, now (ps -A: Linux and macOS; no pstree there)
  ps -A -o pid= -o ppid= | awk -v roots=" $* " '
    { parent[$1] = $2 }
    END { n = split(roots, r, " "); for (i = 1; i <= n; i++) under[r[i]] = 1
          do { more = 0; for (p in parent) if (!(p in under) && (parent[p] in under)) { under[p] = 1; more = 1 } }
          while (more)
          for (p in under) if (index(roots, " " p " ") == 0) print p }'
}

end_runs() {  # after their TERM: STOP_GRACE seconds (default 20) for the runs to save and stop, then every process
  # this script started is killed (SIGKILL), so that none outlives the command. The tree is taken before the wait
  # too: a process whose parent ends during it is no longer under this script, but is still in the first list
  local tree ticks=0
  tree=$(descendants $$)
  while [ -n "$(jobs -rp)" ] && [ $ticks -lt $(( ${STOP_GRACE:-20} * 5 )) ]; do sleep 0.2; ticks=$((ticks + 1)); done
  if [ -n "$(jobs -rp)" ]; then
    echo "ablate.sh: $(( $(jobs -rp | wc -l) )) run(s) still running ${STOP_GRACE:-20}s after the stop: killed" \
         "(SIGKILL; STOP_GRACE=<seconds> waits longer); a re-launch resumes them from their last checkpoint"
    kill -KILL $tree $(descendants $$) 2>/dev/null
  fi
  wait
}

# Ctrl-C or SIGTERM: train.py saves a checkpoint of each run in progress (the TERM is passed on to runs in the
# background); the sweep stops, and a re-launch resumes them. A run that has not stopped STOP_GRACE seconds later is
# killed, with everything it started
trap 'trap "" INT TERM; touch "$STOPPING"; stop_progress
      echo "ablate.sh: stopping: $(( $(jobs -rp | wc -l) )) run(s) in progress save a checkpoint at the end of" \
           "their step"
      for p in $(jobs -p); do pkill -TERM -P "$p"; done; end_runs; rm -f "$STOPPING" "$BUSY" "$LANES".*
      echo "ablate.sh: interrupted; re-launch the same command to continue"; exit 130' INT TERM
skipped=0; launched=(); analyzed=(); slots=()  # runs started, finished runs analyzed now, the job in each slot
dealt=0; rm -f "$LANES".*  # WORKER=1: how many runs and analyses went to the workers' lists
start=$(date +%s)
# the progress line (not for a Slurm task: one run, its own log): sweep.py progress beside the runs, started from a
# command substitution so that it is not one of this shell's jobs (the pool counts and waits for those); it stops
# when told (stop_progress) or when this script is gone
PROGRESS=
if [ -z "$TASK" ] && [ "${PROGRESS_EVERY:-30}" != 0 ]; then
  exec 3>&1
  PROGRESS=$("$PYTHON" sweep.py progress $$ "$start" "$@" >&3 2>&3 </dev/null & echo $!)
  exec 3>&-
fi
stop_progress() {  # its TERM, then a moment for it to clear its line, so that no line of it follows ours
  [ -n "$PROGRESS" ] || return 0
  kill -TERM "$PROGRESS" 2>/dev/null
  local i; for i in 1 2 3 4 5 6 7 8 9 10; do kill -0 "$PROGRESS" 2>/dev/null || break; sleep 0.2; done
  PROGRESS=
}
for ((i = 0; i < ${#RUN_DIR[@]}; i++)); do
  dir=${RUN_DIR[$i]}
  if [ -f "$dir/summary.json" ]; then
    say "skip   $dir (finished)"; skipped=$((skipped + 1))
    [ "$ANALYZE" = 1 ] && ! "$PYTHON" sweep.py analyzed "$ANALYSIS" "$dir" || continue
    # e.g. a committed run copied back without its checkpoint
    [ -f "$dir/ckpt.pt" ] || { say "         no ckpt.pt, so no analysis"; continue; }
    job=(analyze_one "$dir"); analyzed+=("$dir")
    if [ "$WORKER" = 1 ]; then echo "$dir" >> "$LANES.$(( dealt % JOBS )).dirs"; dealt=$((dealt + 1)); continue; fi
  else
    job=(run_one "${RUN_CFG[$i]}" "$dir" "${RUN_SEED[$i]}" "$@"); launched+=("$dir")
    if [ "$WORKER" = 1 ]; then deal "$i" ${1+"$@"}; continue; fi
  fi
  # JOBS runs at once (a small model leaves most of a GPU idle between its kernel launches). Each runs in the
  # background, also for JOBS=1, so that a signal reaches the trap above while the sweep waits. Without bash 4's
  # wait -n: one slot waits for its job, several look again every second
  while [ "$(jobs -rp | wc -l)" -ge "$JOBS" ]; do
    if [ "$JOBS" -eq 1 ]; then wait; else sleep 1; fi
  done
  running=" $(jobs -rp | tr '\n' ' ')"
  for ((slot = 0; slot < JOBS; slot++)); do [[ "$running" == *" ${slots[$slot]:-none} "* ]] || break; done
  if [ ${#GPU_LIST[@]} -gt 0 ]; then
    ( trap '' INT TERM; export CUDA_VISIBLE_DEVICES; CUDA_VISIBLE_DEVICES=$(slot_gpus "$slot"); "${job[@]}" ) &
  else
    ( trap '' INT TERM; "${job[@]}" ) &
  fi
  slots[$slot]=$!
done
for ((k = 0; k < JOBS; k++)); do  # WORKER=1: the workers, all at once, each on its slot's GPUs
  [ -f "$LANES.$k.dirs" ] || continue
  if [ ${#GPU_LIST[@]} -gt 0 ]; then
    ( trap '' INT TERM; export CUDA_VISIBLE_DEVICES; CUDA_VISIBLE_DEVICES=$(slot_gpus "$k"); run_lane "$k" ) &
  else
    ( trap '' INT TERM; run_lane "$k" ) &
  fi
done
wait
rm -f "$LANES".*
stop_progress
# a FAILED file beside summary.json: the run finished and its analysis failed
failed=0; failed_an=0
for dir in ${launched[@]+"${launched[@]}"} ${analyzed[@]+"${analyzed[@]}"}; do
  [ -f "$dir/FAILED" ] || continue
  [ -f "$dir/summary.json" ] && failed_an=$((failed_an + 1)) || failed=$((failed + 1))
done
busy=0; [ -f "$BUSY" ] && busy=$(( $(wc -l < "$BUSY") )); rm -f "$BUSY"
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
