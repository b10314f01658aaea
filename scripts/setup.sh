#!/usr/bin/env bash
# Installs what is missing (Debian bookworm; as root, or with sudo), then configures and
# builds detfuzz into ./build. Safe to run again: it installs and rebuilds only what changed.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(cmake ninja-build g++ pkg-config
          libtorch-dev python3-torchvision
          librapidcheck-dev libgtest-dev libfmt-dev libcli11-dev nlohmann-json3-dev libbenchmark-dev
          libtcmalloc-minimal4   # the detfuzz binary's malloc (CMake's DETFUZZ_ALLOCATOR)
          libxml2-utils   # xmllint: the tests validate junit.xml against tests/reports/junit.xsd
          chromium)       # the tests load report.html in a headless browser
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
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDETFUZZ_WERROR=ON >/dev/null
cmake --build build -j "${DETFUZZ_BUILD_JOBS:-2}"
