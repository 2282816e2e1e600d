// `synapse serve` checks every flag before it creates an identity or opens a
// store: next to a running server (on its data dir, given or default) a bad
// flag exits 2 and changes nothing, and in a fresh directory it leaves
// nothing behind. A second server on a data dir in use exits 4, and leaves
// the running one's identity as it was.
import { mkdir, readdir, readFile } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runCli, startServe, type ServeProcess } from "./helpers/cli.js";
import { tempDir } from "./helpers/server.js";

/** Bad values the other tests use, and one of every other kind of flag problem. */
const BAD_FLAGS: Array<{ args: string[]; says: string }> = [
  { args: ["--port", "eighty"], says: "--port must be a non-negative integer" },
  { args: ["--port", "0", "--idle-timeout", "soon"], says: "--idle-timeout must be a non-negative integer" },
  { args: ["--port", "0", "--heap-growth", "ten"], says: "--heap-growth must be a non-negative integer" },
  { args: ["--port", "0", "--max-connections=-1"], says: "--max-connections must be a non-negative integer" },
  { args: ["--port", "0", "--retention", "forever"], says: "--retention must be a duration" },
  { args: ["--port", "0", "--escalate-after", "soon"], says: "--escalate-after must be a duration" },
  { args: ["--port", "0", "--escalation-contact", "2=agent_x"], says: "--escalation-contact needs --escalate-after" },
  { args: ["--port", "0", "--fsync", "sometimes"], says: "--fsync must be full or normal" },
  { args: ["--port", "0", "--store", "mysql://db"], says: "is not a store" },
  { args: ["--port", "0", "--log-level", "loud"], says: "--log-level must be trace, debug, info, warn, error, fatal or silent" },
  { args: ["--port", "0", "--tls-cert", "/nonexistent/cert.pem", "--tls-key", "/nonexistent/key.pem"], says: "--tls-cert: ENOENT" },
  { args: ["--port", "0", "--trust-store", "/nonexistent/trust.json"], says: "--trust-store: ENOENT" },
  { args: ["--port", "0", "--prot", "0"], says: "Unknown option '--prot'" },
  { args: ["--port", "0", "--join", "registry.example:8080"], says: "--join must be an http:// or https:// URL" },
  { args: ["--port", "0", "--trust-registry", "notaurl"], says: "--trust-registry must be an http:// or https:// URL" },
];

/** Runs `check` for every bad flag, a few processes at a time. */
async function forEachBadFlag(check: (bad: (typeof BAD_FLAGS)[number]) => Promise<void>): Promise<void> {
  for (let i = 0; i < BAD_FLAGS.length; i += 4) await Promise.all(BAD_FLAGS.slice(i, i + 4).map(check));
}

/** What a data dir holds: its file names and the identity files' bytes. */
async function contents(dir: string): Promise<{ names: string[]; identity: string; key: string }> {
  return {
    names: (await readdir(dir)).sort(),
    identity: await readFile(join(dir, "identity.json"), "utf8"),
    key: await readFile(join(dir, "agent.key"), "utf8"),
  };
}

let cwd: string;
let defaultDir: string;
let running: ServeProcess;
beforeAll(async () => {
  // The running server uses its default data dir, ./.synapse of its working directory.
  cwd = await tempDir("synapse-cwd-");
  defaultDir = join(cwd, ".synapse");
  running = await startServe([], {}, undefined, { cwd });
});
afterAll(async () => {
  expect(await running.stop()).toBe(0);
});

describe("synapse serve with bad flags", () => {
  it("exits 2 and changes nothing on the data dir of a running server, given or default", async () => {
    const before = await contents(defaultDir);
    await forEachBadFlag(async ({ args, says }) => {
      for (const where of [["--data-dir", defaultDir], []]) {
        const result = await runCli(["serve", ...args, ...where], { cwd });
        expect(result.code, `${args.join(" ")} ${where.join(" ")}: ${result.stderr}`).toBe(2);
        expect(result.stderr).toContain(says);
      }
    });
    expect(await contents(defaultDir)).toEqual(before);
    // The running server still serves.
    const capabilities = await runCli(["capabilities", running.url]);
    expect(capabilities.code).toBe(0);
  }, 60_000);

  it("exits 2 and creates nothing in a directory that has no data dir yet", async () => {
    const fresh = await tempDir("synapse-cwd-");
    const given = join(fresh, "given");
    await forEachBadFlag(async ({ args, says }) => {
      const atDefault = await runCli(["serve", ...args], { cwd: fresh });
      expect(atDefault.code, `${args.join(" ")}: ${atDefault.stderr}`).toBe(2);
      expect(atDefault.stderr).toContain(says);
      const atGiven = await runCli(["serve", ...args, "--data-dir", given], { cwd: fresh });
      expect(atGiven.code).toBe(2);
    });
    expect(await readdir(fresh)).toEqual([]);
  }, 60_000);
});

describe("synapse serve on a data dir in use", () => {
  it("exits 4, says what to do, and leaves the running server's identity as it was", async () => {
    const before = await contents(defaultDir);
    for (const where of [["--data-dir", defaultDir], []]) {
      // An identity flag too: the running server's identity.json must not be rewritten.
      const second = await runCli(["serve", "--port", "0", "--agent-name", "Someone else", ...where], { cwd });
      expect(second.code, second.stderr).toBe(4);
      expect(second.stderr).toContain(`${join(defaultDir, "synapse.db")} is in use by another process`);
      expect(second.stderr).toContain("--data-dir");
    }
    expect(await contents(defaultDir)).toEqual(before);
  });

  it("starts once the data dir is free again", async () => {
    const dir = join(await tempDir(), "nested");
    await mkdir(dir);
    const first = await startServe(["--data-dir", dir]);
    expect((await runCli(["serve", "--port", "0", "--data-dir", dir])).code).toBe(4);
    expect(await first.stop()).toBe(0);
    const again = await startServe(["--data-dir", dir]);
    expect(again.agentId).toBe(first.agentId);
    expect(await again.stop()).toBe(0);
  });
});
