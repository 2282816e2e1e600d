// Argument parsing shared by every command: node:util parseArgs with a
// usage error that the entry point prints without a stack trace.
import { parseArgs, type ParseArgsConfig } from "node:util";

export class UsageError extends Error {}

export type Options = NonNullable<ParseArgsConfig["options"]>;

const help = { help: { type: "boolean", short: "h" } } as const;

type Parsed<T extends Options> = ReturnType<
  typeof parseArgs<{ args: string[]; options: T & typeof help; allowPositionals: true; strict: true }>
>;

export function parse<T extends Options>(argv: string[], options: T, usage: string): Parsed<T> {
  try {
    return parseArgs({ args: argv, options: { ...options, ...help }, allowPositionals: true, strict: true });
  } catch (error) {
    throw new UsageError(`${(error as Error).message}\n\n${usage}`);
  }
}

export function requirePositional(positionals: string[], index: number, name: string, usage: string): string {
  const value = positionals[index];
  if (value === undefined || value === "") throw new UsageError(`missing ${name}\n\n${usage}`);
  return value;
}

export function integerOption(value: string | undefined, name: string): number | undefined {
  if (value === undefined) return undefined;
  const parsed = Number(value);
  if (!Number.isInteger(parsed) || parsed < 0) throw new UsageError(`${name} must be a non-negative integer, got ${JSON.stringify(value)}`);
  return parsed;
}

const UNITS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/** A duration such as 90s, 15m, 12h or 7d (a bare number is seconds), in milliseconds. */
export function durationOption(value: string | undefined, name: string): number | undefined {
  if (value === undefined) return undefined;
  const match = /^(\d+(?:\.\d+)?)(ms|s|m|h|d)?$/.exec(value.trim());
  if (match === null) throw new UsageError(`${name} must be a duration such as 90s, 15m, 12h or 7d, got ${JSON.stringify(value)}`);
  return Math.round(Number(match[1]) * UNITS[match[2] ?? "s"]!);
}

/** An http:// or https:// URL (an agent's or a registry's base URL). */
export function urlOption(value: string | undefined, name: string): string | undefined {
  if (value === undefined) return undefined;
  let protocol: string | undefined;
  try {
    protocol = new URL(value).protocol;
  } catch {
    protocol = undefined;
  }
  if (protocol !== "http:" && protocol !== "https:") throw new UsageError(`${name} must be an http:// or https:// URL, got ${JSON.stringify(value)}`);
  return value;
}
