// `synapse token URL` and `synapse envelope URL`: the pieces curl needs.
import { create, toJson, type JsonObject } from "@bufbuild/protobuf";
import { durationFromMs } from "@bufbuild/protobuf/wkt";
import { MessageType } from "../../../gen/synapse/v1/envelope_pb.js";
import { SendRequestSchema } from "../../../gen/synapse/v1/p2p_pb.js";
import { TaskRequestPayloadSchema } from "../../../gen/synapse/v1/payloads_pb.js";
import { integerOption, parse, requirePositional, UsageError } from "../args.js";
import { clientOptions, openClient, parseUploads } from "../client.js";
import { printLine } from "../output.js";
import { uuidV7 } from "../../protocol/ids.js";

export const tokenUsage = `usage: synapse token URL [--lifetime SECONDS] [--home DIR] [--protocol P]

Prints a bearer token (an EdDSA JWT signed by your key, audience the agent at URL,
at most 300 s) for GetTask, ListTasks, Watch and ReadResult:
  curl -H "Authorization: Bearer $(synapse token URL)" ...`;

export const envelopeUsage = `usage: synapse envelope URL --type TASK_TYPE --payload JSON [--upload NAME=SHA256:SIZE]... [--task-id ID] [--wait SECONDS] [--home DIR]

Prints a signed SendRequest carrying a p2p:task_request, as JSON, ready for
  synapse envelope URL --type T --payload '{...}' | curl -H 'Content-Type: application/json' -d @- URL/synapse.v1.P2PService/Send
It is valid for 5 minutes. --type is spelled as for \`synapse submit\`; --task-type is
accepted too.`;

export async function token(argv: string[]): Promise<number> {
  const { values, positionals } = parse(argv, { ...clientOptions, lifetime: { type: "string" } }, tokenUsage);
  if (values.help) {
    printLine(tokenUsage);
    return 0;
  }
  const url = requirePositional(positionals, 0, "URL", tokenUsage);
  printLine(await (await openClient(url, values)).token(integerOption(values.lifetime, "--lifetime")));
  return 0;
}

export async function envelope(argv: string[]): Promise<number> {
  const { values, positionals } = parse(
    argv,
    { ...clientOptions, type: { type: "string" }, "task-type": { type: "string" }, payload: { type: "string" }, "task-id": { type: "string" }, wait: { type: "string" }, upload: { type: "string", multiple: true } },
    envelopeUsage,
  );
  if (values.help) {
    printLine(envelopeUsage);
    return 0;
  }
  const url = requirePositional(positionals, 0, "URL", envelopeUsage);
  if (values.type && values["task-type"] && values.type !== values["task-type"]) {
    throw new UsageError(`--type and --task-type name different task types; give one\n\n${envelopeUsage}`);
  }
  const taskType = values.type || values["task-type"];
  if (!taskType) throw new UsageError(`--type is required\n\n${envelopeUsage}`);
  let payload: JsonObject;
  try {
    payload = JSON.parse(values.payload ?? "{}") as JsonObject;
  } catch (error) {
    throw new UsageError(`--payload is not JSON: ${(error as Error).message}`);
  }
  if (typeof payload !== "object" || payload === null || Array.isArray(payload)) throw new UsageError("--payload must be a JSON object");
  const client = await openClient(url, values);
  const taskId = values["task-id"] ?? uuidV7();
  const uploads = parseUploads(values.upload).map((upload) => ({ ...upload, size: BigInt(upload.size) }));
  const request = create(TaskRequestPayloadSchema, { task: { id: taskId, type: taskType, payload }, uploads });
  const wait = integerOption(values.wait, "--wait");
  const send = create(SendRequestSchema, {
    envelope: client.envelope(MessageType.TASK_REQUEST, request, { taskId }),
    wait: wait === undefined ? undefined : durationFromMs(wait * 1000),
  });
  printLine(JSON.stringify(toJson(SendRequestSchema, send)));
  return 0;
}
