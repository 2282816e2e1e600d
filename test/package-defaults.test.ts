// What serveAgent does when its options leave things out, in a Node process
// of its own importing the built package by its public name: the agent is
// named after its data dir (or its task types), never "Synapse reference
// agent", and what a handler writes to task.logger reaches stderr as JSON
// lines at info, unless the caller passes a logger of its own.
import { spawn } from "node:child_process";
import { mkdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { tempDir } from "./helpers/server.js";

const root = fileURLToPath(new URL("..", import.meta.url));

/** Runs a module in a child Node process in the package's scope; resolves with its output and exit code. */
function node(source: string, env: NodeJS.ProcessEnv = {}): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ["--input-type=module", "-e", source], { cwd: root, env: { ...process.env, SYNAPSE_LOG_LEVEL: "", ...env } });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
    child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
    child.on("error", reject);
    child.on("close", (code) => resolve({ code, stdout, stderr }));
  });
}

/** An agent with one logging handler, served with the options given, asked once; prints its declared name. */
const script = (options: string) => `
  import { createIdentity, stateName } from "synapse-connect";
  import { serveAgent, createLogger } from "synapse-connect/server";
  import { SynapseClient } from "synapse-connect/client";
  const server = await serveAgent({
    handlers: { shout: async (task) => { task.logger.info({ text: task.payload.text }, "shouting"); return { output: { text: String(task.payload.text).toUpperCase() } }; } },
    port: 0,
    ${options}
  });
  const client = await SynapseClient.connect({ baseUrl: server.url, identity: createIdentity() });
  const { task } = await client.submit("shout", { text: "hi" }, { waitMs: 10_000 });
  console.log(JSON.stringify({ name: client.capabilities.agentName, state: stateName(task.state) }));
  await server.close();
`;

const jsonLines = (text: string) =>
  text
    .split("\n")
    .filter((line) => line.startsWith("{"))
    .map((line) => JSON.parse(line) as Record<string, unknown>);

describe("serveAgent's defaults", () => {
  it("names the agent after its data dir and logs task.logger to stderr at info", async () => {
    const dir = join(await tempDir("synapse-defaults-"), ".my-agent");
    const run = await node(script(`dataDir: ${JSON.stringify(dir)},`));
    expect(run.code, run.stderr).toBe(0);
    expect(JSON.parse(run.stdout)).toEqual({ name: "my-agent", state: "completed" });
    const lines = jsonLines(run.stderr);
    expect(lines).toContainEqual(expect.objectContaining({ level: 30, msg: "shouting", text: "hi" }));
    // The server's own lines (one per call) go there too; stdout holds only the script's output.
    expect(lines.length).toBeGreaterThan(1);
    expect(run.stdout.trim().split("\n")).toHaveLength(1);
  });

  it("replaces the name identities were once given by default, keeps one the user chose, and takes agentName over both", async () => {
    const base = await tempDir("synapse-defaults-");
    const earlier = join(base, "billing");
    await mkdir(earlier);
    // An identity.json from before: the old default name, kept with the key it belongs to (made on first start).
    expect((await node(script(`dataDir: ${JSON.stringify(earlier)}, logger: createLogger({ level: "silent" }),`))).code).toBe(0);
    const identityFile = join(earlier, "identity.json");
    const stored = JSON.parse(await import("node:fs/promises").then((fs) => fs.readFile(identityFile, "utf8"))) as Record<string, string>;
    expect(stored.agent_name).toBe("billing");
    await writeFile(identityFile, JSON.stringify({ ...stored, agent_name: "Synapse reference agent" }));
    const renamed = await node(script(`dataDir: ${JSON.stringify(earlier)}, logger: createLogger({ level: "silent" }),`));
    expect(JSON.parse(renamed.stdout).name).toBe("billing");
    // A silent logger: nothing on stderr.
    expect(renamed.stderr).toBe("");

    await writeFile(identityFile, JSON.stringify({ ...stored, agent_name: "Billing desk" }));
    expect(JSON.parse((await node(script(`dataDir: ${JSON.stringify(earlier)}, logger: createLogger({ level: "silent" }),`))).stdout).name).toBe("Billing desk");
    const chosen = await node(script(`dataDir: ${JSON.stringify(earlier)}, agentName: "Invoices", logger: createLogger({ level: "silent" }),`));
    expect(JSON.parse(chosen.stdout).name).toBe("Invoices");
  });

  it("names an agent without a data dir of its own after its task types", async () => {
    const run = await node(script(`store: "memory", logger: createLogger({ level: "warn" }),`));
    expect(run.code, run.stderr).toBe(0);
    expect(JSON.parse(run.stdout).name).toBe("shout agent");
    // At warn, the handler's info line is not written.
    expect(run.stderr).not.toContain("shouting");
  });
});
