#!/usr/bin/env bash
# Installs what isomer needs to build and test: Debian packages (apt) and a
# project-local Python venv (.venv). Idempotent; does no apt or pip work when
# everything is already present.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

# ocl-icd-opencl-dev is only a Recommends of libdnnl-dev, but Debian's dnnl CMake
# package (built with the OpenCL GPU runtime) calls find_package(OpenCL REQUIRED).
APT_PACKAGES=(
  build-essential cmake
  libgtest-dev libgmock-dev libbenchmark-dev
  libonnx-dev libonnx-testdata libprotobuf-dev protobuf-compiler
  libdnnl-dev ocl-icd-opencl-dev libz3-dev libsqlite3-dev libcli11-dev nlohmann-json3-dev pybind11-dev
  libopenmpi-dev openmpi-bin iproute2
  python3-venv python3-pip python3-dev
  python3-torchvision python3-torch
)

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

# --- Debian packages -----------------------------------------------------------
missing=()
for p in "${APT_PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if [ "${#missing[@]}" -gt 0 ]; then
  echo "install-deps: apt-get install ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -q
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}" </dev/null
else
  echo "install-deps: Debian packages present"
fi

# --- Python venv ----------------------------------------------------------------
# Debian's interpreter (not the pyenv python3 that may be first on PATH), with
# system site packages so Debian's torch/torchvision are importable.
PY=/usr/bin/python3
VENV="$ROOT/.venv"
REQ="$ROOT/requirements-dev.txt"
STAMP="$VENV/.requirements.stamp"

if [ ! -x "$VENV/bin/python" ]; then
  echo "install-deps: creating $VENV"
  "$PY" -m venv --system-site-packages "$VENV"
  rm -f "$STAMP"
fi

want="$(sha256sum "$REQ" | cut -d' ' -f1)"
have="$(cat "$STAMP" 2>/dev/null || true)"
if [ "$want" != "$have" ]; then
  echo "install-deps: pip install -r requirements-dev.txt"
  PIP_DISABLE_PIP_VERSION_CHECK=1 "$VENV/bin/python" -m pip install -q --no-input -r "$REQ"
  "$VENV/bin/python" -c "import numpy, onnx, onnxruntime, torch, torchvision, matplotlib" \
    || { echo "install-deps: venv import check failed" >&2; exit 1; }
  echo "$want" > "$STAMP"
else
  echo "install-deps: .venv up to date"
fi
