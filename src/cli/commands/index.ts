// The command table: name, one-line summary, entry point.
import { capabilities } from "./capabilities.js";
import { decode } from "./decode.js";
import { keygen } from "./keygen.js";
import { serve } from "./serve.js";

export interface Command {
  summary: string;
  run(argv: string[]): Promise<number>;
}

export const commands: Record<string, Command> = {
  serve: { summary: "run the reference agent (all services, one port)", run: serve },
  keygen: { summary: "create or show your agent identity (SYNAPSE_HOME)", run: keygen },
  capabilities: { summary: "show an agent's capabilities and interfaces", run: capabilities },
  decode: { summary: "verify an envelope (JSON on stdin) and print it readably", run: decode },
};
