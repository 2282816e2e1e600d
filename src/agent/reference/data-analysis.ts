// The data_analysis task: per-column count, min, max and mean of a CSV,
// computed row by row with progress, an optional per-row delay that
// cancellation cuts short, and the parsed rows offered as a result stream.
// The CSV comes in the payload, or as an upload named "csv" (any size: it
// is read from the store chunk by chunk, never whole).
import type { JsonObject, JsonValue } from "@bufbuild/protobuf";
import { ErrorCode } from "../../../gen/synapse/v1/errors_pb.js";
import { TaskFailure, type TaskContext, type TaskHandler, type TaskOutput } from "../handler.js";
import { csvRecordsOf, parseCsvRecords, type CsvRecord } from "./csv-reader.js";
import { counted } from "../../text/plural.js";

export { parseCsvRecords, type CsvRecord } from "./csv-reader.js";

export type ColumnStats = { count: number; min: number | null; max: number | null; mean: number | null };

export type DataStats = { rows: number; columns: { [header: string]: ColumnStats } };

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

/** Where the records come from, and how far along the reading is after data row i. */
interface CsvSource {
  records: Iterable<CsvRecord> | AsyncIterable<CsvRecord>;
  progress(row: number): { percent: number; message: string };
  /** The last report, once every row is read. */
  done(rows: number): { percent: number; message: string };
}

/** The payload's csv text: its rows are counted first, so progress is by row. */
function textSource(csv: string): CsvSource {
  const records = parseCsvRecords(csv);
  const n = Math.max(0, records.length - 1);
  return {
    records,
    progress: (row) => ({ percent: Math.floor((row * 100) / n), message: `row ${row} of ${n}` }),
    done: (rows) => (rows === 0 ? { percent: 100, message: "no data rows" } : { percent: 100, message: `row ${rows} of ${rows}` }),
  };
}

/** An uploaded csv, read from the store as it is parsed: progress is by bytes read. */
function uploadSource(ctx: TaskContext, size: number): CsvSource {
  let read = 0;
  return {
    records: csvRecordsOf(ctx.uploads.open("csv"), (bytes) => (read += bytes)),
    progress: (row) => ({ percent: size === 0 ? 99 : Math.min(99, Math.floor((read * 100) / size)), message: `row ${row}, ${read} of ${size} bytes` }),
    done: (rows) => ({ percent: 100, message: rows === 0 ? "no data rows" : `row ${rows} of ${rows}` }),
  };
}

async function analyze(ctx: TaskContext, source: CsvSource, delay: number, includeRows: boolean): Promise<TaskOutput> {
  let header: string[] | undefined;
  let accumulators: ColumnAccumulator[] = [];
  const parsedRows: JsonObject[] = [];
  let n = 0;
  let reported = 0;
  let pause: Promise<void> | undefined;
  for await (const record of source.records) {
    if (ctx.signal.aborted) throw abortReason(ctx.signal);
    if (header === undefined) {
      header = record.cells;
      const names = header;
      const duplicate = names.find((name, index) => names.indexOf(name) !== index);
      if (duplicate !== undefined) throw invalid(`csv header names column "${duplicate}" more than once`);
      accumulators = names.map(() => new ColumnAccumulator());
      continue;
    }
    // The pause after a row is taken once the next one exists: none follows the last row.
    if (pause !== undefined) await pause;
    const i = ++n;
    if (record.cells.length > header.length) {
      throw new TaskFailure(ErrorCode.INVALID_PARAMS, `line ${record.line} has ${record.cells.length} cells but the header has ${header.length}`, false, {
        line: record.line,
      });
    }
    const values: Array<[string, JsonValue]> = header.map((name, column) => {
      const cell = record.cells[column] ?? "";
      return [name, accumulators[column]?.add(cell) ?? cell];
    });
    // fromEntries rather than assignment, so a column named "__proto__" stays a plain key.
    if (includeRows) parsedRows.push(Object.fromEntries(values));
    const { percent, message } = source.progress(i);
    if (percent > reported) {
      reported = percent;
      await ctx.progress(percent, message);
    }
    pause = delay > 0 ? abortableSleep(delay, ctx.signal) : undefined;
    // Handled now, awaited later: a cancel while the next row is read must not be an unhandled rejection.
    pause?.catch(() => undefined);
  }
  if (header === undefined) throw invalid("csv is empty; its first row must name the columns");
  if (reported < 100) {
    const last = source.done(n);
    await ctx.progress(last.percent, last.message);
  }
  const names = header;
  const output: DataStats = {
    rows: n,
    columns: Object.fromEntries(names.map((name, column) => [name, accumulators[column]?.result() ?? columnStats([])])),
  };
  const summary = `${counted(n, "row")}, ${counted(names.length, "column")}`;
  if (!includeRows) return { output, outputType: "json", summary };
  const data = new TextEncoder().encode(JSON.stringify({ ...output, parsed_rows: parsedRows }));
  return { output, outputType: "json", summary, stream: { contentType: "application/json", data } };
}

export const dataAnalysisHandler: TaskHandler = {
  // Pure computation over the payload: running it again after a restart is safe.
  resumable: true,
  async executeTask(ctx) {
    const delay = readDelay(ctx.payload.delay_ms_per_row);
    const includeRows = readIncludeRows(ctx.payload.include_rows);
    const upload = ctx.uploads.get("csv");
    if (upload !== undefined && ctx.payload.csv === undefined) {
      // Every parsed row of a file of any size would not fit a result held in memory.
      if (includeRows) throw invalid("include_rows is for csv text in the payload, not for an uploaded csv");
      return analyze(ctx, uploadSource(ctx, upload.size), delay, false);
    }
    const csv = ctx.payload.csv;
    if (typeof csv !== "string") throw invalid("csv must be a string (or the task must name an upload called csv)");
    return analyze(ctx, textSource(csv), delay, includeRows);
  },
};
