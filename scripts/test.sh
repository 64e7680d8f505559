#!/usr/bin/env bash
# Set up (idempotent) and run the test suite from the repo root. Extra
# arguments go to pytest:  bash scripts/test.sh -m "not slow" -x
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$ROOT/scripts/setup.sh" --with-browser  # the UI's browser tests need Chromium
cd "$ROOT"

rc=0
.venv/bin/python -m pytest "$@" || rc=$?
if [[ $rc -eq 5 ]]; then
  echo "[test] pytest collected no tests: failing" >&2
fi
exit "$rc"
