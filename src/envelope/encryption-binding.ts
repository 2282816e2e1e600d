// The statement that binds an agent's X25519 encryption key to its Ed25519
// identity (docs/PROTOCOL.md §9.1): signed by the identity key, so that a
// registry or a proxy that relays an agent's capabilities cannot swap it.
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { timestampFromMs } from "@bufbuild/protobuf/wkt";
import { EncryptionKeyBindingSchema, SignedEncryptionKeySchema, type EncryptionKeyBinding, type SignedEncryptionKey } from "../../gen/synapse/v1/confidential_pb.js";
import { defaultEd25519, type Ed25519 } from "../crypto/ed25519.js";
import { encryptionKeyIdOf, type EncryptionKey } from "../crypto/encryption-keys.js";
import { keyIdOf, type AgentKey } from "../crypto/keys.js";
import { SUITE } from "./confidential.js";
import { pae } from "./pae.js";

const DOMAIN = new TextEncoder().encode("synapse.v1.EncryptionKeyBinding");

/** The bytes a binding's signature covers. */
export const bindingSigningInput = (binding: Uint8Array) => pae([DOMAIN, binding]);

/** Signs the binding of `key` to the agent `agentId` with its identity key. */
export function signEncryptionKey(agentId: string, identity: AgentKey, key: EncryptionKey, ed: Ed25519 = defaultEd25519): SignedEncryptionKey {
  const binding = toBinary(
    EncryptionKeyBindingSchema,
    create(EncryptionKeyBindingSchema, {
      agentId,
      signingKeyId: identity.keyId,
      publicKey: key.publicKey,
      keyId: key.keyId,
      suite: SUITE,
      createdAt: timestampFromMs(key.createdAtMs),
      retiredUntil: key.retiredUntilMs === undefined ? undefined : timestampFromMs(key.retiredUntilMs),
    }),
  );
  return create(SignedEncryptionKeySchema, { binding, signature: ed.sign(bindingSigningInput(binding), identity.seed) });
}

/** Why a binding was not accepted. */
export class EncryptionKeyBindingError extends Error {}

/**
 * The binding, if it is `agentId`'s, signed by `signingPublicKey` (the
 * Ed25519 key the caller's trust binds to that agent), for a key whose id
 * is its thumbprint, with our suite.
 */
export function verifyEncryptionKey(signed: SignedEncryptionKey, agentId: string, signingPublicKey: Uint8Array, ed: Ed25519 = defaultEd25519): EncryptionKeyBinding {
  let binding: EncryptionKeyBinding;
  try {
    binding = fromBinary(EncryptionKeyBindingSchema, signed.binding);
  } catch {
    throw new EncryptionKeyBindingError("the binding is not a synapse.v1.EncryptionKeyBinding");
  }
  if (binding.agentId !== agentId) throw new EncryptionKeyBindingError(`the key is bound to ${binding.agentId}, not ${agentId}`);
  if (binding.signingKeyId !== keyIdOf(signingPublicKey)) throw new EncryptionKeyBindingError("the binding names another signing key");
  if (!ed.verify(bindingSigningInput(signed.binding), signed.signature, signingPublicKey)) throw new EncryptionKeyBindingError("the binding's signature does not verify");
  if (binding.publicKey.byteLength !== 32 || binding.keyId !== encryptionKeyIdOf(binding.publicKey)) throw new EncryptionKeyBindingError("the key id is not the key's thumbprint");
  if (binding.suite !== SUITE) throw new EncryptionKeyBindingError(`unknown suite ${binding.suite}`);
  return binding;
}

/** The key to seal to: the newest verified binding that is not retired. */
export function currentEncryptionKey(keys: readonly SignedEncryptionKey[], agentId: string, signingPublicKey: Uint8Array, ed: Ed25519 = defaultEd25519): EncryptionKeyBinding | undefined {
  let best: EncryptionKeyBinding | undefined;
  for (const signed of keys) {
    let binding: EncryptionKeyBinding;
    try {
      binding = verifyEncryptionKey(signed, agentId, signingPublicKey, ed);
    } catch {
      continue;
    }
    if (binding.retiredUntil !== undefined) continue;
    if (best === undefined || (binding.createdAt?.seconds ?? 0n) > (best.createdAt?.seconds ?? 0n)) best = binding;
  }
  return best;
}
