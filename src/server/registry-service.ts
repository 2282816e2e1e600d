// RegistryService over RPC: signed envelopes for the directory, bearer
// tokens for catalogue writes (whom the catalogue then authorizes: the
// owner or an admin key), public reads; matching counts the permissions
// granted to the bearer token's key, if one is sent.
import { create } from "@bufbuild/protobuf";
import { durationFromMs } from "@bufbuild/protobuf/wkt";
import { Code, type HandlerContext, type ServiceImpl } from "@connectrpc/connect";
import { MessageType, type Envelope } from "../../gen/synapse/v1/envelope_pb.js";
import { ErrorCode } from "../../gen/synapse/v1/errors_pb.js";
import {
  DeregisterResponseSchema,
  EvaluateComplianceResponseSchema,
  FindAgentsResponseSchema,
  GetAgentResponseSchema,
  GetCapabilityResponseSchema,
  HeartbeatResponseSchema,
  ListAuditEventsResponseSchema,
  ListCapabilitiesResponseSchema,
  ListPermissionGrantsResponseSchema,
  MatchCapabilitiesResponseSchema,
  OntologySchema,
  RegisterCapabilityResponseSchema,
  RegisterResponseSchema,
  RegistryService,
  SetCapabilityStatusResponseSchema,
  SetPermissionGrantResponseSchema,
  type AgentDeregistrationPayload,
} from "../../gen/synapse/v1/registry_pb.js";
import { evaluateCompliance } from "../capabilities/compliance.js";
import type { OpenedEnvelope } from "../envelope/open.js";
import { TrustChain } from "../envelope/trust-sources.js";
import type { TrustPolicy } from "../envelope/trust.js";
import { clip, protocolError } from "../protocol/errors.js";
import { wireName } from "../protocol/message-types.js";
import type { Registry } from "../registry/registry.js";
import { authenticate } from "./auth.js";
import { openSent } from "./open-sent.js";
import { fittedPage, replyFormat } from "./reply-fit.js";

export interface RegistryHost {
  /** The hosting agent's id: registry envelopes and tokens are addressed to it. */
  agentId: string;
  /** The hosting agent's key id: a registry envelope whose receiver.key_id names another key is refused. */
  keyId: string;
  /** The hosting agent's own trust, beside the directory's keys, for bearer tokens. */
  trust: TrustPolicy;
  clockSkewMs: number;
  /** Told of every registry message taken (the server's metrics). */
  onMessage?(type: MessageType): void;
  /** The largest reply the server sends: list pages are cut to fit it. */
  replyLimit: number;
}

const pageSize = (requested: number, fallback: number, max: number) => {
  if (requested < 0) throw protocolError(ErrorCode.INVALID_PARAMS, "page_size must not be negative");
  return Math.min(requested === 0 ? fallback : requested, max);
};

export function registryService(registry: Registry, host: RegistryHost): ServiceImpl<typeof RegistryService> {
  const bearer = { audience: host.agentId, trust: new TrustChain([registry.directory, host.trust]) };

  /** Opens a registry envelope of the expected type, addressed to this registry, never seen before. */
  async function openRegistryMessage(envelope: Envelope | undefined, type: MessageType, ctx: HandlerContext): Promise<OpenedEnvelope> {
    const opened = await openSent(envelope, { trust: registry.directory.registrationTrust, self: host.agentId, selfKeyId: host.keyId, clockSkewMs: host.clockSkewMs }, ctx);
    if (opened.header.messageType !== type) {
      throw protocolError(ErrorCode.MESSAGE_FORMAT_INVALID, `expected ${wireName(type)}, got ${opened.info.wireName}`);
    }
    await registry.remember(opened);
    host.onMessage?.(opened.header.messageType);
    return opened;
  }

  return {
    async register(request, ctx) {
      const opened = await openRegistryMessage(request.envelope, MessageType.REGISTRY_REGISTER, ctx);
      const { agent, capabilityIds } = await registry.directory.register(opened);
      return create(RegisterResponseSchema, { agent, heartbeatInterval: durationFromMs(registry.heartbeatIntervalMs), capabilityIds });
    },

    async deregister(request, ctx) {
      const opened = await openRegistryMessage(request.envelope, MessageType.REGISTRY_DEREGISTER, ctx);
      const agentId = await registry.directory.deregister(opened, (opened.payload as AgentDeregistrationPayload).reason);
      return create(DeregisterResponseSchema, { agentId });
    },

    async heartbeat(request, ctx) {
      const opened = await openRegistryMessage(request.envelope, MessageType.HEARTBEAT, ctx);
      const agent = await registry.directory.heartbeat(opened);
      return create(HeartbeatResponseSchema, { leaseExpiresAt: agent.leaseExpiresAt, health: agent.health });
    },

    async findAgents(request, ctx) {
      const query = {
        taskType: request.taskType || undefined,
        capability: request.capability || undefined,
        contentType: request.contentType || undefined,
        transportMode: request.transportMode || undefined,
        interfaceName: request.interface || undefined,
        minCompliance: request.minCompliance || undefined,
        includeUnhealthy: request.includeUnhealthy,
        pageToken: request.pageToken || undefined,
      };
      const read = async (size: number) => create(FindAgentsResponseSchema, await registry.directory.find({ ...query, pageSize: size }));
      return fittedPage(FindAgentsResponseSchema, pageSize(request.pageSize, 50, 500), read, replyFormat(ctx), host.replyLimit);
    },

    async getAgent(request) {
      return create(GetAgentResponseSchema, { agent: await registry.directory.get(request.agentId) });
    },

    async evaluateCompliance(request) {
      const names =
        request.interfaces.length > 0 || request.agentId === ""
          ? request.interfaces.map((entry) => entry.name)
          : (await registry.directory.get(request.agentId)).interfaces.map((entry) => entry.name);
      const { evaluation, level, unknown } = evaluateCompliance(names, request.agentId);
      return create(EvaluateComplianceResponseSchema, { evaluation, complianceLevel: level, unknownInterfaces: unknown });
    },

    async registerCapability(request, ctx) {
      const caller = await authenticate(bearer, ctx);
      if (request.capability === undefined) throw protocolError(ErrorCode.MESSAGE_FORMAT_INVALID, "capability is required");
      return create(RegisterCapabilityResponseSchema, { capability: await registry.catalogue.register(request.capability, caller) });
    },

    async getCapability(request) {
      const capability = await registry.catalogue.get(request.id);
      if (capability === undefined) throw protocolError(ErrorCode.INVALID_PARAMS, `no capability ${clip(request.id)}`, { status: Code.NotFound });
      return create(GetCapabilityResponseSchema, { capability });
    },

    async listCapabilities(request, ctx) {
      const query = {
        capabilityType: request.capabilityType || undefined,
        domain: request.domain || undefined,
        statuses: request.statuses,
        code: request.code || undefined,
        pageToken: request.pageToken || undefined,
      };
      const read = async (size: number) => {
        const page = await registry.catalogue.list({ ...query, pageSize: size });
        return create(ListCapabilitiesResponseSchema, { capabilities: page.capabilities, nextPageToken: page.nextPageToken });
      };
      return fittedPage(ListCapabilitiesResponseSchema, pageSize(request.pageSize, 50, 500), read, replyFormat(ctx), host.replyLimit);
    },

    async setCapabilityStatus(request, ctx) {
      const caller = await authenticate(bearer, ctx);
      const capability = await registry.catalogue.setStatus(request.id, request.status, request.reason, caller, request.health || undefined);
      return create(SetCapabilityStatusResponseSchema, { capability });
    },

    async matchCapabilities(request, ctx) {
      const limit = request.limit < 0 ? 0 : request.limit || 20;
      const ontology = request.ontology ?? create(OntologySchema);
      // Anonymous callers hold nothing; a token that is sent must verify (no silent downgrade).
      const caller = ctx.requestHeader.has("authorization") ? await authenticate(bearer, ctx) : undefined;
      const granted = await registry.catalogue.permissionsOf(caller);
      // The request's list can only narrow what is granted.
      const asked = new Set(request.permissions);
      const applied = asked.size > 0 ? granted.filter((permission) => asked.has(permission)) : granted;
      return create(MatchCapabilitiesResponseSchema, { candidates: await registry.catalogue.match(ontology, applied, limit), permissionsApplied: applied });
    },

    async listAuditEvents(request, ctx) {
      const read = async (size: number) => {
        const page = await registry.catalogue.listAudit({ capabilityId: request.capabilityId || undefined, pageSize: size, pageToken: request.pageToken || undefined });
        return create(ListAuditEventsResponseSchema, { events: page.events, nextPageToken: page.nextPageToken });
      };
      return fittedPage(ListAuditEventsResponseSchema, pageSize(request.pageSize, 100, 1000), read, replyFormat(ctx), host.replyLimit);
    },

    async setPermissionGrant(request, ctx) {
      const caller = await authenticate(bearer, ctx);
      return create(SetPermissionGrantResponseSchema, { grant: await registry.catalogue.setGrant(request.keyId, request.permissions, request.reason, caller) });
    },

    async listPermissionGrants(request, ctx) {
      const read = async (size: number) =>
        create(ListPermissionGrantsResponseSchema, await registry.catalogue.listGrants({ keyId: request.keyId || undefined, pageSize: size, pageToken: request.pageToken || undefined }));
      return fittedPage(ListPermissionGrantsResponseSchema, pageSize(request.pageSize, 100, 1000), read, replyFormat(ctx), host.replyLimit);
    },
  };
}
