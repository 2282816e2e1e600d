// Command-line options of the benchmark: --seconds N, --concurrency N, --json.
import { parseArgs } from "node:util";

export interface BenchOptions {
  /** Measured duration of each (workload, protocol) run, in seconds. */
  seconds: number;
  /** Calls kept in flight at once. */
  concurrency: number;
  /** One JSON object on stdout instead of a table. */
  json: boolean;
}

function positive(value: string | undefined, fallback: number, name: string, integer: boolean): number {
  if (value === undefined) return fallback;
  const parsed = Number(value);
  if (!Number.isFinite(parsed) || parsed <= 0 || (integer && !Number.isInteger(parsed))) {
    throw new TypeError(`${name} must be a positive ${integer ? "integer" : "number"}, got ${JSON.stringify(value)}`);
  }
  return parsed;
}

export function parseBenchArgs(argv: readonly string[]): BenchOptions {
  const { values } = parseArgs({
    args: [...argv],
    options: {
      seconds: { type: "string" },
      concurrency: { type: "string" },
      json: { type: "boolean", default: false },
    },
    strict: true,
  });
  return {
    seconds: positive(values.seconds, 5, "--seconds", false),
    concurrency: positive(values.concurrency, 16, "--concurrency", true),
    json: values.json ?? false,
  };
}
