#!/usr/bin/env bash
# Runs the Python interop client against a Synapse server:
#   interop/python/run.sh http://127.0.0.1:<port>
# Creates interop/python/.venv on first use, installs the pinned requirements
# (skipped when the stamp says they are already installed) and the Python kit
# (kits/python, every run), generates the Python protobuf modules from proto/
# into interop/python/gen, and runs synapse_interop.py with the URL,
# test/vectors and the TypeScript command line (dist/src/cli/main.js; its
# client also drives ts_confidential_submit.mjs). The
# program's exit status is passed through.
set -euo pipefail

if [ "$#" -ne 1 ]; then
  echo "usage: $0 URL   (for example http://127.0.0.1:8080)" >&2
  exit 2
fi
url="$1"

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
venv="$here/.venv"
python="$venv/bin/python"
stamp="$venv/.requirements.sha256"

if [ ! -x "$python" ]; then
  python3 -m venv "$venv"
fi

# The stamp is the hash of requirements.txt and of the interpreter's version:
# when it matches, everything pinned is already installed and pip is skipped.
want="$("$python" -c 'import hashlib, sys; print(hashlib.sha256(open(sys.argv[1], "rb").read() + sys.version.encode()).hexdigest())' "$here/requirements.txt")"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  "$python" -m pip install --quiet --disable-pip-version-check --no-input -r "$here/requirements.txt"
  echo "$want" > "$stamp"
fi

# The kit, from this checkout, against the pinned dependencies above.
"$python" -m pip install --quiet --disable-pip-version-check --no-input --no-deps --no-build-isolation --force-reinstall "$root/kits/python"

# Regenerate every run (it takes well under a second), so gen/ always matches proto/.
cd "$root"
gen_tmp="$(mktemp -d "$here/.gen.XXXXXX")"
chmod 755 "$gen_tmp"
trap 'rm -rf "$gen_tmp"' EXIT
"$python" -m grpc_tools.protoc -I proto \
  --python_out="$gen_tmp" --pyi_out="$gen_tmp" \
  proto/synapse/v1/*.proto
rm -rf "$here/gen"
mv "$gen_tmp" "$here/gen"
trap - EXIT

set +e
"$python" "$here/synapse_interop.py" --gen "$here/gen" --cli "$root/dist/src/cli/main.js" "$url" "$root/test/vectors"
status=$?
set -e
exit "$status"
