// A handler's named outputs (ResultArtifact) as the signed result keeps
// them: JSON in the result's metadata, each part in A2A's Part JSON shape
// (text | data | raw (base64) | url, with filename and mediaType), so the
// Synapse face signs exactly what the A2A face shows.
import type { JsonObject, JsonValue } from "@bufbuild/protobuf";
import { ErrorCode } from "../../gen/synapse/v1/errors_pb.js";
import { TaskFailure, type ResultArtifact, type ResultPart } from "./handler.js";

function partJson(part: ResultPart, where: string): JsonObject {
  const json: JsonObject = {};
  const contents = (["text", "data", "bytes", "url"] as const).filter((key) => key in part);
  if (contents.length !== 1) throw new TaskFailure(ErrorCode.OUTPUT_INVALID, `${where} must hold exactly one of text, data, bytes or url`);
  if ("text" in part) json.text = part.text;
  else if ("data" in part) json.data = part.data;
  else if ("bytes" in part) json.raw = Buffer.from(part.bytes).toString("base64");
  else json.url = part.url;
  if (part.fileName !== undefined) json.filename = part.fileName;
  if (part.mediaType !== undefined) json.mediaType = part.mediaType;
  return json;
}

/** The artifacts as the result's metadata holds them; TaskFailure output_invalid for an empty one. */
export function artifactsJson(taskId: string, artifacts: readonly ResultArtifact[]): JsonValue[] {
  return artifacts.map((artifact, index) => {
    if (artifact.parts.length === 0) throw new TaskFailure(ErrorCode.OUTPUT_INVALID, `artifacts[${index}] has no parts`);
    const json: JsonObject = { artifactId: artifact.artifactId ?? `${taskId}-artifact-${index + 1}`, parts: artifact.parts.map((part, at) => partJson(part, `artifacts[${index}].parts[${at}]`)) };
    if (artifact.name !== undefined) json.name = artifact.name;
    if (artifact.description !== undefined) json.description = artifact.description;
    return json;
  });
}
