// The one structured logger library code writes through (pino, JSON lines).
import { pino, type Logger } from "pino";

export type { Logger };

/** Options of {@link createLogger}. */
export interface LoggerOptions {
  /** The lowest level logged (`"debug"`, `"info"`, `"warn"`, ...); default `SYNAPSE_LOG_LEVEL` or `"info"`. */
  level?: string;
  /** Where lines go; defaults to stderr so stdout stays free for command output. */
  destination?: NodeJS.WritableStream;
}

/** A logger writing JSON lines (pino) to stderr, the form the `synapse` command logs in. */
export function createLogger(options: LoggerOptions = {}): Logger {
  // An empty SYNAPSE_LOG_LEVEL is as good as none.
  const level = options.level ?? (process.env.SYNAPSE_LOG_LEVEL || "info");
  return pino({ level, base: { service: "synapse" } }, options.destination ?? pino.destination(2));
}

/** A logger that drops everything, for tests and embedded use. */
export const silentLogger: Logger = pino({ level: "silent" });
