// Pins kept in a small JSON file: a command-line user's known agents
// (~/.synapse/known-agents.json), and the format agents used before their
// pins moved into the store (imported from there once).
import { mkdir, readFile, rename, writeFile } from "node:fs/promises";
import { dirname } from "node:path";
import { fromBase64Url, toBase64Url } from "../crypto/encoding.js";
import { keyIdOf } from "../crypto/keys.js";
import { StoreOpenError } from "./errors.js";
import type { PinnedKey, PinStore } from "./pins.js";

interface PinFile {
  agents: Record<string, { key_id: string; public_key: string; pinned_at: string }>;
}

/** Reads a pin file; an absent file has no pins; a damaged one is refused with a message that names it. */
export async function readPinFile(path: string): Promise<PinnedKey[]> {
  let text: string;
  try {
    text = await readFile(path, "utf8");
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return [];
    throw error;
  }
  try {
    const parsed = JSON.parse(text) as PinFile;
    return Object.entries(parsed.agents ?? {}).map(([agentId, entry]) => {
      const publicKey = fromBase64Url(entry.public_key);
      return { agentId, keyId: keyIdOf(publicKey), publicKey, pinnedAtMs: Date.parse(entry.pinned_at) || 0 };
    });
  } catch (error) {
    throw new StoreOpenError(
      `${path} is damaged (${error instanceof Error ? error.message : String(error)}). It lists the agent keys pinned on first use: ` +
        `fix it, or move it aside (mv '${path}' '${path}.damaged') to forget them and pin each agent again on its next message.`,
    );
  }
}

export class JsonFilePinStore implements PinStore {
  private readonly pins = new Map<string, PinnedKey>();
  private writing: Promise<void> = Promise.resolve();

  private constructor(private readonly path: string) {}

  static async open(path: string): Promise<JsonFilePinStore> {
    const store = new JsonFilePinStore(path);
    for (const pin of await readPinFile(path)) store.pins.set(pin.agentId, pin);
    return store;
  }

  async getPin(agentId: string): Promise<PinnedKey | undefined> {
    return this.pins.get(agentId);
  }

  async findPinByKeyId(keyId: string): Promise<PinnedKey | undefined> {
    for (const pin of this.pins.values()) if (pin.keyId === keyId) return pin;
    return undefined;
  }

  async pin(entry: PinnedKey): Promise<PinnedKey> {
    const held = this.pins.get(entry.agentId);
    if (held !== undefined) return held;
    this.pins.set(entry.agentId, entry);
    await this.save();
    return entry;
  }

  private save(): Promise<void> {
    // Writes are serialized and atomic (temp file, then rename).
    this.writing = this.writing.then(async () => {
      const file: PinFile = { agents: {} };
      for (const [agentId, pin] of this.pins) {
        file.agents[agentId] = { key_id: pin.keyId, public_key: toBase64Url(pin.publicKey), pinned_at: new Date(pin.pinnedAtMs).toISOString() };
      }
      await mkdir(dirname(this.path), { recursive: true, mode: 0o700 });
      const temp = `${this.path}.${process.pid}.tmp`;
      await writeFile(temp, `${JSON.stringify(file, null, 2)}\n`, { mode: 0o600 });
      await rename(temp, this.path);
    });
    return this.writing;
  }
}
