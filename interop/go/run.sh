#!/usr/bin/env bash
# Go interop run: builds the interop program on the Go kit (kits/go, which
# ships its stubs generated from proto/) and runs it against the Synapse
# server at URL; the TypeScript command line (dist/src/cli/main.js, from
# `npm run build`) also submits a task to the program's own kit agent.
# Usage: interop/go/run.sh http://127.0.0.1:PORT
# Exits with the program's status: 0 when every check passed, 1 otherwise.
set -euo pipefail

if [[ $# -ne 1 ]]; then
  echo "usage: $0 URL   (for example http://127.0.0.1:8080)" >&2
  exit 2
fi
url=$1

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
bin=$here/.bin
mkdir -p "$bin"

# Build, then exec, so that the program's exit status is passed through as is.
(cd "$here" && go build -o "$bin/synapse-interop" .)
cd "$root"
exec "$bin/synapse-interop" -url "$url" -vectors "$root/test/vectors" -cli "$root/dist/src/cli/main.js"
