#!/usr/bin/env bash
# Install and start a single-node ZooKeeper for a Squall cluster.
#
#   sudo bash deploy/install-zookeeper.sh [CLIENT_PORT [CLIENT_PORT_ADDRESS]]
#
# CLIENT_PORT defaults to 2181 and CLIENT_PORT_ADDRESS to 127.0.0.1 (this host
# only); for a cluster, pass the host's private address, which the others reach.
#
# - Installs Debian's `zookeeper` package when its jars are missing
#   (apt-get update runs only then). Needs root or sudo.
# - Writes /etc/squall/zookeeper/zoo.cfg and log4j.properties, data in
#   /var/lib/squall/zookeeper (owned by the package's `zookeeper` user).
# - Makes the cluster's ZooKeeper credentials once: a random squall:<password> in
#   /etc/squall/zookeeper/credentials (mode 0600, kept on re-runs), and prints the
#   `storm.zookeeper.auth.payload:` line for squall.yaml on the cluster's hosts.
# - With systemd: writes /etc/systemd/system/squall-zookeeper.service (java
#   with the Debian jars, the command deploy/zookeeper.py builds), enables and
#   (re)starts it, and waits for `ruok` -> `imok`.
# - Without systemd (containers): prints how to run ZooKeeper in the
#   foreground instead.
#
# Idempotent: run it again to change the port or address. DESTDIR=DIR stages
# the files under DIR instead (tests): no apt-get, no service, no sudo.
#
# SECURITY: Squall's daemons authenticate with those credentials, and every znode
# they create carries a digest ACL for them alone (a topology's workers get an
# identity of their own), so a client without them can neither read nor write
# Squall's state. ZooKeeper still accepts any connection, and its traffic,
# digest credentials included, is not encrypted: listen on a private address
# and firewall the client port so that only the cluster's hosts reach it.
set -euo pipefail

PORT="${1:-2181}"
ADDRESS="${2:-127.0.0.1}"
DESTDIR="${DESTDIR:-}"

JAVA_DIR=/usr/share/java
ZK_JAR="$JAVA_DIR/zookeeper.jar"
LOGGING_JARS=("$JAVA_DIR/slf4j-log4j12.jar" "$JAVA_DIR/log4j-1.2.jar")
MAIN_CLASS=org.apache.zookeeper.server.quorum.QuorumPeerMain
CONF_DIR=/etc/squall/zookeeper
CRED_FILE="$CONF_DIR/credentials"
DATA_DIR=/var/lib/squall/zookeeper
UNIT=squall-zookeeper.service
UNIT_FILE="/etc/systemd/system/$UNIT"
ZK_USER=zookeeper   # created by Debian's zookeeper package
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"   # the Squall checkout

log() { echo "[zookeeper] $*"; }
die() { echo "[zookeeper] error: $*" >&2; exit 1; }

if ! [[ $PORT =~ ^[0-9]+$ ]] || (( PORT < 1 || PORT > 65535 )); then
  die "CLIENT_PORT must be a number in 1..65535, got '$PORT'"
fi
[[ -n $ADDRESS && $ADDRESS != *[[:space:]]* ]] || die "CLIENT_PORT_ADDRESS must be an address, got '$ADDRESS'"

SUDO=()
if [[ -z $DESTDIR && $(id -u) -ne 0 ]]; then
  command -v sudo >/dev/null 2>&1 || die "run as root or install sudo"
  SUDO=(sudo)
fi
as_root() { "${SUDO[@]}" "$@"; }

# Run a command as root with its output kept aside; show it only on failure.
quiet() {
  local out rc=0
  out="$(mktemp)"
  as_root "$@" >"$out" 2>&1 || rc=$?
  if [[ $rc -ne 0 ]]; then
    echo "[zookeeper] failed ($rc): $*" >&2
    cat "$out" >&2
  fi
  rm -f "$out"
  return "$rc"
}

# Write stdin to a root-owned file only when its content differs; sets
# CHANGED=1 when it wrote.
CHANGED=0
write_file() {
  local path="$1" mode="$2" tmp
  tmp="$(mktemp)"
  cat >"$tmp"
  if as_root test -f "$path" && as_root cmp -s "$tmp" "$path"; then
    log "$path up to date"
  else
    as_root install -m "$mode" "$tmp" "$path"
    log "wrote $path"
    CHANGED=1
  fi
  rm -f "$tmp"
}

# --- package -----------------------------------------------------------------
if [[ -f $ZK_JAR ]] && command -v java >/dev/null 2>&1; then
  log "zookeeper package present ($ZK_JAR)"
elif [[ -n $DESTDIR ]]; then
  log "zookeeper package missing; not installed for a DESTDIR"
else
  log "installing Debian's zookeeper package with apt-get"
  quiet env DEBIAN_FRONTEND=noninteractive apt-get update
  quiet env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends zookeeper
  [[ -f $ZK_JAR ]] || die "$ZK_JAR still missing after installing zookeeper"
  command -v java >/dev/null 2>&1 || die "java still missing after installing zookeeper"
fi
JAVA="$(command -v java || echo /usr/bin/java)"
CLASSPATH="$ZK_JAR"
for jar in "${LOGGING_JARS[@]}"; do
  if [[ -f $jar ]]; then CLASSPATH="$CLASSPATH:$jar"; fi
done

# --- configuration and data directory ----------------------------------------
as_root install -d -m 0755 "$DESTDIR/etc/squall" "$DESTDIR$CONF_DIR" "$DESTDIR/var/lib/squall"
if [[ -z $DESTDIR ]] && getent passwd "$ZK_USER" >/dev/null; then
  as_root install -d -m 0750 -o "$ZK_USER" -g "$(id -gn "$ZK_USER")" "$DATA_DIR"
else
  ZK_USER=root
  as_root install -d -m 0750 "$DESTDIR$DATA_DIR"
fi

write_file "$DESTDIR$CONF_DIR/zoo.cfg" 0644 <<EOF
# Written by deploy/install-zookeeper.sh: a standalone ZooKeeper for Squall.
tickTime=2000
dataDir=$DATA_DIR
clientPort=$PORT
# Squall's znodes are readable by its credentials only, but ZooKeeper accepts
# any connection and does not encrypt: keep port $PORT to the cluster's hosts.
clientPortAddress=$ADDRESS
maxClientCnxns=0
admin.enableServer=false
4lw.commands.whitelist=ruok,srvr,stat,mntr,conf
# Keep the last snapshots and logs only, purging every 24 h.
autopurge.snapRetainCount=3
autopurge.purgeInterval=24
EOF

write_file "$DESTDIR$CONF_DIR/log4j.properties" 0644 <<'EOF'
log4j.rootLogger=INFO, CONSOLE
log4j.appender.CONSOLE=org.apache.log4j.ConsoleAppender
log4j.appender.CONSOLE.layout=org.apache.log4j.PatternLayout
log4j.appender.CONSOLE.layout.ConversionPattern=%d{ISO8601} - %-5p [%t:%C{1}@%L] - %m%n
EOF

# --- credentials: made once, kept (a new password would lock Squall out of its nodes) ---
if as_root test -s "$DESTDIR$CRED_FILE"; then
  PAYLOAD="$(as_root cat "$DESTDIR$CRED_FILE")"
  [[ $PAYLOAD =~ ^[^:[:space:]]+:[^[:space:]]+$ ]] || die "$CRED_FILE does not hold user:password"
  as_root chmod 0600 "$DESTDIR$CRED_FILE"
  log "$CRED_FILE kept"
else
  PAYLOAD="squall:$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')"
  tmp="$(mktemp)"   # mode 0600
  printf '%s\n' "$PAYLOAD" >"$tmp"
  as_root install -m 0600 "$tmp" "$DESTDIR$CRED_FILE"
  rm -f "$tmp"
  log "wrote $CRED_FILE (the cluster's ZooKeeper credentials)"
fi
log "put this line in squall.yaml on every host of the cluster (and keep it secret):"
echo "storm.zookeeper.auth.payload: \"$PAYLOAD\""

EXEC=("$JAVA" -Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1
      "-Dzookeeper.log.dir=$DATA_DIR"
      "-Dlog4j.configuration=file:$CONF_DIR/log4j.properties"
      -cp "$CLASSPATH" "$MAIN_CLASS" "$CONF_DIR/zoo.cfg")

# The address a client on this host uses to check the server.
CHECK_HOST="$ADDRESS"
if [[ $CHECK_HOST == 0.0.0.0 ]]; then CHECK_HOST=127.0.0.1; fi

# --- no systemd: say how to run it by hand -----------------------------------
if [[ -n $DESTDIR ]]; then
  log "files staged under $DESTDIR: no service installed"
  exit 0
fi
if [[ ! -d /run/systemd/system ]]; then
  log "systemd is not running here (container?): no service installed"
  cat <<EOF
[zookeeper] run ZooKeeper in the foreground instead, either
[zookeeper]   for this host only (listens on 127.0.0.1, temporary data dir):
[zookeeper]     $ROOT/.venv/bin/python -m squall.deploy.zookeeper --port $PORT
[zookeeper]   or with the config written above (listens on $ADDRESS:$PORT, data in $DATA_DIR):
[zookeeper]     ${SUDO[*]:+${SUDO[*]} }runuser -u $ZK_USER -- ${EXEC[*]}
EOF
  exit 0
fi

# --- systemd unit --------------------------------------------------------------
write_file "$UNIT_FILE" 0644 <<EOF
# Written by deploy/install-zookeeper.sh: a single-node ZooKeeper for Squall.
# Config: $CONF_DIR/zoo.cfg   Data: $DATA_DIR   Logs: journalctl -u $UNIT
[Unit]
Description=ZooKeeper for Squall (standalone, port $PORT)
After=network-online.target
Wants=network-online.target

[Service]
Type=simple
User=$ZK_USER
WorkingDirectory=$DATA_DIR
ExecStart=${EXEC[*]}
Restart=on-failure
RestartSec=5
KillSignal=SIGTERM
TimeoutStopSec=30
SuccessExitStatus=143

[Install]
WantedBy=multi-user.target
EOF

quiet systemctl daemon-reload
quiet systemctl enable "$UNIT"
if [[ $CHANGED -eq 1 ]] || ! as_root systemctl is-active --quiet "$UNIT"; then
  log "starting $UNIT"
  quiet systemctl restart "$UNIT"
else
  log "$UNIT already running with this config"
fi

# --- wait for ruok -> imok ------------------------------------------------------
ruok() {
  local reply
  reply="$( { exec 3<>"/dev/tcp/$CHECK_HOST/$PORT"; } 2>/dev/null && printf ruok >&3 && timeout 2 cat <&3 )" || return 1
  [[ $reply == imok ]]
}
for _ in $(seq 1 60); do
  if ruok; then
    log "ZooKeeper serving on $ADDRESS:$PORT (systemctl status $UNIT; journalctl -u $UNIT)"
    exit 0
  fi
  sleep 0.5
done
as_root journalctl -u "$UNIT" -n 30 --no-pager >&2 || true
die "ZooKeeper did not answer 'ruok' on $CHECK_HOST:$PORT within 30 s (log above)"
