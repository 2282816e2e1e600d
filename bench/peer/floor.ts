// The Ed25519 floor of a signed task: what the server's Ed25519 (libsodium
// where it loads, else node:crypto) takes to sign one and verify one
// message the size of a real task_request's signing input (the
// PAE of its header and payload, with the bench's text), through the same
// Ed25519 interface (and key caches) the server uses. Measured in the bench
// process while no load runs, so the same run's CPU per task can be set
// against it.
import { create } from "@bufbuild/protobuf";
import { randomUUID } from "node:crypto";
import { MessageType } from "../../gen/synapse/v1/envelope_pb.js";
import { TaskRequestPayloadSchema } from "../../gen/synapse/v1/payloads_pb.js";
import { defaultEd25519 } from "../../src/crypto/ed25519.js";
import { generateKey, selfCertifyingAgentId } from "../../src/crypto/keys.js";
import { envelopeSigningInput } from "../../src/envelope/pae.js";
import { seal } from "../../src/envelope/seal.js";
import { opsPerSecond } from "../measure.js";

export interface Ed25519Floor {
  /** Bytes signed: the signing input of a text_analysis task_request. */
  message_bytes: number;
  /** The implementation measured: the server's default. */
  implementation: string;
  sign_us: number;
  verify_us: number;
  /** One sign plus one verify. */
  floor_us: number;
}

export function measureFloor(text: string, seconds: number): Ed25519Floor {
  const requester = generateKey();
  const executor = generateKey();
  const taskId = randomUUID();
  const { envelope } = seal(
    {
      messageType: MessageType.TASK_REQUEST,
      payload: create(TaskRequestPayloadSchema, { task: { id: taskId, type: "text_analysis", payload: { text } } }),
      sender: { agentId: selfCertifyingAgentId(requester.publicKey) },
      receiver: { agentId: selfCertifyingAgentId(executor.publicKey) },
      taskId,
    },
    requester,
  );
  const message = envelopeSigningInput(envelope.header, envelope.payload);
  const signature = defaultEd25519.sign(message, requester.seed);
  const sign = () => void defaultEd25519.sign(message, requester.seed);
  const verify = () => {
    if (!defaultEd25519.verify(message, signature, requester.publicKey)) throw new Error(`${defaultEd25519.name} does not verify its own signature`);
  };
  const warmupMs = Math.min(250, seconds * 250);
  opsPerSecond(sign, warmupMs);
  const signUs = 1e6 / opsPerSecond(sign, seconds * 1000);
  opsPerSecond(verify, warmupMs);
  const verifyUs = 1e6 / opsPerSecond(verify, seconds * 1000);
  return { message_bytes: message.byteLength, implementation: defaultEd25519.name, sign_us: signUs, verify_us: verifyUs, floor_us: signUs + verifyUs };
}
