// The two parsers that read uploads in pieces: multipart/form-data bodies
// and CSV text. Whatever the pieces (split anywhere, even inside a
// delimiter, a quote pair or a CRLF), they must read exactly what the whole
// would give.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { ErrorCode } from "../gen/synapse/v1/errors_pb.js";
import { CsvReader, parseCsvRecords, type CsvRecord } from "../src/agent/reference/csv-reader.js";
import { TaskFailure } from "../src/agent/handler.js";
import { MultipartError, multipartBoundary, readMultipart, type MultipartItem } from "../src/server/multipart.js";

/** `bytes` cut at the given offsets. */
function pieces(bytes: Buffer, cuts: number[]): Buffer[] {
  const at = [...new Set(cuts.map((cut) => cut % (bytes.length + 1)))].sort((a, b) => a - b);
  const out: Buffer[] = [];
  let from = 0;
  for (const cut of at) {
    out.push(bytes.subarray(from, cut));
    from = cut;
  }
  out.push(bytes.subarray(from));
  return out.filter((piece) => piece.length > 0);
}

async function* stream(parts: Buffer[]): AsyncIterable<Uint8Array> {
  for (const part of parts) yield part;
}

/** Parts as the reader reports them: name, file name, type and the joined bytes. */
async function readParts(body: Buffer[], boundary: string) {
  const parts: Array<{ name: string; fileName?: string; contentType: string; data: Buffer }> = [];
  for await (const item of readMultipart(stream(body), boundary) as AsyncIterable<MultipartItem>) {
    if (item.kind === "part") parts.push({ name: item.name, fileName: item.fileName, contentType: item.contentType, data: Buffer.alloc(0) });
    else if (item.kind === "data") parts.at(-1)!.data = Buffer.concat([parts.at(-1)!.data, item.bytes]);
  }
  return parts;
}

function form(boundary: string, parts: Array<{ name: string; fileName?: string; data: Buffer }>): Buffer {
  const chunks: Buffer[] = [Buffer.from("preamble text\r\n")];
  for (const part of parts) {
    const file = part.fileName === undefined ? "" : `; filename="${part.fileName}"`;
    chunks.push(Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="${part.name}"${file}\r\nContent-Type: text/csv\r\n\r\n`), part.data, Buffer.from("\r\n"));
  }
  chunks.push(Buffer.from(`--${boundary}--\r\nepilogue`));
  return Buffer.concat(chunks);
}

describe("multipart/form-data reader", () => {
  it("reads the boundary from the content type", () => {
    expect(multipartBoundary("multipart/form-data; boundary=abc")).toBe("abc");
    expect(multipartBoundary('Multipart/Form-Data; charset=utf-8; boundary="a b"')).toBe("a b");
    expect(multipartBoundary("application/json")).toBeUndefined();
    expect(multipartBoundary("multipart/form-data")).toBeUndefined();
  });

  it("reads every part's bytes exactly, however the body is split", async () => {
    const boundary = "----b0undary";
    // Data that looks like a delimiter without being one, and CRLFs at the edges.
    const nearMiss = fc.constantFrom("\r\n--", "\r\n----b0undar", "--", "\r\n", "----b0undary", "x");
    // A sender picks a boundary its data does not contain (RFC 2046 §5.1.1).
    const data = fc
      .array(fc.oneof(nearMiss, fc.string()), { maxLength: 8 })
      .map((bits) => Buffer.from(bits.join("")))
      .filter((bytes) => !Buffer.concat([Buffer.from("\r\n"), bytes]).includes(`\r\n--${boundary}`));
    await fc.assert(
      fc.asyncProperty(fc.array(data, { minLength: 1, maxLength: 3 }), fc.array(fc.nat(), { maxLength: 12 }), async (datas, cuts) => {
        const parts = datas.map((bytes, index) => ({ name: index === 0 ? "file" : `f${index}`, fileName: index === 0 ? "a.csv" : undefined, data: bytes }));
        const read = await readParts(pieces(form(boundary, parts), cuts), boundary);
        expect(read.map((part) => [part.name, part.fileName, part.data.toString("hex")])).toEqual(parts.map((part) => [part.name, part.fileName, part.data.toString("hex")]));
        expect(read[0]?.contentType).toBe("text/csv");
      }),
      { numRuns: 300 },
    );
  });

  it("refuses bodies that are not well-formed multipart", async () => {
    const bad = [
      "no boundary here",
      "--b\r\nContent-Disposition: form-data; name=\"file\"\r\n\r\ncut short",
      "--b\r\nContent-Type: text/plain\r\n\r\nx\r\n--b--",
      "--b\r\nContent-Disposition: attachment; name=\"file\"\r\n\r\nx\r\n--b--",
    ];
    for (const body of bad) await expect(readParts([Buffer.from(body)], "b")).rejects.toBeInstanceOf(MultipartError);
  });
});

/** The whole-text parser data_analysis had before it read in pieces: the reference the reader must match. */
function referenceParse(text: string): CsvRecord[] {
  const records: CsvRecord[] = [];
  let cells: string[] = [];
  let field = "";
  let line = 1;
  let recordLine = 1;
  let i = 0;
  const endRecord = (): void => {
    cells.push(field);
    records.push({ cells, line: recordLine });
    cells = [];
    field = "";
  };

  while (i < text.length) {
    const c = text.charAt(i);
    if (c === '"' && field === "") {
      const quoteLine = line;
      i++;
      for (;;) {
        if (i >= text.length) {
          throw new TaskFailure(ErrorCode.INVALID_PARAMS, `unterminated quoted field starting on line ${quoteLine}`, false, {
            line: quoteLine,
          });
        }
        const q = text.charAt(i);
        if (q === '"') {
          if (text.charAt(i + 1) !== '"') break;
          field += '"';
          i += 2;
          continue;
        }
        if (q === "\n") line++;
        field += q;
        i++;
      }
      i++; // the closing quote
      const next = text.charAt(i);
      if (next !== "" && next !== "," && next !== "\n" && !(next === "\r" && text.charAt(i + 1) === "\n")) {
        throw new TaskFailure(ErrorCode.INVALID_PARAMS, `unexpected text after a closing quote on line ${line}`, false, { line });
      }
      continue;
    }
    if (c === ",") {
      cells.push(field);
      field = "";
      i++;
    } else if (c === "\n" || (c === "\r" && text.charAt(i + 1) === "\n")) {
      i += c === "\r" ? 2 : 1;
      endRecord();
      line++;
      recordLine = line;
      // One trailing line break ends the last record rather than starting an empty one.
      if (i >= text.length) return records;
    } else {
      // A quote inside an unquoted field is kept as a literal character, as most readers do.
      field += c;
      i++;
    }
  }
  if (text.length > 0) endRecord();
  return records;
}

describe("CSV reader in pieces", () => {
  const csvText = fc
    .array(fc.constantFrom("a", "1", ",", "\n", "\r\n", "\r", '"', '""', '"x,\ny"', " "), { maxLength: 40 })
    .map((bits) => bits.join(""));

  it("reads exactly what the whole-text parser gave, records, lines and errors alike", () => {
    fc.assert(
      fc.property(csvText, fc.array(fc.nat(), { maxLength: 8 }), (text, cuts) => {
        const whole = (() => {
          try {
            return referenceParse(text);
          } catch (error) {
            return (error as Error).message;
          }
        })();
        const split = (() => {
          const reader = new CsvReader();
          const records = [];
          try {
            for (const piece of pieces(Buffer.from(text, "latin1"), cuts)) records.push(...reader.push(piece.toString("latin1")));
            records.push(...reader.end());
            return records;
          } catch (error) {
            return (error as Error).message;
          }
        })();
        expect(split).toEqual(whole);
        const direct = (() => {
          try {
            return parseCsvRecords(text);
          } catch (error) {
            return (error as Error).message;
          }
        })();
        expect(direct).toEqual(whole);
      }),
      { numRuns: 2000 },
    );
  });
});
