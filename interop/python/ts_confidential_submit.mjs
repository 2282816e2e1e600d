// The TypeScript requester submits one confidential task and follows it:
//   node ts_confidential_submit.mjs DIST_DIR URL TASK_TYPE PAYLOAD_JSON HOME
// DIST_DIR is the build of this repository (dist). Prints one JSON line per
// event: its sequence, type, whether it travelled sealed, and the output of a
// task_complete; exits 1 when a check inside the client refused something.
import { toJson } from "@bufbuild/protobuf";
import { ValueSchema } from "@bufbuild/protobuf/wkt";
import { pathToFileURL } from "node:url";

const [dist, url, taskType, payload, home] = process.argv.slice(2);
const load = (path) => import(pathToFileURL(`${dist}/${path}`).href);
const { SynapseClient } = await load("src/client/requester.js");
const { loadOrCreateIdentity } = await load("src/agent/identity.js");
const { parseProtocol } = await load("src/client/transport.js");
const { MessageType } = await load("gen/synapse/v1/envelope_pb.js");

const { identity } = await loadOrCreateIdentity(home, { agentName: "confidential interop requester" });
const client = await SynapseClient.connect({ baseUrl: url, identity, transport: { protocol: parseProtocol("grpc") } });
const sent = await client.submit(taskType, JSON.parse(payload), { confidential: true });
for await (const item of client.watch(sent.taskId)) {
  if (item.kind !== "event") continue;
  const event = item.event;
  const line = { sequence: item.sequence, type: MessageType[event.type], sealed: event.header.confidential !== undefined };
  if (event.type === MessageType.TASK_COMPLETE && event.payload.result?.output !== undefined) {
    line.output = toJson(ValueSchema, event.payload.result.output);
  }
  console.log(JSON.stringify(line));
  if (["TASK_COMPLETE", "TASK_FAILED", "TASK_REJECT"].includes(line.type)) break;
}
const task = await client.getTask(sent.taskId);
console.log(JSON.stringify({ task: sent.taskId, confidential: task.confidential !== undefined, result: task.result?.output !== undefined }));
