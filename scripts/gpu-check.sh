#!/usr/bin/env bash
# The CUDA checks of detfuzz (its own kernels in kernels/native, and torchvision's on the
# device), for a bare CUDA machine that has PyTorch: nvcc, CMake, ninja, a C++ compiler and a
# python3 with torch and torchvision, but no apt and no network.
#
#   Here, on a Debian machine with apt:      scripts/gpu-check.sh --prepare
#     downloads the .debs of the C++ dependencies such a machine lacks (RapidCheck,
#     GoogleTest, fmt, CLI11, nlohmann-json) into .gpu-deps/, which git ignores.
#   There, with .gpu-deps carried along:      scripts/gpu-check.sh [REPORT_DIR]
#     (the device tool: command "scripts/gpu-check.sh $OUT/gpu-check", carry [".gpu-deps"],
#     timeout_s 480). Unpacks the .debs into a private prefix, builds detfuzz into
#     build-gpu/ against that python's LibTorch (torch.utils.cmake_prefix_path) and
#     torchvision's op library (its package's _C.so), with DETFUZZ_CUDA=ON, then:
#       1. `detfuzz list`: each native and torchvision target says "cuda: supported" per
#          dtype, or why not;
#       2. the NMS block boundaries (n = 1..4097 around multiples of 64) on the real kernel;
#       3. a campaign over the native, torchvision and aten targets on cuda, every dtype,
#          written to REPORT_DIR (report.json, summary.md, junit.xml, report.html).
#     About 2-3 minutes of build on 16 cores, then 3 of checks.
# PYTHON names another python; JOBS the build's parallelism; BUDGET the campaign's (150s).
set -euo pipefail
cd "$(dirname "$0")/.."
deps=.gpu-deps
packages=(librapidcheck-dev libgtest-dev libfmt-dev libfmt9 libcli11-dev nlohmann-json3-dev)

if [ "${1:-}" = --prepare ]; then
  mkdir -p "$deps"
  exclude=.git/info/exclude
  if [ -d .git ] && ! grep -qxF "/$deps/" "$exclude" 2>/dev/null; then echo "/$deps/" >>"$exclude"; fi
  (cd "$deps" && apt-get download "${packages[@]}")
  ls -l "$deps"
  echo "carry $deps to the GPU machine and run scripts/gpu-check.sh there"
  exit 0
fi

out="${1:-gpu-check-report}"
python="${PYTHON:-python3}"
fail() { echo "gpu-check: $*" >&2; exit 2; }

torch_prefix=$("$python" -c 'import torch; print(torch.utils.cmake_prefix_path)') ||
  fail "$python cannot import torch: this script builds against a PyTorch installation's LibTorch (set PYTHON to one that has it)"
torchvision_lib=$("$python" -c 'import os, torchvision; print(os.path.join(os.path.dirname(torchvision.__file__), "_C.so"))') ||
  fail "$python cannot import torchvision: its op library (_C.so) is what the torchvision targets call"
[ -f "$torchvision_lib" ] || fail "no torchvision op library at $torchvision_lib"
"$python" -c 'import torch; print("torch", torch.__version__, "CUDA", torch.version.cuda, "GPU:", torch.cuda.is_available())'

# The .debs unpacked, not installed: no root needed, nothing outside the prefix touched.
prefix="${TMPDIR:-/tmp}/detfuzz-gpu-deps"
if compgen -G "$deps/*.deb" >/dev/null; then
  rm -rf "$prefix" && mkdir -p "$prefix"
  for deb in "$deps"/*.deb; do dpkg -x "$deb" "$prefix"; done
else
  echo "gpu-check: no $deps/*.deb (scripts/gpu-check.sh --prepare makes them); using the system's packages" >&2
fi

nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DDETFUZZ_CUDA=ON -DDETFUZZ_BENCH=OFF \
  -DCMAKE_CUDA_COMPILER="$nvcc" -DCMAKE_PREFIX_PATH="$prefix/usr;$torch_prefix" \
  -DDETFUZZ_TORCHVISION_LIB="$torchvision_lib"
cmake --build build-gpu -j "${JOBS:-$(nproc)}" --target detfuzz native_test

nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv || true
./build-gpu/detfuzz list | grep -E "^[a-z_]+:|^  target (native|torchvision|aten)|cuda" || true
DETFUZZ_TEST_DEVICE=cuda DETFUZZ_BINARY="$PWD/build-gpu/detfuzz" ./build-gpu/tests/native_test --gtest_filter='Native*'
status=0
./build-gpu/detfuzz run --targets native,torchvision,aten --devices cuda --dtypes fp16,bf16,fp32,fp64 \
  --budget "${BUDGET:-150s}" --jobs 8 --progress lines --report "$out" || status=$?
echo "gpu-check: campaign exit $status (1: failing findings, as on the CPU for torchvision's known ones); report in $out"
cat "$out/summary.md" 2>/dev/null | head -60 || true
[ "$status" -le 1 ]
