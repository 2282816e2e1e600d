// Bearer-token authentication for the RPCs that carry no envelope.
import type { HandlerContext } from "@connectrpc/connect";
import { ErrorCode } from "../../gen/synapse/v1/errors_pb.js";
import { verifyToken, type VerifiedCaller } from "../crypto/tokens.js";
import type { TrustPolicy } from "../envelope/trust.js";
import { protocolError } from "../protocol/errors.js";

export interface BearerPolicy {
  /** The agent id tokens must name as audience. */
  audience: string;
  trust: TrustPolicy;
}

export async function authenticate(policy: BearerPolicy, ctx: HandlerContext): Promise<VerifiedCaller> {
  const header = ctx.requestHeader.get("authorization");
  if (header === null) {
    throw protocolError(ErrorCode.UNAUTHENTICATED, "missing Authorization: Bearer <token> (see `synapse token`)");
  }
  const match = /^Bearer\s+(\S+)$/i.exec(header.trim());
  if (match === null) throw protocolError(ErrorCode.UNAUTHENTICATED, "Authorization must be `Bearer <token>`");
  // Tokens have their own fixed tolerance (60 s), not the envelopes' clock skew.
  return verifyToken(match[1]!, { audience: policy.audience, trust: policy.trust });
}
