// The command table: name, one-line summary, entry point.
import { serve } from "./serve.js";

export interface Command {
  summary: string;
  run(argv: string[]): Promise<number>;
}

export const commands: Record<string, Command> = {
  serve: { summary: "run the reference agent (all services, one port)", run: serve },
};
