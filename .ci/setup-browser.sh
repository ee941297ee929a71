#!/usr/bin/env bash
# Debian's chromium for the Playwright tests (Playwright cannot download its
# own browsers here). Idempotent: does nothing when it is already installed.
set -euo pipefail
if [ ! -x /usr/bin/chromium ]; then
  apt-get update -qq
  apt-get install -y -qq chromium >/dev/null
fi
