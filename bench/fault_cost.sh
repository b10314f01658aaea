#!/usr/bin/env bash
# What a hang and a crash cost a campaign (issue: "A hang costs 100 ms, a crash 10 ms").
# One cell (nms, fp32, the test plugin's nms_faulty), CASES cases, once without faults and
# once per fault rate; each fault's cost is the wall time above the fault-free run divided
# by the faults met (the occurrences of its hang or crash finding). With FIXED=1 the case
# timeout is the ceiling for every case (the rule before calibration).
#   bench/fault_cost.sh [build dir]       CASES=2000 CEILING=10s FIXED=0 by default
set -euo pipefail
build=${1:-build}
cases=${CASES:-2000}
ceiling=${CEILING:-10s}
floor_flag=()
[[ "${FIXED:-0}" == 1 ]] && floor_flag=(--case-timeout-floor "$ceiling")
plugin="$build/tests/libdetfuzz_test_plugin.so"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
run() {  # fault -> "seconds faults cases"
  local start end
  start=$(date +%s.%N)
  DETFUZZ_TEST_FAULT=$1 "$build/detfuzz" --load "$plugin" --bind nms=detfuzz_test::nms_faulty run --ops nms \
    --targets detfuzz_test::nms_faulty --dtypes fp32 --cases "$cases" --jobs 1 --minimize-budget 1s \
    --case-timeout "$ceiling" "${floor_flag[@]}" --progress none --report "$out/$1" >/dev/null || true
  end=$(date +%s.%N)
  python3 - "$out/$1/report.json" "$start" "$end" <<'PY'
import json, sys
report = json.load(open(sys.argv[1]))
faults = sum(f.get("occurrences", 1) for f in report["findings"] if f["kind"] in ("hang", "crash"))
cases = sum(c["cases"] for c in report["cells"])
print(f"{float(sys.argv[3]) - float(sys.argv[2]):.3f} {faults} {cases}")
PY
}
read -r base _ base_cases < <(run none)
printf "%-10s %8s %7s %7s %9s %12s\n" fault wall_s faults cases cases/s ms_per_fault
printf "%-10s %8.2f %7d %7d %9.0f %12s\n" none "$base" 0 "$base_cases" "$(echo "$base_cases / $base" | bc -l)" -
for fault in hang:1 hang:10 hang:100 crash:1 crash:10 crash:100; do
  read -r wall faults done_cases < <(run "$fault")
  per=$(python3 -c "print(f'{($wall - $base) * 1000 / max($faults, 1):.1f}')")
  printf "%-10s %8.2f %7d %7d %9.0f %12s\n" "$fault" "$wall" "$faults" "$done_cases" "$(echo "$done_cases / $wall" | bc -l)" "$per"
done
