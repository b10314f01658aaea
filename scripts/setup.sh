#!/usr/bin/env bash
# Installs what is missing (Debian bookworm; as root, or with sudo), then configures and
# builds detfuzz. Safe to run again: it installs and rebuilds only what changed.
#
#   scripts/setup.sh [--stack debian|pypi|both]
#     debian (default)  ./build       against Debian's LibTorch 1.13.1 and torchvision 0.14.1 (CPU)
#     pypi              ./build-pypi  against PyPI's torch 2.11.0 and torchvision 0.26.0 (CUDA 13.0
#                                     builds), installed into a virtual environment in
#                                     $DETFUZZ_CACHE (default ~/.cache/detfuzz), reused when present
#     both              both of the above
#
# DETFUZZ_TORCH_PYTHON=/path/to/python: build ./build-pypi against the torch and torchvision
# that this python imports instead (no virtual environment is made). DETFUZZ_BUILD_JOBS: the
# build's parallelism (2).
set -euo pipefail
cd "$(dirname "$0")/.."

readonly torch_pin=2.11.0 torchvision_pin=0.26.0
usage() { sed -n '5,14p' "$0" | sed 's/^# \{0,1\}//'; }
fail() { echo "setup: $*" >&2; exit 2; }

stack=debian
while (($#)); do
  case "$1" in
    --stack) (($# >= 2)) || fail "--stack needs a value: debian, pypi or both"; stack="$2"; shift 2 ;;
    --stack=*) stack="${1#--stack=}"; shift ;;
    -h|--help) usage; exit 0 ;;
    *) fail "unknown argument '$1' (expected --stack debian|pypi|both; see --help)" ;;
  esac
done
case "$stack" in debian|pypi|both) ;; *) fail "--stack is '$stack': expected debian, pypi or both" ;; esac

packages=(cmake ninja-build g++ pkg-config
          librapidcheck-dev libgtest-dev libfmt-dev libcli11-dev nlohmann-json3-dev libbenchmark-dev
          libtcmalloc-minimal4   # the detfuzz binary's malloc (CMake's DETFUZZ_ALLOCATOR)
          libxml2-utils   # xmllint: the tests validate junit.xml against tests/reports/junit.xsd
          chromium)       # the tests load report.html in a headless browser
if [ "$stack" != pypi ]; then packages+=(libtorch-dev python3-torchvision); fi
if [ "$stack" != debian ]; then
  # python3-venv: a virtual environment for the wheels on Debian's python; libpython3.11: the
  # symbols that PyPI's torchvision/_C.so needs through libtorch_python.so (no interpreter runs).
  packages+=(python3-venv libpython3.11)
fi
missing=()
for package in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}" >&2
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then sudo=sudo; fi
  $sudo apt-get update -q
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

# LibTorch's headers make each translation unit heavy: two jobs fit a 2-core, 24 GiB machine.
jobs="${DETFUZZ_BUILD_JOBS:-2}"
if [ "$stack" != pypi ]; then
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDETFUZZ_WERROR=ON >/dev/null
  cmake --build build -j "$jobs"
fi
[ "$stack" = debian ] && exit 0

# The PyPI stack: the pinned pair in a virtual environment of the cache (4.7 GB with its
# nvidia-* wheels), made once; a marker says the install finished.
torch_python="${DETFUZZ_TORCH_PYTHON:-}"
if [ -z "$torch_python" ]; then
  cache="${DETFUZZ_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/detfuzz}"
  venv="$cache/torch-$torch_pin-vision-$torchvision_pin"
  if [ ! -f "$venv/.detfuzz-complete" ]; then
    echo "setup: installing torch $torch_pin and torchvision $torchvision_pin from PyPI into $venv" >&2
    rm -rf "$venv" && mkdir -p "$cache"
    base_python=$(command -v python3) || fail "no python3 on PATH to make $venv with"
    "$base_python" -m venv "$venv" || fail "$base_python -m venv failed (on Debian: apt-get install python3-venv)"
    "$venv/bin/pip" install -q --disable-pip-version-check "torch==$torch_pin" "torchvision==$torchvision_pin" numpy ||
      fail "pip could not install torch==$torch_pin torchvision==$torchvision_pin from PyPI into $venv"
    touch "$venv/.detfuzz-complete"
  fi
  torch_python="$venv/bin/python"
fi
"$torch_python" -c 'import torch, torchvision' 2>/dev/null ||
  fail "DETFUZZ_TORCH_PYTHON=$torch_python cannot import torch and torchvision"
# With the CUDA toolkit, DETFUZZ_CUDA=ON: the native CUDA kernels and the CUDA dispatch of
# the torchvision targets are compiled and linked here, GPU or not.
cuda=AUTO
if command -v nvcc >/dev/null || [ -x /usr/local/cuda/bin/nvcc ]; then cuda=ON; else
  echo "setup: no nvcc (CUDA toolkit): build-pypi gets no native CUDA kernels" >&2
fi
cmake -S . -B build-pypi -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDETFUZZ_WERROR=ON \
  -DDETFUZZ_TORCH_PYTHON="$torch_python" -DDETFUZZ_CUDA="$cuda" >/dev/null
cmake --build build-pypi -j "$jobs"
