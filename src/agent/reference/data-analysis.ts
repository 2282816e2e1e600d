// The data_analysis task: an RFC 4180 CSV parser and per-column count, min,
// max and mean, computed row by row with progress, an optional per-row delay
// that cancellation cuts short, and the parsed rows offered as a result stream.
import type { JsonObject, JsonValue } from "@bufbuild/protobuf";
import { ErrorCode } from "../../../gen/synapse/v1/errors_pb.js";
import { TaskFailure, type TaskHandler } from "../handler.js";

export type ColumnStats = { count: number; min: number | null; max: number | null; mean: number | null };

export type DataStats = { rows: number; columns: { [header: string]: ColumnStats } };

/** A CSV record and the 1-based line it starts on (quoted newlines make the two differ). */
export type CsvRecord = { cells: string[]; line: number };

/** Parses CSV text into records, keeping where each starts for error messages. */
export function parseCsvRecords(text: string): CsvRecord[] {
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

/** RFC 4180 CSV: quoted fields, "" escapes, separators and line breaks inside quotes, LF or CRLF. */
export function parseCsv(text: string): string[][] {
  return parseCsvRecords(text).map((record) => record.cells);
}

/** A cell's number, or undefined when it is blank or not a finite number. */
export function parseNumber(cell: string): number | undefined {
  const trimmed = cell.trim();
  if (trimmed === "") return undefined;
  const value = Number(trimmed);
  return Number.isFinite(value) ? value : undefined;
}

function round6(x: number): number {
  const scaled = x * 1e6;
  // Beyond about 1e302 scaling overflows, and such numbers have no decimals left to round.
  return Number.isFinite(scaled) ? Math.round(scaled) / 1e6 : x;
}

/** Accumulates one column's statistics a cell at a time. */
export class ColumnAccumulator {
  private count = 0;
  private min = Infinity;
  private max = -Infinity;
  private sum = 0;
  /** Kept alongside the sum for columns whose sum overflows. */
  private runningMean = 0;

  /** Adds a cell and returns its number, or undefined when it is not numeric. */
  add(cell: string): number | undefined {
    const value = parseNumber(cell);
    if (value === undefined) return undefined;
    this.count++;
    this.min = Math.min(this.min, value);
    this.max = Math.max(this.max, value);
    this.sum += value;
    this.runningMean += (value - this.runningMean) / this.count;
    return value;
  }

  result(): ColumnStats {
    if (this.count === 0) return { count: 0, min: null, max: null, mean: null };
    const mean = Number.isFinite(this.sum) ? this.sum / this.count : this.runningMean;
    return { count: this.count, min: this.min, max: this.max, mean: round6(mean) };
  }
}

/** The statistics of one column's cells. */
export function columnStats(cells: readonly string[]): ColumnStats {
  const accumulator = new ColumnAccumulator();
  for (const cell of cells) accumulator.add(cell);
  return accumulator.result();
}

function abortReason(signal: AbortSignal): unknown {
  if (signal.reason !== undefined) return signal.reason;
  const error = new Error("the task was aborted");
  error.name = "AbortError";
  return error;
}

/** Waits ms milliseconds, rejecting with the abort reason as soon as signal aborts. */
export function abortableSleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) {
      reject(abortReason(signal));
      return;
    }
    const onAbort = (): void => {
      clearTimeout(timer);
      reject(abortReason(signal));
    };
    const timer = setTimeout(() => {
      signal.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    signal.addEventListener("abort", onAbort, { once: true });
  });
}

function invalid(message: string): TaskFailure {
  return new TaskFailure(ErrorCode.INVALID_PARAMS, message);
}

function readDelay(value: JsonValue | undefined): number {
  if (value === undefined || value === null) return 0;
  if (typeof value !== "number" || !Number.isInteger(value) || value < 0 || value > 60_000) {
    throw invalid("delay_ms_per_row must be an integer from 0 to 60000");
  }
  return value;
}

function readIncludeRows(value: JsonValue | undefined): boolean {
  if (value === undefined || value === null) return false;
  if (typeof value !== "boolean") throw invalid("include_rows must be a boolean");
  return value;
}

export const dataAnalysisHandler: TaskHandler = {
  // Pure computation over the payload: running it again after a restart is safe.
  resumable: true,
  async executeTask(ctx) {
    const csv = ctx.payload.csv;
    if (typeof csv !== "string") throw invalid("csv must be a string");
    const delay = readDelay(ctx.payload.delay_ms_per_row);
    const includeRows = readIncludeRows(ctx.payload.include_rows);

    const [headerRecord, ...dataRecords] = parseCsvRecords(csv);
    if (headerRecord === undefined) throw invalid("csv is empty; its first row must name the columns");
    const header = headerRecord.cells;
    const duplicate = header.find((name, index) => header.indexOf(name) !== index);
    if (duplicate !== undefined) throw invalid(`csv header names column "${duplicate}" more than once`);

    const accumulators = header.map(() => new ColumnAccumulator());
    const parsedRows: JsonObject[] = [];
    const n = dataRecords.length;
    let reported = 0;
    for (const [index, record] of dataRecords.entries()) {
      if (ctx.signal.aborted) throw abortReason(ctx.signal);
      const i = index + 1;
      if (record.cells.length > header.length) {
        throw new TaskFailure(
          ErrorCode.INVALID_PARAMS,
          `line ${record.line} has ${record.cells.length} cells but the header has ${header.length}`,
          false,
          { line: record.line },
        );
      }
      const values: Array<[string, JsonValue]> = header.map((name, column) => {
        const cell = record.cells[column] ?? "";
        return [name, accumulators[column]?.add(cell) ?? cell];
      });
      // fromEntries rather than assignment, so a column named "__proto__" stays a plain key.
      if (includeRows) parsedRows.push(Object.fromEntries(values));

      const percent = Math.floor((i * 100) / n);
      if (percent > reported || i === n) {
        reported = percent;
        await ctx.progress(percent, `row ${i} of ${n}`);
      }
      // No pause after the last row: nothing is left to watch or cancel.
      if (delay > 0 && i < n) await abortableSleep(delay, ctx.signal);
    }
    if (n === 0) await ctx.progress(100, "no data rows");

    const output: DataStats = {
      rows: n,
      columns: Object.fromEntries(header.map((name, column) => [name, accumulators[column]?.result() ?? columnStats([])])),
    };
    const summary = `${n} rows, ${header.length} columns`;
    if (!includeRows) return { output, outputType: "json", summary };
    const data = new TextEncoder().encode(JSON.stringify({ ...output, parsed_rows: parsedRows }));
    return { output, outputType: "json", summary, stream: { contentType: "application/json", data } };
  },
};
