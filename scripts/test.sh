#!/usr/bin/env bash
# Set up (idempotent) and run the test suite from the repo root. Extra
# arguments go to pytest:  bash scripts/test.sh -m "not slow" -x
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$ROOT/scripts/setup.sh" --with-browser  # the UI's browser tests need Chromium
cd "$ROOT"

rc=0
# The slowest tests are listed at the end: the suite's time is budgeted (README).
.venv/bin/python -m pytest --durations=25 "$@" || rc=$?
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
  # The Kafka suite's core against a second Kafka-protocol broker (Tansu), so Squall keeps
  # to Kafka's protocol rather than to one small broker's behaviour (tests/kafka_fixtures.py
  # names what Tansu gets wrong; those checks are skipped there).
  echo "[test] again with SQUALL_KAFKA_BROKER=tansu: the Kafka tests"
  krc=0
  SQUALL_KAFKA_BROKER=tansu .venv/bin/python -m pytest -q -p no:cacheprovider \
    tests/integration/test_kafka.py tests/integration/test_kafka_faults.py || krc=$?
  [[ $rc -ne 0 ]] || rc=$krc
fi
exit "$rc"
