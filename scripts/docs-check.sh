#!/usr/bin/env bash
# Regenerates the API reference (TypeDoc, from the TSDoc of the package's
# entry points) into a temporary directory and fails if docs/api differs:
# run `npm run docs` and commit docs/api after changing a public name or its
# comment. TypeDoc itself fails on a public name without documentation or a
# broken {@link}. Then runs the shell blocks of README.md and docs/ marked
# runnable against a server of its own (scripts/doc-blocks.mjs).
set -euo pipefail
cd "$(dirname "$0")/.."
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
npx typedoc --out "$out" --logLevel Warn
if ! diff -r "$out" docs/api; then
  echo "docs/api is stale: run 'npm run docs' and commit docs/api" >&2
  exit 1
fi
echo "docs/api is up to date"
node scripts/doc-blocks.mjs
