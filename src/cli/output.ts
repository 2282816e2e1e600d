// How commands print: one JSON object (--json) or readable text, to stdout.
import { toJson, type DescMessage, type MessageShape } from "@bufbuild/protobuf";

export function printJson(value: unknown): void {
  process.stdout.write(`${JSON.stringify(value, null, 2)}\n`);
}

export function printLine(text = ""): void {
  process.stdout.write(`${text}\n`);
}

/** Proto3 JSON of a message, as the server's JSON would show it. */
export function messageJson<Desc extends DescMessage>(schema: Desc, message: MessageShape<Desc>): unknown {
  return toJson(schema, message, { alwaysEmitImplicit: false });
}
