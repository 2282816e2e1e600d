// `synapse upload URL FILE [--json]`: uploads a file (POST /upload) and
// prints its SHA-256 and size, which `synapse submit --upload` names.
import { ConnectError } from "@connectrpc/connect";
import { uploadFile } from "../../client/upload.js";
import { parse, requirePositional } from "../args.js";
import { clientOptions, openClient } from "../client.js";
import { printJson, printLine } from "../output.js";

export const uploadUsage = `usage: synapse upload URL FILE [--content-type TYPE] [--home DIR] [--json]

Uploads FILE to the agent at URL (POST /upload, multipart/form-data, streamed:
files larger than max_file_size are what it is for) and prints the upload's
SHA-256 and size. A task names it with
  synapse submit URL --type data_analysis --payload '{}' --upload csv=SHA256:SIZE
Uploads count against your quota at the agent and are dropped after a while
unless a running task uses them.`;

export async function upload(argv: string[]): Promise<number> {
  const { values, positionals } = parse(argv, { ...clientOptions, "content-type": { type: "string" } }, uploadUsage);
  if (values.help) {
    printLine(uploadUsage);
    return 0;
  }
  const url = requirePositional(positionals, 0, "URL", uploadUsage);
  const path = requirePositional(positionals, 1, "FILE", uploadUsage);
  const client = await openClient(url, values);
  let answer;
  try {
    answer = await uploadFile({ baseUrl: url, token: await client.token(), path, contentType: values["content-type"] });
  } catch (error) {
    if (error instanceof ConnectError) throw error;
    throw new Error(`could not upload ${path}: ${(error as Error).message}`);
  }
  if (values.json) printJson(answer);
  else {
    printLine(`sha256 ${answer.sha256}`);
    printLine(`size ${answer.size}`);
  }
  return 0;
}
