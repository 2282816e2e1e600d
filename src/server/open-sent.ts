// The first step of every Send-like RPC: the request must carry an
// envelope, it is opened (signature first, then the receiver checks), and
// the call's log line is told which verified message it is about.
import type { HandlerContext } from "@connectrpc/connect";
import type { Envelope } from "../../gen/synapse/v1/envelope_pb.js";
import { ErrorCode } from "../../gen/synapse/v1/errors_pb.js";
import { open, type OpenedEnvelope, type OpenOptions } from "../envelope/open.js";
import { protocolError } from "../protocol/errors.js";
import { callStatusKey } from "./call-status.js";

export async function openSent(envelope: Envelope | undefined, options: OpenOptions, ctx: HandlerContext): Promise<OpenedEnvelope> {
  if (envelope === undefined) throw protocolError(ErrorCode.MESSAGE_FORMAT_INVALID, "envelope is required");
  const opened = await open(envelope, options);
  const status = ctx.values.get(callStatusKey);
  if (status !== undefined) status.envelope = opened.header;
  return opened;
}
