// A confidential task on PostgreSQL: every row of every table the agent
// wrote is read back raw, and none holds the task's request, question,
// answer or result, in text or in bytes.
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { TaskState } from "../gen/synapse/v1/payloads_pb.js";
import type { SynapseClient } from "../src/client/requester.js";
import { fromValue } from "../src/protocol/json-values.js";
import { postgresStorage } from "../src/store/postgres/index.js";
import type { Storage } from "../src/store/storage.js";
import { freshDatabase, postgresAvailable } from "./helpers/postgres.js";
import { connectClient, startTestServer, type TestServer } from "./helpers/server.js";

const SECRET = "Ambassador Okonkwo lands at Tegel on the ninth. The convoy takes the river road. Keep it between us.";
const SECRETS = ["Okonkwo", "Tegel", "river road", "convoy"];

describe.skipIf(!postgresAvailable())("a confidential task on PostgreSQL", () => {
  let url: string;
  let storage: Storage;
  let server: TestServer;
  let client: SynapseClient;

  beforeAll(async () => {
    url = await freshDatabase("synapse_confidential");
    storage = await postgresStorage(url, { pollIntervalMs: 200 });
    server = await startTestServer({ storage });
    client = await connectClient(server);
  });
  afterAll(async () => {
    await server?.close();
    await storage?.close();
  });

  it("runs with a question answered, and the database holds none of it", async () => {
    const { taskId } = await client.submit("summarization", { text: SECRET }, { confidential: true, waitMs: 5000 });
    const answered = await client.provideInfo(taskId, { max_sentences: 2 }, { waitMs: 5000 });
    expect(answered.task?.state).toBe(TaskState.COMPLETED);
    const summary = (fromValue((await client.getTask(taskId)).result?.output) as { summary: string }).summary;
    expect(summary).toContain("Okonkwo");

    const db = new pg.Client({ connectionString: url });
    await db.connect();
    try {
      const tables = (await db.query<{ tablename: string }>("SELECT tablename FROM pg_tables WHERE schemaname = current_schema()")).rows.map((row) => row.tablename);
      expect(tables).toContain("tasks");
      let cells = 0;
      for (const table of tables) {
        for (const row of (await db.query(`SELECT * FROM "${table}"`)).rows as Array<Record<string, unknown>>) {
          for (const [column, value] of Object.entries(row)) {
            if (value === null || value === undefined) continue;
            cells++;
            const bytes = Buffer.isBuffer(value) ? value : Buffer.from(typeof value === "string" ? value : JSON.stringify(value));
            for (const secret of SECRETS) expect(bytes.includes(Buffer.from(secret)), `${secret} in ${table}.${column}`).toBe(false);
          }
        }
      }
      expect(cells).toBeGreaterThan(20);
      // The task's row is there, sealed: its wrapped keys and its sealed content.
      const task = await db.query("SELECT confidential, sealed FROM tasks WHERE task_id = $1", [taskId]);
      expect(task.rows[0].confidential).toBeInstanceOf(Buffer);
      expect(task.rows[0].sealed).toBeInstanceOf(Buffer);
    } finally {
      await db.end();
    }
  });
});
