#!/usr/bin/env bash
# bootstrap.sh — set up a Debian 12 machine to build and test sieve.
# Idempotent: installs only the apt packages that are missing, and rebuilds
# the Python virtual environment (.venv) only when tests/requirements.txt
# changed. Run as root or with sudo available.
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PACKAGES=(
  build-essential cmake pkg-config git
  libpcre2-dev libjansson-dev libevent-dev libsqlite3-dev libopenblas-dev
  clang llvm libclang-rt-14-dev            # libFuzzer, sanitizers, llvm-symbolizer
  python3 python3-venv python3-pip
  unzip ca-certificates
)

missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "bootstrap: installing ${missing[*]}"
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null || { echo "bootstrap: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
    SUDO=sudo
  fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# Python tools for the tests, in .venv. Prefer the system interpreter so the
# venv works on a fresh Debian 12; any python3 >= 3.9 will do.
PY=${PYTHON:-python3}
stamp=.venv/.requirements.sha256
want=$(sha256sum tests/requirements.txt | cut -d' ' -f1)
if [ ! -x .venv/bin/python ] || [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "bootstrap: creating .venv with $($PY --version)"
  rm -rf .venv
  "$PY" -m venv .venv
  .venv/bin/pip install -q --upgrade pip
  .venv/bin/pip install -q -r tests/requirements.txt
  echo "$want" > "$stamp"
fi
echo "bootstrap: ok"
