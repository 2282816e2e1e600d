// What the command line tells a user, through the real `synapse` command
// against `synapse serve` in its own process: hints that name the agent's
// URL and every answer, the deciders after an escalation, a progress bar
// that ends at 100% (on a real terminal), counts in words, aligned task
// columns, and an https agent with a self-signed certificate.
import { spawn } from "node:child_process";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CLI, runCli, startServe, type ServeProcess } from "./helpers/cli.js";
import { tempDir } from "./helpers/server.js";

const json = <T>(text: string) => JSON.parse(text) as T;
const run = (code: string, args: string[]) =>
  new Promise<{ code: number | null; stderr: string }>((resolve, reject) => {
    const child = spawn(code, args);
    let stderr = "";
    child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
    child.on("error", reject);
    child.on("close", (exit) => resolve({ code: exit, stderr }));
  });

describe("hints, counts and columns", () => {
  let served: ServeProcess;
  let env: NodeJS.ProcessEnv;
  let managerHome: string;
  let managerId: string;
  const cli = (...args: string[]) => runCli(args, { env });

  beforeAll(async () => {
    managerHome = await tempDir("synapse-manager-");
    const keygen = await runCli(["keygen", "--home", managerHome, "--json"]);
    managerId = json<{ agentId: string }>(keygen.stdout).agentId;
    // Level 1 (the requester) waits 6 s; then the manager decides, at level 2 or (6 s later) 3: time enough on a busy machine.
    served = await startServe(["--data-dir", await tempDir(), "--escalate-after", "6s", "--escalation-contact", `2=${managerId}`, "--escalation-contact", `3=${managerId}`]);
    env = { SYNAPSE_HOME: await tempDir("synapse-cli-home-") };
  });
  afterAll(async () => {
    expect(await served.stop()).toBe(0);
  });

  it("a decision's hint names the agent's URL and --modify; after an escalation status names the deciders, not you", async () => {
    const asked = await cli("submit", served.url, "--task-id", "hint-decide", "--type", "text_analysis", "--payload", '{"text":"a b. a.","require_approval":true}', "--wait");
    expect(asked.code).toBe(3);
    expect(asked.stdout).toContain("needs a human decision (escalation level 1)");
    expect(asked.stdout).toContain(`decide with: synapse decide ${served.url} hint-decide --approve | --modify --set KEY=VALUE | --reject`);
    expect(asked.stdout).not.toMatch(/\bURL\b/);

    // The deadline passes: level 2 is the manager's.
    let status = await cli("status", served.url, "hint-decide");
    for (let tries = 0; !status.stdout.includes("escalation level 2") && tries < 60; tries++) {
      await new Promise((resolve) => setTimeout(resolve, 250));
      status = await cli("status", served.url, "hint-decide");
    }
    expect(status.code).toBe(3);
    expect(status.stdout).toContain("needs a human decision (escalation level 2)");
    expect(status.stdout).toContain(`decided at this level by: ${managerId} (not you)`);
    expect(status.stdout).not.toMatch(/^decide with:/m);
    expect(status.stdout).toContain(`they decide with: synapse decide ${served.url} hint-decide --approve | --modify --set KEY=VALUE | --reject [--note TEXT] --home THEIR_SYNAPSE_HOME`);
    // The manager is told it is its decision, and its decision goes through.
    const theirs = await runCli(["status", served.url, "hint-decide", "--home", managerHome]);
    expect(theirs.stdout).toMatch(new RegExp(`^decide with: synapse decide ${served.url} hint-decide --approve \\| --modify`, "m"));
    const decided = await runCli(["decide", served.url, "hint-decide", "--approve", "--wait", "--home", managerHome]);
    expect(decided.code, decided.stdout + decided.stderr).toBe(0);
  }, 60_000);

  it("a need-info hint names the agent's URL", async () => {
    const asked = await cli("submit", served.url, "--task-id", "hint-info", "--type", "summarization", "--payload", '{"text":"One. Two. Three."}', "--wait");
    expect(asked.code).toBe(3);
    expect(asked.stdout).toContain(`answer with: synapse provide-info ${served.url} hint-info --set max_sentences=VALUE`);
  });

  it("counts one sentence as one sentence", async () => {
    const done = await cli("submit", served.url, "--task-id", "one-sentence", "--type", "text_analysis", "--payload", '{"text":"Hello."}', "--wait");
    expect(done.code).toBe(0);
    const watched = await cli("watch", served.url, "one-sentence");
    expect(watched.stdout).toContain("1 word, 1 sentence");
    expect(watched.stdout).not.toMatch(/\b1 (words|sentences)\b/);
  });

  it("lines up the task list's columns whatever the ids' lengths", async () => {
    for (const id of ["t", "a-much-longer-task-id-than-the-first"]) {
      expect((await cli("submit", served.url, "--task-id", id, "--type", "text_analysis", "--payload", '{"text":"x"}', "--wait")).code).toBe(0);
    }
    const listed = await cli("tasks", served.url, "--state", "completed");
    expect(listed.code).toBe(0);
    const lines = listed.stdout.trimEnd().split("\n").filter((line) => /^(t|a-much-longer)/.test(line));
    expect(lines).toHaveLength(2);
    // Every column starts at the same place on each line.
    const starts = (line: string) => [...line.matchAll(/(?<=^|\s{2})\S/g)].map((match) => match.index);
    expect(starts(lines[0]!)).toEqual(starts(lines[1]!));
    expect(lines[0]!.indexOf("text_analysis")).toBe("a-much-longer-task-id-than-the-first".length + 2);
  });

  it("--watch's progress bar ends at 100% on a terminal", async () => {
    // script(1) gives the command a pseudo-terminal, so it draws the bar.
    const typescript = join(await tempDir("synapse-tty-"), "out");
    const command = [process.execPath, CLI, "submit", served.url, "--type", "data_analysis", "--payload", JSON.stringify({ csv: "a\n1\n2\n3", delay_ms_per_row: 50 }), "--watch"]
      .map((word) => `'${word.replace(/'/g, "'\\''")}'`)
      .join(" ");
    const result = await run("script", ["-q", "-e", "-c", `SYNAPSE_HOME='${env.SYNAPSE_HOME}' ${command}`, typescript]);
    expect(result.code).toBe(0);
    const screen = await readFile(typescript, "utf8");
    const bars = [...screen.matchAll(/\[([#.]{30})\]\s+(\d+)%/g)];
    expect(bars.length).toBeGreaterThan(1);
    const last = bars.at(-1)!;
    expect(last[2]).toBe("100");
    expect(last[1]).toBe("#".repeat(30));
  }, 30_000);
});

describe("https with a self-signed certificate", () => {
  let served: ServeProcess;
  let dir: string;
  let env: NodeJS.ProcessEnv;
  const cli = (...args: string[]) => runCli(args, { env });

  beforeAll(async () => {
    dir = await tempDir("synapse-tls-");
    const made = await run("openssl", [
      "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
      "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", join(dir, "key.pem"), "-out", join(dir, "cert.pem"),
    ]);
    expect(made.code, made.stderr).toBe(0);
    served = await startServe(["--data-dir", join(dir, "data"), "--tls-cert", join(dir, "cert.pem"), "--tls-key", join(dir, "key.pem")]);
    expect(served.url).toMatch(/^https:\/\//);
    env = { SYNAPSE_HOME: join(dir, "home") };
  });
  afterAll(async () => {
    expect(await served.stop()).toBe(0);
  });

  it("an untrusted certificate is unavailable with a hint, not internal", async () => {
    for (const args of [["status", served.url, "x"], ["capabilities", served.url], ["submit", served.url, "--type", "text_analysis", "--protocol", "grpc"]]) {
      const refused = await cli(...args);
      expect(refused.code, args.join(" ")).toBe(1);
      expect(refused.stderr).toContain("[unavailable]");
      expect(refused.stderr).not.toContain("[internal]");
      expect(refused.stderr).toContain("self-signed");
      expect(refused.stderr).toContain("--ca FILE");
      expect(refused.stderr).toContain("NODE_EXTRA_CA_CERTS");
    }
  });

  it("--ca FILE trusts it, for calls and uploads; NODE_EXTRA_CA_CERTS does too", async () => {
    const ca = ["--ca", join(dir, "cert.pem")];
    const done = await cli("submit", served.url, "--type", "text_analysis", "--payload", '{"text":"Over TLS."}', "--wait", ...ca);
    expect(done.code, done.stderr).toBe(0);
    expect(done.stdout).toContain("completed, 100%");
    expect((await cli("capabilities", served.url, ...ca)).code).toBe(0);
    const file = join(dir, "rows.csv");
    await import("node:fs/promises").then((fs) => fs.writeFile(file, "n\n1\n"));
    const uploaded = await cli("upload", served.url, file, "--name", "csv", ...ca);
    expect(uploaded.code, uploaded.stderr).toBe(0);
    expect(uploaded.stdout).toMatch(/^csv=[0-9a-f]{64}:4\n$/);
    const untrusted = await cli("upload", served.url, file);
    expect(untrusted.code).toBe(1);
    expect(untrusted.stderr).toContain("[unavailable]");
    const viaEnv = await runCli(["status", served.url, "no-such-task"], { env: { ...env, NODE_EXTRA_CA_CERTS: join(dir, "cert.pem") } });
    expect(viaEnv.stderr).toContain("task_not_found");
    const missing = await cli("status", served.url, "x", "--ca", join(dir, "nothing.pem"));
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain("--ca");
  }, 30_000);
});
