#!/usr/bin/env bash
# The CUDA checks of detfuzz's own kernels (kernels/native), for a machine with a GPU: one
# short script, about two minutes once built. Uses ./build when it is there (carry it to a
# machine without apt), else builds it with setup.sh (nvcc from /usr/local/cuda).
#   1. `detfuzz list`: the native targets say "cuda: supported" per dtype, or why not;
#   2. the NMS block boundaries (n = 1..4097 around multiples of 64) on the real kernel;
#   3. a campaign of every native target on cpu (host emulation) and cuda side by side: the
#      same cases, judged by the same oracle; FMA contraction on the device stays in bounds.
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-gpu-check-report}"
[ -x build/detfuzz ] || ./scripts/setup.sh
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv || true
./build/detfuzz list | grep -A10 "target native" | grep -E "target native|cuda" || true
DETFUZZ_TEST_DEVICE=cuda DETFUZZ_BINARY="$PWD/build/detfuzz" ./build/tests/native_test --gtest_filter='Native*'
./build/detfuzz run --targets native --devices cpu,cuda --cases 2000 --jobs 4 --progress lines --report "$out"
