#!/usr/bin/env bash
# Regenerate the Python protobuf modules (and gRPC stubs for protos that
# declare a service) from every proto/*.proto. Run from any cwd:
#   bash proto/generate.sh
# Generated imports of sibling protos are rewritten to package-relative ones
# (`from . import x_pb2`) so they work as squall.proto.x_pb2.
set -euo pipefail

PROTO_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(dirname "$PROTO_DIR")"
PY="${PROTO_PY:-$ROOT/.venv/bin/python}"
[[ -x "$PY" ]] || { echo "[proto] $PY missing: run scripts/setup.sh first" >&2; exit 1; }

cd "$PROTO_DIR"
shopt -s nullglob
protos=(*.proto)
(( ${#protos[@]} )) || { echo "[proto] no .proto files in $PROTO_DIR" >&2; exit 1; }

for proto in "${protos[@]}"; do
  name="${proto%.proto}"
  rm -f "${name}_pb2.py" "${name}_pb2.pyi" "${name}_pb2_grpc.py"
  args=(-I. --python_out=. --pyi_out=.)
  # Only emit gRPC stubs where there is a service to stub.
  if grep -Eq '^[[:space:]]*service[[:space:]]' "$proto"; then
    args+=(--grpc_python_out=.)
  fi
  "$PY" -m grpc_tools.protoc "${args[@]}" "$proto"
done

# protoc emits `import x_pb2 as x__pb2` (and `import x_pb2 as _x_pb2` in .pyi)
# for imports between our protos; make them relative to the package.
# google.protobuf imports use `from google.protobuf import ...` and are untouched.
for f in *_pb2.py *_pb2.pyi *_pb2_grpc.py; do
  sed -i -E 's/^import ([A-Za-z0-9_]+_pb2) as /from . import \1 as /' "$f"
done
# protoc sets the message classes' __module__ to the bare 'x_pb2', which is
# not importable, so pickling a message fails; use the real module name.
for f in *_pb2.py; do
  sed -i -E "s/BuildTopDescriptorsAndMessages\(DESCRIPTOR, '[A-Za-z0-9_]+_pb2', _globals\)/BuildTopDescriptorsAndMessages(DESCRIPTOR, __name__, _globals)/" "$f"
done

echo "[proto] generated: $(ls *_pb2.py *_pb2.pyi *_pb2_grpc.py 2>/dev/null | tr '\n' ' ')"
