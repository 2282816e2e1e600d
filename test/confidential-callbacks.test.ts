// A confidential task whose requester is itself an agent with a callback
// endpoint: the executor pushes every sealed event to it, the requester
// agent opens each with the task key wrapped to itself (read back from its
// SQLite store), acknowledges it so that the delivery ends, and its database
// file keeps none of the plaintext.
import { readdir, readFile } from "node:fs/promises";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { MessageType } from "../gen/synapse/v1/envelope_pb.js";
import { TaskState, type TaskCompletePayload, type TaskStatusUpdatePayload } from "../gen/synapse/v1/payloads_pb.js";
import { loadOrCreateIdentity } from "../src/agent/identity.js";
import { SynapseClient } from "../src/client/requester.js";
import { fromValue } from "../src/protocol/json-values.js";
import { sqliteStorage } from "../src/store/sqlite/index.js";
import { DeliveryStatus } from "../src/store/store.js";
import { startTestServer, tempDir } from "./helpers/server.js";

const SECRET_CSV = "codename,amount\nbluefinch,48213\nredheron,99127\nsilverlark,31337\n";
const SECRETS = ["bluefinch", "48213", "redheron", "99127", "silverlark", "31337", "codename"];

async function until<T>(probe: () => Promise<T>, done: (value: T) => boolean, timeoutMs = 5000): Promise<T> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (done(value) || Date.now() > end) return value;
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

describe("a confidential task with a callback", () => {
  it("pushes every sealed event to the requester agent, which opens and keeps them sealed", async () => {
    const executor = await startTestServer({ agentId: "executor_conf_cb" });
    const dataDir = await tempDir("synapse-conf-cb-");
    const storage = sqliteStorage(join(dataDir, "synapse.db"));
    const requester = await startTestServer({ identity: (await loadOrCreateIdentity(dataDir)).identity, storage });
    let closed = false;
    try {
      const client = await SynapseClient.connect({
        baseUrl: executor.url,
        identity: requester.agent.identity,
        callback: { url: requester.url, inbox: requester.agent.inbox },
      });
      const { taskId } = await client.submit("data_analysis", { csv: SECRET_CSV, include_rows: true, delay_ms_per_row: 150 }, { confidential: true });

      const pushed = [];
      for await (const item of requester.agent.inbox.events("executor_conf_cb", taskId)) pushed.push(item);
      expect(pushed.map((p) => p.event.sequence)).toEqual(pushed.map((_, i) => i + 1));
      expect(pushed.every((p) => p.event.header.confidential !== undefined)).toBe(true);
      expect(pushed.at(-1)?.event.header.messageType).toBe(MessageType.TASK_COMPLETE);
      expect(pushed.at(-1)?.state).toBe(TaskState.COMPLETED);
      // The payloads read from the store are the opened ones, not placeholders.
      const statuses = pushed.filter((p) => p.event.header.messageType === MessageType.TASK_STATUS_UPDATE);
      expect(statuses.length).toBeGreaterThan(0);
      for (const status of statuses) expect((status.event.payload as TaskStatusUpdatePayload).message).toMatch(/^row \d of 3$/);
      const complete = pushed.at(-1)!.event.payload as TaskCompletePayload;
      expect(complete.taskId).toBe(taskId);
      expect(complete.summary).toBe("3 rows, 2 columns");
      expect((fromValue(complete.result?.output) as { rows: number }).rows).toBe(3);

      // The pushed envelopes are the executor's sealed events, byte for byte.
      const watched = [];
      for await (const item of client.watch(taskId)) if (item.kind === "event") watched.push(item.event.envelope);
      expect(watched.map((e) => Buffer.from(e.payload).toString("hex"))).toEqual(pushed.map((p) => Buffer.from(p.event.envelope.payload).toString("hex")));

      // Every push was acknowledged: the executor's delivery ends, with no retry pending.
      const delivery = await until(() => executor.agent.store.getDelivery(taskId), (d) => d?.status === DeliveryStatus.DONE);
      expect(delivery?.status).toBe(DeliveryStatus.DONE);
      expect(delivery?.nextSequence).toBe(pushed.length + 1);
      expect(delivery?.lastError ?? "").toBe("");

      // After a restart, the requester agent opens the stored events again with the wrapped key it kept.
      await requester.close();
      await storage.close();
      closed = true;
      const reopened = sqliteStorage(join(dataDir, "synapse.db"));
      const again = await startTestServer({ identity: (await loadOrCreateIdentity(dataDir)).identity, storage: reopened });
      try {
        const events = await again.agent.store.listOutboundEvents("executor_conf_cb", taskId, 1);
        expect(events.map((e) => e.header.messageType)).toEqual(pushed.map((p) => p.event.header.messageType));
        expect((events.at(-1)!.payload as TaskCompletePayload).taskId).toBe(taskId);
      } finally {
        await again.close();
        await reopened.close();
      }

      const files = (await readdir(dataDir)).filter((name) => name.startsWith("synapse.db"));
      expect(files.length).toBeGreaterThan(0);
      for (const name of files) {
        const bytes = await readFile(join(dataDir, name));
        for (const secret of SECRETS) expect(bytes.includes(Buffer.from(secret)), `${secret} in ${name}`).toBe(false);
      }
    } finally {
      await executor.close();
      if (!closed) {
        await requester.close();
        await storage.close();
      }
    }
  });
});
