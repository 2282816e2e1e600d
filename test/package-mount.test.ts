// The package's public API beyond one agent on its own port: an agent
// mounted on a server of your own (node:http with requestHandler, or a
// Connect router with routes plus httpHandler) serves uploads and the SSE
// event stream beside its RPCs and leaves other paths to yours; and
// serveAgent({ groups: true }) hosts groups whose tasks run at members,
// driven with GroupClient. Only the entry points are imported.
import { connectNodeAdapter } from "@connectrpc/connect-node";
import { writeFile } from "node:fs/promises";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { createIdentity, TaskState } from "../src/api/index.js";
import { GroupClient, SynapseClient, taskOutput, uploadFile } from "../src/api/client.js";
import { GroupTaskState, GroupTaskStrategy } from "../src/api/proto.js";
import { createAgent, serveAgent, type NodeRequestHandler, type TaskTypeHandler } from "../src/api/server.js";

// Counts the bytes of the file the task names "data".
const count: TaskTypeHandler = {
  async executeTask(task) {
    let bytes = 0;
    for await (const chunk of task.uploads.open("data")) bytes += chunk.byteLength;
    return { output: { bytes } };
  },
};
const mine: NodeRequestHandler = (_req, res) => {
  res.writeHead(200, { "Content-Type": "text/plain" });
  res.end("my route");
};

const closers: Array<() => Promise<void>> = [];
afterAll(async () => {
  for (const close of closers.reverse()) await close();
});

async function listen(server: http.Server): Promise<string> {
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  closers.push(async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

describe("an agent mounted on a server of your own", () => {
  it.each(["requestHandler", "routes and httpHandler"])("serves uploads and SSE beside its RPCs, and your routes (%s)", async (how) => {
    const agent = await createAgent({ handlers: { count }, store: "memory" });
    closers.push(() => agent.close());
    await agent.start();
    const handler = how === "requestHandler" ? agent.requestHandler({ fallback: mine }) : connectNodeAdapter({ routes: agent.routes, fallback: agent.httpHandler({ fallback: mine }) });
    const url = await listen(http.createServer(handler));
    agent.listeningOn("127.0.0.1");

    const client = await SynapseClient.connect({ baseUrl: url, identity: createIdentity() });
    const path = join(tmpdir(), `synapse-package-upload-${process.pid}-${how.length}.bin`);
    await writeFile(path, Buffer.alloc(300_000, 7));
    const { sha256, size } = await uploadFile({ baseUrl: url, token: await client.token(), path });
    expect(size).toBe(300_000);
    const { task, taskId } = await client.submit("count", {}, { uploads: [{ name: "data", sha256, size }], waitMs: 10_000 });
    expect(task!.state).toBe(TaskState.COMPLETED);
    expect(taskOutput(task!)).toEqual({ bytes: 300_000 });

    const events = await fetch(`${url}/tasks/${taskId}/events`, { headers: { Authorization: `Bearer ${await client.token()}` } });
    expect(events.headers.get("content-type")).toMatch(/^text\/event-stream/);
    const text = await events.text(); // the stream ends after the terminal event
    expect(text).toMatch(/^id: 1$/m);
    expect(text).toContain("MESSAGE_TYPE_TASK_COMPLETE");
    expect(text).toMatch(/^event: end$/m);

    expect(await (await fetch(`${url}/elsewhere`)).text()).toBe("my route");
  });
});

describe("serveAgent with groups", () => {
  it("hosts a group whose task runs at a member that joined with its own key", async () => {
    const echo: TaskTypeHandler = { executeTask: async (task) => ({ output: { echoed: task.payload.text ?? null, by: "member" } }) };
    const host = await serveAgent({ handlers: { echo }, store: "memory", groups: true });
    closers.push(() => host.close());
    const member = await serveAgent({ handlers: { echo }, store: "memory" });
    closers.push(() => member.close());
    expect([host.agent.capabilities.supportGroups, member.agent.capabilities.supportGroups]).toEqual([true, false]);

    const coordinator = await GroupClient.connect({ baseUrl: host.url, identity: createIdentity() });
    await coordinator.create("team", { name: "Echoes" });
    const invited = await coordinator.invite("team", { agentId: member.agent.agentId, keyId: member.agent.identity.key.keyId });
    const asMember = await GroupClient.connect({ baseUrl: host.url, identity: member.agent.identity });
    await asMember.join("team", { invitationId: invited.reply.header.replyTo, endpointUrl: member.url });

    const { groupTask } = await coordinator.submitTask("team", { taskType: "echo", payload: { text: "hi" }, strategy: GroupTaskStrategy.BROADCAST }, 10_000);
    expect(groupTask!.state).toBe(GroupTaskState.COMPLETED);
    expect(groupTask!.outputs.map((output) => output.agentId)).toEqual([member.agent.agentId]);
    const events = [];
    for await (const item of coordinator.watch("team")) {
      if (item.kind === "event") events.push(item.event.sequence);
      if (events.length === 3) break;
    }
    expect(events).toEqual([1, 2, 3]);
  });
});
