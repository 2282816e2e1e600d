// Made-up agents, as anyone can make them: fresh keys with the ids derived
// from them, one small HTTP server that answers a registry's confirmation
// calls (GetCapabilities, GetSupportedInterfaces) as whichever of them its
// path names, and their signed registrations. For floods of registrations
// (bench/registry-flood.ts) and the tests of what a registry keeps of them.
import { clone, create, toBinary } from "@bufbuild/protobuf";
import http from "node:http";
import type { AddressInfo } from "node:net";
import {
  AgentCapabilitiesSchema,
  GetCapabilitiesResponseSchema,
  GetSupportedInterfacesResponseSchema,
  type AgentCapabilities,
  type ImplementedInterface,
} from "../gen/synapse/v1/capabilities_pb.js";
import { MessageType, type Envelope } from "../gen/synapse/v1/envelope_pb.js";
import { AgentRegistrationPayloadSchema } from "../gen/synapse/v1/registry_pb.js";
import { generateKey, selfCertifyingAgentId, type AgentKey } from "../src/crypto/keys.js";
import { seal } from "../src/envelope/seal.js";

export interface MintedAgent {
  agentId: string;
  key: AgentKey;
}

export function mintAgents(count: number): MintedAgent[] {
  return Array.from({ length: count }, () => {
    const key = generateKey();
    return { agentId: selfCertifyingAgentId(key.publicKey), key };
  });
}

/** `template` (a real agent's capabilities) as `who` describes itself. */
export function capabilitiesAs(template: AgentCapabilities, who: MintedAgent): AgentCapabilities {
  const capabilities = clone(AgentCapabilitiesSchema, template);
  capabilities.agentId = who.agentId;
  capabilities.keyId = who.key.keyId;
  capabilities.publicKey = who.key.publicKey;
  capabilities.agentName = `minted ${who.agentId.slice(-8)}`;
  return capabilities;
}

export interface ImpersonatingEndpoint {
  server: http.Server;
  /** The endpoint URL of agent `index`. */
  urlOf(index: number): string;
  close(): Promise<void>;
}

/** Answers /a/<index>/synapse.v1.CapabilitiesService/<method> (Connect, binary) as agent <index>, with the template's task types. */
export function startImpersonatingEndpoint(agents: readonly MintedAgent[], template: AgentCapabilities, interfaces: ImplementedInterface[]): Promise<ImpersonatingEndpoint> {
  const server = http.createServer((req, res) => {
    const match = /^\/a\/(\d+)\/synapse\.v1\.CapabilitiesService\/(GetCapabilities|GetSupportedInterfaces)$/.exec(req.url ?? "");
    const who = match === null ? undefined : agents[Number(match[1])];
    req.resume();
    if (match === null || who === undefined) {
      res.writeHead(404).end();
      return;
    }
    const body =
      match[2] === "GetCapabilities"
        ? toBinary(GetCapabilitiesResponseSchema, create(GetCapabilitiesResponseSchema, { capabilities: capabilitiesAs(template, who) }))
        : toBinary(GetSupportedInterfacesResponseSchema, create(GetSupportedInterfacesResponseSchema, { interfaces }));
    res.writeHead(200, { "Content-Type": "application/proto", "Content-Length": body.byteLength }).end(body);
  });
  return new Promise((resolve) =>
    server.listen(0, "127.0.0.1", () => {
      const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
      resolve({
        server,
        urlOf: (index) => `${base}/a/${index}`,
        close: () => new Promise<void>((done) => server.close(() => done())),
      });
    }),
  );
}

/** A signed registry:register of `who`, at `endpointUrl`, to the registry `receiver`. */
export function registrationOf(
  who: MintedAgent,
  endpointUrl: string,
  template: AgentCapabilities,
  interfaces: ImplementedInterface[],
  receiver: { agentId: string; systemId?: string },
): Envelope {
  const payload = create(AgentRegistrationPayloadSchema, { capabilities: capabilitiesAs(template, who), interfaces, endpointUrl, publicKey: who.key.publicKey });
  return seal({ messageType: MessageType.REGISTRY_REGISTER, payload, sender: { agentId: who.agentId, systemId: "minted" }, receiver }, who.key).envelope;
}
