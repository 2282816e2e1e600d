// Who an A2A caller is, whatever binding it came by: an agent id proved by
// one of our EdDSA bearer tokens (the same tokens GetTask takes), or, when
// the operator chose open mode, the one anonymous party every
// unauthenticated caller shares. The caller becomes the task's requester.
import { ConnectError } from "@connectrpc/connect";
import { a2aError } from "./errors.js";
import type { TrustPolicy } from "../envelope/trust.js";
import { authenticateHeader } from "../server/auth.js";

/** The agent id unauthenticated callers share in open mode (an A2A task's requester). */
export const ANONYMOUS_AGENT_ID = "a2a:anonymous";

/** An authenticated (or, in open mode, anonymous) A2A caller. */
export interface A2ACaller {
  /** The requester recorded on the caller's tasks: a verified agent id, or ANONYMOUS_AGENT_ID. */
  readonly agentId: string;
  /** The key id its token was signed with; empty for the anonymous caller. */
  readonly keyId: string;
  /** Whether it came without credentials (open mode). */
  readonly anonymous: boolean;
  /** Whether its key is one of the agent's operator keys (reads every task, steers none it did not request). */
  readonly operator: boolean;
}

export interface A2AAuthOptions {
  /** This agent's id: the audience tokens must name. */
  audience: string;
  trust: TrustPolicy;
  /** Operator key ids. */
  operatorKeyIds?: ReadonlySet<string>;
  /** Admit callers without an Authorization header as the anonymous party. */
  open?: boolean;
}

/**
 * The caller of an A2A request from its headers.
 *
 * @throws `ConnectError` (`unauthenticated`) when the token is missing (and
 * open mode is off), malformed or not trusted. A bad token is refused even in
 * open mode: a caller who presents credentials is held to them.
 */
export async function resolveA2ACaller(headers: Headers, options: A2AAuthOptions): Promise<A2ACaller> {
  const header = headers.get("authorization");
  if ((header === null || header.trim() === "") && options.open === true) {
    return { agentId: ANONYMOUS_AGENT_ID, keyId: "", anonymous: true, operator: false };
  }
  try {
    const verified = await authenticateHeader({ audience: options.audience, trust: options.trust }, header);
    return { agentId: verified.agentId, keyId: verified.keyId, anonymous: false, operator: options.operatorKeyIds?.has(verified.keyId) === true };
  } catch (error) {
    throw a2aError("Unauthenticated", ConnectError.from(error).rawMessage, { cause: error });
  }
}
