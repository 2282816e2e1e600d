#!/usr/bin/env bash
# npm run test:kits: installs each kit as a new user would and runs its tests
# and the README quick starts against the TypeScript server:
#   - Go: the committed stubs (kits/go/synapsev1) match proto/; then, with a
#     fresh GOPATH and module cache, gofmt, go vet and go test in kits/go, and
#     the quick start built as a module of its own outside the repository
#     (requiring the kit through a replace directive);
#   - Python: a fresh virtualenv, `pip install ./kits/python[test]`, stubs
#     generated from proto/ with grpc_tools, pytest, and the quick start.
# Modules and wheels come from the Go module proxy and PyPI. The local Go
# download cache is read first, so the modules the interop suite fetched are
# not fetched again (go.sum still verifies every one); the wheels are the
# interop suite's pins (pip's own cache serves them again when it has one).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
cd "$root"

work=$(mktemp -d)
server=""
cleanup() {
  [[ -n $server ]] && kill -TERM "$server" 2>/dev/null && wait "$server" 2>/dev/null
  chmod -R u+w "$work" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
step() { printf '\n== kits: %s\n' "$*"; }

step "Go stubs are fresh (kits/go/generate.sh --check)"
kits/go/generate.sh --check

step "Go kit from a clean module cache: gofmt, go vet, go test"
download_cache="$(go env GOMODCACHE)/cache/download"
export GOPATH="$work/gopath" GOMODCACHE="$work/gopath/pkg/mod" GOFLAGS="${GOFLAGS:-} -modcacherw"
export GOPROXY="file://$download_cache,${GOPROXY:-$(go env GOPROXY)}"
(
  cd kits/go
  unformatted=$(gofmt -l .)
  if [[ -n $unformatted ]]; then
    echo "not gofmt-clean: $unformatted" >&2
    exit 1
  fi
  go vet ./...
  go test -count=1 ./...
)

step "Python kit in a fresh virtualenv: pip install, pytest"
python3 -m venv "$work/venv"
py="$work/venv/bin/python"
# The interop suite's pins as constraints (without extras), so that the same wheels serve both.
sed 's/\[[^]]*\]//' interop/python/requirements.txt >"$work/constraints.txt"
"$py" -m pip install --quiet --disable-pip-version-check --no-input -c "$work/constraints.txt" "./kits/python[test]"
(cd kits/python && "$py" -m pytest -q -p no:cacheprovider)
rm -rf kits/python/tests/.gen

step "README quick starts against the TypeScript server"
npm run build --silent
data="$work/server"
mkdir -p "$data"
node dist/src/cli/main.js serve --port 0 --data-dir "$data" >"$data/stdout" 2>"$data/log" &
server=$!
url=""
for _ in $(seq 100); do
  url=$(grep -o 'http://[^ ]*' "$data/stdout" 2>/dev/null | head -n 1) && [[ -n $url ]] && break
  sleep 0.1
done
[[ -n $url ]] || { cat "$data/log" >&2; exit 1; }

# Go: a module of its own, outside this repository.
app="$work/go-quickstart"
mkdir -p "$app"
cp kits/go/example/quickstart/main.go "$app/"
(
  cd "$app"
  go mod init example.com/quickstart >/dev/null 2>&1
  go mod edit -require=github.com/synapse-connect/synapse-go@v0.0.0 -replace="github.com/synapse-connect/synapse-go=$root/kits/go"
  go mod tidy >/dev/null 2>&1
  go run . "$url" | tee "$work/go.out"
)
grep -q "MESSAGE_TYPE_TASK_COMPLETE" "$work/go.out" || { echo "the Go quick start did not see the task complete" >&2; exit 1; }

# Python: the stubs generated as the README says, outside this repository.
gen="$work/py-quickstart/gen"
mkdir -p "$gen"
"$py" -m grpc_tools.protoc -I proto --python_out="$gen" --pyi_out="$gen" proto/synapse/v1/*.proto
(cd "$work/py-quickstart" && PYTHONPATH=gen "$py" "$root/kits/python/example/quickstart.py" "$url" | tee "$work/py.out")
grep -q "MESSAGE_TYPE_TASK_COMPLETE" "$work/py.out" || { echo "the Python quick start did not see the task complete" >&2; exit 1; }

printf '\n== kits: all checks passed\n'
