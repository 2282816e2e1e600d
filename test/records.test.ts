// A store's first record of a task: every field of the new task, version 1
// and its first event, and every optional field present (as undefined when
// unset) in the order the SQLite codec reads records back, so that a commit's
// copy ({ ...current, ...patch }) only overwrites fields and new and read-back
// records share one shape.
import { create } from "@bufbuild/protobuf";
import { describe, expect, it } from "vitest";
import { TaskResultSchema, TaskState } from "../gen/synapse/v1/payloads_pb.js";
import { taskFromRow, taskRow, type TaskRow } from "../src/store/codec.js";
import { firstRecord } from "../src/store/records.js";
import type { NewTask } from "../src/store/store.js";
import { newTask } from "./store-contract/fixtures.js";

describe("firstRecord", () => {
  it("carries every field of the new task, at version 1 with one event", () => {
    const full: NewTask = newTask("t-full", {
      state: TaskState.COMPLETED,
      result: create(TaskResultSchema, { outputType: "json" }),
      carried: { traceparent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", tracestate: "", sessionId: "s", correlationId: "c" },
      answers: [{ kind: "info", phase: "execution", fields: { a: 1 } }],
    });
    const record = firstRecord(full);
    expect(record).toEqual({ ...full, version: 1, lastSequence: 1 });
    for (const [field, value] of Object.entries(full)) expect(record[field as keyof typeof record]).toBe(value);
  });

  it("sets version and lastSequence whatever the caller passed, and holds every optional field as its own", () => {
    const extra = { ...newTask("t-extra"), version: 7, lastSequence: 9 } as NewTask;
    const record = firstRecord(extra);
    expect(record.version).toBe(1);
    expect(record.lastSequence).toBe(1);
    for (const field of ["pendingInfo", "pendingDecision", "result", "error", "rejection", "resultStream", "carried"]) {
      expect(Object.prototype.hasOwnProperty.call(record, field)).toBe(true);
    }
  });

  it("lists its fields in the order a record read back from SQLite does", () => {
    const record = firstRecord(newTask("t-order"));
    const row = taskRow(record) as unknown as TaskRow;
    expect(Object.keys(record)).toEqual(Object.keys(taskFromRow(row)));
  });
});
