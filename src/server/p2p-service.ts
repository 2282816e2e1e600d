// P2PService over RPC: opens each envelope and hands it to the engine;
// authenticates the reads with bearer tokens and serves them from the reader
// (a token signed by an operator key reads every task; Send is unchanged, so
// an operator steers nothing it did not request).
import { create } from "@bufbuild/protobuf";
import { durationMs } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError, type ServiceImpl } from "@connectrpc/connect";
import {
  GetTaskResponseSchema,
  ListTasksResponseSchema,
  P2PService,
  ReadResultResponseSchema,
  SendResponseSchema,
  WatchResponseSchema,
  type Task,
  type WatchResponse,
} from "../../gen/synapse/v1/p2p_pb.js";
import { ErrorCode } from "../../gen/synapse/v1/errors_pb.js";
import type { Agent } from "../agent/agent.js";
import { RETRY_AFTER_SECONDS } from "../agent/intake.js";
import { taskPageSize, type TaskReaderCaller, type WatchItem } from "../agent/reader.js";
import { taskView } from "../agent/task-view.js";
import { signedMessage } from "../envelope/view.js";
import { protocolError } from "../protocol/errors.js";
import { isTerminal, WAITING_STATES } from "../protocol/state-machine.js";
import type { StoredEvent, StoredReply, TaskRecord } from "../store/store.js";
import { authenticate } from "./auth.js";
import { callAbortOf } from "./call-abort.js";
import { callStatusKey } from "./call-status.js";
import { openSent } from "./open-sent.js";
import { fittedPage, fitTasks, replyFormat, type ReplyFormat } from "./reply-fit.js";
import { signedMessageBytes, taskEventBytes } from "./signed-bytes.js";
import { taskViewBytes } from "./task-bytes.js";
import { encoded, fromEncodedFields, knownEncoding, withEncodedField } from "../protocol/encoded.js";

const signed = (reply: StoredReply) => signedMessage(reply.envelope, reply.header, reply.payload);

// Field numbers of SendResponse's reply and task, WatchResponse's event and heartbeat, and Task.result.
const SEND_REPLY = 1;
const SEND_TASK = 2;
const WATCH_EVENT = 2;
const WATCH_HEARTBEAT = 3;
const TASK_RESULT = 13;

/** A task view for a reader in `format`: in binary its result goes out as the bytes it was signed or stored as. */
function viewFor(record: TaskRecord, format: ReplyFormat, options: { withRequest?: boolean } = {}): Task {
  const view = taskView(record, options);
  // A confidential task's view has no result to place (taskView leaves its content out).
  const bytes = format === "binary" && record.result !== undefined && record.confidential === undefined ? knownEncoding(record.result) : undefined;
  if (bytes === undefined) return view;
  view.result = undefined;
  return withEncodedField(view, TASK_RESULT, bytes);
}

/**
 * One binary WatchResponse per object it shows (a task version, an event),
 * built and encoded once, so the stream path writes the same frame to every
 * watcher it goes to.
 */
function sharedBinaryResponse<K extends object>(build: (from: K) => WatchResponse): (from: K) => WatchResponse {
  const responses = new WeakMap<K, WatchResponse>();
  return (from) => {
    let response = responses.get(from);
    if (response === undefined) {
      response = build(from);
      encoded(WatchResponseSchema, response);
      responses.set(from, response);
    }
    return response;
  };
}

/**
 * @param replyLimit the largest message the server writes: replies showing a
 * task leave its request out rather than exceed it (see reply-fit.ts).
 */
function waitCutByShutdown(): ConnectError {
  return protocolError(
    ErrorCode.AGENT_NOT_READY,
    "the agent is shutting down before the task settled; the message was processed: send the same envelope again for its reply and the wait, or read the task",
    { retryAfterSeconds: RETRY_AFTER_SECONDS },
  );
}

export function p2pService(agent: Agent, draining: AbortSignal, replyLimit: number): ServiceImpl<typeof P2PService> {
  const maxWaitMs = () => agent.provider.getCapabilities().maxTaskDurationSeconds * 1000;
  const bearer = { audience: agent.identity.agentId, trust: agent.trust };
  /** The verified caller of a read; an operator key reads every task. */
  const reader = async (ctx: Parameters<typeof authenticate>[1]): Promise<TaskReaderCaller> => {
    const caller = await authenticate(bearer, ctx);
    return { agentId: caller.agentId, operator: agent.operatorKeyIds.has(caller.keyId) };
  };
  const snapshotResponse = (task: TaskRecord, format: ReplyFormat): WatchResponse => {
    const view = viewFor(task, format);
    return fitTasks(WatchResponseSchema, create(WatchResponseSchema, { kind: { case: "snapshot", value: view } }), [view], format, replyLimit);
  };
  // Watchers that open on the same version of a task (a dashboard, everyone
  // resubscribing after a restart) are handed one binary snapshot: a record
  // is never changed in place, a new version is a new object.
  const binarySnapshot = sharedBinaryResponse((task: TaskRecord) => snapshotResponse(task, "binary"));
  // Every watcher of the task is handed one response per event.
  const binaryEventResponse = sharedBinaryResponse((event: StoredEvent) => withEncodedField(create(WatchResponseSchema), WATCH_EVENT, taskEventBytes(event)));
  const watchMessage = (item: WatchItem, format: ReplyFormat): WatchResponse => {
    if (item.kind === "snapshot") return format === "binary" ? binarySnapshot(item.task) : snapshotResponse(item.task, format);
    if (item.kind === "heartbeat") {
      return format === "binary"
        ? withEncodedField(create(WatchResponseSchema), WATCH_HEARTBEAT, signedMessageBytes(item.heartbeat))
        : create(WatchResponseSchema, { kind: { case: "heartbeat", value: signed(item.heartbeat) } });
    }
    return format === "binary"
      ? binaryEventResponse(item.event)
      : create(WatchResponseSchema, { kind: { case: "event", value: { sequence: BigInt(item.event.sequence), message: signed(item.event) } } });
  };
  return {
    async send(request, ctx) {
      const opened = await openSent(request.envelope, agent.openOptions, ctx);
      const outcome = await agent.engine.receive(opened);
      let task = outcome.task;
      if (request.wait !== undefined && task !== undefined) {
        const waitMs = Math.min(Math.max(0, durationMs(request.wait)), maxWaitMs());
        task = (await agent.engine.waitForOutcome(task.taskId, waitMs, [callAbortOf(ctx), draining])) ?? task;
        // A wait the shutdown cut short is no answer: the sender sends the same envelope again (it gets the same reply).
        if (draining.aborted && !isTerminal(task.state) && !WAITING_STATES.has(task.state)) throw waitCutByShutdown();
      }
      const status = ctx.values.get(callStatusKey);
      if (status !== undefined) status.taskState = task?.state ?? outcome.state;
      // The sender has its request: the task shown leaves it out (GetTask shows it).
      const format = replyFormat(ctx);
      if (format === "binary") {
        // The reply's signed bytes, and the task's view written directly where task-bytes.ts covers it:
        // then the whole response is bytes already, which the short path writes as they are.
        const replyBytes = outcome.reply && signedMessageBytes(outcome.reply);
        const taskBytes = task && taskViewBytes(task);
        if (task === undefined || taskBytes !== undefined) {
          const fields: Array<[number, Uint8Array]> = [];
          if (replyBytes) fields.push([SEND_REPLY, replyBytes]);
          if (taskBytes) fields.push([SEND_TASK, taskBytes]);
          return fromEncodedFields(create(SendResponseSchema), fields);
        }
        const response = create(SendResponseSchema, { task: viewFor(task, format, { withRequest: false }) });
        return replyBytes ? withEncodedField(response, SEND_REPLY, replyBytes) : response;
      }
      return create(SendResponseSchema, { reply: outcome.reply ? signed(outcome.reply) : undefined, task: task && viewFor(task, format, { withRequest: false }) });
    },

    async getTask(request, ctx) {
      const caller = await reader(ctx);
      const format = replyFormat(ctx);
      const view = viewFor(await agent.reader.getTask(request.taskId, caller), format);
      return fitTasks(GetTaskResponseSchema, create(GetTaskResponseSchema, { task: view }), [view], format, replyLimit);
    },

    async listTasks(request, ctx) {
      const caller = await reader(ctx);
      const format = replyFormat(ctx);
      const read = async (size: number) => {
        const page = await agent.reader.listTasks(caller, size, request.pageToken, request.states, request.taskTypes);
        const views = page.tasks.map((record) => viewFor(record, format));
        return fitTasks(ListTasksResponseSchema, create(ListTasksResponseSchema, { tasks: views, nextPageToken: page.nextPageToken }), views, format, replyLimit);
      };
      return fittedPage(ListTasksResponseSchema, taskPageSize(request.pageSize), read, format, replyLimit);
    },

    async *watch(request, ctx) {
      const caller = await reader(ctx);
      const format = replyFormat(ctx);
      // Where a client resumes: after the last event this stream sent, or where it asked to start.
      let next = request.fromSequence > 0n ? request.fromSequence : 1n;
      for await (const item of agent.reader.watch(request.taskId, caller, Number(request.fromSequence), [callAbortOf(ctx), draining])) {
        if (item.kind === "event") next = BigInt(item.event.sequence) + 1n;
        yield watchMessage(item, format);
      }
      if (draining.aborted) {
        throw new ConnectError(`the agent is shutting down; resume with from_sequence ${next}`, Code.Unavailable);
      }
    },

    async *readResult(request, ctx) {
      const caller = await reader(ctx);
      for await (const chunk of agent.reader.readResult(request.taskId, caller, Number(request.offset))) {
        yield create(ReadResultResponseSchema, { chunk });
      }
    },
  };
}
