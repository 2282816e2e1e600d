// The two RPC workloads, each over gRPC and over Connect JSON:
// a bare unary Handshake (no signing, no state) as the baseline, and a
// signed text_analysis submission through SynapseClient.
import { createClient } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport } from "@connectrpc/connect-node";
import { CapabilitiesService } from "../gen/synapse/v1/capabilities_pb.js";
import { MessageType } from "../gen/synapse/v1/envelope_pb.js";
import { TaskState } from "../gen/synapse/v1/payloads_pb.js";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { loadOrCreateIdentity, type AgentIdentity } from "../src/agent/identity.js";
import { SynapseClient } from "../src/client/requester.js";
import type { TransportOptions } from "../src/client/transport.js";
import type { Call } from "./measure.js";

export type BenchProtocol = "grpc" | "connect-json";
export const BENCH_PROTOCOLS: readonly BenchProtocol[] = ["grpc", "connect-json"];

export const BASELINE = "baseline (unary Handshake)";
export const SIGNED = "signed submit (text_analysis)";

/** A fixed text of about 200 characters, so every task does the same work. */
export const TEXT =
  "Synapse agents exchange signed task requests. Each envelope carries an Ed25519 signature over the exact bytes sent. " +
  "The executor verifies it, records the task, runs the handler and signs every event it returns.";

const TRANSPORT: Record<BenchProtocol, TransportOptions> = {
  grpc: { protocol: "grpc" },
  "connect-json": { protocol: "connect", httpVersion: "1.1", binary: false },
};

export function baselineCall(baseUrl: string, protocol: BenchProtocol): Call {
  const transport =
    protocol === "grpc" ? createGrpcTransport({ baseUrl }) : createConnectTransport({ baseUrl, httpVersion: "1.1", useBinaryFormat: false });
  const client = createClient(CapabilitiesService, transport);
  return async () => {
    const response = await client.handshake({ protocolVersion: "1.0.0" });
    if (!response.compatible) throw new Error(`handshake not compatible: ${response.reason}`);
  };
}

/** One SynapseClient per protocol (its own transport), sharing the requester identity. */
export async function signedCall(baseUrl: string, protocol: BenchProtocol, identity: AgentIdentity): Promise<Call> {
  const client = await SynapseClient.connect({ baseUrl, identity, transport: TRANSPORT[protocol] });
  return async () => {
    const { reply, task, taskId } = await client.submit("text_analysis", { text: TEXT }, { waitMs: 10_000 });
    // submit already verified the signed reply; a call only counts if the task really ran to completion.
    if (reply?.type !== MessageType.TASK_CONFIRM || task?.state !== TaskState.COMPLETED) {
      throw new Error(`task ${taskId} ended as ${task ? TaskState[task.state] : "no task"} (reply ${reply ? MessageType[reply.type] : "none"})`);
    }
  };
}

/** A fresh requester identity in a temporary directory, for benches whose server runs elsewhere. */
export async function temporaryRequester(): Promise<{ identity: AgentIdentity; remove(): Promise<void> }> {
  const dir = await mkdtemp(join(tmpdir(), "synapse-bench-requester-"));
  const { identity } = await loadOrCreateIdentity(dir);
  return { identity, remove: () => rm(dir, { recursive: true, force: true }) };
}
