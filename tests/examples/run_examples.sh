#!/usr/bin/env bash
# Runs the detfuzz command lines of docs/examples/ on this machine, shard by shard, then
# their merge, so the examples cannot rot: the GitHub Actions matrix (4 shards), the Slurm
# array script (2 tasks, its own merge step) and the Kubernetes Indexed Job's container
# command (4 indices). Budgets shrink to 2 s and the matrix to two ops; everything else is
# the examples' text.
# Usage: run_examples.sh /path/to/detfuzz
set -euo pipefail
bin=$(realpath "$1")
examples=$(realpath "$(dirname "$0")/../../docs/examples")
work=$(mktemp -d /tmp/detfuzz-examples.XXXX)
trap 'rm -rf "$work"' EXIT
small='--budget 2s --ops nms,box_iou --dtypes fp32,fp16'

fail() { echo "FAIL: $*" >&2; exit 1; }
parts() { python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["parts"]))' "$1"; }

# GitHub Actions: the `run:` lines that call detfuzz, with the matrix and contexts filled in.
gha="$examples/github-actions-nightly.yml"
shard_line=$(grep -E '^\s+\./build/detfuzz run ' "$gha" | sed -E 's/^\s+//')
merge_line=$(grep -E '^\s+\./build/detfuzz merge ' "$gha" | sed -E 's/^\s+//')
[[ -n "$shard_line" && -n "$merge_line" ]] || fail "no detfuzz command lines in $gha"
mkdir -p "$work/gha" && cd "$work/gha"
for shard in 0 1 2 3; do
  line=${shard_line//'${{ matrix.shard }}'/$shard}
  line=${line//'${{ github.run_number }}'/7}
  line=$(sed -E "s/--budget [0-9a-z]+/$small/" <<<"$line")
  bash -c "${line//.\/build\/detfuzz/$bin}" > "shard-$shard.log" 2>&1 || fail "GitHub Actions shard $shard: $line"
done
GITHUB_ENV="$work/gha/env" bash -c "${merge_line//.\/build\/detfuzz/$bin}" > merge.log 2>&1 || fail "GitHub Actions merge"
[[ $(parts merged/report.json) == 4 ]] || fail "GitHub Actions: merged report has $(parts merged/report.json) parts, want 4"
[[ -s merged/summary.md && -s merged/junit.xml ]] || fail "GitHub Actions: no summary.md or junit.xml"
echo "GitHub Actions example: 4 shards merged"

# Slurm: the script itself, as array tasks 10 and 11 of an array starting at 10.
for task in 10 11; do
  DETFUZZ="$bin" REPORTS="$work/slurm" BUDGET=2s DETFUZZ_ARGS="--ops nms,box_iou --dtypes fp32,fp16" SLURM_ARRAY_TASK_ID=$task \
    SLURM_ARRAY_TASK_MIN=10 SLURM_ARRAY_TASK_COUNT=2 SLURM_CPUS_PER_TASK=1 \
    bash "$examples/slurm-array.sh" > "$work/slurm-$task.log" 2>&1 || fail "Slurm task $task"
done
DETFUZZ="$bin" REPORTS="$work/slurm" bash "$examples/slurm-array.sh" merge > "$work/slurm-merge.log" 2>&1 ||
  test $? -eq 1 || fail "Slurm merge"
[[ $(parts "$work/slurm/merged/report.json") == 2 ]] || fail "Slurm: merged report does not have 2 parts"
python3 -c 'import json,sys; s=json.load(open(sys.argv[1]))["config"]["shard"]; assert s["count"]==2 and s["merged"]==[0,1], s' \
  "$work/slurm/merged/report.json" || fail "Slurm: shards are not 0/2 and 1/2"
echo "Slurm example: 2 array tasks merged"

# Kubernetes: the container's command line, once per completion index.
k8s="$examples/kubernetes-indexed-job.yaml"
pod_line=$(grep -E '^\s+- detfuzz run ' "$k8s" | sed -E 's/^\s+- //')
[[ -n "$pod_line" ]] || fail "no detfuzz command line in $k8s"
pod_line=${pod_line//\/reports/$work/k8s}
pod_line=$(sed -E "s/--budget [0-9a-z]+/$small/" <<<"$pod_line")
mkdir -p "$work/k8s"
for index in 0 1 2 3; do
  JOB_COMPLETION_INDEX=$index sh -c "${pod_line/detfuzz/$bin}" > "$work/k8s-$index.log" 2>&1 || fail "Kubernetes index $index"
done
"$bin" merge -o "$work/k8s/merged" "$work"/k8s/shard-* > "$work/k8s-merge.log" 2>&1 || test $? -eq 1 || fail "Kubernetes merge"
[[ $(parts "$work/k8s/merged/report.json") == 4 ]] || fail "Kubernetes: merged report does not have 4 parts"
echo "Kubernetes example: 4 indices merged"
