#!/usr/bin/env bash
# The no-behaviour-change check for refactors (issue 33): a pinned campaign over every op
# (fixed seed, case count, one lane, hostile and normal) and a replay of every corpus case,
# written with every timing and machine fact removed, so that two builds' outputs compare
# with diff. Usage: scripts/pinned-campaign.sh BUILD_DIR OUT_DIR; then diff -r OUT_A OUT_B.
set -euo pipefail
build=${1:?usage: pinned-campaign.sh BUILD_DIR OUT_DIR}
out=${2:?usage: pinned-campaign.sh BUILD_DIR OUT_DIR}
detfuzz="$build/detfuzz"
here=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$out"
strip_timings() {  # report.json without times, rates, profiles and the machine it ran on
  python3 - "$1" <<'PY'
import json, os, sys
drop = {"elapsed_s", "cases_per_second", "profile_s", "minimize_s", "found_after_s",  # timings
        "environment", "corpus"}  # the machine, the output folder
def clean(v, key=None):
    if key == "case_file" and isinstance(v, str):
        return os.path.basename(v)  # content-addressed: the name is the case
    if isinstance(v, dict):
        return {k: clean(x, k) for k, x in sorted(v.items()) if k not in drop}
    if isinstance(v, list):
        return [clean(x) for x in v]
    return v
print(json.dumps(clean(json.load(open(sys.argv[1]))), indent=1, sort_keys=True))
PY
}
for mode in normal hostile; do
  flags=(); [[ $mode == hostile ]] && flags=(--hostile)
  # --case-timeout-floor equal to the ceiling: a fixed timeout, so a slow moment of the machine
  # cannot change which cases are suspects.
  "$detfuzz" run --seed 33 --cases 40 --jobs 1 --progress none --minimize-budget 2s \
    --case-timeout 30s --case-timeout-floor 30s "${flags[@]}" --report "$out/run-$mode" >"$out/run-$mode.log" 2>&1 || true
  strip_timings "$out/run-$mode/report.json" >"$out/report-$mode.json"
done
for case_file in "$here"/corpus/cases/*.json; do
  name=$(basename "$case_file" .json)
  status=0
  "$detfuzz" replay "$case_file" >"$out/replay-$name.raw" 2>&1 || status=$?
  # A kernel that reads past its input (batch_index findings) shows whatever memory lay
  # there: its element table is not a behaviour of detfuzz, so it is left out.
  if grep -q "batch_index:" "$out/replay-$name.raw"; then
    grep -v '^  \[' "$out/replay-$name.raw" >"$out/replay-$name.txt"
  else
    cp "$out/replay-$name.raw" "$out/replay-$name.txt"
  fi
  rm "$out/replay-$name.raw"
  echo "exit $status" >>"$out/replay-$name.txt"
done
echo "pinned campaign and corpus replays in $out (compare report-*.json and replay-*.txt)"
