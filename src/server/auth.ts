// Bearer-token authentication for the RPCs that carry no envelope, and for
// the plain HTTP routes (uploads, the SSE event stream).
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
  return authenticateHeader(policy, ctx.requestHeader.get("authorization"));
}

/** Checks an `Authorization: Bearer <token>` header value. */
export async function authenticateHeader(policy: BearerPolicy, header: string | null | undefined): Promise<VerifiedCaller> {
  if (header === null || header === undefined) {
    throw protocolError(ErrorCode.UNAUTHENTICATED, "missing Authorization: Bearer <token> (see `synapse token`)");
  }
  const match = /^Bearer\s+(\S+)$/i.exec(header.trim());
  if (match === null) throw protocolError(ErrorCode.UNAUTHENTICATED, "Authorization must be `Bearer <token>`");
  return authenticateToken(policy, match[1]!);
}

export async function authenticateToken(policy: BearerPolicy, token: string): Promise<VerifiedCaller> {
  // Tokens have their own fixed tolerance (60 s), not the envelopes' clock skew.
  return verifyToken(token, { audience: policy.audience, trust: policy.trust });
}
