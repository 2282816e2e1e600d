// `synapse decode`: verify an envelope read as JSON on stdin and print its
// header and payload readably.
import { fromJson, type JsonValue } from "@bufbuild/protobuf";
import { timestampMs } from "@bufbuild/protobuf/wkt";
import { EnvelopeSchema, HeaderSchema, type Envelope } from "../../../gen/synapse/v1/envelope_pb.js";
import { toBase64Url } from "../../crypto/encoding.js";
import { loadOrCreateIdentity } from "../../agent/identity.js";
import type { SynapseClient } from "../../client/requester.js";
import { unwrapRequestKey } from "../../envelope/confidential.js";
import { open, type ConfidentialKeys } from "../../envelope/open.js";
import { ErrorCode } from "../../../gen/synapse/v1/errors_pb.js";
import { openClient } from "../client.js";
import { synapseHome } from "../home.js";
import { integrityOnly, type TrustPolicy } from "../../envelope/trust.js";
import { decodeUnverified } from "../../envelope/view.js";
import { findErrorDetail, protocolError } from "../../protocol/errors.js";
import { messageTypeInfo } from "../../protocol/message-types.js";
import { parse, UsageError } from "../args.js";
import { messageJson, printJson, printLine } from "../output.js";

export const decodeUsage = `usage: synapse decode [--key-id KEY_ID] [--receiver AGENT_ID] [--at RFC3339] [--home DIR] [--url URL]

Reads an Envelope as JSON on stdin (or any JSON holding one, such as a
SendRequest, a SendResponse or a Watch event), verifies its signature and
prints header and payload. With --key-id the signer must be that key; with
--receiver it must be addressed to that agent. An envelope past its expiry
still verifies and is reported as expired; with --at, validity is checked at
that time and an expired envelope fails. A confidential envelope is opened with
the key in --home (default SYNAPSE_HOME): a task_request wrapped to it directly,
any other message with its task's key, which --url (the agent that runs the
task) gives. Exits 1 when verification fails.`;

/** How decode opens a confidential envelope: a request with this identity's key, anything else with its task's key from the agent at --url. */
async function confidentialKeys(values: { home?: string; url?: string; protocol?: string; ca?: string }): Promise<ConfidentialKeys> {
  let client: SynapseClient | undefined;
  return {
    taskKey: async (header) => {
      if (header.confidential!.keys.length > 0) {
        const { identity } = await loadOrCreateIdentity(synapseHome(values.home), { agentName: "synapse command line" });
        return unwrapRequestKey(header, identity.agentId, identity.encryption!);
      }
      if (values.url === undefined) {
        throw protocolError(ErrorCode.ENCRYPTION_KEY_UNKNOWN, "this confidential message opens with its task's key: give --url, the agent that runs the task (your key in --home unwraps it)");
      }
      client ??= await openClient(values.url, values);
      const key = await client.taskKey(header.taskId);
      if (key === undefined) throw protocolError(ErrorCode.ENCRYPTION_KEY_UNKNOWN, `task ${header.taskId} at ${values.url} is not confidential`);
      return key;
    },
  };
}

async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString("utf8");
}

/** The first object that looks like an Envelope, searching nested fields. */
export function findEnvelopeJson(value: unknown): JsonValue | undefined {
  if (typeof value !== "object" || value === null) return undefined;
  const record = value as Record<string, unknown>;
  if ("signature" in record && "header" in record) return record as JsonValue;
  for (const key of ["envelope", "reply", "message", "event", "heartbeat", ...Object.keys(record)]) {
    const found = findEnvelopeJson(record[key]);
    if (found !== undefined) return found;
  }
  return undefined;
}

function trustFor(keyId: string | undefined): TrustPolicy {
  if (keyId === undefined) return integrityOnly;
  return { publicKeyFor: () => undefined, check: (_agent, id) => (id === keyId ? { kind: "trusted" } : { kind: "unknown" }) };
}

export async function decode(argv: string[]): Promise<number> {
  const { values } = parse(
    argv,
    { "key-id": { type: "string" }, receiver: { type: "string" }, at: { type: "string" }, home: { type: "string" }, url: { type: "string" }, protocol: { type: "string" }, ca: { type: "string" } },
    decodeUsage,
  );
  if (values.help) {
    printLine(decodeUsage);
    return 0;
  }
  const at = values.at === undefined ? Date.now() : Date.parse(values.at);
  if (Number.isNaN(at)) throw new UsageError(`--at must be an RFC 3339 time\n\n${decodeUsage}`);
  let input: unknown;
  try {
    input = JSON.parse(await readStdin());
  } catch (error) {
    throw new UsageError(`stdin is not JSON: ${(error as Error).message}`);
  }
  const found = findEnvelopeJson(input);
  if (found === undefined) throw new UsageError("no envelope (an object with header, payload and signature) in the input");
  let envelope: Envelope;
  try {
    envelope = fromJson(EnvelopeSchema, found, { ignoreUnknownFields: true });
  } catch (error) {
    throw new UsageError(`not a synapse.v1.Envelope: ${(error as Error).message}`);
  }
  const options = { trust: trustFor(values["key-id"]), self: values.receiver, confidential: await confidentialKeys(values) };
  try {
    // An old envelope (from a log, say) still verifies; its expiry is reported beside.
    let expired: string | undefined;
    const opened = await open(envelope, { ...options, now: () => at }).catch(async (error: unknown) => {
      if (findErrorDetail(error)?.protocolCode !== "message_expired" || values.at !== undefined) throw error;
      expired = (error as Error).message;
      const sentAt = decodeUnverified(envelope).header.sentAt;
      return open(envelope, { ...options, now: () => (sentAt ? timestampMs(sentAt) : at) });
    });
    printJson({
      verified: true,
      expired: expired !== undefined,
      ...(expired ? { expiry: expired } : {}),
      messageType: opened.info.wireName,
      signer: { agentId: opened.header.sender?.agentId, keyId: opened.header.sender?.keyId, publicKey: toBase64Url(opened.publicKey) },
      header: messageJson(HeaderSchema, opened.header),
      payload: messageJson(opened.info.payloadSchema, opened.payload as never),
    });
    return 0;
  } catch (error) {
    const detail = findErrorDetail(error);
    let header: unknown;
    let payload: unknown;
    try {
      const unverified = decodeUnverified(envelope);
      header = messageJson(HeaderSchema, unverified.header);
      const info = messageTypeInfo(unverified.header.messageType);
      if (info && unverified.payload) payload = messageJson(info.payloadSchema, unverified.payload as never);
    } catch {
      // Not decodable either; report the refusal alone.
    }
    printJson({
      verified: false,
      error: { code: detail?.protocolCode ?? "unknown", message: (error as Error).message },
      unverifiedHeader: header,
      unverifiedPayload: payload,
    });
    return 1;
  }
}
