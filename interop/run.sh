#!/usr/bin/env bash
# npm run test:interop: starts a server and proves that clients built without
# this repository's TypeScript can use it: grpcurl and buf curl through
# reflection, grpc-health-probe, the Go and Python programs built on the
# kits (kits/go, kits/python) and stubs generated from proto/ (each also runs
# the kit's gRPC-only agent, registered at the server's registry to receive
# signed callbacks, and serving a task to the TypeScript command line), and
# the console page in headless Chromium. Prints each part's
# result and exits non-zero if any part failed.
set -uo pipefail

GRPCURL_VERSION=v1.9.3                 # github.com/fullstorydev/grpcurl
GRPC_HEALTH_PROBE_VERSION=v0.4.62      # github.com/grpc-ecosystem/grpc-health-probe

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
bin=$here/.bin
mkdir -p "$bin"
cd "$root"

results=()
failed=0
record() { # record NAME STATUS
  results+=("$(printf '%-28s %s' "$1" "$2")")
  [[ $2 == PASS ]] || failed=1
}
run_part() { # run_part NAME COMMAND...: runs it, showing its output, and records PASS or FAIL
  local name=$1
  shift
  printf '\n== %s\n' "$name"
  if "$@"; then record "$name" PASS; else record "$name" FAIL; fi
}

# shellcheck source=go-tool.sh
source "$here/go-tool.sh"

printf '== build and tools\n'
npm run build --silent || exit 1
go_tool "$bin" github.com/fullstorydev/grpcurl/cmd/grpcurl "$GRPCURL_VERSION" || exit 1
go_tool "$bin" github.com/grpc-ecosystem/grpc-health-probe "$GRPC_HEALTH_PROBE_VERSION" || exit 1

data=$(mktemp -d)
log=$(mktemp)
node dist/src/cli/main.js serve --port 0 --data-dir "$data" --registry >"$data/stdout" 2>"$log" &
server=$!
trap 'kill -TERM $server 2>/dev/null; wait $server 2>/dev/null; rm -rf "$data" "$log"' EXIT
for _ in $(seq 100); do
  url=$(grep -o 'http://[^ ]*' "$data/stdout" 2>/dev/null | head -n 1)
  [[ -n $url ]] && break
  sleep 0.1
done
if [[ -z ${url:-} ]]; then
  echo "the server did not start:" >&2
  cat "$log" >&2
  exit 1
fi
addr=${url#http://}
echo "server at $url"

expect_output() { # expect_output PATTERN COMMAND...: the command succeeds and prints PATTERN
  local pattern=$1 out
  shift
  out=$("$@" 2>&1) || { echo "$out"; return 1; }
  echo "$out" | head -n 20
  grep -q -- "$pattern" <<<"$out" || { echo "expected output matching: $pattern"; return 1; }
}

run_part "grpcurl list" expect_output "synapse.v1.P2PService" "$bin/grpcurl" -plaintext "$addr" list
run_part "grpcurl describe" expect_output "rpc Send" "$bin/grpcurl" -plaintext "$addr" describe synapse.v1.P2PService
run_part "grpcurl call" expect_output '"agentId"' "$bin/grpcurl" -plaintext -d '{}' "$addr" synapse.v1.CapabilitiesService/GetCapabilities
run_part "grpcurl health check" expect_output '"SERVING"' "$bin/grpcurl" -plaintext "$addr" grpc.health.v1.Health/Check
run_part "grpc-health-probe" expect_output "SERVING" "$bin/grpc-health-probe" -addr "$addr" -service synapse.v1.P2PService
run_part "buf curl (reflection)" expect_output '"protocolVersion"' npx --no-install buf curl --http2-prior-knowledge --protocol grpc -d '{}' "$url/synapse.v1.CapabilitiesService/GetCapabilities"
run_part "go client" interop/go/run.sh "$url"
run_part "python client" interop/python/run.sh "$url"
run_part "browser (gRPC-web)" npm run test:browser --silent

printf '\n== results\n'
printf '%s\n' "${results[@]}"
exit $failed
