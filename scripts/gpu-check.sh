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
#     build-pypi/ against that python's torch and torchvision (DETFUZZ_TORCH_PYTHON: the
#     configuration of `scripts/setup.sh --stack pypi`), with DETFUZZ_CUDA=ON, then:
#       1. `detfuzz list`: each native and torchvision target says "cuda: supported" per
#          dtype, or why not;
#       2. the NMS block boundaries (n = 1..4097 around multiples of 64) on the real kernel;
#       3. a campaign over the native, torchvision and aten targets on cuda, every dtype,
#          written to REPORT_DIR (report.json, summary.md, junit.xml, report.html).
#     About 2-3 minutes of build on 16 cores, then 3 of checks.
#   Anywhere, without a GPU:                  scripts/gpu-check.sh --until-device
#     every step up to the first that needs a device (configure, build, `detfuzz list`, whose
#     cuda cells must then all say "no CUDA device"), so that a GPU machine's first run
#     does not fail on a build step; the CTest gpu_check/until_device of build-pypi runs it.
# PYTHON names the python whose torch is used; BUILD_DIR the build folder (build-pypi); JOBS
# the build's parallelism; BUDGET the campaign's (150s).
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

until_device=false
if [ "${1:-}" = --until-device ]; then until_device=true; shift; fi
out="${1:-gpu-check-report}"
build=$(realpath -m "${BUILD_DIR:-build-pypi}")
python="${PYTHON:-python3}"
fail() { echo "gpu-check: $*" >&2; exit 2; }

torchvision_lib=$("$python" -c 'import os, torch, torchvision; print(os.path.join(os.path.dirname(torchvision.__file__), "_C.so"))') ||
  fail "$python cannot import torch and torchvision: this script builds against a PyPI PyTorch's LibTorch and torchvision's op library (set PYTHON to a python that has them)"
[ -f "$torchvision_lib" ] || fail "no torchvision op library at $torchvision_lib"
"$python" -c 'import torch; print("torch", torch.__version__, "CUDA", torch.version.cuda, "GPU:", torch.cuda.is_available())'

# The .debs unpacked, not installed: no root needed, nothing outside the prefix touched.
prefix="${TMPDIR:-/tmp}/detfuzz-gpu-deps"
prefix_args=()
if compgen -G "$deps/*.deb" >/dev/null; then
  rm -rf "$prefix" && mkdir -p "$prefix"
  for deb in "$deps"/*.deb; do dpkg -x "$deb" "$prefix"; done
  prefix_args=(-DCMAKE_PREFIX_PATH="$prefix/usr")
else
  echo "gpu-check: no $deps/*.deb (scripts/gpu-check.sh --prepare makes them); using the system's packages" >&2
fi

# nvcc for LibTorch's CMake config and kernels/native, by the environment (not a cache
# variable: a build folder configured before keeps its compiler and its objects).
if ! command -v nvcc >/dev/null && [ -z "${CUDACXX:-}" ] && [ -x /usr/local/cuda/bin/nvcc ]; then
  export CUDACXX=/usr/local/cuda/bin/nvcc PATH="/usr/local/cuda/bin:$PATH"
fi
# The configuration of setup.sh's PyPI stack (an unchanged cache rebuilds nothing), plus the
# unpacked prefix where there is one.
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDETFUZZ_WERROR=ON -DDETFUZZ_CUDA=ON \
  "${prefix_args[@]}" -DDETFUZZ_TORCH_PYTHON="$(command -v "$python")"
cmake --build "$build" -j "${JOBS:-$(nproc)}" --target detfuzz native_test

if $until_device; then
  # The last step without a device: the binary starts, loads torchvision's CUDA build and
  # says why every cuda cell is unsupported.
  listing=$("$build/detfuzz" list) || fail "detfuzz list failed"
  echo "$listing" | grep -E "^  (torch|torch_cuda|torchvision|torchvision_cuda|cuda):"
  cuda_lines=$(echo "$listing" | grep -E "^    cuda" || true)
  [ -n "$cuda_lines" ] || fail "detfuzz list shows no cuda line"
  wrong=$(echo "$cuda_lines" | grep -vE "cuda: unavailable: (no CUDA device|emulated targets run on the CPU only|native:fma is the host emulation)" || true)
  [ -z "$wrong" ] || fail "cuda cells that do not say 'no CUDA device' on a machine without a GPU:
$wrong"
  echo "gpu-check: $(echo "$cuda_lines" | wc -l) cuda cells say why they cannot run; stopping before the first step that needs a device"
  exit 0
fi

nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv || true
"$build/detfuzz" list | grep -E "^[a-z_]+:|^  target (native|torchvision|aten)|cuda" || true
DETFUZZ_TEST_DEVICE=cuda DETFUZZ_BINARY="$PWD/$build/detfuzz" "$build/tests/native_test" --gtest_filter='Native*'
status=0
"$build/detfuzz" run --targets native,torchvision,aten --devices cuda --dtypes fp16,bf16,fp32,fp64 \
  --budget "${BUDGET:-150s}" --jobs 8 --progress lines --report "$out" || status=$?
echo "gpu-check: campaign exit $status (1: failing findings, as on the CPU for torchvision's known ones); report in $out"
cat "$out/summary.md" 2>/dev/null | head -60 || true
[ "$status" -le 1 ]
