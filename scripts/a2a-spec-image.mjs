// Compiles the A2A specification's own a2a.proto into a buf image without
// source info (names, numbers, types and options only: no comments), for
// test/a2a-contract.test.ts to compare proto/lf/a2a/v1/a2a.proto against.
// The published file imports google.api annotations that this build cannot
// fetch; they do not change the wire, so they are cut out first.
//
//   node scripts/a2a-spec-image.mjs <specification/a2a.proto> [out.binpb]
import { execFileSync } from "node:child_process";
import { mkdtemp, mkdir, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const root = fileURLToPath(new URL("..", import.meta.url));
const [source, target = join(root, "contract", "a2a-v1.0.1.binpb")] = process.argv.slice(2);
if (!source) {
  process.stderr.write("usage: node scripts/a2a-spec-image.mjs <specification/a2a.proto> [out.binpb]\n");
  process.exit(2);
}

/** Removes the google.api imports, field_behavior field options and option (google.api.*) statements. */
function withoutGoogleApi(text) {
  let out = text.replace(/^import "google\/api\/[^"]+";\n/gm, "");
  out = out.replace(/\s*\[\(google\.api\.field_behavior\) = [A-Z_]+\]/g, "");
  const option = /[ \t]*option \(google\.api\.[a-z_]+\) = /g;
  let kept = "";
  let at = 0;
  for (let match = option.exec(out); match; match = option.exec(out)) {
    kept += out.slice(at, match.index);
    let end = match.index + match[0].length;
    if (out[end] === "{") {
      for (let depth = 0; ; end++) {
        if (out[end] === "{") depth++;
        else if (out[end] === "}" && --depth === 0) break;
      }
    }
    end = out.indexOf(";", end) + 1;
    if (out[end] === "\n") end++;
    at = end;
    option.lastIndex = end;
  }
  kept += out.slice(at);
  if (kept.includes("google.api")) throw new Error("a google.api reference is left after stripping");
  return kept;
}

const dir = await mkdtemp(join(tmpdir(), "a2a-spec-"));
try {
  await mkdir(join(dir, "proto"));
  await writeFile(join(dir, "proto", "a2a.proto"), withoutGoogleApi(await readFile(resolve(source), "utf8")));
  await writeFile(join(dir, "buf.yaml"), "version: v2\nmodules:\n  - path: proto\n");
  const buf = join(root, "node_modules", ".bin", "buf");
  execFileSync(buf, ["build", "--exclude-source-info", "-o", resolve(target)], { cwd: dir, stdio: "inherit" });
} finally {
  await rm(dir, { recursive: true, force: true });
}
