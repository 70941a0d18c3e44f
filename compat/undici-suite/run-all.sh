#!/bin/sh
# Runs every variant sequentially (concurrency 2 within each) and the comparison.
# Usage: ./run-all.sh   (LIFELINE_DIST=/path/to/dist ./run-all.sh to test another build;
#                        UNDICI_DIR=/path/to/undici for a checkout elsewhere than ./undici)
set -e
cd "$(dirname "$0")"
ROOT=$(cd ../.. && pwd)
N=${LIFELINE_NODE:-$ROOT/node_modules/.bin/node}
# By default, test a frozen copy of the repository's current build (see snapshot-lifeline.sh).
if [ -z "$LIFELINE_DIST" ]; then
  ./snapshot-lifeline.sh "$ROOT" "$PWD/lifeline-snapshot"
  LIFELINE_DIST=$PWD/lifeline-snapshot/dist
fi
export LIFELINE_DIST
mkdir -p results
# VARIANTS="dispatcher deadline" ./run-all.sh  re-runs only those (baselines kept if present)
VARIANTS=${VARIANTS:-"baseline baseline-2 dispatcher deadline sdk-deadline context-only compose"}
for v in $VARIANTS; do
  case $v in baseline-2) variant=baseline ;; *) variant=$v ;; esac
  start=$(date +%s)
  "$N" run.mjs --variant "$variant" --out "results/$v.json" > "results/run-$v.txt" 2>&1 ||
    { echo "$v failed (results/run-$v.txt):" >&2; tail -5 "results/run-$v.txt" >&2; exit 1; }
  echo "$v: $(( $(date +%s) - start )) s  (LIFELINE_DIST=$LIFELINE_DIST)" | tee -a results/timings.txt
done
# Compare every variant that has results (all together, then one file per variant).
present=
for v in dispatcher deadline sdk-deadline context-only compose; do
  if [ -f "results/$v.json" ]; then present="$present $v"; fi
done
[ -n "$present" ] || { echo "no variant results to compare" >&2; exit 1; }
# shellcheck disable=SC2046 # one argument per variant
"$N" compare.mjs results/baseline.json $(for v in $present; do echo "results/$v.json"; done) \
  --baseline2 results/baseline-2.json --md results/comparison.md > /dev/null
for v in $present; do
  "$N" compare.mjs results/baseline.json "results/$v.json" --baseline2 results/baseline-2.json --md "results/diff-$v.md" > /dev/null
done
echo "done: results/comparison.md, results/diff-<variant>.md, results/timings.txt"
