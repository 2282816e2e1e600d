// `synapse serve`: run the reference agent on one port until SIGTERM/SIGINT.
import { readFile } from "node:fs/promises";
import { resolve } from "node:path";
import { DEFAULT_MAX_FILE_SIZE, defaultAgentCapabilities } from "../../capabilities/defaults.js";
import { REFERENCE_TASK_TYPES } from "../../agent/reference/task-types.js";
import { loadOrCreateIdentity } from "../../agent/identity.js";
import { createLogger } from "../../log.js";
import { startServer } from "../../server/server.js";
import { integerOption, parse, UsageError } from "../args.js";

export const serveUsage = `usage: synapse serve [--host H] [--port P] [--data-dir DIR] [--tls-cert FILE --tls-key FILE]
                     [--agent-id ID] [--agent-name NAME] [--system-id ID] [--max-file-size BYTES] [--log-level LEVEL]

Serves CapabilitiesService and P2PService as gRPC, gRPC-web and Connect on one port.
HOST and PORT environment variables are used when the flags are absent.
The agent's identity (agent.key, identity.json) is created in the data dir on first start and kept.`;

export async function serve(argv: string[]): Promise<number> {
  const { values } = parse(
    argv,
    {
      host: { type: "string" },
      port: { type: "string" },
      "data-dir": { type: "string" },
      "tls-cert": { type: "string" },
      "tls-key": { type: "string" },
      "agent-id": { type: "string" },
      "agent-name": { type: "string" },
      "system-id": { type: "string" },
      "max-file-size": { type: "string" },
      "log-level": { type: "string" },
    },
    serveUsage,
  );
  if (values.help) {
    process.stdout.write(`${serveUsage}\n`);
    return 0;
  }
  if ((values["tls-cert"] === undefined) !== (values["tls-key"] === undefined)) {
    throw new UsageError(`--tls-cert and --tls-key go together\n\n${serveUsage}`);
  }
  const logger = createLogger({ level: values["log-level"] });
  const dataDir = resolve(values["data-dir"] ?? process.env.SYNAPSE_DATA_DIR ?? ".synapse");
  const { identity, created } = await loadOrCreateIdentity(dataDir, {
    agentId: values["agent-id"],
    agentName: values["agent-name"],
    systemId: values["system-id"],
  });
  if (created) logger.info({ data_dir: dataDir, key_id: identity.key.keyId }, "created a new agent identity");
  const capabilities = defaultAgentCapabilities({
    agentId: identity.agentId,
    agentName: identity.agentName,
    systemId: identity.systemId,
    publicKey: identity.key.publicKey,
    keyId: identity.key.keyId,
    supportedTaskTypes: [...REFERENCE_TASK_TYPES],
    maxFileSize: BigInt(integerOption(values["max-file-size"], "--max-file-size") ?? DEFAULT_MAX_FILE_SIZE),
  });
  const tls =
    values["tls-cert"] && values["tls-key"]
      ? { cert: await readFile(values["tls-cert"]), key: await readFile(values["tls-key"]) }
      : undefined;
  const server = await startServer({
    capabilities,
    host: values.host ?? process.env.HOST ?? "127.0.0.1",
    port: integerOption(values.port ?? process.env.PORT, "--port") ?? 8080,
    tls,
    logger,
  });
  process.stdout.write(`synapse agent ${identity.agentId} listening on ${server.url}\n`);
  await new Promise<void>((done) => {
    const stop = (signal: NodeJS.Signals) => {
      logger.info({ signal }, "signal received");
      process.off("SIGTERM", stop);
      process.off("SIGINT", stop);
      server.close().then(done, done);
    };
    process.on("SIGTERM", stop);
    process.on("SIGINT", stop);
  });
  return 0;
}
