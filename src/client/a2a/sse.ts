// Server-Sent Events read from a fetch body, as the WHATWG spec parses them:
// `data:` lines joined by newlines, `event:` and `id:` kept, comments and
// unknown fields skipped, an event dispatched at each blank line. An event
// larger than the limit ends the stream with an error instead of growing
// memory without bound.

export interface SseEvent {
  /** The `event:` field; "message" when none was given. */
  event: string;
  data: string;
  id?: string;
}

/** The largest event accepted (data of all its lines), in characters. */
export const MAX_SSE_EVENT_CHARS = 16 * 1024 * 1024;

/** The events of a text/event-stream body, in order, until the body ends. */
export async function* readSse(body: ReadableStream<Uint8Array>, maxEventChars = MAX_SSE_EVENT_CHARS): AsyncGenerator<SseEvent> {
  const decoder = new TextDecoder();
  const reader = body.getReader();
  let buffer = "";
  let data: string[] = [];
  let dataChars = 0;
  let event = "";
  let id: string | undefined;
  try {
    for (;;) {
      const { value, done } = await reader.read();
      buffer += done ? decoder.decode() : decoder.decode(value, { stream: true });
      let start = 0;
      for (;;) {
        const newline = nextLineEnd(buffer, start);
        if (newline < 0) break;
        let line = buffer.slice(start, newline);
        start = newline + (buffer[newline] === "\r" && buffer[newline + 1] === "\n" ? 2 : 1);
        if (line === "") {
          if (data.length > 0) yield { event: event || "message", data: data.join("\n"), id };
          data = [];
          dataChars = 0;
          event = "";
          continue;
        }
        if (line.startsWith(":")) continue;
        const colon = line.indexOf(":");
        const field = colon < 0 ? line : line.slice(0, colon);
        line = colon < 0 ? "" : line.slice(colon + 1);
        if (line.startsWith(" ")) line = line.slice(1);
        if (field === "data") {
          dataChars += line.length;
          if (dataChars > maxEventChars) throw new Error(`an event of the stream is larger than ${maxEventChars} characters`);
          data.push(line);
        } else if (field === "event") event = line;
        else if (field === "id" && !line.includes("\0")) id = line;
      }
      buffer = buffer.slice(start);
      if (buffer.length > maxEventChars) throw new Error(`a line of the stream is longer than ${maxEventChars} characters`);
      if (done) {
        // An event not closed by a blank line is dropped, as the spec says.
        return;
      }
    }
  } finally {
    reader.releaseLock();
    await body.cancel().catch(() => undefined);
  }
}

/** Where the next line ends (\n, \r\n or \r) at or after `from`, or -1; a final \r waits for what follows. */
function nextLineEnd(text: string, from: number): number {
  for (let i = from; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 10) return i;
    if (c === 13) return i + 1 < text.length ? i : -1;
  }
  return -1;
}
