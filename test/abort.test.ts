// onAbort (src/abort.ts): many listeners of one shared signal cost the
// signal one listener of its own; each is told once, and can stop listening.
import { getEventListeners } from "node:events";
import { describe, expect, it } from "vitest";
import { linkedSignal, onAbort } from "../src/abort.js";

describe("onAbort", () => {
  it("tells every listener once, not those that stopped, through one listener on the signal", () => {
    const controller = new AbortController();
    const told: number[] = [];
    const stops = Array.from({ length: 1000 }, (_, i) => onAbort(controller.signal, () => told.push(i)));
    expect(getEventListeners(controller.signal, "abort")).toHaveLength(1);
    for (let i = 0; i < 1000; i += 2) stops[i]!();
    controller.abort();
    controller.abort();
    expect(told).toHaveLength(500);
    expect(told.every((i) => i % 2 === 1)).toBe(true);
    expect(getEventListeners(controller.signal, "abort")).toHaveLength(0);
  });

  it("calls at once for a signal already aborted", () => {
    let told = 0;
    const stop = onAbort(AbortSignal.abort(), () => told++);
    expect(told).toBe(1);
    stop();
    expect(told).toBe(1);
  });
});

describe("onAbort with an Abortable (a call's own abort, no EventTarget)", () => {
  it("listens through the Abortable, and calls at once when it has aborted", () => {
    const listening = new Set<() => void>();
    const call = { aborted: false, listen: (listener: () => void) => (listening.add(listener), () => listening.delete(listener)) };
    let told = 0;
    const stop = onAbort(call, () => told++);
    expect(listening.size).toBe(1);
    stop();
    expect(listening.size).toBe(0);
    onAbort(call, () => told++);
    for (const listener of listening) listener();
    expect(told).toBe(1);
    onAbort({ aborted: true, listen: () => expect.unreachable("an aborted call is not listened to") }, () => told++);
    expect(told).toBe(2);
  });
});

describe("linkedSignal", () => {
  it("aborts with the reason of whichever source aborts first, and stops listening on release", () => {
    const shared = new AbortController();
    const call = new AbortController();
    const linked = linkedSignal(call.signal, shared.signal);
    const released = linkedSignal(new AbortController().signal, shared.signal);
    // One listener on the shared signal serves both links.
    expect(getEventListeners(shared.signal, "abort")).toHaveLength(1);
    released.release();
    call.abort("client went away");
    expect(linked.signal.aborted).toBe(true);
    expect(linked.signal.reason).toBe("client went away");
    linked.release();
    shared.abort("shutting down");
    expect(released.signal.aborted).toBe(false);
  });
});
