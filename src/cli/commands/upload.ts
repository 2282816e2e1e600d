// `synapse upload URL FILE [--name NAME] [--confidential --task-id ID] [--json]`:
// uploads a file (POST /upload), sealed for a confidential task if asked, and
// prints the NAME=SHA256:SIZE that `synapse submit --upload` takes.
import { ConnectError } from "@connectrpc/connect";
import { basename, extname } from "node:path";
import { uploadFile } from "../../client/upload.js";
import { parse, requirePositional, UsageError } from "../args.js";
import { clientOptions, openClient, transportOptions } from "../client.js";
import { printJson, printLine } from "../output.js";
import { readTaskKey, writeTaskKey } from "../task-key-file.js";

export const uploadUsage = `usage: synapse upload URL FILE [--name NAME] [--content-type TYPE] [--confidential --task-id ID] [--home DIR] [--ca FILE] [--json]

Uploads FILE to the agent at URL (POST /upload, multipart/form-data, streamed:
files larger than max_file_size are what it is for) and prints the reference a
task names it by, NAME=SHA256:SIZE, ready for --upload:
  synapse submit URL --type data_analysis --payload '{}' --upload "$(synapse upload URL big.csv --name csv)"
NAME is the name the handler reads it under (data_analysis reads csv); default
the file's name without its extension. --json prints the agent's answer with
name and upload (the same reference) added.
Uploads count against your quota at the agent and are dropped after a while
unless a running task uses them.
--confidential --task-id ID seals the file for the confidential task ID, not
yet submitted (docs/PROTOCOL.md §9.7): its key is made now and kept in
--home/tasks/ID.key (mode 0600) until
  synapse submit URL --confidential --task-id ID --upload NAME=... ...
sends the request that carries it. The agent stores only the sealed file.`;

/** The names an upload reference may have (the agent refuses others). */
const NAME = /^[A-Za-z0-9_.-]{1,64}$/;

/** The default name: the file's name without its extension, with what a name may not hold replaced. */
function defaultName(path: string): string {
  const stem = basename(path, extname(path)).replace(/[^A-Za-z0-9_.-]/g, "_").slice(0, 64);
  return stem === "" ? "file" : stem;
}

export async function upload(argv: string[]): Promise<number> {
  const { values, positionals } = parse(
    argv,
    { ...clientOptions, name: { type: "string" }, "content-type": { type: "string" }, confidential: { type: "boolean" }, "task-id": { type: "string" } },
    uploadUsage,
  );
  if (values.help) {
    printLine(uploadUsage);
    return 0;
  }
  const url = requirePositional(positionals, 0, "URL", uploadUsage);
  const path = requirePositional(positionals, 1, "FILE", uploadUsage);
  const name = values.name ?? defaultName(path);
  if (!NAME.test(name)) throw new UsageError(`--name must be 1 to 64 of A-Z a-z 0-9 _ . -, got ${JSON.stringify(name)}`);
  const taskId = values["task-id"];
  if (values.confidential && taskId === undefined) throw new UsageError(`--confidential needs --task-id: the file is sealed with that task's key\n\n${uploadUsage}`);
  if (!values.confidential && taskId !== undefined) throw new UsageError("--task-id goes with --confidential");
  const client = await openClient(url, values);
  let answer;
  try {
    if (taskId !== undefined) {
      // A second file for the same task is sealed with the key kept for it.
      const sealed = await client.uploadConfidential(taskId, name, { path, contentType: values["content-type"], taskKey: await readTaskKey(values.home, taskId) });
      await writeTaskKey(values.home, taskId, sealed.taskKey);
      answer = { sha256: sealed.sha256, size: sealed.size, contentType: sealed.contentType, fileName: sealed.fileName };
    } else {
      answer = await uploadFile({ baseUrl: url, token: await client.token(), path, contentType: values["content-type"], ca: transportOptions(values).ca });
    }
  } catch (error) {
    if (error instanceof ConnectError) throw error;
    throw new Error(`could not upload ${path}: ${(error as Error).message}`);
  }
  const reference = `${name}=${answer.sha256}:${answer.size}`;
  if (values.json) printJson({ ...answer, name, upload: reference });
  else printLine(reference);
  return 0;
}
