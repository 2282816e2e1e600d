// Bearer tokens for GetTask, ListTasks, Watch and ReadResult: an EdDSA JWT
// per docs/PROTOCOL.md §5.4, signed by the console's key. The header carries
// the public key as `jwk`, because a console's first read may come before
// the agent has pinned its key. A token serves every read until a minute
// before it expires.
import { toBase64Url, utf8 } from "./bytes.js";
import { publicJwk, type ConsoleIdentity } from "./keys.js";

/** The protocol's upper bound on exp - iat. */
export const MAX_TOKEN_LIFETIME_SECONDS = 300;

const encodeJson = (value: object): string => toBase64Url(utf8(JSON.stringify(value)));

export async function issueToken(identity: ConsoleIdentity, audience: string, options: { lifetimeSeconds?: number; nowMs?: number } = {}): Promise<string> {
  const lifetime = Math.min(options.lifetimeSeconds ?? 120, MAX_TOKEN_LIFETIME_SECONDS);
  const iat = Math.floor((options.nowMs ?? Date.now()) / 1000);
  const header = { alg: "EdDSA", typ: "JWT", kid: identity.keyId, jwk: publicJwk(identity.publicKey) };
  const claims = { iss: identity.agentId, sub: identity.agentId, aud: audience, iat, exp: iat + lifetime };
  const signingInput = `${encodeJson(header)}.${encodeJson(claims)}`;
  const signature = await identity.sign(utf8(signingInput));
  return `${signingInput}.${toBase64Url(signature)}`;
}

/** One token per audience, renewed a minute before it expires. */
export class TokenCache {
  private current: { token: string; renewAtMs: number } | undefined;
  private pending: Promise<string> | undefined;

  constructor(
    private readonly identity: ConsoleIdentity,
    private readonly audience: string,
  ) {}

  async token(): Promise<string> {
    if (this.current !== undefined && Date.now() < this.current.renewAtMs) return this.current.token;
    this.pending ??= issueToken(this.identity, this.audience, { lifetimeSeconds: MAX_TOKEN_LIFETIME_SECONDS })
      .then((token) => {
        this.current = { token, renewAtMs: Date.now() + (MAX_TOKEN_LIFETIME_SECONDS - 60) * 1000 };
        return token;
      })
      .finally(() => {
        this.pending = undefined;
      });
    return this.pending;
  }

  async headers(): Promise<Record<string, string>> {
    return { Authorization: `Bearer ${await this.token()}` };
  }
}
