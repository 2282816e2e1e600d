// Bearer-token authentication for the RPCs that carry no envelope.
import type { HandlerContext } from "@connectrpc/connect";
import { ErrorCode } from "../../gen/synapse/v1/errors_pb.js";
import { verifyToken, type VerifiedCaller } from "../crypto/tokens.js";
import type { Agent } from "../agent/agent.js";
import { protocolError } from "../protocol/errors.js";

export async function authenticate(agent: Agent, ctx: HandlerContext): Promise<VerifiedCaller> {
  const header = ctx.requestHeader.get("authorization");
  if (header === null) {
    throw protocolError(ErrorCode.UNAUTHENTICATED, "missing Authorization: Bearer <token> (see `synapse token`)");
  }
  const match = /^Bearer\s+(\S+)$/i.exec(header.trim());
  if (match === null) throw protocolError(ErrorCode.UNAUTHENTICATED, "Authorization must be `Bearer <token>`");
  return verifyToken(match[1]!, {
    audience: agent.identity.agentId,
    trust: agent.trust,
    clockSkewSeconds: Math.round(agent.clockSkewMs / 1000),
  });
}
