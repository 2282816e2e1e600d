// SQLite group commit: writes issued together share one transaction, yet
// each stands or falls alone; a batch whose commit fails rejects every
// write in it, keeps nothing, and tells the store to forget its cache.
import Database from "better-sqlite3";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { TaskState } from "../gen/synapse/v1/payloads_pb.js";
import { BatchWriter } from "../src/store/sqlite/batch.js";
import { sqliteStorage } from "../src/store/sqlite/index.js";
import type { StoreChange } from "../src/store/changes.js";
import { newTask, signedEvent } from "./store-contract/fixtures.js";
import { tempDir } from "./helpers/server.js";

describe("SQLite group commit", () => {
  it("commits the writes of one batch together; a refused write fails alone", async () => {
    const path = join(await tempDir(), "synapse.db");
    const storage = sqliteStorage(path);
    await storage.tasks.createTask(newTask("taken"), signedEvent("taken", 1));
    const changes: string[] = [];
    storage.tasks.onChange((change: StoreChange) => {
      if (change.kind === "task") changes.push(`${change.taskId}:${change.sequence}`);
    });

    // Issued in one tick, so they land in one batch.
    const outcomes = await Promise.allSettled([
      storage.tasks.createTask(newTask("a"), signedEvent("a", 1)),
      storage.tasks.createTask(newTask("taken"), signedEvent("taken", 1)),
      storage.tasks.commit("taken", 1, { state: TaskState.EXECUTING }, signedEvent("taken", 2)),
      storage.tasks.commit("taken", 1, { state: TaskState.FAILED }, signedEvent("taken", 2)),
      storage.tasks.createTask(newTask("b"), signedEvent("b", 1)),
    ]);
    expect(outcomes.map((o) => o.status)).toEqual(["fulfilled", "rejected", "fulfilled", "rejected", "fulfilled"]);
    expect((outcomes[1] as PromiseRejectedResult).reason).toMatchObject({ name: "StoreConflictError", reason: "task_exists" });
    expect((outcomes[3] as PromiseRejectedResult).reason).toMatchObject({ name: "StoreConflictError", reason: "version" });
    // Announced after the commit, in the order the writes were issued.
    expect(changes).toEqual(["a:1", "taken:2", "b:1"]);
    await storage.close();

    const reopened = sqliteStorage(path);
    expect(await reopened.tasks.getTask("a")).toMatchObject({ version: 1 });
    expect(await reopened.tasks.getTask("b")).toMatchObject({ version: 1 });
    expect(await reopened.tasks.getTask("taken")).toMatchObject({ version: 2, state: TaskState.EXECUTING });
    expect((await reopened.tasks.listEvents("taken", 1)).map((e) => e.sequence)).toEqual([1, 2]);
    await reopened.close();
  });

  it("rejects every write of a batch whose commit fails, and keeps none of them", async () => {
    const db = new Database(":memory:");
    db.exec("PRAGMA foreign_keys = ON");
    db.exec("CREATE TABLE parent (id TEXT PRIMARY KEY)");
    db.exec("CREATE TABLE child (id TEXT PRIMARY KEY, parent TEXT REFERENCES parent(id) DEFERRABLE INITIALLY DEFERRED)");
    let lost = 0;
    const writer = new BatchWriter(db, () => lost++);
    const after: string[] = [];
    const insert = (id: string, parent: string) =>
      writer.run(() => {
        db.prepare("INSERT INTO child (id, parent) VALUES (?, ?)").run(id, parent);
        return { value: id, after: () => after.push(id) };
      });

    db.prepare("INSERT INTO parent (id) VALUES ('p')").run();
    // The orphan passes its own savepoint (the key is checked at COMMIT) and sinks the batch.
    const outcomes = await Promise.allSettled([insert("c1", "p"), insert("orphan", "missing"), insert("c2", "p")]);
    expect(outcomes.map((o) => o.status)).toEqual(["rejected", "rejected", "rejected"]);
    expect(String((outcomes[0] as PromiseRejectedResult).reason)).toMatch(/FOREIGN KEY/);
    expect(lost).toBe(1);
    expect(after).toEqual([]);
    expect(db.prepare("SELECT COUNT(*) AS n FROM child").get()).toEqual({ n: 0 });
    expect(db.inTransaction).toBe(false);

    // The writer goes on with the next batch.
    await expect(insert("c3", "p")).resolves.toBe("c3");
    expect(after).toEqual(["c3"]);
    db.close();
  });
});
