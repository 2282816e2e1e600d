// CapabilitiesProvider (seed 000 §1): answers what this agent is and can do,
// from its configured AgentCapabilities and what the server has wired.
import { clone, create } from "@bufbuild/protobuf";
import { Code } from "@connectrpc/connect";
import {
  AgentCapabilitiesSchema,
  HandshakeResponseSchema,
  ImplementedInterfaceSchema,
  type AgentCapabilities,
  type HandshakeRequest,
  type HandshakeResponse,
  type ImplementedInterface,
  type SupportedTaskType,
} from "../../gen/synapse/v1/capabilities_pb.js";
import { AgentRefSchema } from "../../gen/synapse/v1/envelope_pb.js";
import { ErrorCode } from "../../gen/synapse/v1/errors_pb.js";
import { clip, protocolError } from "../protocol/errors.js";
import { compareVersions } from "../protocol/versions.js";
import { implementedInterfaces, type Wiring } from "./interfaces.js";

export class CapabilitiesProvider {
  private readonly capabilities: AgentCapabilities;
  private readonly interfaces: ImplementedInterface[];

  constructor(capabilities: AgentCapabilities, wiring: Wiring) {
    this.capabilities = clone(AgentCapabilitiesSchema, capabilities);
    this.interfaces = implementedInterfaces(wiring);
  }

  getCapabilities(): AgentCapabilities {
    return this.capabilities;
  }

  getSupportedInterfaces(): ImplementedInterface[] {
    return this.interfaces;
  }

  /** The task type's declaration, or undefined when this agent does not run it. */
  findTaskType(taskType: string): SupportedTaskType | undefined {
    return this.capabilities.supportedTaskTypes.find((entry) => entry.type === taskType);
  }

  getTaskTypeCapabilities(taskType: string): SupportedTaskType {
    const found = this.findTaskType(taskType);
    if (found === undefined) {
      throw protocolError(ErrorCode.CAPABILITY_LACKING, `task type ${JSON.stringify(clip(taskType))} is not supported`, {
        details: { task_type: taskType, supported: this.capabilities.supportedTaskTypes.map((entry) => entry.type) },
        status: Code.NotFound,
      });
    }
    return found;
  }

  /** Negotiates protocol version and common interfaces (seed 000 §6.5). */
  handshake(request: HandshakeRequest): HandshakeResponse {
    const ours = this.capabilities.protocolVersion;
    const agent = create(AgentRefSchema, {
      agentId: this.capabilities.agentId,
      systemId: this.capabilities.systemId,
      keyId: this.capabilities.keyId,
    });
    const version = compareVersions(ours, request.protocolVersion);
    if (version === undefined) {
      throw protocolError(ErrorCode.INVALID_PARAMS, `protocol_version ${JSON.stringify(clip(request.protocolVersion))} is not semver (major.minor.patch)`);
    }
    if (!version.compatible) {
      return create(HandshakeResponseSchema, { compatible: false, reason: version.reason, protocolVersion: ours, agent });
    }
    const common: ImplementedInterface[] = [];
    for (const theirs of request.interfaces) {
      const mine = this.interfaces.find((entry) => entry.name === theirs.name);
      if (mine === undefined) continue;
      const interfaceVersion = compareVersions(mine.version, theirs.version || mine.version);
      if (interfaceVersion === undefined || !interfaceVersion.compatible) continue;
      common.push(create(ImplementedInterfaceSchema, { ...mine, version: interfaceVersion.negotiated }));
    }
    return create(HandshakeResponseSchema, {
      compatible: true,
      negotiatedVersion: version.negotiated,
      commonInterfaces: common,
      protocolVersion: ours,
      agent,
    });
  }
}
