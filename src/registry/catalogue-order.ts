// Ordering and paging of the catalogue: natural version order, list keys,
// page tokens and page sizes.
import { ErrorCode } from "../../gen/synapse/v1/errors_pb.js";
import type { GovernedCapability } from "../../gen/synapse/v1/registry_pb.js";
import { protocolError } from "../protocol/errors.js";


/**
 * Versions in natural order: a leading "v" is ignored, digit runs compare
 * as numbers (v1.9 < v1.10), and a pre-release suffix sorts first
 * (1.0.0-beta < 1.0.0). Equal-looking versions fall back to plain text order.
 */
export function compareVersions(a: string, b: string): number {
  const left = versionTokens(a);
  const right = versionTokens(b);
  const common = Math.min(left.length, right.length);
  for (let i = 0; i < common; i++) {
    const x = left[i]!;
    const y = right[i]!;
    if (x === y) continue;
    const xNumber = /^\d+$/.test(x);
    const yNumber = /^\d+$/.test(y);
    if (xNumber && yNumber) return compareDigits(x, y);
    // 1.0.0-beta against 1.0.0.1: the pre-release is older.
    if (x.startsWith("-") !== y.startsWith("-")) return x.startsWith("-") ? -1 : 1;
    return compareStrings(x, y);
  }
  if (left.length !== right.length) {
    const longerIsLeft = left.length > right.length;
    const extra = (longerIsLeft ? left : right)[common]!;
    const longerIsNewer = !extra.startsWith("-");
    return longerIsLeft === longerIsNewer ? 1 : -1;
  }
  return compareStrings(a, b);
}

function versionTokens(version: string): string[] {
  return version.trim().toLowerCase().replace(/^v/, "").match(/\d+|\D+/g) ?? [];
}

function compareDigits(a: string, b: string): number {
  const x = a.replace(/^0+(?=\d)/, "");
  const y = b.replace(/^0+(?=\d)/, "");
  return x.length - y.length || compareStrings(x, y);
}

export function compareStrings(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

export interface ListKey {
  c: string;
  v: string;
  a: string;
  i: string;
}

export function listKey(record: GovernedCapability): ListKey {
  return { c: record.code, v: record.version, a: record.agentId, i: record.id };
}

export function compareListKeys(x: ListKey, y: ListKey): number {
  return compareStrings(x.c, y.c) || compareVersions(x.v, y.v) || compareStrings(x.a, y.a) || compareStrings(x.i, y.i);
}

export function encodeToken(cursor: object): string {
  return Buffer.from(JSON.stringify(cursor)).toString("base64url");
}

export function decodeToken(token: string): unknown {
  try {
    return JSON.parse(Buffer.from(token, "base64url").toString("utf8")) as unknown;
  } catch {
    return undefined;
  }
}

export function decodeListCursor(token: string): ListKey {
  const value = decodeToken(token);
  if (typeof value === "object" && value !== null) {
    const { c, v, a, i } = value as Record<string, unknown>;
    if (typeof c === "string" && typeof v === "string" && typeof a === "string" && typeof i === "string") return { c, v, a, i };
  }
  throw badToken();
}

export function decodeAuditCursor(token: string): number {
  const value = decodeToken(token);
  if (typeof value === "object" && value !== null) {
    const { s } = value as Record<string, unknown>;
    if (typeof s === "number" && Number.isSafeInteger(s) && s >= 0) return s;
  }
  throw badToken();
}

/** The grant list's cursor: the last key id of the previous page. */
export function decodeKeyCursor(token: string): string {
  const value = decodeToken(token);
  if (typeof value === "object" && value !== null) {
    const { k } = value as Record<string, unknown>;
    if (typeof k === "string") return k;
  }
  throw badToken();
}

function badToken() {
  return protocolError(ErrorCode.INVALID_PARAMS, "page_token is not one this registry issued", { details: { field: "page_token" } });
}

export function pageSizeOf(requested: number | undefined, fallback: number, max: number): number {
  const size = requested ?? 0;
  if (!Number.isInteger(size) || size < 0) {
    throw protocolError(ErrorCode.INVALID_PARAMS, "page_size must be a non-negative integer", { details: { field: "page_size" } });
  }
  return Math.min(size === 0 ? fallback : size, max);
}

