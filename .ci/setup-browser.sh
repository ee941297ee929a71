#!/usr/bin/env bash
# Debian's chromium for the Playwright tests (Playwright cannot download its
# own browsers here). Idempotent: does nothing when it is already installed.
# Holds the apt lock that setup-boost.sh also takes (make runs them side by side).
set -euo pipefail
if [ ! -x /usr/bin/chromium ]; then
  flock /var/lock/clinieval-apt.lock sh -c \
    'apt-get update -qq && apt-get install -y -qq chromium >/dev/null'
fi
