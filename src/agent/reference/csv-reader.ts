// An RFC 4180 CSV reader that takes its text in pieces: quoted fields, ""
// escapes, separators and line breaks inside quotes, LF or CRLF, one
// trailing line break ending the last record. Pieces may split anywhere
// (inside a quote pair or a CRLF), so a file read chunk by chunk parses
// exactly as the whole text would, in memory bounded by the longest record.
import { ErrorCode } from "../../../gen/synapse/v1/errors_pb.js";
import { TaskFailure } from "../handler.js";

/** A CSV record and the 1-based line it starts on (quoted newlines make the two differ). */
export type CsvRecord = { cells: string[]; line: number };

/** Characters that may mean something outside quotes. */
const SPECIAL = /[",\r\n]/g;

export class CsvReader {
  private cells: string[] = [];
  private field = "";
  private line = 1;
  private recordLine = 1;
  private inQuotes = false;
  private quoteLine = 1;
  /** Inside quotes, a quote was seen: an escaped quote or the closing one, the next character says. */
  private quotePending = false;
  /** A quoted field just closed: a separator or line break must follow. */
  private afterQuote = false;
  /** A CR was seen outside quotes: a line break if LF follows, else a literal CR. */
  private crPending = false;
  /** Whether anything was read since the last record ended. */
  private open = false;
  private records: CsvRecord[] = [];

  /** Reads more text; returns the records it completed. */
  push(text: string): CsvRecord[] {
    let i = 0;
    while (i < text.length) {
      if (this.quotePending || this.crPending || this.afterQuote) {
        this.take(text.charAt(i++));
        continue;
      }
      // Runs of plain characters are taken as slices: a large file costs one string per field, not one per character.
      if (this.inQuotes) {
        const quote = text.indexOf('"', i);
        const end = quote < 0 ? text.length : quote;
        if (end > i) this.plain(text.slice(i, end), true);
        if (quote < 0) break;
        this.take('"');
        i = quote + 1;
        continue;
      }
      SPECIAL.lastIndex = i;
      const end = SPECIAL.exec(text)?.index ?? text.length;
      if (end > i) {
        this.plain(text.slice(i, end), false);
        i = end;
      } else this.take(text.charAt(i++));
    }
    const done = this.records;
    this.records = [];
    return done;
  }

  /** Characters with no meaning in the current state (inside quotes, line breaks count lines). */
  private plain(run: string, quoted: boolean): void {
    this.open = true;
    this.field += run;
    if (quoted) for (let at = run.indexOf("\n"); at >= 0; at = run.indexOf("\n", at + 1)) this.line++;
  }

  /** Ends the text; returns the last record, if one is open. */
  end(): CsvRecord[] {
    if (this.inQuotes && !this.quotePending) {
      throw new TaskFailure(ErrorCode.INVALID_PARAMS, `unterminated quoted field starting on line ${this.quoteLine}`, false, { line: this.quoteLine });
    }
    this.inQuotes = false;
    this.quotePending = false;
    if (this.crPending) {
      // A CR at the very end is text (after a closing quote, it is text where none may be).
      if (this.afterQuote) throw this.afterQuoteError();
      this.field += "\r";
      this.crPending = false;
    }
    if (this.open) this.endRecord();
    const done = this.records;
    this.records = [];
    return done;
  }

  private afterQuoteError(): TaskFailure {
    return new TaskFailure(ErrorCode.INVALID_PARAMS, `unexpected text after a closing quote on line ${this.line}`, false, { line: this.line });
  }

  private take(c: string): void {
    this.open = true;
    if (this.quotePending) {
      this.quotePending = false;
      if (c === '"') {
        this.field += '"';
        return;
      }
      this.inQuotes = false;
      this.afterQuote = true;
    }
    if (this.inQuotes) {
      if (c === '"') this.quotePending = true;
      else {
        if (c === "\n") this.line++;
        this.field += c;
      }
      return;
    }
    if (this.crPending) {
      this.crPending = false;
      if (c === "\n") {
        this.afterQuote = false;
        return this.endRecord();
      }
      if (this.afterQuote) throw this.afterQuoteError();
      this.field += "\r";
    }
    if (this.afterQuote) {
      if (c === "\r") {
        this.crPending = true;
        return;
      }
      if (c !== "," && c !== "\n") throw this.afterQuoteError();
      this.afterQuote = false;
    }
    if (c === '"' && this.field === "") {
      this.inQuotes = true;
      this.quoteLine = this.line;
    } else if (c === ",") {
      this.cells.push(this.field);
      this.field = "";
    } else if (c === "\n") {
      this.endRecord();
    } else if (c === "\r") {
      this.crPending = true;
    } else {
      // A quote inside an unquoted field is kept as a literal character, as most readers do.
      this.field += c;
    }
  }

  private endRecord(): void {
    this.cells.push(this.field);
    this.records.push({ cells: this.cells, line: this.recordLine });
    this.cells = [];
    this.field = "";
    this.line++;
    this.recordLine = this.line;
    this.open = false;
  }
}

/** Parses CSV text into records, keeping where each starts for error messages. */
export function parseCsvRecords(text: string): CsvRecord[] {
  const reader = new CsvReader();
  return [...reader.push(text), ...reader.end()];
}

/** Records of CSV bytes arriving in chunks (UTF-8), as they complete. */
export async function* csvRecordsOf(chunks: AsyncIterable<Uint8Array>, onBytes?: (bytes: number) => void): AsyncGenerator<CsvRecord> {
  const reader = new CsvReader();
  const decoder = new TextDecoder("utf-8");
  for await (const chunk of chunks) {
    onBytes?.(chunk.byteLength);
    yield* reader.push(decoder.decode(chunk, { stream: true }));
  }
  yield* reader.push(decoder.decode());
  yield* reader.end();
}
