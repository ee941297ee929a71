#!/usr/bin/env bash
# Boost's headers (Debian's libboost-dev), which confseq compiles against: that
# test extra, the reference for the confidence sequences, ships only an sdist,
# so `uv sync` builds it. Idempotent. Shares a lock with setup-browser.sh, which
# `make test` runs beside it, because two apt-get cannot run at once.
set -euo pipefail
if [ ! -f /usr/include/boost/math/special_functions/beta.hpp ]; then
  flock /var/lock/clinieval-apt.lock sh -c \
    'apt-get update -qq && apt-get install -y -qq libboost-dev >/dev/null'
fi
