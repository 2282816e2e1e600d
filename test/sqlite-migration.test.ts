// A database written by an earlier schema opens with everything in it:
// tasks, their event logs (the same signed bytes) and the messages already
// processed, with their replies, are read as before, and new writes and
// retention work on the migrated tables.
import Database from "better-sqlite3";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { TaskState } from "../gen/synapse/v1/payloads_pb.js";
import { envelopeBytes, TASK_COLUMNS, taskRow } from "../src/store/codec.js";
import { SQLITE_MIGRATIONS } from "../src/store/sqlite/migrations.js";
import { sqliteStorage } from "../src/store/sqlite/index.js";
import type { StoredReply, TaskRecord } from "../src/store/store.js";
import { tempDir } from "./helpers/server.js";
import { newTask, sameEnvelope, signedEvent, signedReply } from "./store-contract/fixtures.js";

const BEFORE_EVENT_ORDER = 5;

/** A database at schema version 5 holding `count` tasks with two events each and one seen message per task. */
function writeVersion5(path: string, count: number): Map<string, StoredReply> {
  const written = new Map<string, StoredReply>();
  const db = new Database(path);
  db.exec("CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, description TEXT NOT NULL, applied_at_ms INTEGER NOT NULL)");
  for (const migration of SQLITE_MIGRATIONS.filter((m) => m.version <= BEFORE_EVENT_ORDER)) {
    db.exec(migration.sql);
    db.prepare("INSERT INTO schema_migrations VALUES (?, ?, 0)").run(migration.version, migration.description);
  }
  // The columns a version-5 tasks table has (later migrations add the others).
  const columns = TASK_COLUMNS.filter((column) => column !== "confidential" && column !== "sealed" && column !== "sealed_request");
  const insertTask = db.prepare(`INSERT INTO tasks (${columns.join(", ")}) VALUES (${columns.map((c) => `@${c}`).join(", ")})`);
  const insertEvent = db.prepare("INSERT INTO task_events (task_id, sequence, envelope) VALUES (?, ?, ?)");
  const insertMessage = db.prepare("INSERT INTO seen_messages (scope, message_id, sender_agent_id, digest, keep_until_ms, task_id, reply) VALUES (?, ?, ?, ?, ?, ?, ?)");
  for (let i = 0; i < count; i++) {
    const taskId = `old-${i}`;
    // The even ones finished long ago (retention takes them); the odd ones are still running.
    const record: TaskRecord = { ...newTask(taskId, { state: i % 2 === 0 ? TaskState.COMPLETED : TaskState.EXECUTING, createdAtMs: 1_000 + i, updatedAtMs: 1_000 + i }), version: 2, lastSequence: 2 };
    insertTask.run(taskRow(record));
    for (const sequence of [1, 2]) {
      const event = signedEvent(taskId, sequence);
      written.set(`${taskId}/${sequence}`, event);
      insertEvent.run(taskId, sequence, envelopeBytes(event.envelope));
    }
    const reply = signedReply(`message-${i}`);
    written.set(`message-${i}`, reply);
    insertMessage.run("p2p", `message-${i}`, "requester", `digest-${i}`, 9_999_999_999_999, taskId, envelopeBytes(reply.envelope));
  }
  db.close();
  return written;
}

describe("migrating a SQLite database from schema version 5", () => {
  it("keeps every task, event and seen message, and new writes and retention work after it", async () => {
    const path = join(await tempDir(), "synapse.db");
    const written = writeVersion5(path, 20);

    const storage = sqliteStorage(path);
    try {
      for (let i = 0; i < 20; i++) {
        const taskId = `old-${i}`;
        const task = await storage.tasks.getTask(taskId);
        expect(task?.state).toBe(i % 2 === 0 ? TaskState.COMPLETED : TaskState.EXECUTING);
        expect(task?.lastSequence).toBe(2);
        const events = await storage.tasks.listEvents(taskId, 1);
        expect(events.map((event) => event.sequence)).toEqual([1, 2]);
        for (const event of events) expect(sameEnvelope(event, written.get(`${taskId}/${event.sequence}`)!)).toBe(true);
        const seen = await storage.tasks.getMessage("p2p", `message-${i}`);
        expect(seen?.taskId).toBe(taskId);
        expect(seen?.reply && sameEnvelope(seen.reply, written.get(`message-${i}`)!)).toBe(true);
      }

      // The same message id is still refused once; a new one is taken.
      const again = await storage.tasks.rememberMessage({ scope: "p2p", messageId: "message-3", senderAgentId: "requester", digest: "digest-3", keepUntilMs: 9_999_999_999_999 });
      expect(again?.digest).toBe("digest-3");
      expect(await storage.tasks.rememberMessage({ scope: "p2p", messageId: "fresh", senderAgentId: "requester", digest: "d", keepUntilMs: 9_999_999_999_999 })).toBeUndefined();

      // A running task goes on where it was; a new task gets its own log.
      const running = (await storage.tasks.getTask("old-1"))!;
      await storage.tasks.commit("old-1", running.version, { state: TaskState.COMPLETED, updatedAtMs: 2_000 }, signedEvent("old-1", 3));
      expect((await storage.tasks.listEvents("old-1", 1)).map((event) => event.sequence)).toEqual([1, 2, 3]);
      await storage.tasks.createTask(newTask("new-0"), signedEvent("new-0", 1));
      expect((await storage.tasks.listEvents("new-0", 1)).map((event) => event.sequence)).toEqual([1]);

      // Retention takes the finished tasks with their logs and leaves the rest.
      expect(await storage.tasks.pruneTasks(1_500, 100)).toBe(10);
      expect(await storage.tasks.getTask("old-0")).toBeUndefined();
      expect(await storage.tasks.listEvents("old-0", 1)).toEqual([]);
      expect((await storage.tasks.listEvents("old-3", 1)).length).toBe(2);
    } finally {
      await storage.close();
    }

    const db = new Database(path, { readonly: true });
    try {
      const version = db.prepare("SELECT MAX(version) AS version FROM schema_migrations").get() as { version: number };
      expect(version.version).toBe(SQLITE_MIGRATIONS[SQLITE_MIGRATIONS.length - 1]!.version);
      expect((db.prepare("SELECT COUNT(*) AS n FROM task_events").get() as { n: number }).n).toBe(10 * 2 + 1 + 1);
    } finally {
      db.close();
    }
  });
});
