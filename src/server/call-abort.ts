// A call's abort for code that waits on it (a Send waiting for its task),
// without the call's AbortSignal: Node gives every AbortSignal three hidden
// classes of its own, made in the old generation, and whatever listens to
// one was promoted with it (about 1.3 KB per waited Send); on the short
// paths the signal is not even made unless something reads it
// (invoke-unary.ts). The short call paths set this (short-call.ts);
// elsewhere it is unset and the context's signal is the one to read. (How the
// short paths abort a call, and when: short-call.ts.)
import { createContextKey, type HandlerContext } from "@connectrpc/connect";
import type { Abortable } from "../abort.js";

export const callAbortKey = createContextKey<Abortable | undefined>(undefined, { description: "the call's abort, without an EventTarget" });

/** What a method that waits (a waited Send, a Watch) listens to for its call's end: the short path's abort, else the signal. */
export function callAbortOf(ctx: HandlerContext): Abortable | AbortSignal {
  return ctx.values.get(callAbortKey) ?? ctx.signal;
}
