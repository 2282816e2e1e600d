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
