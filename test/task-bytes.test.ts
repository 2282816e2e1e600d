// The Send reply's task, written directly (src/server/task-bytes.ts): the
// same bytes as protobuf-es writes for the view, for every record it covers,
// and undefined for every record it leaves to the message path.
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { TaskSchema } from "../gen/synapse/v1/p2p_pb.js";
import { TaskErrorSchema, TaskNeedInfoPayloadSchema, TaskRejectPayloadSchema, TaskResultSchema, TaskState } from "../gen/synapse/v1/payloads_pb.js";
import { buildTaskResult } from "../src/agent/task-result.js";
import { taskView } from "../src/agent/task-view.js";
import { rememberEncoding } from "../src/protocol/encoded.js";
import { firstRecord } from "../src/store/records.js";
import type { TaskRecord } from "../src/store/store.js";
import { taskViewBytes } from "../src/server/task-bytes.js";
import { newTask } from "./store-contract/fixtures.js";

// Strings of any UTF-16 code units, lone surrogates included (fast-check's "binary" strings hold none).
const text = fc.oneof(fc.string({ unit: "grapheme" }), fc.string({ unit: fc.integer({ min: 0, max: 0xffff }).map((u) => String.fromCharCode(u)) }), fc.constant(""));
const party = fc.record({ agentId: text, systemId: text, keyId: text });
const uint32 = fc.integer({ min: 0, max: 2 ** 32 - 1 });
// Milliseconds up to the encoder's limit (2^32 seconds), and the edges.
const ms = fc.oneof(fc.integer({ min: 0, max: 2 ** 32 * 1000 - 1 }), fc.constantFrom(0, 999, 1000, Date.now()));

const record = fc
  .record({
    taskId: text,
    taskType: text,
    state: fc.integer({ min: 0, max: 13 }),
    progress: fc.integer({ min: 0, max: 100 }),
    statusMessage: text,
    requester: party,
    executor: party,
    createdAtMs: ms,
    updatedAtMs: ms,
    lastSequence: uint32,
    output: fc.option(fc.jsonValue(), { nil: undefined }),
  })
  .map(({ output, lastSequence, ...fields }): TaskRecord => {
    const result = output === undefined ? undefined : buildTaskResult("json", output as never, {}, undefined).result;
    return { ...firstRecord(newTask("t", { ...fields, result })), lastSequence };
  });

/** What the message path writes for the record's Send view. */
const viaMessage = (task: TaskRecord) => toBinary(TaskSchema, taskView(task, { withRequest: false }));

describe("taskViewBytes", () => {
  it("writes what toBinary writes for the view, for every record it covers", () => {
    fc.assert(
      fc.property(record, (task) => {
        const bytes = taskViewBytes(task);
        expect(bytes).toBeDefined();
        expect(Buffer.from(bytes!).equals(Buffer.from(viaMessage(task)))).toBe(true);
      }),
      { numRuns: 500 },
    );
  });

  it("writes the result as the bytes it was signed as", () => {
    const result = create(TaskResultSchema, { outputType: "in the record" });
    const kept = toBinary(TaskResultSchema, create(TaskResultSchema, { outputType: "as signed" }));
    rememberEncoding(result, kept);
    const task = firstRecord(newTask("t-kept", { state: TaskState.COMPLETED, result }));
    expect(fromBinary(TaskSchema, taskViewBytes(task)!).result?.outputType).toBe("as signed");
  });

  it("leaves to the message path what it does not cover", () => {
    const base = newTask("t-left");
    const left: Array<[string, TaskRecord]> = [
      ["a pending question", firstRecord({ ...base, pendingInfo: create(TaskNeedInfoPayloadSchema, { taskId: "t-left" }) })],
      ["an error", firstRecord({ ...base, error: create(TaskErrorSchema, { message: "no" }) })],
      ["a rejection", firstRecord({ ...base, rejection: create(TaskRejectPayloadSchema, { taskId: "t-left" }) })],
      ["a result without kept bytes", firstRecord({ ...base, result: create(TaskResultSchema, { outputType: "json" }) })],
      ["a negative time", firstRecord({ ...base, createdAtMs: -1 })],
      ["a time past 2106", firstRecord({ ...base, updatedAtMs: 2 ** 32 * 1000 })],
      ["a fractional time", firstRecord({ ...base, createdAtMs: 1.5 })],
      ["a state outside int32", firstRecord({ ...base, state: 2 ** 31 as TaskState })],
      ["a sequence past 2^32", { ...firstRecord(base), lastSequence: 2 ** 32 }],
      ["a requester with unknown fields", firstRecord({ ...base, requester: { ...base.requester, $unknown: [{ no: 9, wireType: 0, data: new Uint8Array([1]) }] } as never })],
    ];
    for (const [what, task] of left) expect(taskViewBytes(task), what).toBeUndefined();
  });
});
