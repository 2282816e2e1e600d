// A task's row (the columns the SQL stores write): an input that is the
// request's payload, as intake makes it, is written once, in the request
// column; a changed input is written as JSON of its own. Both read back.
import { create } from "@bufbuild/protobuf";
import { describe, expect, it } from "vitest";
import { TaskRequestPayloadSchema } from "../gen/synapse/v1/payloads_pb.js";
import { patchColumns, taskFromRow, taskRow, type TaskRow } from "../src/store/codec.js";
import type { TaskRecord } from "../src/store/store.js";
import { newTask } from "./store-contract/fixtures.js";

const record = (task: ReturnType<typeof newTask>): TaskRecord => ({ ...task, version: 1, lastSequence: 1 });

describe("task rows", () => {
  it("keep an input that is the request's payload once, and read it back from the request", () => {
    const request = create(TaskRequestPayloadSchema, { task: { id: "t", type: "text_analysis", payload: { text: "x".repeat(10_000), n: [1, 2] } } });
    const row = taskRow(record(newTask("t", { request, payload: request.task!.payload! })));
    expect(row.payload).toBe("");
    const back = taskFromRow(row as unknown as TaskRow);
    expect(back.payload).toEqual({ text: "x".repeat(10_000), n: [1, 2] });
    expect(back.payload).toBe(back.request.task!.payload);
  });

  it("write any other input, and a changed one, as JSON", () => {
    const request = create(TaskRequestPayloadSchema, { task: { id: "t", type: "text_analysis", payload: { text: "as sent" } } });
    const row = taskRow(record(newTask("t", { request, payload: { text: "as sent" } })));
    expect(row.payload).toBe('{"text":"as sent"}');
    expect(taskFromRow(row as unknown as TaskRow).payload).toEqual({ text: "as sent" });
    expect(patchColumns({ payload: request.task!.payload! })).toEqual({ payload: '{"text":"as sent"}' });
    expect(taskFromRow({ ...row, payload: '{"text":"changed"}' } as unknown as TaskRow).payload).toEqual({ text: "changed" });
  });
});
