// Permission grants: what the registry's operators grant a key, and so the
// permissions matching counts for a caller (seed 003 §5 step 6, §7 step 3:
// "只返回当前用户或任务有权限调用的能力"). A caller's own list of permissions
// never adds to them.
import { create } from "@bufbuild/protobuf";
import { ErrorCode } from "../../gen/synapse/v1/errors_pb.js";
import { AuditEventKind, PermissionGrantSchema, type PermissionGrant } from "../../gen/synapse/v1/registry_pb.js";
import { protocolError } from "../protocol/errors.js";
import type { CatalogueState } from "../store/registry-storage.js";
import { actorName, EVERYONE, isKeyId, type Actor, type CallerIdentity } from "./catalogue-access.js";
import type { Batch } from "./catalogue-batch.js";

const MAX_PERMISSIONS = 256;
const MAX_PERMISSION_CHARS = 256;

/** The permissions a caller holds: its key's grant and the grant to every authenticated caller; none without a caller. */
export function grantedPermissions(state: CatalogueState, caller: CallerIdentity | undefined): string[] {
  if (caller === undefined) return [];
  const held = new Set([...(state.getGrant(caller.keyId)?.permissions ?? []), ...(state.getGrant(EVERYONE)?.permissions ?? [])]);
  return [...held].sort();
}

/** INVALID_ARGUMENT unless a grant's key is a key id or "*". */
export function checkGranteeKeyId(keyId: string): void {
  if (keyId !== EVERYONE && !isKeyId(keyId)) {
    throw protocolError(ErrorCode.INVALID_PARAMS, 'key_id must be a key id (43 characters, RFC 7638 thumbprint, as `synapse keygen` prints) or "*"', {
      details: { field: "key_id" },
    });
  }
}

/** The permissions as a grant keeps them: trimmed, sorted, no duplicates; INVALID_ARGUMENT for an empty, over-long or spaced one. */
export function normalPermissions(permissions: readonly string[]): string[] {
  if (permissions.length > MAX_PERMISSIONS) {
    throw protocolError(ErrorCode.INVALID_PARAMS, `at most ${MAX_PERMISSIONS} permissions per grant`, { details: { field: "permissions" } });
  }
  const out = new Set<string>();
  for (const raw of permissions) {
    const permission = raw.trim();
    if (permission === "" || permission.length > MAX_PERMISSION_CHARS || /\s/.test(permission)) {
      throw protocolError(ErrorCode.INVALID_PARAMS, `a permission is 1 to ${MAX_PERMISSION_CHARS} characters without whitespace`, { details: { field: "permissions" } });
    }
    out.add(permission);
  }
  return [...out].sort();
}

/** Stages a grant's new permissions (none removes it), audited as GRANT_CHANGED when they change. */
export function stageGrant(batch: Batch, keyId: string, permissions: readonly string[], reason: string, actor: Actor): PermissionGrant {
  const before = batch.getGrant(keyId)?.permissions ?? [];
  const grant = create(PermissionGrantSchema, { keyId, permissions: [...permissions], reason, updatedBy: actorName(actor), updatedAt: batch.timestamp });
  const from = before.join(",");
  const to = permissions.join(",");
  if (from !== to) {
    batch.putGrant(grant);
    batch.audit(AuditEventKind.GRANT_CHANGED, undefined, actor, from, to, reason, keyId);
    return grant;
  }
  return batch.getGrant(keyId) ?? grant;
}
