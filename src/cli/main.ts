#!/usr/bin/env node
// The `synapse` command: dispatches to one module per subcommand.
import { ConnectError } from "@connectrpc/connect";
import { A2AClientError } from "../client/a2a/errors.js";
import { findErrorDetail } from "../protocol/errors.js";
import { StoreInUseError } from "../store/errors.js";
import { UsageError } from "./args.js";
import { commands } from "./commands/index.js";

const usage = `usage: synapse <command> [options]

commands:
${Object.entries(commands)
  .map(([name, command]) => `  ${name.padEnd(14)}${command.summary}`)
  .join("\n")}

Run 'synapse <command> --help' for a command's options. Every command that calls
an agent also takes --protocol connect|grpc|grpc-web and, for an https URL whose
certificate Node does not trust (self-signed, a private CA), --ca FILE: the CA
certificate in PEM (NODE_EXTRA_CA_CERTS=FILE does the same for any Node program).`;

async function main(argv: string[]): Promise<number> {
  const [name, ...rest] = argv;
  if (name === undefined || name === "--help" || name === "-h" || name === "help") {
    process.stdout.write(`${usage}\n`);
    return name === undefined ? 2 : 0;
  }
  const command = commands[name];
  if (command === undefined) throw new UsageError(`unknown command ${JSON.stringify(name)}\n\n${usage}`);
  return command.run(rest);
}

// Output piped into `head` and closed early is not an error.
process.stdout.on("error", (error: NodeJS.ErrnoException) => {
  if (error.code === "EPIPE") process.exit(process.exitCode ?? 0);
  throw error;
});

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (error: unknown) => {
    if (error instanceof UsageError) {
      process.stderr.write(`synapse: ${error.message}\n`);
      process.exitCode = 2;
      return;
    }
    if (error instanceof ConnectError) {
      const detail = findErrorDetail(error);
      const code = detail ? ` (${detail.protocolCode})` : "";
      process.stderr.write(`synapse: ${error.message}${code}\n`);
      process.exitCode = 1;
      return;
    }
    if (error instanceof A2AClientError) {
      process.stderr.write(`synapse: ${error.message} (${error.kind})\n`);
      process.exitCode = 1;
      return;
    }
    process.stderr.write(`synapse: ${error instanceof Error ? error.message : String(error)}\n`);
    // A data dir another running server holds has its own status: a script can tell it from a failed start.
    process.exitCode = error instanceof StoreInUseError ? 4 : 1;
  },
);
