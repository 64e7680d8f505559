#!/usr/bin/env bash
# Make a Squall cluster's CA and certificates for mutual TLS (SECURITY.md).
#
#   bash deploy/make-certs.sh DIR --nimbus HOST[,HOST...] [--supervisor NAME]...
#                                 [--user NAME[:GROUP,...]]...
#
# DIR gets ca.pem (copy it to every host), ca.key (keep it offline; re-running with the
# same DIR reuses the CA) and NAME.pem / NAME.key per certificate (keys are mode 0600).
# A certificate's CN is its principal, its OUs the principal's groups. Uses the repo's
# .venv (bash scripts/setup.sh) or python3 with Squall installed.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PY="$ROOT/.venv/bin/python"
[[ -x $PY ]] || PY=python3
exec "$PY" -m squall.deploy.certs "$@"
