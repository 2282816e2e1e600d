// A streaming multipart/form-data reader (RFC 7578): turns a request body
// into a sequence of part headers and body pieces, holding at most one
// network read plus a delimiter's length of it, however large a part is.
// The consumer pulls, so a slow store slows the reading (backpressure).

export type MultipartItem =
  | { kind: "part"; name: string; fileName: string | undefined; contentType: string }
  | { kind: "data"; bytes: Uint8Array }
  | { kind: "end-part" };

/** The body is not well-formed multipart, or breaks a limit. */
export class MultipartError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "MultipartError";
  }
}

const CRLF = Buffer.from("\r\n");
const HEADER_END = Buffer.from("\r\n\r\n");
/** Longest header block of one part, and longest preamble. */
const MAX_HEADER_BYTES = 16 * 1024;
const MAX_PARTS = 32;

/** The boundary of a multipart/form-data content type, or undefined when it is not one. */
export function multipartBoundary(contentType: string | undefined): string | undefined {
  if (contentType === undefined) return undefined;
  const [type, ...params] = contentType.split(";");
  if (type?.trim().toLowerCase() !== "multipart/form-data") return undefined;
  for (const param of params) {
    const eq = param.indexOf("=");
    if (eq < 0 || param.slice(0, eq).trim().toLowerCase() !== "boundary") continue;
    let value = param.slice(eq + 1).trim();
    if (value.startsWith('"') && value.endsWith('"') && value.length >= 2) value = value.slice(1, -1);
    // RFC 2046: 1 to 70 characters.
    return value.length >= 1 && value.length <= 70 ? value : undefined;
  }
  return undefined;
}

/** Parameters of a header value such as `form-data; name="file"; filename="a.csv"`. */
function headerParams(value: string): Map<string, string> {
  const params = new Map<string, string>();
  const pattern = /;\s*([^\s=;]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^;]*))/g;
  for (const match of value.matchAll(pattern)) {
    const raw = match[2] !== undefined ? match[2].replace(/\\(.)/g, "$1") : (match[3] ?? "").trim();
    params.set(match[1]!.toLowerCase(), raw);
  }
  return params;
}

function parsePartHeaders(block: string): MultipartItem & { kind: "part" } {
  let disposition: string | undefined;
  let contentType = "application/octet-stream";
  for (const line of block.split("\r\n")) {
    const colon = line.indexOf(":");
    if (colon <= 0) throw new MultipartError(`malformed part header ${JSON.stringify(line.slice(0, 64))}`);
    const name = line.slice(0, colon).trim().toLowerCase();
    const value = line.slice(colon + 1).trim();
    if (name === "content-disposition") disposition = value;
    else if (name === "content-type") contentType = value;
  }
  if (disposition === undefined || !/^form-data\s*(;|$)/i.test(disposition)) throw new MultipartError("a part has no Content-Disposition: form-data");
  const params = headerParams(disposition);
  const name = params.get("name");
  if (name === undefined) throw new MultipartError("a part has no name");
  return { kind: "part", name, fileName: params.get("filename"), contentType };
}

/** Reads `body` as multipart with `boundary`, yielding each part's headers, then its bytes, then its end. */
export async function* readMultipart(body: AsyncIterable<Uint8Array>, boundary: string): AsyncGenerator<MultipartItem> {
  // The delimiter is CRLF--boundary; a CRLF in front lets the first one match like the rest.
  const delimiter = Buffer.from(`\r\n--${boundary}`);
  let buffer: Buffer = Buffer.from(CRLF);
  let state: "preamble" | "after-delimiter" | "headers" | "body" | "epilogue" = "preamble";
  let parts = 0;
  const source = body[Symbol.asyncIterator]();
  let ended = false;
  const nextRead = async (): Promise<Buffer | undefined> => {
    if (ended) return undefined;
    const next = await source.next();
    if (next.done) {
      ended = true;
      return undefined;
    }
    return Buffer.isBuffer(next.value) ? next.value : Buffer.from(next.value.buffer, next.value.byteOffset, next.value.byteLength);
  };
  const more = async (): Promise<boolean> => {
    const chunk = await nextRead();
    if (chunk === undefined) return false;
    buffer = buffer.length === 0 ? chunk : Buffer.concat([buffer, chunk]);
    return true;
  };
  try {
    for (;;) {
      if (state === "preamble") {
        const at = buffer.indexOf(delimiter);
        if (at >= 0) {
          buffer = buffer.subarray(at + delimiter.length);
          state = "after-delimiter";
          continue;
        }
        if (buffer.length > MAX_HEADER_BYTES) throw new MultipartError("no multipart boundary in the first 16 KiB");
      } else if (state === "after-delimiter") {
        if (buffer.length >= 2) {
          if (buffer[0] === 0x2d && buffer[1] === 0x2d) {
            state = "epilogue";
            continue;
          }
          // Transport padding (spaces, tabs) may follow a delimiter before its CRLF.
          const eol = buffer.indexOf(CRLF);
          if (eol >= 0) {
            if (buffer.subarray(0, eol).some((byte) => byte !== 0x20 && byte !== 0x09)) throw new MultipartError("text after a boundary");
            buffer = buffer.subarray(eol + 2);
            if (++parts > MAX_PARTS) throw new MultipartError(`more than ${MAX_PARTS} parts`);
            state = "headers";
            continue;
          }
          if (buffer.length > MAX_HEADER_BYTES) throw new MultipartError("text after a boundary");
        }
      } else if (state === "headers") {
        const at = buffer.indexOf(HEADER_END);
        const emptyBlock = buffer.subarray(0, 2).equals(CRLF);
        if (emptyBlock) throw new MultipartError("a part has no Content-Disposition: form-data");
        if (at >= 0) {
          yield parsePartHeaders(buffer.subarray(0, at).toString("utf8"));
          buffer = buffer.subarray(at + HEADER_END.length);
          state = "body";
          continue;
        }
        if (buffer.length > MAX_HEADER_BYTES) throw new MultipartError("a part's headers exceed 16 KiB");
      } else if (state === "body") {
        const at = buffer.indexOf(delimiter);
        if (at >= 0) {
          if (at > 0) yield { kind: "data", bytes: buffer.subarray(0, at) };
          yield { kind: "end-part" };
          buffer = buffer.subarray(at + delimiter.length);
          state = "after-delimiter";
          continue;
        }
        // Everything but a tail that could be the start of a delimiter is part of the body.
        const safe = buffer.length - (delimiter.length - 1);
        if (safe > 0) {
          yield { kind: "data", bytes: buffer.subarray(0, safe) };
          buffer = buffer.subarray(safe);
        }
        // The next read joins the short tail only when a delimiter may span the two: file bytes are never copied here.
        const chunk = await nextRead();
        if (chunk === undefined) throw new MultipartError("the body ended inside a part");
        const spans = chunk.length < delimiter.length ? 0 : Buffer.concat([buffer, chunk.subarray(0, delimiter.length)]).indexOf(delimiter);
        // A read shorter than a delimiter is simply joined: it may be the middle of one.
        if (spans >= 0 && spans < buffer.length) buffer = Buffer.concat([buffer, chunk]);
        else {
          if (buffer.length > 0) yield { kind: "data", bytes: buffer };
          buffer = chunk;
        }
        continue;
      } else {
        // The epilogue is ignored, whatever it holds.
        while (await more()) buffer = Buffer.alloc(0);
        return;
      }
      if (!(await more())) throw new MultipartError(state === "preamble" ? "the body has no multipart boundary" : "the body ended inside a part");
    }
  } finally {
    if (!ended) await source.return?.();
  }
}
