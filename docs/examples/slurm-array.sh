#!/usr/bin/env bash
# A detfuzz campaign as a Slurm job array: each array task runs one shard (detfuzz reads
# SLURM_ARRAY_TASK_ID, SLURM_ARRAY_TASK_MIN and SLURM_ARRAY_TASK_COUNT itself), then a
# job that depends on the whole array merges the shards.
#
#   sbatch slurm-array.sh            # submits the array and the merge job
#
# tests/examples/run_examples.sh runs the shard and merge command lines on the test machine.
#SBATCH --job-name=detfuzz
#SBATCH --array=0-7
#SBATCH --cpus-per-task=2
#SBATCH --time=00:40:00
set -euo pipefail
DETFUZZ=${DETFUZZ:-./build/detfuzz}  # BUDGET and DETFUZZ_ARGS (extra flags) override the run
REPORTS=${REPORTS:-reports/$(date +%F)}

if [[ "${1:-}" == merge ]]; then
  $DETFUZZ merge -o "$REPORTS/merged" "$REPORTS"/shard-*
  exit
fi

if [[ -z "${SLURM_ARRAY_TASK_ID:-}" ]]; then
  # Submitted by hand: queue the array (this script) and the merge after it.
  array=$(sbatch --parsable "$0")
  sbatch --dependency=afterany:"$array" --job-name=detfuzz-merge --wrap "$0 merge"
  exit
fi

mkdir -p "$REPORTS"
$DETFUZZ run --budget "${BUDGET:-30m}" ${DETFUZZ_ARGS:-} --jobs "${SLURM_CPUS_PER_TASK:-2}" --progress lines --report "$REPORTS/shard-$SLURM_ARRAY_TASK_ID" || test $? -eq 1
