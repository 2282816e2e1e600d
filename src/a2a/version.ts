// The A2A service parameters every binding reads the same way (A2A 1.0
// sections 3.2.6 and 3.6): A2A-Version, from the header or the A2A-Version
// query parameter, and A2A-Extensions, the extensions a client asks to use.
//
// Versions: this server speaks 1.0. Only Major.Minor counts (a patch number
// is ignored). The specification says a request with no version, or an
// empty one, MUST be read as a 0.3 request; we do not serve 0.3, so such a
// request is answered VersionNotSupportedError like any other version we do
// not speak. The official SDK's clients send "A2A-Version: 1.0" with every
// call, so they are served; curl users add the header (docs/A2A.md).
import type { Interceptor } from "@connectrpc/connect";
import type { ConnectError } from "@connectrpc/connect";
import { a2aError } from "./errors.js";

/** The A2A protocol version this server speaks (Major.Minor). */
export const A2A_PROTOCOL_VERSION = "1.0";
export const A2A_VERSION_HEADER = "A2A-Version";
export const A2A_EXTENSIONS_HEADER = "A2A-Extensions";
/** What the specification makes of a request that names no version. */
export const A2A_ASSUMED_VERSION = "0.3";

const SUPPORTED = new Set([A2A_PROTOCOL_VERSION]);
/** Major[.Minor[.Patch]]: digits only, the patch ignored. */
const VERSION = /^(\d{1,4})(?:\.(\d{1,4}))?(?:\.\d{1,6})?$/;
const MAX_ECHO = 32;

/**
 * The version a request names: its A2A-Version header, else its A2A-Version
 * query parameter, reduced to Major.Minor; the assumed 0.3 when it names
 * none; undefined when what it names is not a version at all.
 */
export function requestedVersion(headers: Headers, query?: URLSearchParams): string | undefined {
  const raw = (headers.get(A2A_VERSION_HEADER) ?? "").trim() || (query?.get(A2A_VERSION_HEADER) ?? query?.get("a2a-version") ?? "").trim();
  if (raw === "") return A2A_ASSUMED_VERSION;
  const match = VERSION.exec(raw);
  if (match === null) return undefined;
  return `${Number(match[1])}.${Number(match[2] ?? 0)}`;
}

/** VersionNotSupportedError for a request that does not name a version we speak; undefined when it does. */
export function versionError(headers: Headers, query?: URLSearchParams): ConnectError | undefined {
  const version = requestedVersion(headers, query);
  if (version !== undefined && SUPPORTED.has(version)) return undefined;
  const named = (headers.get(A2A_VERSION_HEADER) ?? query?.get(A2A_VERSION_HEADER) ?? "").trim().slice(0, MAX_ECHO);
  const message =
    named === ""
      ? `the request names no A2A-Version, which A2A reads as ${A2A_ASSUMED_VERSION}; this agent speaks A2A ${A2A_PROTOCOL_VERSION} only: send the header "${A2A_VERSION_HEADER}: ${A2A_PROTOCOL_VERSION}"`
      : `A2A-Version ${JSON.stringify(named)} is not supported; this agent speaks A2A ${A2A_PROTOCOL_VERSION} only`;
  return a2aError("VersionNotSupported", message, {
    metadata: { requestedVersion: version ?? named, supportedVersions: [...SUPPORTED].join(",") },
  });
}

/**
 * Refuses, on the Connect router (gRPC, gRPC-web, Connect), calls to
 * lf.a2a.v1.A2AService that name a version we do not speak; other services
 * are not A2A and pass. The JSON bindings check the same themselves.
 */
export const a2aVersionInterceptor: Interceptor = (next) => async (req) => {
  if (req.service.typeName === "lf.a2a.v1.A2AService") {
    const refused = versionError(req.header);
    if (refused !== undefined) throw refused;
  }
  return next(req);
};

/** The extension URIs a request asks to use (A2A-Extensions: comma-separated, in order, each once). */
export function requestedExtensions(headers: Headers): string[] {
  const raw = headers.get(A2A_EXTENSIONS_HEADER);
  if (raw === null) return [];
  const seen = new Set<string>();
  for (const item of raw.split(",")) {
    const uri = item.trim();
    if (uri !== "") seen.add(uri);
  }
  return [...seen];
}

/**
 * Activates, for one call, the extensions it asks for that this agent
 * supports (others are ignored, as the specification says), and names them
 * in the response's A2A-Extensions header. A binding copies the context's
 * response headers to its answer, so a service method calls this once.
 *
 * @throws `ConnectError` ExtensionSupportRequiredError when the request does
 * not ask for an extension the agent marks required.
 */
export function activateExtensions(
  ctx: { requestHeader: Headers; responseHeader: Headers },
  supported: ReadonlySet<string>,
  required: readonly string[] = [],
): string[] {
  const requested = requestedExtensions(ctx.requestHeader);
  const missing = required.filter((uri) => !requested.includes(uri));
  if (missing.length > 0) {
    throw a2aError("ExtensionSupportRequired", `this agent requires the extension${missing.length > 1 ? "s" : ""} ${missing.join(", ")}: name ${missing.length > 1 ? "them" : "it"} in the ${A2A_EXTENSIONS_HEADER} header`, {
      metadata: { requiredExtensions: missing.join(",") },
    });
  }
  const active = requested.filter((uri) => supported.has(uri));
  if (active.length > 0) ctx.responseHeader.set(A2A_EXTENSIONS_HEADER, active.join(","));
  return active;
}
