#!/usr/bin/env bash
# The library upgrade gate as a user runs it, in small: one campaign (same seed, matrix and
# cases) on the Debian stack as baseline and on the PyPI stack as candidate, then
# `detfuzz gate`. The upgrade torchvision 0.14.1 -> 0.26.0, LibTorch 1.13 -> 2.11 must pass
# (no change it prints is a regression: docs/upgrade-gate.md explains each), and the changes
# that are known must be among those printed.
#
#   tests/gate/upgrade_gate.sh BASELINE_DETFUZZ CANDIDATE_DETFUZZ OUT_DIR
# Exit 77 (CTest's skip) when the baseline build is absent: `scripts/setup.sh --stack both`
# makes both.
set -euo pipefail
(($# == 3)) || { echo "usage: $0 BASELINE_DETFUZZ CANDIDATE_DETFUZZ OUT_DIR" >&2; exit 2; }
baseline_bin=$1 candidate_bin=$2 out=$3
if [ ! -x "$baseline_bin" ]; then
  echo "upgrade_gate: no baseline build at $baseline_bin (scripts/setup.sh --stack both makes it): skipped"
  exit 77
fi
rm -rf "$out" && mkdir -p "$out"

# Every op, its default targets and dtypes, on the CPU; exit 1 (failing findings: the known
# library bugs, on both sides) is a finished campaign.
campaign=(run --seed 5 --cases 60 --jobs 2 --progress none)
for side in baseline candidate; do
  bin=$baseline_bin
  [ "$side" = candidate ] && bin=$candidate_bin
  status=0
  "$bin" "${campaign[@]}" --report "$out/$side" >"$out/$side.txt" 2>&1 || status=$?
  if ((status > 1)); then
    cat "$out/$side.txt"
    echo "upgrade_gate: the $side campaign ($bin) exited $status" >&2
    exit 1
  fi
done

status=0
"$candidate_bin" gate --baseline "$out/baseline" --candidate "$out/candidate" >"$out/gate.txt" 2>&1 || status=$?
cat "$out/gate.txt"
if ((status != 0)); then
  echo "upgrade_gate: the gate exited $status: it calls the real upgrade a regression" >&2
  exit 1
fi

# What the upgrade is known to change (torch 2.x gave fp16 CPU kernels that 1.13 lacked).
expected=(
  "now supported .*box_coder/torchvision/fp16/cpu"
  "now supported .*fast_rcnn_loss/torchvision/fp16/cpu"
  "failing finding, new cell .*box_coder/torchvision/fp16/cpu dtype_overflow/oracle"
)
missing=0
for line in "${expected[@]}"; do
  if ! grep -qE "$line" "$out/gate.txt"; then
    echo "upgrade_gate: the gate did not print a line matching '$line'" >&2
    missing=1
  fi
done
exit "$missing"
