#!/usr/bin/env bash
# Set up (idempotent) and run the test suite from the repo root. Extra
# arguments go to pytest:  bash scripts/test.sh -m "not slow" -x
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$ROOT/scripts/setup.sh" --with-browser  # the UI's browser tests need Chromium
cd "$ROOT"

rc=0
# Two processes (pytest-xdist), a test file each at a time: an integration test mostly waits
# on real daemons, so two fit the 2-core machine and the suite its time budget (README).
# Every test starts its daemons on free ports and in directories of its own. The slowest
# tests are listed at the end. Arguments replace the default selection: run one file with
#   bash scripts/test.sh tests/unit/test_web.py -n 0
.venv/bin/python -m pytest -n 2 --dist loadfile --durations=25 "$@" || rc=$?
if [[ $rc -eq 5 ]]; then
  echo "[test] pytest collected no tests: failing" >&2
fi
if [[ $# -eq 0 ]]; then
  # Side by side, each into a file shown when both are done:
  # - the same per-tuple path as pure Python (the compiled modules switched off), on a fast
  #   subset: the unit tests and the reliability tests, whose workers inherit the switch;
  # - the Kafka suite's core against a second Kafka-protocol broker (Tansu), so Squall keeps
  #   to Kafka's protocol rather than to one small broker's behaviour (tests/kafka_fixtures.py
  #   names what Tansu gets wrong; those checks are skipped there).
  out=$(mktemp -d)
  SQUALL_PURE_PYTHON=1 .venv/bin/python -m pytest -q -p no:cacheprovider tests/unit \
    tests/integration/test_reliability.py >"$out/pure.log" 2>&1 &
  pure=$!
  SQUALL_KAFKA_BROKER=tansu .venv/bin/python -m pytest -q -p no:cacheprovider \
    tests/integration/test_kafka.py tests/integration/test_kafka_faults.py >"$out/tansu.log" 2>&1 &
  tansu=$!
  prc=0; wait "$pure" || prc=$?
  krc=0; wait "$tansu" || krc=$?
  echo "[test] again with SQUALL_PURE_PYTHON=1: tests/unit and tests/integration/test_reliability.py"
  cat "$out/pure.log"
  echo "[test] again with SQUALL_KAFKA_BROKER=tansu: the Kafka tests"
  cat "$out/tansu.log"
  rm -rf "$out"
  [[ $rc -ne 0 ]] || rc=$prc
  [[ $rc -ne 0 ]] || rc=$krc
fi
exit "$rc"
