#!/usr/bin/env bash
# npm run test:examples: uses the package as a user would. Packs it
# (`npm pack`), copies the examples out of the repository, installs the
# tarball into them (`npm install <tarball>`), builds them with tsc against
# the package's published types, then runs the echo agent on 127.0.0.1 on a
# free port and both requesters against it, checking what they print. Also
# checks that the installed package refuses a deep import.
#
# The copies are the workspaces of one temporary project, so the install
# resolves the tarball's dependencies once (better-sqlite3 is compiled once,
# not three times); each example still declares the package itself.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
examples=(echo-agent requester human-in-the-loop)

work=$(mktemp -d)
agent=""
cleanup() {
  if [[ -n $agent ]]; then kill -TERM "$agent" 2>/dev/null || true; wait "$agent" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
step() { printf '\n== examples: %s\n' "$*"; }
fail() { printf 'FAIL: %s\n' "$*" >&2; exit 1; }

step "npm pack"
(cd "$root" && npm pack --silent --pack-destination "$work" >/dev/null)
tarball=$(ls "$work"/*.tgz)
echo "$tarball"

step "copies of ${examples[*]}, installing the tarball (npm install --prefer-offline)"
for example in "${examples[@]}"; do
  mkdir "$work/$example"
  cp -R "$here/$example/package.json" "$here/$example/tsconfig.json" "$here/$example/src" "$work/$example/"
done
cat >"$work/package.json" <<JSON
{ "name": "synapse-examples", "private": true, "workspaces": ["echo-agent", "requester", "human-in-the-loop"] }
JSON
workspaces=()
for example in "${examples[@]}"; do workspaces+=(--workspace "$example"); done
(cd "$work" && npm install --prefer-offline --no-audit --no-fund --loglevel=error "$tarball" "${workspaces[@]}")
for example in "${examples[@]}"; do
  grep -q '"synapse-connect": "file:' "$work/$example/package.json" || fail "$example does not depend on the tarball"
done

step "the installed package refuses deep imports"
code=$(cd "$work/requester" && node --input-type=module -e '
  try { await import("synapse-connect/dist/src/agent/engine.js"); console.log("imported"); } catch (error) { console.log(error.code); }')
[[ $code == ERR_PACKAGE_PATH_NOT_EXPORTED ]] || fail "synapse-connect/dist/src/agent/engine.js: $code"
echo "synapse-connect/dist/src/agent/engine.js: $code"

step "build (tsc, against the package's .d.ts)"
(cd "$work" && npm run build --workspaces --silent)

step "the echo agent on 127.0.0.1, a free port"
(cd "$work/echo-agent" && PORT=0 exec node dist/agent.js >"$work/agent.out" 2>"$work/agent.err") &
agent=$!
url=""
for _ in $(seq 300); do # a bound on a hung start, not a timing check
  url=$(grep -o 'http://127\.0\.0\.1:[0-9]*' "$work/agent.out" 2>/dev/null | head -n 1 || true)
  [[ -n $url ]] && break
  kill -0 "$agent" 2>/dev/null || break
  sleep 0.1
done
[[ -n $url ]] || { cat "$work/agent.out" "$work/agent.err" >&2; fail "the echo agent did not start"; }
cat "$work/agent.out"

expect() { # expect NAME FILE EXPECTED: FILE's content is EXPECTED
  if [[ "$(cat "$2")" != "$3" ]]; then
    printf -- '--- expected\n%s\n--- got\n' "$3" >&2
    cat "$2" >&2
    fail "$1"
  fi
  cat "$2"
}

step "requester: submits and watches"
(cd "$work/requester" && AGENT_URL=$url timeout 60 node dist/requester.js "hello, agent") >"$work/requester.out" || { cat "$work/requester.out" >&2; fail "requester failed"; }
# Events are numbered 1, 2, 3... A progress report that the completion follows
# at once says nothing new and is not recorded, so status updates may or may
# not appear; the task id is random. Every other line is fixed.
awk '/ p2p:/ { if ($1 != ++n) { print "event " n " numbered " $1; exit 1 } }' "$work/requester.out" >&2 || fail "requester: events out of order"
sed -E -e 's/^submitted [^ ]+ to [^ ]+$/submitted/' -e '/ p2p:task_status_update -> in_progress$/d' -e 's/^[0-9]+ p2p:/p2p:/' "$work/requester.out" >"$work/requester.seen"
cat "$work/requester.out"
expect requester "$work/requester.seen" 'submitted
p2p:task_confirm -> confirmed
p2p:task_complete -> completed
completed {"text":"hello, agent"}' >/dev/null

step "human-in-the-loop: answers the agent's questions from standard input"
printf 'hello from a person\ny\n' | (cd "$work/human-in-the-loop" && AGENT_URL=$url USER=ada timeout 60 node dist/answer.js) >"$work/human.out" || { cat "$work/human.out" >&2; fail "human-in-the-loop failed"; }
expect human-in-the-loop "$work/human.out" 'The agent needs text (what to echo):
The agent asks: May I echo "hello from a person"? [y/n]
completed {"text":"hello from a person","approvedBy":"ada"}'

step "a rejected decision fails the task"
printf 'no thanks\nn\n' | (cd "$work/human-in-the-loop" && AGENT_URL=$url timeout 60 node dist/answer.js) >"$work/rejected.out" && fail "a rejected task exited with 0"
tail -n 1 "$work/rejected.out" | grep -q '^failed ' || { cat "$work/rejected.out" >&2; fail "a rejected task did not fail"; }
tail -n 1 "$work/rejected.out"

step "the agent stops on SIGTERM"
kill -TERM "$agent"
status=0
wait "$agent" || status=$?
agent=""
[[ $status -eq 0 ]] || { cat "$work/agent.err" >&2; fail "the echo agent exited with $status"; }
# serveAgent logs JSON lines to stderr at info by default: nothing else is there, and no error
# (the rejected decision above is a warning: its handler's question ends in a failure).
node -e '
  const lines = require("fs").readFileSync(process.argv[1], "utf8").split("\n").filter(Boolean);
  const bad = lines.filter((line) => { try { return !(JSON.parse(line).level < 50); } catch { return true; } });
  if (bad.length > 0 || !lines.some((line) => line.includes("\"msg\":\"listening\""))) { console.error(lines.join("\n")); process.exit(1); }
  console.log(`the echo agent logged ${lines.length} lines to stderr, none an error`);
' "$work/agent.err" || fail "the echo agent's stderr holds more than its info lines"

printf '\nexamples: all passed\n'
