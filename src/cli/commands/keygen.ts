// `synapse keygen`: create (or show) an agent identity in a directory.
import { access } from "node:fs/promises";
import { join } from "node:path";
import { KEY_FILE, loadOrCreateIdentity } from "../../agent/identity.js";
import { toBase64Url } from "../../crypto/encoding.js";
import { generateKey, saveKey } from "../../crypto/keys.js";
import { durationOption, parse, UsageError } from "../args.js";
import { DEFAULT_ENCRYPTION_OVERLAP_MS, saveEncryptionKeys } from "../../crypto/encryption-keys.js";
import { synapseHome } from "../home.js";
import { printJson, printLine } from "../output.js";

export const keygenUsage = `usage: synapse keygen [--home DIR] [--agent-id ID] [--force] [--rotate-encryption [--overlap DURATION]] [--json]

Creates an Ed25519 agent identity (agent.key, mode 0600, and identity.json) in
DIR (default: SYNAPSE_HOME, or ~/.synapse) and prints its agent id and key id.
An existing identity is kept and shown; --force replaces its key (peers that
pinned the old key will refuse the new one until they are told of it).

Beside it is the X25519 key confidential tasks are encrypted to
(encryption.key). --rotate-encryption makes a new one; the old one is still
opened for --overlap (default 7d) and published as retired until then. A
running agent takes the new key when it starts again (serve --data-dir DIR is
--home DIR here).`;

export async function keygen(argv: string[]): Promise<number> {
  const { values } = parse(
    argv,
    {
      home: { type: "string" },
      "agent-id": { type: "string" },
      force: { type: "boolean" },
      "rotate-encryption": { type: "boolean" },
      overlap: { type: "string" },
      json: { type: "boolean" },
    },
    keygenUsage,
  );
  if (values.help) {
    printLine(keygenUsage);
    return 0;
  }
  const dir = synapseHome(values.home);
  const keyPath = join(dir, KEY_FILE);
  const exists = await access(keyPath).then(
    () => true,
    () => false,
  );
  if (exists && values.force) await saveKey(keyPath, generateKey());
  if (values.overlap !== undefined && !values["rotate-encryption"]) throw new UsageError(`--overlap goes with --rotate-encryption\n\n${keygenUsage}`);
  const { identity, created } = await loadOrCreateIdentity(dir, { agentId: values["agent-id"] });
  let encryption = identity.encryption!;
  if (values["rotate-encryption"]) {
    encryption = encryption.rotated(Date.now(), durationOption(values.overlap, "--overlap") ?? DEFAULT_ENCRYPTION_OVERLAP_MS);
    await saveEncryptionKeys(dir, encryption);
  }
  const result = {
    agentId: identity.agentId,
    keyId: identity.key.keyId,
    publicKey: toBase64Url(identity.key.publicKey),
    keyFile: keyPath,
    encryptionKeyId: encryption.current.keyId,
    retiredEncryptionKeys: encryption.retired.map((key) => ({ keyId: key.keyId, retiredUntil: new Date(key.retiredUntilMs!).toISOString() })),
    created: created || Boolean(values.force),
  };
  if (values.json) printJson(result);
  else {
    printLine(`${result.created ? "created" : "existing"} identity in ${dir}`);
    printLine(`agent id:   ${result.agentId}`);
    printLine(`key id:     ${result.keyId}`);
    printLine(`public key: ${result.publicKey} (raw Ed25519, base64url)`);
    printLine(`encryption: ${result.encryptionKeyId} (X25519, for confidential tasks)`);
    for (const retired of result.retiredEncryptionKeys) printLine(`retired:    ${retired.keyId} (opened until ${retired.retiredUntil})`);
  }
  return 0;
}
