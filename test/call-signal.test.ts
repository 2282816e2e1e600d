// CallSignal (src/server/short-call.ts): a short-path call's abort. It aborts
// when the client goes away before the answer ended, tells the code that
// listens through callAbortKey, and leaves the response when the call is over
// (Node may keep a closed HTTP/2 stream, and what hangs on it, until a full GC).
import { EventEmitter } from "node:events";
import { describe, expect, it } from "vitest";
import { CallSignal, type NodeResponse } from "../src/server/short-call.js";

function fakeResponse(): EventEmitter & { writableEnded: boolean } {
  return Object.assign(new EventEmitter(), { writableEnded: false });
}

describe("CallSignal", () => {
  it("aborts when the response closes before it ended, and tells its listeners once", () => {
    const res = fakeResponse();
    const call = new CallSignal(undefined, undefined, res as unknown as NodeResponse);
    let told = 0;
    call.listen(() => told++);
    const stop = call.listen(() => told++);
    stop();
    res.emit("close");
    expect(call.aborted).toBe(true);
    expect(call.signal.aborted).toBe(true);
    expect(told).toBe(1);
  });

  it("takes its listener off the response when the call is over, and then aborts nothing", () => {
    const res = fakeResponse();
    const call = new CallSignal(undefined, undefined, res as unknown as NodeResponse);
    let told = 0;
    call.listen(() => told++);
    expect(res.listenerCount("close")).toBe(1);
    call.release();
    expect(res.listenerCount("close")).toBe(0);
    res.emit("close");
    expect(call.aborted).toBe(false);
    expect(told).toBe(0);
  });

  it("aborts at its deadline", async () => {
    const call = new CallSignal(undefined, 10, fakeResponse() as unknown as NodeResponse);
    await new Promise((resolve) => call.listen(() => resolve(undefined)));
    expect(call.signal.reason).toMatchObject({ code: 4 }); // Code.DeadlineExceeded
  });
});
