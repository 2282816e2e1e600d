// `synapse serve`: run the reference agent on one port until SIGTERM/SIGINT.
import { readFile, rename } from "node:fs/promises";
import { join, resolve } from "node:path";
import { createAgent } from "../../agent/agent.js";
import { createGroupHost } from "../../group/group-host.js";
import { referenceHandlers } from "../../agent/reference/index.js";
import { DEFAULT_MAX_FILE_SIZE, defaultAgentCapabilities, type P2PConfig } from "../../capabilities/defaults.js";
import type { TrustPolicy } from "../../envelope/trust.js";
import { PinnedKeys, TrustChain, TrustStore } from "../../envelope/trust-sources.js";
import { isKeyId } from "../../registry/catalogue-access.js";
import { joinRegistry } from "../../registry/join.js";
import { Registry } from "../../registry/registry.js";
import { DirectoryTrust, RegistryTrust } from "../../registry/registry-trust.js";
import { REFERENCE_TASK_TYPES } from "../../agent/reference/task-types.js";
import { loadOrCreateIdentity, PINNED_KEYS_FILE } from "../../agent/identity.js";
import { createLogger, type Logger } from "../../log.js";
import { OutboundPolicy } from "../../net/outbound-policy.js";
import { installTracing, otlpTracesUrl } from "../../observability/tracing.js";
import { startServer } from "../../server/server.js";
import { readPinFile } from "../../store/file-pins.js";
import { openStorage } from "../../store/open.js";
import type { PinStore } from "../../store/pins.js";
import type { Storage } from "../../store/storage.js";
import { durationOption, integerOption, parse, UsageError } from "../args.js";
import { escalationPolicy } from "../escalation-options.js";

export const serveUsage = `usage: synapse serve [--host H] [--port P] [--data-dir DIR] [--tls-cert FILE --tls-key FILE]
                     [--store sqlite|sqlite:PATH|postgres://...|memory] [--fsync normal|full] [--retention DURATION] [--run-lease SECONDS]
                     [--trust-store FILE [--tofu]] [--trust-registry URL] [--agent-id ID] [--agent-name NAME] [--system-id ID]
                     [--registry [--lease SECONDS] [--registry-admin KEY_ID]... [--registry-open-names]]
                     [--join URL [--advertise-url URL]] [--operator KEY_ID]...
                     [--allow-outbound CIDR|IP|HOST|*.DOMAIN]...
                     [--max-file-size BYTES] [--max-concurrent-tasks N] [--max-task-duration SECONDS]
                     [--max-upload-size BYTES] [--upload-quota BYTES] [--upload-ttl DURATION]
                     [--escalate-after DURATION [--escalation-contact LEVEL=AGENT_ID]...]
                     [--task-timeout SECONDS] [--heartbeat-interval SECONDS] [--clock-skew SECONDS]
                     [--max-connections N] [--header-timeout SECONDS] [--body-timeout SECONDS]
                     [--idle-timeout SECONDS] [--write-timeout SECONDS] [--log-level LEVEL]
                     [--no-metrics] [--otlp-endpoint URL]

Serves the reference agent (CapabilitiesService, P2PService and GroupService) as
gRPC, gRPC-web and Connect on one port. HOST and PORT environment variables are used when the
flags are absent. The agent's identity (agent.key, identity.json) is created in
the data dir on first start and kept.

State (tasks, event logs, seen messages, results, pending callbacks, pinned
keys, the registry) is kept in --store: by default SQLite in <data-dir>/synapse.db
(one process at a time); postgres://user:password@host:port/db (or SYNAPSE_STORE)
for several instances of one agent; memory for tests. --fsync full makes every
SQLite commit survive power loss (normal: a process crash loses nothing
acknowledged). Finished tasks are kept for --retention (default 7d). A task's run
is leased for --run-lease seconds (default 15): another instance takes over a
dead one's tasks after that.

--operator KEY_ID (repeatable) names an operator key by its key id (the
43-character thumbprint \`synapse keygen\` prints): a bearer token signed by it
may read every task (GetTask, ListTasks, Watch, ReadResult), as the console
does for an operator. It steers nothing: cancelling, answering and deciding
stay with each task's requester. Everyone else reads only the tasks they
requested, and cannot tell another requester's task exists.

Files larger than --max-file-size travel as uploads: POST /upload
(multipart/form-data, bearer token; \`synapse upload\`) streams one into the
store, at most --max-upload-size bytes (default 1 GiB); one sender's uploads may
hold --upload-quota bytes (default 4 GiB); an upload no running task uses is
dropped --upload-ttl after its last use (default 24h).

A task that asks a human (the reference tasks do with "require_approval": true)
waits for its requester's decision. With --escalate-after each level of the
decision waits DURATION; then it escalates to the contacts named for the next
level (--escalation-contact 2=AGENT_ID, 3=AGENT_ID; repeatable), who alone may
decide there and may read the task from then on; after the last level the task
fails (execution_timeout). Task types declare this policy (GetTaskTypeCapabilities).

Senders' keys are pinned on first use (in the store). With
--trust-store only the agents listed there are trusted ({"agents": [{"agent_id",
"public_key" (base64url)}]}); add --tofu to also pin agents it does not list.
--trust-registry URL (implied by --join) also trusts the keys of the agents
registered there.

--registry hosts RegistryService (agent directory and capability catalogue)
beside the agent; agents must heartbeat within --lease (default 30 s).
--registry-admin KEY_ID (repeatable) names an operator key: the key id (the
43-character RFC 7638 thumbprint \`synapse keygen\` prints), never an agent id.
Admins may add static capabilities, change any capability and grant the
permissions matching counts (\`synapse permissions\`); everyone else may change
only the capabilities it registered. An agent id the registry does not hold
yet is registered only with the key it is derived from (agent_ and 32 hex
digits of SHA-256 of the public key, every agent's default id) or with the key
--trust-store binds it to (add --tofu to keep pinning the senders it does not
list); any other name is refused, so nobody claims a name before its owner.
--registry-open-names lets anyone register any name not yet held (and not
bound by --trust-store) with whatever key signs first: for closed or
development networks only. --join URL
registers this agent at that registry on start (reachable at --advertise-url,
default the listening URL), keeps the lease, and deregisters on shutdown.

Callbacks (a task's callback_url) and the registry's confirmation calls go to
public addresses, and to loopback only while the server listens on loopback
only. Private, link-local, multicast and other special-purpose addresses, and
loopback when listening beyond it, are refused unless allowed with
--allow-outbound (repeatable): a CIDR block (10.0.0.0/8), an address, a host
name, or *.domain. Names are checked by every address they resolve to.

Connections are bounded so that slow or stalled clients cannot hold the port:
  --max-connections N       open connections at most (default: 3/4 of the
                            open-file limit, at most 10000; 0: no cap). At the
                            cap the connection waiting longest on its client
                            (still sending headers, then idle, then still
                            sending a body) is closed for the new one; if every
                            connection is being answered, the new one is closed.
  --header-timeout SECONDS  a new connection must send its first request's
                            headers (TLS handshake included) within this, a
                            kept-alive one its next request's (default 20)
  --body-timeout SECONDS    a request body must arrive within this after its
                            headers (default 60)
  --idle-timeout SECONDS    a connection with no call in flight is closed after
                            this (default 60); long streams are not idle
  --write-timeout SECONDS   a response that cannot write anything for this long
                            (its client stopped reading) is cut (default 60)
A timeout of 0 turns it off.

Observability: GET /metrics on the same port answers the server's metrics in
the Prometheus text format (--no-metrics turns it off). --otlp-endpoint URL
exports OpenTelemetry traces over OTLP/HTTP to a collector (its base URL,
http://host:4318, or the full .../v1/traces URL); without the flag,
OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or OTEL_EXPORTER_OTLP_ENDPOINT do the same,
and with none of them no spans are made. Every log line about a message
carries trace_id, message_id, message_type, task_id, sender, receiver and state.`;

/**
 * Pinning on first use by default (self-certifying ids only); a trust-store
 * file makes trust explicit; a registry's key directory (a remote one, or
 * the one this server hosts) is asked before pinning decides.
 */
function trustPolicy(
  pins: PinStore,
  trustStore: TrustStore | undefined,
  tofu: boolean,
  registryUrl: string | undefined,
  hosted: TrustPolicy | undefined,
): TrustPolicy {
  const sources: TrustPolicy[] = [];
  if (trustStore !== undefined) sources.push(trustStore);
  if (hosted !== undefined) sources.push(hosted);
  if (registryUrl !== undefined) sources.push(new RegistryTrust(registryUrl));
  if (trustStore === undefined || tofu) sources.push(new PinnedKeys(pins));
  return sources.length === 1 ? sources[0]! : new TrustChain(sources);
}

/** Pins an older agent kept in pinned-keys.json move into the store, once. */
async function importPinFile(dataDir: string, pins: PinStore, logger: Logger): Promise<void> {
  const path = join(dataDir, PINNED_KEYS_FILE);
  const found = await readPinFile(path);
  if (found.length === 0) return;
  for (const pin of found) await pins.pin(pin);
  await rename(path, `${path}.imported`);
  logger.info({ pins: found.length, from: path }, "moved pinned keys into the store");
}

/** `{ [key]: value }` when the value was given, else nothing (so defaults stay). */
function optional<K extends string>(key: K, value: number | undefined): Partial<Record<K, number>> {
  return value === undefined ? {} : ({ [key]: value } as Record<K, number>);
}

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
      "max-concurrent-tasks": { type: "string" },
      "max-task-duration": { type: "string" },
      "max-upload-size": { type: "string" },
      "upload-quota": { type: "string" },
      "upload-ttl": { type: "string" },
      "escalate-after": { type: "string" },
      "escalation-contact": { type: "string", multiple: true },
      "task-timeout": { type: "string" },
      "heartbeat-interval": { type: "string" },
      "clock-skew": { type: "string" },
      "max-connections": { type: "string" },
      "header-timeout": { type: "string" },
      "body-timeout": { type: "string" },
      "idle-timeout": { type: "string" },
      "write-timeout": { type: "string" },
      "trust-store": { type: "string" },
      tofu: { type: "boolean" },
      "trust-registry": { type: "string" },
      registry: { type: "boolean" },
      lease: { type: "string" },
      "registry-admin": { type: "string", multiple: true },
      "registry-open-names": { type: "boolean" },
      store: { type: "string" },
      fsync: { type: "string" },
      retention: { type: "string" },
      "run-lease": { type: "string" },
      join: { type: "string" },
      "advertise-url": { type: "string" },
      operator: { type: "string", multiple: true },
      "allow-outbound": { type: "string", multiple: true },
      "log-level": { type: "string" },
      "no-metrics": { type: "boolean" },
      "otlp-endpoint": { type: "string" },
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
  const admins = values["registry-admin"] ?? [];
  if (admins.length > 0 && !values.registry) throw new UsageError(`--registry-admin goes with --registry\n\n${serveUsage}`);
  if (values["registry-open-names"] && !values.registry) throw new UsageError(`--registry-open-names goes with --registry\n\n${serveUsage}`);
  for (const admin of admins) {
    if (!isKeyId(admin)) {
      throw new UsageError(`--registry-admin takes a key id (43 characters, as \`synapse keygen\` prints), not ${JSON.stringify(admin)}\n\n${serveUsage}`);
    }
  }
  const operators = values.operator ?? [];
  for (const operator of operators) {
    if (!isKeyId(operator)) {
      throw new UsageError(`--operator takes a key id (43 characters, as \`synapse keygen\` prints), not ${JSON.stringify(operator)}\n\n${serveUsage}`);
    }
  }
  let tracesUrl: string | undefined;
  try {
    tracesUrl = otlpTracesUrl(values["otlp-endpoint"]);
  } catch {
    throw new UsageError(`--otlp-endpoint (or OTEL_EXPORTER_OTLP_ENDPOINT) must be a URL such as http://127.0.0.1:4318\n\n${serveUsage}`);
  }
  const logger = createLogger({ level: values["log-level"] });
  let outbound: OutboundPolicy;
  try {
    outbound = new OutboundPolicy({ allow: values["allow-outbound"] ?? [] });
  } catch (error) {
    throw new UsageError(`${(error as Error).message}\n\n${serveUsage}`);
  }
  const dataDir = resolve(values["data-dir"] ?? process.env.SYNAPSE_DATA_DIR ?? ".synapse");
  const { identity, created } = await loadOrCreateIdentity(dataDir, {
    agentId: values["agent-id"],
    agentName: values["agent-name"],
    systemId: values["system-id"],
  });
  if (created) logger.info({ data_dir: dataDir, key_id: identity.key.keyId }, "created a new agent identity");
  const defaults = defaultAgentCapabilities();
  const escalation = escalationPolicy(durationOption(values["escalate-after"], "--escalate-after"), values["escalation-contact"], serveUsage);
  const capabilities = defaultAgentCapabilities({
    agentName: identity.agentName,
    supportedTaskTypes: REFERENCE_TASK_TYPES.map((taskType) => (escalation ? { ...taskType, escalation } : taskType)),
    maxFileSize: BigInt(integerOption(values["max-file-size"], "--max-file-size") ?? DEFAULT_MAX_FILE_SIZE),
    maxConcurrentTasks: integerOption(values["max-concurrent-tasks"], "--max-concurrent-tasks") ?? defaults.maxConcurrentTasks,
    maxTaskDurationSeconds: integerOption(values["max-task-duration"], "--max-task-duration") ?? defaults.maxTaskDurationSeconds,
  });
  type SecondsFlag = "task-timeout" | "heartbeat-interval" | "clock-skew" | "lease" | "run-lease" | "header-timeout" | "body-timeout" | "idle-timeout" | "write-timeout";
  const seconds = (name: SecondsFlag) => {
    const value = integerOption(values[name], `--${name}`);
    return value === undefined ? undefined : value * 1000;
  };
  const config: Partial<P2PConfig> = {};
  const taskTimeoutMs = seconds("task-timeout");
  const heartbeatIntervalMs = seconds("heartbeat-interval");
  if (taskTimeoutMs !== undefined) config.taskTimeoutMs = taskTimeoutMs;
  if (heartbeatIntervalMs !== undefined) config.heartbeatIntervalMs = heartbeatIntervalMs;
  const fsync = values.fsync;
  if (fsync !== undefined && fsync !== "full" && fsync !== "normal") throw new UsageError(`--fsync must be full or normal\n\n${serveUsage}`);
  const retentionMs = durationOption(values.retention, "--retention");
  const uploadLimits = {
    ...optional("maxUploadBytes", integerOption(values["max-upload-size"], "--max-upload-size")),
    ...optional("quotaBytes", integerOption(values["upload-quota"], "--upload-quota")),
    ...optional("keepUnusedMs", durationOption(values["upload-ttl"], "--upload-ttl")),
  };
  const tls =
    values["tls-cert"] && values["tls-key"]
      ? { cert: await readFile(values["tls-cert"]), key: await readFile(values["tls-key"]) }
      : undefined;
  // The operator's bindings of ids to keys: trusted by the agent, and the names its registry lets those keys register.
  const trustStore = values["trust-store"] === undefined ? undefined : await TrustStore.load(values["trust-store"]);
  const storage: Storage = await openStorage(values.store ?? process.env.SYNAPSE_STORE, { dataDir, fsync, logger });
  logger.info({ store: storage.kind, location: storage.location }, "state store open");
  const tracing = tracesUrl === undefined ? undefined : await installTracing({ url: tracesUrl, attributes: { "synapse.agent.id": identity.agentId } });
  if (tracing !== undefined) logger.info({ otlp_traces_url: tracing.url }, "exporting traces");
  try {
    await importPinFile(dataDir, storage.pins, logger);
    // A registry this server hosts vouches for the agents registered with it.
    const hostedDirectory = values.registry ? new DirectoryTrust(storage.directory) : undefined;
    const agent = createAgent({
      identity,
      capabilities,
      handlers: referenceHandlers(),
      trust: trustPolicy(storage.pins, trustStore, Boolean(values.tofu), values["trust-registry"] ?? values.join, hostedDirectory),
      store: storage.tasks,
      uploads: storage.uploads,
      uploadLimits,
      config,
      clockSkewMs: seconds("clock-skew"),
      retentionMs,
      leaseMs: seconds("run-lease"),
      logger,
      outbound,
      operators,
      groups: true,
    });
    if (operators.length > 0) logger.info({ operators }, "operator keys may read every task");
    const groups = createGroupHost({ agent, storage: storage.groups, logger, retentionMs });
    const registry = values.registry
      ? new Registry({
          logger,
          clockSkewMs: agent.clockSkewMs,
          leaseMs: seconds("lease"),
          admins,
          outbound,
          bindings: trustStore,
          openNames: Boolean(values["registry-open-names"]),
          storage: { directory: storage.directory, catalogue: storage.catalogue, messages: storage.tasks },
        })
      : undefined;
    if (registry !== undefined && values["registry-open-names"]) {
      logger.warn("--registry-open-names: any agent id not yet registered goes to the first key that registers it; for closed or development networks only");
    }
    const server = await startServer({
      agent,
      registry,
      groups,
      host: values.host ?? process.env.HOST ?? "127.0.0.1",
      port: integerOption(values.port ?? process.env.PORT, "--port") ?? 8080,
      tls,
      logger,
      maxConnections: integerOption(values["max-connections"], "--max-connections"),
      headerTimeoutMs: seconds("header-timeout"),
      bodyTimeoutMs: seconds("body-timeout"),
      idleTimeoutMs: seconds("idle-timeout"),
      writeTimeoutMs: seconds("write-timeout"),
      metrics: !values["no-metrics"],
    });
    await serveUntilSignalled(server, registry !== undefined, values.join, values["advertise-url"], identity, agent.provider, logger);
  } finally {
    // The last spans leave before the process does.
    await tracing?.shutdown().catch((error: unknown) => logger.warn({ err: error }, "could not export the last traces"));
    await storage.close();
  }
  return 0;
}

async function serveUntilSignalled(
  server: Awaited<ReturnType<typeof startServer>>,
  isRegistry: boolean,
  join: string | undefined,
  advertiseUrl: string | undefined,
  identity: Parameters<typeof joinRegistry>[0]["identity"],
  provider: Parameters<typeof joinRegistry>[0]["provider"],
  logger: Logger,
): Promise<void> {
  // Signals are heard from the moment the URL is printed: a supervisor may stop the agent at once.
  let membership: Awaited<ReturnType<typeof joinRegistry>> | undefined;
  let stopping: Promise<void> | undefined;
  const stopped = new Promise<void>((done) => {
    const stop = (signal: NodeJS.Signals) => {
      logger.info({ signal }, "signal received");
      process.off("SIGTERM", stop);
      process.off("SIGINT", stop);
      stopping = Promise.resolve(membership?.leave())
        .then(() => server.close())
        .then(done, done);
    };
    process.on("SIGTERM", stop);
    process.on("SIGINT", stop);
  });
  process.stdout.write(`synapse agent ${identity.agentId} listening on ${server.url}${isRegistry ? " (registry)" : ""}\n`);
  if (join) {
    try {
      membership = await joinRegistry({ registryUrl: join, identity, provider, endpointUrl: advertiseUrl ?? server.url, logger });
    } catch (error) {
      await (stopping ?? server.close());
      throw error;
    }
    if (stopping === undefined) process.stdout.write(`joined registry ${join} (${membership.registryAgentId})\n`);
    else void membership.leave();
  }
  await stopped;
}
