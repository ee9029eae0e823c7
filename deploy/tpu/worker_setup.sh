#!/usr/bin/env bash
# Runs on EVERY TPU VM worker (the launcher copies it there with the code tarball).
# Unpacks the code, creates a venv, installs afm's training extra plus JAX's TPU extra.
# Idempotent: a re-run reuses the venv and only reinstalls the code.
set -euo pipefail

TARBALL="${1:-$HOME/afm-src.tar.gz}"
JAX_VERSION="${JAX_VERSION:-0.10.2}"
AFM_HOME="${AFM_HOME:-$HOME/afm}"
VENV="${VENV:-$HOME/afm-venv}"

mkdir -p "$AFM_HOME"
tar -xzf "$TARBALL" -C "$AFM_HOME"
if [ ! -x "$VENV/bin/python" ]; then
  python3 -m venv "$VENV"
  "$VENV/bin/python" -m pip install -q --upgrade pip
fi
# The training extra pins the JAX stack; jax[tpu] pulls the matching libtpu.
"$VENV/bin/python" -m pip install -q -e "$AFM_HOME[train]" "jax[tpu]==${JAX_VERSION}"
"$VENV/bin/python" -c "import jax, afm.training.core.trainer; print(\"jax\", jax.__version__, \"ready\")"
