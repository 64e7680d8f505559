#!/usr/bin/env bash
# Set up a machine for Squall: the repo's .venv with Squall installed
# (editable, with the spark, trident-redis and test extras), Debian's
# ZooKeeper and Redis, a Java runtime for Spark, and (with --with-browser, as
# scripts/test.sh asks) Chromium for the UI's browser tests. Idempotent; run
# from any cwd:  bash scripts/setup.sh [--with-browser] [--service-user USER]
#
# --service-user USER (or SQUALL_SERVICE_USER=USER): the user the systemd units run
# the daemons as (squall); setup ends with a warning if USER cannot run the venv's
# interpreter. --check-service-user USER makes that check alone, changing nothing
# (exit status 1 if it warns).
set -euo pipefail

WITH_BROWSER=0
SERVICE_USER="${SQUALL_SERVICE_USER:-}"
CHECK_ONLY=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --with-browser) WITH_BROWSER=1 ;;
    --service-user|--check-service-user)
      [[ $# -ge 2 && -n $2 ]] || { echo "[setup] $1 needs a user name" >&2; exit 2; }
      [[ $1 == --check-service-user ]] && CHECK_ONLY=1
      SERVICE_USER=$2; shift ;;
    --service-user=*) SERVICE_USER=${1#*=} ;;
    *) echo "[setup] unknown argument $1 (known: --with-browser, --service-user USER, --check-service-user USER)" >&2
       exit 2 ;;
  esac
  shift
done

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

log() { echo "[setup] $*"; }

# check_service_user USER: warn (one line, status 1) unless USER can run .venv/bin/python.
# A venv's python is a symlink to the interpreter it was made from: one under /root or a
# home directory (pyenv, a user's own build) is closed to the daemons' user, and the
# systemd units hide those directories (ProtectHome=) even where their modes allow it.
check_service_user() {
  local user=$1 py="$ROOT/.venv/bin/python" as=() problem="" f d target hops=0 base
  local sys_py=/usr/bin/python3.11
  [[ -x $sys_py ]] || sys_py=/usr/bin/python3
  local fix="rebuild the venv from a system python: rm -rf $ROOT/.venv && PYTHON=$sys_py bash $ROOT/scripts/setup.sh --service-user $user"
  if ! id -u "$user" >/dev/null 2>&1; then
    echo "[setup] WARNING: service user $user does not exist: create it (useradd --system ... $user, README's cluster step 1), then run setup again" >&2
    return 1
  fi
  if [[ ! -e $py ]]; then
    echo "[setup] WARNING: $py does not exist: run bash scripts/setup.sh --service-user $user" >&2
    return 1
  fi
  if [[ $(id -u) -eq $(id -u "$user") ]]; then
    as=()
  elif [[ $(id -u) -eq 0 ]] && command -v runuser >/dev/null 2>&1; then
    as=(runuser -u "$user" --)
  elif command -v sudo >/dev/null 2>&1 && sudo -n true >/dev/null 2>&1; then
    as=(sudo -n -u "$user" --)
  else
    log "cannot check that $user can run $py (needs root or sudo): check it with: sudo -u $user $py -c pass"
    return 0
  fi
  # The symlink chain to the real binary, and every directory on the way, must be open to USER.
  local chain=("$py")
  f=$py
  while [[ -L $f && $hops -lt 40 ]]; do
    target=$(readlink "$f")
    [[ $target == /* ]] || target="$(dirname "$f")/$target"
    f=$target; chain+=("$f"); hops=$((hops + 1))
  done
  base=$("$py" -c 'import sys; print(sys.base_prefix)' 2>/dev/null || true)
  for f in "${chain[@]}"; do
    d=$(dirname "$f")
    local dirs=()
    while [[ $d != / ]]; do dirs=("$d" "${dirs[@]}"); d=$(dirname "$d"); done
    for d in "${dirs[@]}"; do
      if ! "${as[@]}" test -x "$d"; then problem="$user cannot enter $d (on the way to $f)"; break 2; fi
    done
  done
  if [[ -z $problem ]] && ! "${as[@]}" test -x "$(readlink -f "$py")"; then
    problem="$user cannot execute $(readlink -f "$py")"
  fi
  if [[ -z $problem ]] && ! "${as[@]}" "$py" -I -c pass >/dev/null 2>&1; then
    problem="$py fails as $user (is ${base:-its base prefix} readable by $user?)"
  fi
  if [[ -z $problem ]]; then
    for f in "${chain[@]}" "$base"; do
      case "$f" in
        /root|/root/*|/home|/home/*|/run/user|/run/user/*)
          problem="$f is under a home directory, which the systemd units hide (ProtectHome=)"; break ;;
      esac
    done
  fi
  if [[ -n $problem ]]; then
    echo "[setup] WARNING: service user $user cannot run .venv/bin/python: $problem; $fix" >&2
    return 1
  fi
  log "service user $user can run .venv/bin/python ($(readlink -f "$py"))"
}

if [[ $CHECK_ONLY -eq 1 ]]; then
  check_service_user "$SERVICE_USER"
  exit $?
fi

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
log "installing squall into .venv (pip install -e '.[spark,trident-redis,redis,kafka,jdbc,nats,files,test,fast,bench]'; pyspark is ~480 MB the first time)"
quiet .venv/bin/python -m pip install --upgrade pip
quiet .venv/bin/python -m pip install -e '.[spark,trident-redis,redis,kafka,jdbc,nats,files,test,fast,bench]'
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

# --- PostgreSQL 15 and nats-server (Debian packages) ------------------------------------
# Only the binaries: the JDBC and NATS connectors' tests and launchers
# (python -m squall.deploy.postgres, python -m squall.deploy.nats) start private servers in
# temporary directories on free loopback ports, never the packaged services.
if [[ -x /usr/lib/postgresql/15/bin/postgres ]]; then
  log "postgresql-15 present (/usr/lib/postgresql/15/bin)"
else
  log "installing postgresql-15 with apt-get"
  apt_install postgresql-15
fi
if command -v nats-server >/dev/null 2>&1; then
  log "nats-server present ($(command -v nats-server))"
else
  log "installing nats-server with apt-get"
  apt_install nats-server
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
# certutil (libnss3-tools) gives a test browser the cluster's CA, as an operator does
# (tests/integration/test_cross_host.py).
if [[ $WITH_BROWSER -eq 0 ]]; then
  :  # running topologies needs no browser
elif [[ -x /usr/bin/chromium ]] && command -v certutil >/dev/null 2>&1; then
  log "chromium and certutil present (/usr/bin/chromium)"
else
  log "installing chromium, fonts-dejavu-core and libnss3-tools with apt-get (for the UI's browser tests)"
  apt_install chromium fonts-dejavu-core libnss3-tools
fi

# Last, so that it is not scrolled away: the warning says how to rebuild the venv.
if [[ -n $SERVICE_USER ]]; then
  check_service_user "$SERVICE_USER" || true
fi

log "done"
