// The command-line user's own agent identity: SYNAPSE_HOME (default
// ~/.synapse), kept apart from any server's data dir.
import { homedir } from "node:os";
import { join, resolve } from "node:path";

export function synapseHome(flag?: string): string {
  return resolve(flag ?? process.env.SYNAPSE_HOME ?? join(homedir(), ".synapse"));
}
