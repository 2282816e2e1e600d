// invokeUnary (src/server/invoke-unary.ts): a short-path unary call through
// the interceptors, as connect-es calls it (the first interceptor outermost,
// the handler's headers and trailers carried to the call, a plain object
// answer made a message, a request an interceptor replaced seen by the
// handler), with the call's AbortSignal made only when something reads it.
import { create, isMessage } from "@bufbuild/protobuf";
import { createContextKey, type HandlerContext, type Interceptor, type MethodImplSpec } from "@connectrpc/connect";
import { EventEmitter } from "node:events";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { GetTaskRequestSchema, GetTaskResponseSchema, P2PService } from "../gen/synapse/v1/p2p_pb.js";
import { invokeUnary } from "../src/server/invoke-unary.js";
import { CallSignal, ShortCallContext, type NodeRequest, type NodeResponse } from "../src/server/short-call.js";

type GetTaskSpec = Extract<MethodImplSpec<typeof GetTaskRequestSchema, typeof GetTaskResponseSchema>, { kind: "unary" }>;

const Original = globalThis.AbortController;
let signalsMade = 0;

// Counts the AbortSignals made while a test runs (no client runs in this process here).
beforeEach(() => {
  signalsMade = 0;
  globalThis.AbortController = class extends Original {
    override get signal(): AbortSignal {
      signalsMade++;
      return super.signal;
    }
  };
});
afterEach(() => {
  globalThis.AbortController = Original;
});

function shortCall(): { call: CallSignal; context: HandlerContext } {
  const res = Object.assign(new EventEmitter(), { writableEnded: false }) as unknown as NodeResponse;
  const req = { headers: { ":authority": "agent.test", "x-tag": "one" }, socket: {}, url: "/synapse.v1.P2PService/GetTask" } as unknown as NodeRequest;
  const call = new CallSignal(undefined, undefined, res);
  return { call, context: new ShortCallContext(spec(async () => ({})), req, "grpc", call, undefined, {}) };
}

function spec(impl: GetTaskSpec["impl"]): GetTaskSpec {
  return { kind: "unary", method: P2PService.method.getTask, impl } as GetTaskSpec;
}

const input = create(GetTaskRequestSchema, { taskId: "t-1" });

describe("invokeUnary", () => {
  it("makes no AbortSignal for a call whose handler and interceptors never read it", async () => {
    const { context } = shortCall();
    const passThrough: Interceptor = (next) => (req) => next(req);
    const output = await invokeUnary(spec(async (req) => ({ task: { taskId: req.taskId } })), context, input, [passThrough]);
    expect(isMessage(output, GetTaskResponseSchema)).toBe(true);
    expect(output.task?.taskId).toBe("t-1");
    expect(signalsMade).toBe(0);
  });

  it("hands the call's signal to a handler or an interceptor that reads it, aborted with the call", async () => {
    const { context } = shortCall();
    let seen: AbortSignal | undefined;
    const reading: Interceptor = (next) => (req) => {
      seen = req.signal;
      return next(req);
    };
    await invokeUnary(spec(async (_req, ctx) => (expect(ctx.signal).toBe(seen), {})), context, input, [reading]);
    expect(seen?.aborted).toBe(false);
    expect(signalsMade).toBeGreaterThan(0);
  });

  it("applies the first interceptor outermost and carries the handler's headers and trailers", async () => {
    const { context } = shortCall();
    const order: string[] = [];
    const named =
      (name: string): Interceptor =>
      (next) =>
      async (req) => {
        order.push(`${name} in`);
        const res = await next(req);
        order.push(`${name} out`);
        return res;
      };
    await invokeUnary(
      spec(async (_req, ctx) => {
        order.push("handler");
        ctx.responseHeader.set("x-answer", "yes");
        ctx.responseTrailer.set("x-after", "done");
        expect(ctx.requestHeader.get("x-tag")).toBe("one");
        return {};
      }),
      context,
      input,
      [named("first"), named("second")],
    );
    expect(order).toEqual(["first in", "second in", "handler", "second out", "first out"]);
    expect(context.responseHeader.get("x-answer")).toBe("yes");
    expect(context.responseTrailer.get("x-after")).toBe("done");
  });

  it("gives the handler what an interceptor put in a request it replaced", async () => {
    const { context } = shortCall();
    const tag = createContextKey("none");
    const replacing: Interceptor = (next) => (req) => {
      const header = new Headers(req.header);
      header.set("x-tag", "two");
      return next({ ...req, header, contextValues: req.contextValues.set(tag, "set") });
    };
    await invokeUnary(
      spec(async (_req, ctx) => {
        expect(ctx.requestHeader.get("x-tag")).toBe("two");
        expect(ctx.values.get(tag)).toBe("set");
        // A copied request keeps the call's signal (an accessor the copy reads).
        expect(ctx.signal).toBeInstanceOf(AbortSignal);
        expect(ctx.method).toBe(P2PService.method.getTask);
        return {};
      }),
      context,
      input,
      [replacing],
    );
  });
});
