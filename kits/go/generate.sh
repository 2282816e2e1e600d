#!/usr/bin/env bash
# Regenerates kits/go/synapsev1 from proto/synapse/v1 with buf and the pinned
# protoc plugins (installed into kits/go/.bin). Run after changing proto/.
# With --check, fails instead when the committed stubs differ from what it
# generates (CI runs that).
set -euo pipefail

PROTOC_GEN_GO_VERSION=v1.36.12      # google.golang.org/protobuf/cmd/protoc-gen-go
PROTOC_GEN_GO_GRPC_VERSION=v1.6.2   # google.golang.org/grpc/cmd/protoc-gen-go-grpc

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
bin=$here/.bin
mkdir -p "$bin"

# shellcheck source=../../interop/go-tool.sh
source "$root/interop/go-tool.sh"
go_tool "$bin" google.golang.org/protobuf/cmd/protoc-gen-go "$PROTOC_GEN_GO_VERSION"
go_tool "$bin" google.golang.org/grpc/cmd/protoc-gen-go-grpc "$PROTOC_GEN_GO_GRPC_VERSION"

if [[ ! -x $root/node_modules/.bin/buf ]]; then
  (cd "$root" && npm ci --no-audit --no-fund)
fi

if [[ ${1:-} == --check ]]; then
  out=$(mktemp -d)
  trap 'rm -rf "$out"' EXIT
  mkdir -p "$out/kits/go"
  # Generate into a scratch tree laid out like the repository, then compare.
  sed "s#out: kits/go#out: $out/kits/go#" "$here/buf.gen.yaml" >"$out/buf.gen.yaml"
  (cd "$root" && PATH="$bin:$PATH" npx --no-install buf generate --template "$out/buf.gen.yaml")
  if ! diff -r "$out/kits/go/synapsev1" "$here/synapsev1"; then
    echo "kits/go/synapsev1 differs from what buf generates: run kits/go/generate.sh and commit" >&2
    exit 1
  fi
  echo "kits/go/synapsev1 is fresh"
  exit 0
fi
(cd "$root" && PATH="$bin:$PATH" npx --no-install buf generate --template kits/go/buf.gen.yaml)
