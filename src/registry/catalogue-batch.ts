// The staged changes of one catalogue operation: records put or removed,
// grants and audit events, handed to CatalogueStorage.update to commit at once.
import { clone, create } from "@bufbuild/protobuf";
import { timestampFromMs, type Timestamp } from "@bufbuild/protobuf/wkt";
import {
  AuditEventSchema,
  GovernedCapabilitySchema,
  type AuditEvent,
  type AuditEventKind,
  type GovernedCapability,
  type PermissionGrant,
} from "../../gen/synapse/v1/registry_pb.js";
import type { CatalogueState, CatalogueWrites } from "../store/registry-storage.js";
import { actorKeyId, actorName, type Actor } from "./catalogue-access.js";

export class Batch {
  private readonly staged = new Map<string, GovernedCapability>();
  private readonly removed = new Set<string>();
  private readonly stagedGrants = new Map<string, PermissionGrant>();
  private readonly events: AuditEvent[] = [];

  /** `action`: the operation's name, recorded in each of its audit events ("" in-process). */
  constructor(
    private readonly storage: CatalogueState,
    private readonly nowMs: number,
    readonly action: string,
  ) {}

  /** The operation's time; a fresh message each time, so no two records share one. */
  get timestamp(): Timestamp {
    return timestampFromMs(this.nowMs);
  }

  get(id: string): GovernedCapability | undefined {
    if (this.removed.has(id)) return undefined;
    return this.staged.get(id) ?? this.storage.getCapability(id);
  }

  /** A staged copy of a record to change; the stored one stays untouched until commit. */
  edit(id: string): GovernedCapability {
    const staged = this.staged.get(id);
    if (staged !== undefined) return staged;
    const stored = this.storage.getCapability(id);
    if (stored === undefined) throw new Error(`no capability ${id} to edit`);
    const copy = clone(GovernedCapabilitySchema, stored);
    this.staged.set(id, copy);
    return copy;
  }

  put(record: GovernedCapability): void {
    this.removed.delete(record.id);
    this.staged.set(record.id, record);
  }

  /** Removes a record at commit (its audit events stay). */
  remove(id: string): void {
    this.staged.delete(id);
    this.removed.add(id);
  }

  /** Every record as it will be after commit. */
  all(): GovernedCapability[] {
    const out = [...this.storage.capabilities()].filter((record) => !this.removed.has(record.id)).map((record) => this.staged.get(record.id) ?? record);
    for (const record of this.staged.values()) if (this.storage.getCapability(record.id) === undefined) out.push(record);
    return out;
  }

  getGrant(keyId: string): PermissionGrant | undefined {
    return this.stagedGrants.get(keyId) ?? this.storage.getGrant(keyId);
  }

  /** Stages a grant; one without permissions is removed at commit. */
  putGrant(grant: PermissionGrant): void {
    this.stagedGrants.set(grant.keyId, grant);
  }

  audit(
    kind: AuditEventKind,
    capability: Pick<GovernedCapability, "id" | "code"> | undefined,
    actor: Actor,
    from: string,
    to: string,
    reason: string,
    granteeKeyId = "",
  ): void {
    const sequence = this.storage.lastAuditSequence() + this.events.length + 1;
    this.events.push(
      create(AuditEventSchema, {
        id: `audit-${String(sequence).padStart(6, "0")}`,
        kind,
        capabilityId: capability?.id ?? "",
        capabilityCode: capability?.code ?? "",
        actor: actorName(actor),
        actorKeyId: actorKeyId(actor),
        action: this.action,
        at: this.timestamp,
        from,
        to,
        reason,
        granteeKeyId,
      }),
    );
  }

  /** What the operation writes, with its result, for CatalogueStorage.update to commit. */
  writes<T>(result: T): CatalogueWrites<T> {
    return { result, capabilities: [...this.staged.values()], removed: [...this.removed], events: this.events, grants: [...this.stagedGrants.values()] };
  }
}
