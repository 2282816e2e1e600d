// Reading the governed capability catalogue a page at a time: its records,
// its grants and its audit trail, in the orders and with the page tokens of
// catalogue-order.ts.
import { clone } from "@bufbuild/protobuf";
import {
  AuditEventSchema,
  CapabilityType,
  GovernedCapabilitySchema,
  PermissionGrantSchema,
  type AuditEvent,
  type CapabilityStatus,
  type GovernedCapability,
  type PermissionGrant,
} from "../../gen/synapse/v1/registry_pb.js";
import type { CatalogueState, CatalogueStorage } from "../store/registry-storage.js";
import { compareListKeys, compareStrings, decodeAuditCursor, decodeKeyCursor, decodeListCursor, encodeToken, listKey, pageSizeOf } from "./catalogue-order.js";

const DEFAULT_LIST_PAGE_SIZE = 50;
const MAX_LIST_PAGE_SIZE = 500;
const DEFAULT_AUDIT_PAGE_SIZE = 100;
const MAX_AUDIT_PAGE_SIZE = 1000;

export interface ListCapabilitiesQuery {
  /** UNSPECIFIED or absent: every type. */
  capabilityType?: CapabilityType;
  /** Exact domain; empty or absent: every domain. */
  domain?: string;
  /** Empty or absent: every status. */
  statuses?: readonly CapabilityStatus[];
  code?: string;
  /** 0 or absent: 50; at most 500. */
  pageSize?: number;
  pageToken?: string;
}

export interface CapabilityPage {
  capabilities: GovernedCapability[];
  /** Empty on the last page. */
  nextPageToken: string;
}

export interface ListAuditQuery {
  capabilityId?: string;
  /** 0 or absent: 100; at most 1000. */
  pageSize?: number;
  pageToken?: string;
}

export interface AuditPage {
  events: AuditEvent[];
  /** Empty on the last page. */
  nextPageToken: string;
}

export interface ListGrantsQuery {
  keyId?: string;
  pageSize?: number;
  pageToken?: string;
}

export interface GrantPage {
  grants: PermissionGrant[];
  /** Empty on the last page. */
  nextPageToken: string;
}

export function listCapabilities(state: CatalogueState, query: ListCapabilitiesQuery = {}): CapabilityPage {
  const size = pageSizeOf(query.pageSize, DEFAULT_LIST_PAGE_SIZE, MAX_LIST_PAGE_SIZE);
  const cursor = query.pageToken ? decodeListCursor(query.pageToken) : undefined;
  const type = query.capabilityType ?? CapabilityType.UNSPECIFIED;
  const statuses = query.statuses && query.statuses.length > 0 ? new Set(query.statuses) : undefined;
  const selected = [...state.capabilities()]
    .filter(
      (record) =>
        (type === CapabilityType.UNSPECIFIED || record.capabilityType === type) &&
        (!query.domain || record.domain === query.domain) &&
        (!query.code || record.code === query.code) &&
        (statuses === undefined || statuses.has(record.status)) &&
        (cursor === undefined || compareListKeys(listKey(record), cursor) > 0),
    )
    .sort((a, b) => compareListKeys(listKey(a), listKey(b)));
  const page = selected.slice(0, size);
  const more = selected.length > page.length;
  return {
    capabilities: page.map((record) => clone(GovernedCapabilitySchema, record)),
    nextPageToken: more ? encodeToken(listKey(page[page.length - 1]!)) : "",
  };
}

export function listGrants(state: CatalogueState, query: ListGrantsQuery = {}): GrantPage {
  const size = pageSizeOf(query.pageSize, DEFAULT_AUDIT_PAGE_SIZE, MAX_AUDIT_PAGE_SIZE);
  const after = query.pageToken ? decodeKeyCursor(query.pageToken) : undefined;
  const selected = [...state.grants()]
    .filter((grant) => (!query.keyId || grant.keyId === query.keyId) && (after === undefined || compareStrings(grant.keyId, after) > 0))
    .sort((a, b) => compareStrings(a.keyId, b.keyId));
  const page = selected.slice(0, size);
  return {
    grants: page.map((grant) => clone(PermissionGrantSchema, grant)),
    nextPageToken: selected.length > page.length ? encodeToken({ k: page[page.length - 1]!.keyId }) : "",
  };
}

export async function listAudit(storage: CatalogueStorage, query: ListAuditQuery = {}): Promise<AuditPage> {
  const size = pageSizeOf(query.pageSize, DEFAULT_AUDIT_PAGE_SIZE, MAX_AUDIT_PAGE_SIZE);
  const after = query.pageToken ? decodeAuditCursor(query.pageToken) : 0;
  const found = await storage.listAudit(after, query.capabilityId || undefined, size + 1);
  const page = found.slice(0, size);
  const more = found.length > size;
  return { events: page.map(({ event }) => clone(AuditEventSchema, event)), nextPageToken: more ? encodeToken({ s: page[page.length - 1]!.sequence }) : "" };
}
