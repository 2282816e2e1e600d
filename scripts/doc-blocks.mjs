// Runs the shell blocks of README.md and docs/*.md that are marked
// `<!-- runnable -->` on the line before their opening fence, as a user would
// type them, against a `synapse serve` of the check's own (a free port, a
// temporary data dir and home), so that it runs next to a user's `npm start`.
//
// A file's blocks run in order in one shell, as in one terminal, so a
// variable set in one block is there in the next. Each command must exit 0,
// or the status its line ends with (`# exits 3`).
// The block's text is changed in three ways only: the documented address
// (http://127.0.0.1:8080) becomes the check's server, `npx synapse` runs the
// built CLI directly (the same program, without npx's lookup), and
// `npx buf` the local buf binary.
import { spawn, spawnSync } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { fileURLToPath } from "node:url";

const root = fileURLToPath(new URL("..", import.meta.url));
const cli = join(root, "dist/src/cli/main.js");
const DOCUMENTED = "127.0.0.1:8080";

/** The runnable blocks of one Markdown file, each with the line its fence opens on. */
function runnableBlocks(file) {
  const lines = readFileSync(file, "utf8").split("\n");
  const blocks = [];
  for (let i = 0; i < lines.length; i++) {
    if (lines[i].trim() !== "<!-- runnable -->") continue;
    const fence = lines[i + 1] ?? "";
    if (!/^```(sh|bash)\s*$/.test(fence)) throw new Error(`${relative(root, file)}:${i + 1}: <!-- runnable --> must stand right before a \`\`\`sh block`);
    const body = [];
    let j = i + 2;
    for (; j < lines.length && !lines[j].startsWith("```"); j++) body.push(lines[j]);
    blocks.push({ file: relative(root, file), line: i + 2, commands: commands(body, i + 3) });
    i = j;
  }
  return blocks;
}

/** Joins continued lines; each command keeps the line it starts on and the exit status it expects. */
function commands(body, firstLine) {
  const found = [];
  let text = "";
  let start = 0;
  body.forEach((line, index) => {
    if (text === "") {
      if (line.trim() === "" || line.trim().startsWith("#")) return;
      start = firstLine + index;
    }
    if (line.endsWith("\\")) {
      text += `${line.slice(0, -1)} `;
      return;
    }
    text += line;
    const expected = /#\s*exits\s+(\d+)\b[^'"]*$/.exec(text);
    found.push({ line: start, text, expect: expected ? Number(expected[1]) : 0 });
    text = "";
  });
  return found;
}

function markdownFiles() {
  const docs = join(root, "docs");
  return [join(root, "README.md"), ...readdirSync(docs).filter((name) => name.endsWith(".md")).map((name) => join(docs, name))];
}

/** The script a file's blocks become: every command checked for its exit status, in one shell so variables carry. */
function script(blocks, url) {
  const host = new URL(url).host;
  const out = ["set -uo pipefail"];
  for (const block of blocks) {
    for (const command of block.commands) {
      const text = command.text
        .replaceAll(`http://${DOCUMENTED}`, url)
        .replaceAll(DOCUMENTED, host)
        .replace(/\bnpx synapse\b/g, `node ${JSON.stringify(cli)}`)
        .replace(/\bnpx buf\b/g, JSON.stringify(join(root, "node_modules/.bin/buf")));
      out.push(
        `{ ${text}\n} </dev/null >>"$DOC_BLOCKS_OUT" 2>&1`,
        `status=$?; if [ "$status" -ne ${command.expect} ]; then echo "${block.file}:${command.line}: exit status $status, expected ${command.expect}: ${JSON.stringify(command.text).slice(1, -1).replaceAll("`", "'").replaceAll("$", "\\$")}" >&2; exit 1; fi`,
      );
    }
  }
  return out.join("\n");
}

function startServer(dataDir, home) {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [cli, "serve", "--port", "0", "--data-dir", dataDir], { env: { ...process.env, SYNAPSE_HOME: home }, stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stderr.on("data", (chunk) => (stderr += chunk));
    child.stdout.on("data", (chunk) => {
      stdout += chunk;
      const match = /listening on (\S+)/.exec(stdout);
      if (match) resolve({ child, url: match[1] });
    });
    child.once("exit", (code) => reject(new Error(`synapse serve exited with ${code}: ${stderr}`)));
  });
}

const byFile = markdownFiles()
  .map((file) => runnableBlocks(file))
  .filter((blocks) => blocks.length > 0);
const work = mkdtempSync(join(tmpdir(), "synapse-doc-blocks-"));
const home = join(work, "home");
const server = await startServer(join(work, "data"), home);
let passed = 0;
let failed = 0;
try {
  for (const blocks of byFile) {
    const output = join(work, "output");
    const result = spawnSync("bash", ["-c", script(blocks, server.url)], {
      cwd: root,
      env: { ...process.env, SYNAPSE_HOME: home, HOME: work, DOC_BLOCKS_OUT: output },
      encoding: "utf8",
      timeout: 300_000,
    });
    const count = blocks.reduce((sum, block) => sum + block.commands.length, 0);
    if (result.status === 0) {
      passed++;
      console.log(`ok    ${blocks[0].file}: ${blocks.length} blocks, ${count} commands`);
      continue;
    }
    failed++;
    let tail = "";
    try {
      tail = readFileSync(output, "utf8").trim().split("\n").slice(-12).join("\n");
    } catch {
      // Nothing was printed.
    }
    console.error(`FAIL  ${result.stderr.trim() || `${blocks[0].file}: ${result.error?.message ?? `exit ${result.status}`}`}\n  its last output:\n${tail}`);
  }
} finally {
  server.child.kill("SIGTERM");
  await new Promise((resolve) => server.child.once("exit", resolve));
  rmSync(work, { recursive: true, force: true });
}
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed === 0 && passed > 0 ? 0 : 1);
