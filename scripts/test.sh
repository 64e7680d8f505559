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
# The same per-tuple path as pure Python (the compiled modules switched off), on a fast
# subset: the unit tests and the reliability tests, whose workers inherit the switch.
if [[ $# -eq 0 ]]; then
  echo "[test] again with SQUALL_PURE_PYTHON=1: tests/unit and tests/integration/test_reliability.py"
  prc=0
  SQUALL_PURE_PYTHON=1 .venv/bin/python -m pytest -q -p no:cacheprovider tests/unit \
    tests/integration/test_reliability.py || prc=$?
  [[ $rc -ne 0 ]] || rc=$prc
fi
exit "$rc"
