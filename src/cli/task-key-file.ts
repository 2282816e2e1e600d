// The key of a confidential task made ahead by `synapse upload --confidential`
// (its files are sealed with it before the task exists), kept in
// --home/tasks/<id>.key (mode 0600) until `synapse submit --confidential
// --task-id ID` has sent the request that carries it, wrapped.
import { mkdir, readFile, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { TASK_KEY_BYTES } from "../envelope/confidential.js";
import { UsageError } from "./args.js";
import { synapseHome } from "./home.js";

/** Task ids that are safe as a file name (uuidV7 ids are). */
const FILE_SAFE_ID = /^[A-Za-z0-9_-][A-Za-z0-9_.-]{0,127}$/;

function taskKeyPath(home: string | undefined, taskId: string): string {
  if (!FILE_SAFE_ID.test(taskId)) throw new UsageError(`--task-id for a confidential upload must be 1 to 128 of A-Z a-z 0-9 _ . - (not starting with .), got ${JSON.stringify(taskId)}`);
  return join(synapseHome(home), "tasks", `${taskId}.key`);
}

/** The key made ahead for the task, if one is kept. */
export async function readTaskKey(home: string | undefined, taskId: string): Promise<Uint8Array | undefined> {
  if (!FILE_SAFE_ID.test(taskId)) return undefined; // no upload could have kept one
  let text: string;
  try {
    text = await readFile(taskKeyPath(home, taskId), "utf8");
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw error;
  }
  const key = Buffer.from(text.trim(), "base64url");
  if (key.byteLength !== TASK_KEY_BYTES) throw new Error(`${taskKeyPath(home, taskId)} does not hold a task key`);
  return new Uint8Array(key);
}

export async function writeTaskKey(home: string | undefined, taskId: string, key: Uint8Array): Promise<void> {
  const path = taskKeyPath(home, taskId);
  await mkdir(join(synapseHome(home), "tasks"), { recursive: true, mode: 0o700 });
  await writeFile(path, `${Buffer.from(key).toString("base64url")}\n`, { mode: 0o600 });
}

/** Once the request carries the key (wrapped to this requester too), the file is no longer needed. */
export async function removeTaskKey(home: string | undefined, taskId: string): Promise<void> {
  await rm(taskKeyPath(home, taskId), { force: true });
}
