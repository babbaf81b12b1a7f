#!/usr/bin/env bash
# A GPU loan's first command, so that every run it brings back carries its commit (or none runs). Two halves:
#
#   bash evidence/loan.sh pack                   # here, on a checkout: .loan/repo.bundle, the commit packed for the transfer
#   bash evidence/loan.sh run [--budget 540] [--out DIR] [more bench_gpu.py arguments]
#                                       # there, first thing on the device: the GPU queue, from a clean checkout
#
# pack refuses a tree with uncommitted changes (untracked files included) or without a commit. .loan/ is ignored by
# git: carry it with the tree (a device call's `carry`: ".loan"). run refuses, before any run, a tree without
# .loan/repo.bundle or one that differs from the packed commit (a file changed after packing); it clones the bundle
# outside the tree (LOAN_WORK, default /tmp/loan.<pid>, removed at the end), copies in what the tree holds and git
# ignores under data/ (input.txt, prepared tokens, data/pycode/downloads), and runs
# `python evidence/bench_gpu.py --next --budget B --out DIR` in the clone with BENCH_GPU_COMMIT set, so its env step checks
# the commit again. DIR must be outside the tree and the clone (default $OUT/q where the loan gives an $OUT, else
# /tmp/loan_out.<pid>). Back on the checkout: `python evidence/gpu_queue.py collect DIR` (it refuses a run without a commit,
# from a dirty tree, off CUDA, or of other sweep settings).
# Every process it starts ends with it: a SIGTERM or SIGINT goes to bench_gpu.py (which stops its step: TERM, then
# KILL), and LOAN_GRACE seconds later (default 60) whatever this script started and is left is killed. Exit 2: a
# refusal (said on stderr); 130/143: stopped. LOAN_COMMAND replaces the bench_gpu.py command line (a test's stand-in).
# Portable bash (macOS's 3.2).
set -u
HERE=$(cd "$(dirname "$0")/.." && pwd)  # the repository's root
PYTHON=${PYTHON:-python}
die() { echo "loan.sh: $*" >&2; exit 2; }

inside() {  # path dir: whether path is dir or under it
  case "$1/" in "$2"/*) return 0 ;; esac
  return 1
}

pack() {
  cd "$HERE" || exit 2
  git rev-parse --verify -q HEAD >/dev/null || die "$HERE has no commit: commit the tree, then pack"
  local changes; changes=$(git status --porcelain --untracked-files=normal)
  if [ -n "$changes" ]; then
    echo "loan.sh: $HERE has uncommitted changes; a loan runs one commit. Commit them (or remove them), then pack:" >&2
    echo "$changes" | head -n 20 | sed 's/^/  /' >&2
    exit 2
  fi
  mkdir -p .loan && rm -f .loan/repo.bundle
  git bundle create -q .loan/repo.bundle HEAD 2>/dev/null || git bundle create .loan/repo.bundle HEAD || exit 2
  git rev-parse HEAD > .loan/commit
  echo "loan.sh: packed $(cut -c1-7 .loan/commit) into .loan/ ($(du -h .loan/repo.bundle | cut -f1)); carry .loan" \
       "with the tree, and run 'bash evidence/loan.sh run --out \$OUT/q' first on the device"
}

under() {  # pid: every process under it now, children first (ps -A: Linux and macOS; no pstree there)
  ps -A -o pid= -o ppid= | awk -v root="$1" '{ kids[$2] = kids[$2] " " $1 }
    END { todo = root
          while (todo != "") { n = split(todo, t, " "); todo = ""
                               for (i = 1; i <= n; i++) { m = split(kids[t[i]], k, " ")
                                                          for (j = 1; j <= m; j++) { print k[j]; todo = todo " " k[j] } } } }'
}

CHILD= WORK= STOPPED=
stop() {  # TERM to bench_gpu.py, LOAN_GRACE seconds for it, then KILL to whatever is left of what this script started
  STOPPED=$1
  [ -n "$CHILD" ] || exit "$STOPPED"
  local tree ticks=0
  tree=$(under $$)
  kill -TERM "$CHILD" 2>/dev/null
  while kill -0 "$CHILD" 2>/dev/null && [ $ticks -lt $(( ${LOAN_GRACE:-60} * 5 )) ]; do
    sleep 0.2; ticks=$((ticks + 1))
  done
  if kill -0 "$CHILD" 2>/dev/null; then
    echo "loan.sh: bench_gpu.py still running ${LOAN_GRACE:-60}s after the stop: killed with everything it started" >&2
  fi
  kill -KILL $tree 2>/dev/null
  wait "$CHILD" 2>/dev/null
}

run() {
  local budget=540 out=${OUT:+$OUT/q} args=()
  [ -n "$out" ] || out=/tmp/loan_out.$$
  while [ $# -gt 0 ]; do
    case "$1" in
      --budget) budget=${2:?--budget needs seconds}; shift 2 ;;
      --budget=*) budget=${1#--budget=}; shift ;;
      --out) out=${2:?--out needs a folder}; shift 2 ;;
      --out=*) out=${1#--out=}; shift ;;
      *) args+=("$1"); shift ;;
    esac
  done
  [ -f "$HERE/.loan/repo.bundle" ] && [ -f "$HERE/.loan/commit" ] ||
    die "no .loan/repo.bundle in $HERE: run 'bash evidence/loan.sh pack' on the checkout, and carry .loan with the tree"
  local commit; commit=$(cat "$HERE/.loan/commit")
  WORK=${LOAN_WORK:-/tmp/loan.$$}
  case "$out" in /*) ;; *) out=$(pwd)/$out ;; esac
  inside "$out" "$HERE" && die "--out $out is inside the tree: write the loan's output outside it (e.g. \$OUT/q)"
  inside "$WORK" "$HERE" && die "LOAN_WORK=$WORK is inside the tree: the clone goes outside it"
  inside "$out" "$WORK" && die "--out $out is inside the clone ($WORK), which is removed at the end"
  [ -e "$WORK/repo" ] && die "$WORK/repo exists: remove it, or say another LOAN_WORK"
  mkdir -p "$WORK" || exit 2
  trap 'rm -rf "$WORK"' EXIT
  git clone -q --no-checkout "$HERE/.loan/repo.bundle" "$WORK/repo" 2>/dev/null &&
    git -C "$WORK/repo" checkout -q --detach "$commit" 2>/dev/null ||
    die ".loan/repo.bundle does not hold commit ${commit:0:7}: pack again"
  # the tree that travelled against the packed commit: a file changed, added or removed after packing is refused
  local changes
  changes=$(git --git-dir="$WORK/repo/.git" --work-tree="$HERE" status --porcelain --untracked-files=normal)
  if [ -n "$changes" ]; then
    echo "loan.sh: the tree differs from the packed commit ${commit:0:7}; nothing was run. Commit and pack again:" >&2
    echo "$changes" | head -n 20 | sed 's/^/  /' >&2
    exit 2
  fi
  [ -z "$(git -C "$WORK/repo" status --porcelain --untracked-files=normal)" ] || die "the clone in $WORK is not clean"
  # what git ignores under data/ (the texts, prepared tokens, downloaded wheels): into the clone, never into git
  (cd "$HERE" && git --git-dir="$WORK/repo/.git" ls-files -z --others --ignored --exclude-standard -- data |
    xargs -0 -I{} sh -c 'mkdir -p "$(dirname "$1/{}")" && cp -p "{}" "$1/{}"' sh "$WORK/repo") || exit 2
  mkdir -p "$out" || exit 2
  echo "loan.sh: commit ${commit:0:7}, a clean checkout in $WORK/repo; output in $out"
  trap 'stop 130' INT
  trap 'stop 143' TERM
  if [ -n "${LOAN_COMMAND:-}" ]; then
    (cd "$WORK/repo" && BENCH_GPU_COMMIT=$commit LOAN_OUT=$out exec sh -c "$LOAN_COMMAND") &
  else
    (cd "$WORK/repo" && BENCH_GPU_COMMIT=$commit exec "$PYTHON" evidence/bench_gpu.py --next --budget "$budget" --out "$out" \
       ${args[@]+"${args[@]}"}) &
  fi
  CHILD=$!
  wait "$CHILD"
  local rc=$?
  [ -n "$STOPPED" ] && exit "$STOPPED"
  return $rc
}

case "${1:-}" in
  pack) pack ;;
  run) shift; run "$@" ;;
  *) sed -n '2,5p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
esac
