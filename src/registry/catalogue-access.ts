// Who may change what in the catalogue (docs/PROTOCOL.md §6.3).
//
// A capability belongs to the identity that registered it, recorded in
// owner_agent_id and owner_key_id (not `owner`, which is the accountable
// team of seed 003). Ownership goes by lineage (the code together with the
// providing agent): every version of a lineage has the owner of its first.
// Only the owner or a registry admin key may register versions of, change
// the status of, or retire a capability. Static capabilities (no agent_id)
// share one namespace of codes, so only admins create them: otherwise the
// first stranger to register a code would own it. A capability an agent
// provides may be created by that agent. Admins are named by key id, the
// RFC 7638 thumbprint a token's `kid` proves possession of; an agent id
// alone proves nothing where trust is pinned on first use.
//
// In-process actors (a plain string: "registry", or an embedder seeding
// static capabilities) are trusted: they run with the operator's authority.
import { Code } from "@connectrpc/connect";
import { ErrorCode } from "../../gen/synapse/v1/errors_pb.js";
import type { GovernedCapability } from "../../gen/synapse/v1/registry_pb.js";
import { protocolError } from "../protocol/errors.js";

/** An identity proven by its key: the signer of a bearer token or of an agent's registration. */
export interface CallerIdentity {
  readonly agentId: string;
  readonly keyId: string;
}

/** Who asks for a change: an authenticated caller (checked), or the process itself by name (trusted). */
export type Actor = string | CallerIdentity;

/** Whom a record belongs to: an agent, recognised by keyId when it is set. */
export interface Owner {
  readonly agentId: string;
  readonly keyId: string;
}

/** The grant key that stands for every authenticated caller. */
export const EVERYONE = "*";

const KEY_ID = /^[A-Za-z0-9_-]{43}$/;

/** A caller's string as a refusal repeats it (message, audit event): bounded, so refusals stay small. */
export function clip(value: string, max = 128): string {
  return value.length <= max ? value : `${value.slice(0, max - 1)}…`;
}

/** Whether a string has the form of a key id: the base64url SHA-256 of an RFC 7638 JWK, 43 characters. */
export function isKeyId(value: string): boolean {
  return KEY_ID.test(value);
}

export function actorName(actor: Actor): string {
  return typeof actor === "string" ? actor : actor.agentId;
}

export function actorKeyId(actor: Actor): string {
  return typeof actor === "string" ? "" : actor.keyId;
}

/** The record's owner; undefined when only admins may change it (seeded in-process, or stored before owners were recorded). */
export function ownerOf(record: GovernedCapability): Owner | undefined {
  const agentId = record.ownerAgentId || record.agentId;
  return agentId === "" ? undefined : { agentId, keyId: record.ownerKeyId };
}

export function owns(caller: CallerIdentity, record: GovernedCapability): boolean {
  const owner = ownerOf(record);
  return owner !== undefined && owner.agentId === caller.agentId && (owner.keyId === "" || owner.keyId === caller.keyId);
}

function describeOwner(owner: Owner | undefined): string {
  if (owner === undefined) return "it has no owner but the registry's admins";
  return owner.keyId === "" ? `it belongs to agent ${owner.agentId}` : `it belongs to agent ${owner.agentId} (key ${owner.keyId})`;
}

function describeCaller(caller: CallerIdentity): string {
  return `agent ${clip(caller.agentId)} (key ${clip(caller.keyId)})`;
}

/** What a refused change would have touched, for its audit event. */
export interface RefusedChange {
  capabilityId: string;
  capabilityCode: string;
  /** The value now. */
  from: string;
  /** The value asked for. */
  to: string;
  granteeKeyId?: string;
}

/** A change the caller may not make: audited as REFUSED, answered PERMISSION_DENIED. */
export class Refusal extends Error {
  constructor(
    readonly rule: "not_owner" | "admin_only" | "not_the_agent",
    message: string,
    readonly caller: CallerIdentity,
    readonly change: RefusedChange,
    readonly owner?: Owner,
  ) {
    super(message);
  }

  toConnectError(action: string) {
    return protocolError(ErrorCode.PERMISSION_DENIED, this.message, {
      status: Code.PermissionDenied,
      details: {
        rule: this.rule,
        action,
        ...(this.change.capabilityId ? { capability_id: this.change.capabilityId } : {}),
        ...(this.change.granteeKeyId !== undefined ? { key_id: this.change.granteeKeyId } : {}),
        ...(this.owner ? { owner_agent_id: this.owner.agentId, owner_key_id: this.owner.keyId } : {}),
      },
    });
  }
}

export class CatalogueAccess {
  private readonly admins: ReadonlySet<string>;

  /** `admins`: the key ids of the registry's operators. */
  constructor(admins: Iterable<string> = []) {
    const keys = [...admins];
    for (const key of keys) {
      if (!isKeyId(key)) throw new TypeError(`a registry admin is named by its key id (43 characters, as \`synapse keygen\` prints), not ${JSON.stringify(key)}`);
    }
    this.admins = new Set(keys);
  }

  /** Trusted in-process actors and admin keys. */
  isAdmin(actor: Actor): boolean {
    return typeof actor === "string" || this.admins.has(actor.keyId);
  }

  /**
   * May `actor` register `input` (its id already set)? `previous` is the
   * record of that id, `lineage` every record of its code and agent.
   * Returns the owner to record; throws a Refusal.
   */
  authorizeRegistration(actor: Actor, input: GovernedCapability, previous: GovernedCapability | undefined, lineage: readonly GovernedCapability[]): Owner {
    if (!this.isAdmin(actor)) {
      const caller = actor as CallerIdentity;
      const change = { capabilityId: clip(input.id), capabilityCode: clip(input.code), from: previous?.version ?? "", to: clip(input.version) };
      if (input.agentId !== "" && input.agentId !== caller.agentId) {
        throw new Refusal(
          "not_the_agent",
          `${describeCaller(caller)} may not register capabilities for agent ${clip(input.agentId)}: an agent's capabilities are registered by that agent or a registry admin`,
          caller,
          change,
        );
      }
      for (const record of previous === undefined ? lineage : [previous, ...lineage]) {
        if (owns(caller, record)) continue;
        const owner = ownerOf(record);
        throw new Refusal(
          owner === undefined ? "admin_only" : "not_owner",
          `${describeCaller(caller)} may not register a version of capability ${record.id} (code ${record.code}): ${describeOwner(owner)}; only its owner or a registry admin may`,
          caller,
          change,
          owner,
        );
      }
      if (input.agentId === "" && lineage.length === 0 && previous === undefined) {
        throw new Refusal(
          "admin_only",
          `${describeCaller(caller)} may not add the static capability ${clip(input.code)}: capabilities without agent_id are added by a registry admin; an agent registers what it provides with its own agent_id`,
          caller,
          change,
        );
      }
    }
    const first = lineage[0];
    if (first !== undefined) return { agentId: first.ownerAgentId, keyId: first.ownerKeyId };
    if (typeof actor === "string" || (input.agentId !== "" && input.agentId !== actor.agentId)) return { agentId: input.agentId, keyId: "" };
    return { agentId: actor.agentId, keyId: actor.keyId };
  }

  /** May `actor` change this record (its status, health, or retire it)? Throws a Refusal. */
  authorizeChange(actor: Actor, record: GovernedCapability, from: string, to: string): void {
    if (this.isAdmin(actor)) return;
    const caller = actor as CallerIdentity;
    if (owns(caller, record)) return;
    const owner = ownerOf(record);
    throw new Refusal(
      owner === undefined ? "admin_only" : "not_owner",
      `${describeCaller(caller)} may not change capability ${record.id}: ${describeOwner(owner)}; only its owner or a registry admin may`,
      caller,
      { capabilityId: record.id, capabilityCode: record.code, from, to },
      owner,
    );
  }

  /** Grants are the operator's: admins only. Throws a Refusal. */
  authorizeGrant(actor: Actor, keyId: string, from: string, to: string): void {
    if (this.isAdmin(actor)) return;
    const caller = actor as CallerIdentity;
    throw new Refusal("admin_only", `${describeCaller(caller)} may not change permission grants: only a registry admin may`, caller, {
      capabilityId: "",
      capabilityCode: "",
      from,
      to: clip(to, 256),
      granteeKeyId: clip(keyId),
    });
  }
}
