#!/usr/bin/env bash
# Every Eval Ever's own validator, for the test of `clinieval export-eee`:
# every-eval-ever needs Python >= 3.12 (and numpy >= 2.4), the project runs on
# 3.11, so it gets a venv of its own (.venv-eee). The interpreter is $EEE_PYTHON,
# else the first python3.12 / python3.13 on PATH or under pyenv. Without one this
# prints why and exits 0: the test then skips, saying so. Idempotent.
#
# Usage: .ci/setup-eee.sh [VENV]   (default .venv-eee)
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${1:-.venv-eee}"
EEE="every-eval-ever==0.3.0"

has_eee() { [ -x "$VENV/bin/python" ] && "$VENV/bin/python" -c "import every_eval_ever.validator" 2>/dev/null; }
if has_eee; then exit 0; fi

PY="${EEE_PYTHON:-}"
if [ -z "$PY" ]; then
  for candidate in python3.12 python3.13 "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.1[23]*/bin/python3; do
    if command -v "$candidate" >/dev/null 2>&1 \
        && "$candidate" -c 'import sys; sys.exit(sys.version_info < (3, 12))' 2>/dev/null; then
      PY="$candidate"; break
    fi
  done
fi
if [ -z "$PY" ]; then
  echo "setup-eee: no Python >= 3.12 found (set EEE_PYTHON); the Every Eval Ever check will skip"
  exit 0
fi
[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
# Exact versions (.ci/eee-constraints.txt): the validator the test runs is the one checked.
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check \
  -c .ci/eee-constraints.txt "$EEE" 2>&1 | grep -v "^WARNING: Location" || true
"$VENV/bin/python" -c "import every_eval_ever.validator"
"$VENV/bin/python" -c "import every_eval_ever, importlib.metadata as m; print('every-eval-ever', m.version('every-eval-ever'), 'on', __import__('sys').version.split()[0])"
