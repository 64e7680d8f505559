#!/usr/bin/env bash
# Set up a machine for Squall: the repo's .venv with Squall installed
# (editable, with the spark, trident-redis and test extras), Debian's
# ZooKeeper and Redis, a Java runtime for Spark, and (with --with-browser, as
# scripts/test.sh asks) Chromium for the UI's browser tests. Idempotent; run
# from any cwd:  bash scripts/setup.sh [--with-browser]
set -euo pipefail

WITH_BROWSER=0
for arg in "$@"; do
  case "$arg" in
    --with-browser) WITH_BROWSER=1 ;;
    *) echo "[setup] unknown argument $arg (known: --with-browser)" >&2; exit 2 ;;
  esac
done

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

log() { echo "[setup] $*"; }

# Run a command with its output kept aside; show it only if the command fails.
quiet() {
  local out rc=0
  out="$(mktemp)"
  "$@" >"$out" 2>&1 || rc=$?
  if [[ $rc -ne 0 ]]; then
    echo "[setup] failed ($rc): $*" >&2
    cat "$out" >&2
  fi
  rm -f "$out"
  return "$rc"
}

APT_UPDATED=0
apt_install() {  # apt_install PKG...: quiet, non-interactive, root or sudo
  local sudo=()
  if [[ $(id -u) -ne 0 ]]; then
    command -v sudo >/dev/null 2>&1 || { echo "[setup] need root or sudo to apt-get install $*" >&2; exit 1; }
    sudo=(sudo)
  fi
  if [[ $APT_UPDATED -eq 0 ]]; then
    quiet "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update
    APT_UPDATED=1
  fi
  quiet "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive \
    apt-get install -y --no-install-recommends "$@"
}

# --- Python environment --------------------------------------------------
if [[ ! -x .venv/bin/python ]]; then
  PYTHON="${PYTHON:-}"
  if [[ -z $PYTHON ]]; then
    PYTHON=python3.11
    command -v "$PYTHON" >/dev/null 2>&1 || PYTHON=python3
  fi
  # Debian's python3.11 needs python3.11-venv for `python -m venv` (ensurepip).
  if ! "$PYTHON" -c 'import ensurepip' >/dev/null 2>&1; then
    log "installing python3-venv with apt-get"
    apt_install python3-venv "python$("$PYTHON" -c 'import sys; print("%d.%d" % sys.version_info[:2])')-venv"
  fi
  log "creating .venv with $("$PYTHON" --version 2>&1)"
  quiet "$PYTHON" -m venv .venv
fi
log "installing squall into .venv (pip install -e '.[spark,trident-redis,kafka,test,fast,bench]'; pyspark is ~480 MB the first time)"
quiet .venv/bin/python -m pip install --upgrade pip
quiet .venv/bin/python -m pip install -e '.[spark,trident-redis,kafka,test,fast,bench]'
# The per-tuple path compiled with Cython from the same .py files (one warning line and
# the pure-Python modules if it fails); SQUALL_PURE_PYTHON=1 runs the sources instead.
log "compiling the per-tuple path (scripts/build_compiled.py)"
.venv/bin/python scripts/build_compiled.py

# --- ZooKeeper (Debian package) -----------------------------------------
if [[ -d /usr/share/zookeeper ]]; then
  log "zookeeper present (/usr/share/zookeeper)"
else
  log "installing zookeeper with apt-get"
  apt_install zookeeper
fi

# --- Redis (Debian package) ----------------------------------------------
# Only the binary is used: tests and LocalRedis start their own servers
# (python -m squall.deploy.redis), never the packaged redis-server service.
if [[ -x /usr/bin/redis-server ]]; then
  log "redis-server present (/usr/bin/redis-server)"
else
  log "installing redis-server with apt-get"
  apt_install redis-server
fi

# --- Ruby and Node.js (Debian packages): Storm's own multi-lang components run unchanged in
# the tests (tests/integration/resources/: tester_spout.rb on storm.rb, randomsentence.js
# and splitsentence.js on storm.js) ------------------------------------------------------
for tool in ruby:ruby node:nodejs; do
  if command -v "${tool%%:*}" >/dev/null 2>&1; then
    log "${tool%%:*} present ($(command -v "${tool%%:*}"))"
  else
    log "installing ${tool#*:} with apt-get (Storm's multi-lang components in the tests)"
    apt_install "${tool#*:}"
  fi
done

# --- Java (Spark 4 needs 17 or newer; ZooKeeper's package usually brings one) --
java_major() { java -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -1; }
if command -v java >/dev/null 2>&1 && [[ "$(java_major)" -ge 17 ]]; then
  log "java $(java_major) present"
else
  log "installing a Java runtime for Spark (default-jre-headless) with apt-get"
  apt_install default-jre-headless
fi

# --- Chromium (Debian package): the UI's browser tests drive it through Playwright --
# (tests/integration/test_ui_browser.py); Playwright's own browser download is never used.
if [[ $WITH_BROWSER -eq 0 ]]; then
  :  # running topologies needs no browser
elif [[ -x /usr/bin/chromium ]]; then
  log "chromium present (/usr/bin/chromium)"
else
  log "installing chromium and fonts-dejavu-core with apt-get (for the UI's browser tests)"
  apt_install chromium fonts-dejavu-core
fi

log "done"
