#!/usr/bin/env bash
# Go interop run: installs the pinned protoc plugins into interop/go/.bin,
# generates Go code from proto/ with buf (interop/go/buf.gen.yaml), builds
# the interop program and runs it against the Synapse server at URL.
# Usage: interop/go/run.sh http://127.0.0.1:PORT
# Exits with the program's status: 0 when every check passed, 1 otherwise.
set -euo pipefail

PROTOC_GEN_GO_VERSION=v1.36.12      # google.golang.org/protobuf/cmd/protoc-gen-go
PROTOC_GEN_GO_GRPC_VERSION=v1.6.2   # google.golang.org/grpc/cmd/protoc-gen-go-grpc

if [[ $# -ne 1 ]]; then
  echo "usage: $0 URL   (for example http://127.0.0.1:8080)" >&2
  exit 2
fi
url=$1

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
bin=$here/.bin
mkdir -p "$bin"

# shellcheck source=../go-tool.sh
source "$here/../go-tool.sh"
go_tool "$bin" google.golang.org/protobuf/cmd/protoc-gen-go "$PROTOC_GEN_GO_VERSION"
go_tool "$bin" google.golang.org/grpc/cmd/protoc-gen-go-grpc "$PROTOC_GEN_GO_GRPC_VERSION"

# buf comes from the repository's npm devDependencies (@bufbuild/buf, pinned
# by package-lock.json); a fresh clone gets it with npm ci.
if [[ ! -x $root/node_modules/.bin/buf ]]; then
  (cd "$root" && npm ci --no-audit --no-fund)
fi

# buf resolves `inputs: - directory: proto` and the plugins' out paths from
# the repository root; the local plugins are found on PATH.
(cd "$root" && PATH="$bin:$PATH" npx --no-install buf generate --template interop/go/buf.gen.yaml)

# Build, then exec, so that the program's exit status is passed through as is.
(cd "$here" && go build -o "$bin/synapse-interop" .)
cd "$root"
exec "$bin/synapse-interop" -url "$url" -vectors "$root/test/vectors"
