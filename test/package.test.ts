// The installable package: its exports map resolves every entry point by its
// public specifier (from the built package, as Node resolves a package's
// self-reference), refuses deep imports, packs only what a user needs, and
// the public API serves, submits, watches and answers questions end to end.
// (Installing the packed tarball into projects of their own is
// `npm run test:examples`.)
import { connectNodeAdapter } from "@connectrpc/connect-node";
import { execFile } from "node:child_process";
import http from "node:http";
import http2 from "node:http2";
import type { AddressInfo } from "node:net";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createIdentity, MessageType, stateName, TaskState } from "../src/api/index.js";
import { messageToJson, SynapseClient, taskOutput } from "../src/api/client.js";
import { createAgent, serveAgent, type ServedAgent, type TaskOutput, type TaskTypeHandler } from "../src/api/server.js";

const run = promisify(execFile);
const root = fileURLToPath(new URL("..", import.meta.url));

/** Runs an ES module in a child Node process with the repository as its working directory (the package's own scope). */
async function node(source: string): Promise<string> {
  const { stdout } = await run(process.execPath, ["--input-type=module", "-e", source], { cwd: root });
  return stdout;
}

describe("exports map", () => {
  it("resolves each entry point by its public specifier", async () => {
    const out = await node(`
      const names = {};
      for (const specifier of ["synapse-connect", "synapse-connect/server", "synapse-connect/client", "synapse-connect/proto", "synapse-connect/a2a-proto"]) {
        names[specifier] = Object.keys(await import(specifier)).sort();
      }
      console.log(JSON.stringify(names));
    `);
    const names = JSON.parse(out) as Record<string, string[]>;
    expect(names["synapse-connect"]).toEqual(expect.arrayContaining(["createIdentity", "sealEnvelope", "openEnvelope", "keyIdOf", "issueToken", "verifyToken", "PinnedKeys", "TaskState", "uuidV7"]));
    expect(names["synapse-connect/server"]).toEqual(expect.arrayContaining(["serveAgent", "createAgent", "openStore", "TaskFailure"]));
    expect(names["synapse-connect/client"]).toEqual(expect.arrayContaining(["SynapseClient", "taskOutput", "messageToJson", "A2AClient", "A2AClientError", "readAgentCard"]));
    expect(names["synapse-connect/a2a-proto"]).toEqual(expect.arrayContaining(["A2AService", "AgentCardSchema", "SendMessageRequestSchema", "TaskState"]));
    expect(names["synapse-connect/proto"]).toEqual(expect.arrayContaining(["P2PService", "CapabilitiesService", "RegistryService", "EnvelopeSchema", "TaskSchema"]));
    // Internal assembly stays internal.
    expect(names["synapse-connect/server"]).not.toContain("startServer");
  });

  it("refuses deep imports with ERR_PACKAGE_PATH_NOT_EXPORTED", async () => {
    const deep = [
      "synapse-connect/dist/src/agent/engine.js",
      "synapse-connect/dist/src/agent/agent.js",
      "synapse-connect/dist/src/api/server.js",
      "synapse-connect/dist/gen/synapse/v1/p2p_pb.js",
      "synapse-connect/src/api/index.ts",
      "synapse-connect/package.json",
      "synapse-connect/agent",
    ];
    const out = await node(`
      const codes = [];
      for (const specifier of ${JSON.stringify(deep)}) {
        try { await import(specifier); codes.push("imported"); } catch (error) { codes.push(error.code); }
      }
      console.log(JSON.stringify(codes));
    `);
    expect(JSON.parse(out)).toEqual(deep.map(() => "ERR_PACKAGE_PATH_NOT_EXPORTED"));
  });

  it("packs the built code, types, protos and docs, and nothing else", async () => {
    const { stdout } = await run("npm", ["pack", "--dry-run", "--json", "--ignore-scripts"], { cwd: root });
    const [pack] = JSON.parse(stdout) as Array<{ size: number; unpackedSize: number; files: Array<{ path: string }> }>;
    const files = pack!.files.map((file) => file.path);
    for (const name of ["server", "client", "proto", "a2a-proto", "index"]) {
      expect(files).toContain(`dist/src/api/${name}.js`);
      expect(files).toContain(`dist/src/api/${name}.d.ts`);
    }
    expect(files).toEqual(expect.arrayContaining(["package.json", "README.md", "LICENSE", "CHANGELOG.md", "dist/src/cli/main.js", "dist/console/app.js", "proto/synapse/v1/p2p.proto"]));
    expect(files).toContain("dist/gen/synapse/v1/p2p_pb.js");
    const stray = files.filter((file) => file.endsWith(".map") || /^(src|gen|test|bench|scripts|kits|interop|examples|docs|contract|dist\/(bench|scripts|test))\//.test(file) || /(^|\/)\.[^/]/.test(file));
    expect(stray).toEqual([]);
    // The tarball stays small: a few hundred kilobytes.
    expect(pack!.size).toBeLessThan(1_000_000);
  });
});

describe("public API", () => {
  // Asks for the text when it is missing (before confirming), and for a human's approval when asked to.
  const echo: TaskTypeHandler = {
    description: "Echoes its text",
    inputSchema: { type: "object", properties: { text: { type: "string" }, approval: { type: "boolean" } } },
    resumable: true,
    validateTask: (task) => (typeof task.payload.text === "string" ? { kind: "accept" } : { kind: "need_info", fields: [{ field: "text", reason: "what to echo" }] }),
    async executeTask(task): Promise<TaskOutput> {
      await task.progress(50, "echoing");
      if (task.payload.approval === true) {
        const answer = await task.askHuman({ code: "approval_required", message: `echo ${String(task.payload.text)}?` });
        return { output: { text: task.payload.text ?? null, approvedBy: answer.decidedBy.userName } };
      }
      return { output: { text: task.payload.text ?? null } };
    },
  };
  let server: ServedAgent;
  let client: SynapseClient;

  beforeAll(async () => {
    server = await serveAgent({ handlers: { echo, shout: async (task) => ({ output: String(task.payload.text).toUpperCase() }) }, store: "memory" });
    client = await SynapseClient.connect({ baseUrl: server.url, identity: createIdentity() });
  });
  afterAll(() => server.close());

  it("declares the task types from the handlers", () => {
    expect(client.capabilities.supportedTaskTypes.map((t) => [t.type, t.description])).toEqual([
      ["echo", "Echoes its text"],
      ["shout", ""],
    ]);
    expect(client.executor.agentId).toBe(server.agent.agentId);
  });

  it("submits and waits, and watches the signed events", async () => {
    const { task, taskId } = await client.submit("shout", { text: "hi" }, { waitMs: 10_000 });
    expect(stateName(task!.state)).toBe("completed");
    expect(taskOutput(task!)).toBe("HI");
    const events = [];
    for await (const item of client.watch(taskId)) if (item.kind === "event") events.push(messageToJson(item.event).type);
    expect(events).toEqual(["p2p:task_confirm", "p2p:task_complete"]);
  });

  it("answers a question for information and a human decision", async () => {
    const { taskId, task } = await client.submit("echo", { approval: true }, { waitMs: 10_000 });
    expect(task!.state).toBe(TaskState.INFO_NEEDED);
    expect(task!.pendingInfo?.missingFields.map((field) => field.field)).toEqual(["text"]);
    await client.provideInfo(taskId, { text: "hello" });
    const waiting = await client.waitFor(taskId, { untilInput: true });
    expect(waiting.state).toBe(TaskState.NEED_HUMAN);
    await client.decide(taskId, { action: "approve", decidedBy: { userName: "Ada" } });
    const done = await client.waitFor(taskId);
    expect(taskOutput(done)).toEqual({ text: "hello", approvedBy: "Ada" });
  });

  it("rejects a task type it has no handler for", async () => {
    const { reply, task } = await client.submit("nope", {}, { waitMs: 1000 });
    expect(reply?.type).toBe(MessageType.TASK_REJECT);
    expect(task!.state).toBe(TaskState.REJECTED);
    expect(task!.statusMessage).toMatch(/"nope" is not supported/);
  });

  it("mounts on a node:http2 server and on a Connect router", async () => {
    const agent = await createAgent({ handlers: { echo: async (task) => ({ output: task.payload }) }, store: "memory" });
    await agent.start();
    const direct = http2.createServer(agent.requestHandler());
    const routed = http.createServer(connectNodeAdapter({ routes: agent.routes }));
    try {
      for (const listener of [direct, routed]) {
        await new Promise<void>((resolve) => listener.listen(0, "127.0.0.1", resolve));
        const { port } = listener.address() as AddressInfo;
        const protocol = listener === direct ? "grpc" : "connect";
        const mounted = await SynapseClient.connect({ baseUrl: `http://127.0.0.1:${port}`, identity: createIdentity(), transport: { protocol } });
        const { reply, task } = await mounted.submit("echo", { n: 1 }, { waitMs: 10_000 });
        expect(reply?.type).toBe(MessageType.TASK_CONFIRM);
        expect(taskOutput(task!)).toEqual({ n: 1 });
      }
    } finally {
      await agent.close();
      direct.close();
      routed.closeAllConnections();
      routed.close();
    }
  });
});
