// A server whose TLS certificate the client does not trust is not an
// internal error: connect-node reports Node's certificate errors as
// INTERNAL, so this interceptor reports them as UNAVAILABLE with a hint
// at what to trust.
import { Code, ConnectError, type Interceptor, type StreamResponse } from "@connectrpc/connect";

/** Node's codes for a certificate chain or name it could not verify. */
const CERTIFICATE_CODES = new Set([
  "DEPTH_ZERO_SELF_SIGNED_CERT",
  "SELF_SIGNED_CERT_IN_CHAIN",
  "UNABLE_TO_VERIFY_LEAF_SIGNATURE",
  "UNABLE_TO_GET_ISSUER_CERT",
  "UNABLE_TO_GET_ISSUER_CERT_LOCALLY",
  "CERT_HAS_EXPIRED",
  "CERT_NOT_YET_VALID",
  "CERT_UNTRUSTED",
  "CERT_REVOKED",
  "ERR_TLS_CERT_ALTNAME_INVALID",
]);

/** What to do about an untrusted certificate; the CLI's --ca and Node's own variable. */
export const UNTRUSTED_CERTIFICATE_HINT = "trust its CA certificate (PEM) with --ca FILE, or NODE_EXTRA_CA_CERTS=FILE for any Node program";

function certificateCode(error: unknown): string | undefined {
  const seen = new Set<unknown>();
  for (let current = error; current instanceof Error && !seen.has(current); current = current.cause) {
    seen.add(current);
    const code = (current as { code?: unknown }).code;
    if (typeof code === "string" && CERTIFICATE_CODES.has(code)) return code;
  }
  return undefined;
}

/** The error as the caller should see it: UNAVAILABLE with a hint when a certificate was not trusted, else unchanged. */
export function untrustedCertificateError(error: unknown, url: string): unknown {
  const code = certificateCode(error);
  if (code === undefined) return error;
  const reason = error instanceof ConnectError ? error.rawMessage : error instanceof Error ? error.message : String(error);
  return new ConnectError(`the TLS certificate of ${new URL(url).origin} is not trusted (${code}: ${reason}); ${UNTRUSTED_CERTIFICATE_HINT}`, Code.Unavailable, undefined, undefined, error);
}

async function* mapped<T>(messages: AsyncIterable<T>, url: string): AsyncIterable<T> {
  try {
    yield* messages;
  } catch (error) {
    throw untrustedCertificateError(error, url);
  }
}

/** Reports certificate errors of unary calls and streams as UNAVAILABLE with a hint. */
export const untrustedCertificates: Interceptor = (next) => async (request) => {
  try {
    const response = await next(request);
    if (!response.stream) return response;
    return { ...response, message: mapped(response.message, request.url) } as StreamResponse;
  } catch (error) {
    throw untrustedCertificateError(error, request.url);
  }
};
