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
import { loadOrCreateIdentity, PINNED_KEYS_FILE, type AgentIdentity } from "../../agent/identity.js";
import { createLogger, type Logger } from "../../log.js";
import { OutboundPolicy } from "../../net/outbound-policy.js";
import { installTracing, otlpTracesUrl } from "../../observability/tracing.js";
import { startServer } from "../../server/server.js";
import { readPinFile } from "../../store/file-pins.js";
import { writeBackup } from "../../ops/backup.js";
import { listenForControl } from "../../ops/control-socket.js";
import { openStorage, parseStoreSpec } from "../../store/open.js";
import type { PinStore } from "../../store/pins.js";
import type { Storage } from "../../store/storage.js";
import { durationOption, integerOption, parse, urlOption, UsageError } from "../args.js";
import { escalationPolicy } from "../escalation-options.js";
import { boundHeapGrowth, DEFAULT_HEAP_GROWTH_PERCENT } from "../heap.js";
import { startedByNpm, whenParentExits } from "../parent-watch.js";
import { openStorageWaiting } from "../store-wait.js";
import { serveUsage } from "./serve-usage.js";

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

/** The task type of A2A messages that name none, when the agent has it (the reference agent does). */
const DEFAULT_A2A_SKILL = "text_analysis";

/** A file a flag names, read before anything is created; one that cannot be read is a usage error. */
async function flagFile<T>(flag: string, path: string, read: (path: string) => Promise<T>): Promise<T> {
  try {
    return await read(path);
  } catch (error) {
    throw new UsageError(`${flag}: ${(error as Error).message}`);
  }
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
      "upload-quota-first-use": { type: "string" },
      "upload-total": { type: "string" },
      "upload-reserve": { type: "string" },
      "max-uploads": { type: "string" },
      "upload-ttl": { type: "string" },
      "escalate-after": { type: "string" },
      "escalation-contact": { type: "string", multiple: true },
      "confidential-only": { type: "string", multiple: true },
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
      "registry-max-untrusted": { type: "string" },
      "registry-rate": { type: "string" },
      store: { type: "string" },
      "store-wait": { type: "string" },
      fsync: { type: "string" },
      retention: { type: "string" },
      "run-lease": { type: "string" },
      join: { type: "string" },
      "advertise-url": { type: "string" },
      operator: { type: "string", multiple: true },
      "allow-outbound": { type: "string", multiple: true },
      "log-level": { type: "string" },
      "no-metrics": { type: "boolean" },
      "no-a2a": { type: "boolean" },
      "a2a-open": { type: "boolean" },
      "a2a-skill": { type: "string" },
      "otlp-endpoint": { type: "string" },
      "heap-growth": { type: "string" },
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
  for (const flag of ["registry-open-names", "registry-max-untrusted", "registry-rate"] as const) {
    if (values[flag] !== undefined && !values.registry) throw new UsageError(`--${flag} goes with --registry\n\n${serveUsage}`);
  }
  const registryLimits = {
    ...optional("maxUntrusted", integerOption(values["registry-max-untrusted"], "--registry-max-untrusted")),
    ...optional("ratePerSecond", integerOption(values["registry-rate"], "--registry-rate")),
  };
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
  boundHeapGrowth(integerOption(values["heap-growth"], "--heap-growth") ?? DEFAULT_HEAP_GROWTH_PERCENT);
  const storeWaitMs = durationOption(values["store-wait"], "--store-wait");
  let logger: Logger;
  try {
    logger = createLogger({ level: values["log-level"] });
  } catch {
    throw new UsageError(`--log-level must be trace, debug, info, warn, error, fatal or silent, got ${JSON.stringify(values["log-level"] ?? process.env.SYNAPSE_LOG_LEVEL)}\n\n${serveUsage}`);
  }
  let outbound: OutboundPolicy;
  try {
    outbound = new OutboundPolicy({ allow: values["allow-outbound"] ?? [] });
  } catch (error) {
    throw new UsageError(`${(error as Error).message}\n\n${serveUsage}`);
  }
  // Every flag is checked before anything is created or opened: a typo leaves no identity and no store behind.
  for (const flag of ["join", "trust-registry", "advertise-url"] as const) urlOption(values[flag], `--${flag}`);
  const escalation = escalationPolicy(durationOption(values["escalate-after"], "--escalate-after"), values["escalation-contact"], serveUsage);
  const maxFileSize = integerOption(values["max-file-size"], "--max-file-size");
  const maxConcurrentTasks = integerOption(values["max-concurrent-tasks"], "--max-concurrent-tasks");
  const maxTaskDurationSeconds = integerOption(values["max-task-duration"], "--max-task-duration");
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
  const clockSkewMs = seconds("clock-skew");
  const registryLeaseMs = seconds("lease");
  const runLeaseMs = seconds("run-lease");
  const listenOptions = {
    host: values.host ?? process.env.HOST ?? "127.0.0.1",
    port: integerOption(values.port ?? process.env.PORT, "--port") ?? 8080,
    maxConnections: integerOption(values["max-connections"], "--max-connections"),
    headerTimeoutMs: seconds("header-timeout"),
    bodyTimeoutMs: seconds("body-timeout"),
    idleTimeoutMs: seconds("idle-timeout"),
    writeTimeoutMs: seconds("write-timeout"),
  };
  const fsync = values.fsync;
  if (fsync !== undefined && fsync !== "full" && fsync !== "normal") throw new UsageError(`--fsync must be full or normal\n\n${serveUsage}`);
  const retentionMs = durationOption(values.retention, "--retention");
  const dataDir = resolve(values["data-dir"] ?? process.env.SYNAPSE_DATA_DIR ?? ".synapse");
  const uploadLimits = {
    ...optional("maxUploadBytes", integerOption(values["max-upload-size"], "--max-upload-size")),
    ...optional("quotaBytes", integerOption(values["upload-quota"], "--upload-quota")),
    ...optional("firstUseQuotaBytes", integerOption(values["upload-quota-first-use"], "--upload-quota-first-use")),
    ...optional("totalBytes", integerOption(values["upload-total"], "--upload-total")),
    ...optional("reserveBytes", integerOption(values["upload-reserve"], "--upload-reserve")),
    ...optional("maxConcurrent", integerOption(values["max-uploads"], "--max-uploads")),
    // Free space is watched where the data dir is: the SQLite store, and the task writes the reserve keeps room for.
    spacePath: dataDir,
    ...optional("keepUnusedMs", durationOption(values["upload-ttl"], "--upload-ttl")),
  };
  const a2aSkill = values["a2a-skill"];
  const taskTypes = REFERENCE_TASK_TYPES.map((taskType) => taskType.type);
  const confidentialOnly = new Set(values["confidential-only"] ?? []);
  for (const type of confidentialOnly) {
    if (!taskTypes.includes(type)) throw new UsageError(`--confidential-only takes one of ${taskTypes.join(", ")}, not ${JSON.stringify(type)}\n\n${serveUsage}`);
  }
  if (a2aSkill !== undefined && !taskTypes.includes(a2aSkill)) throw new UsageError(`--a2a-skill takes one of ${taskTypes.join(", ")}, not ${JSON.stringify(a2aSkill)}\n\n${serveUsage}`);
  const storeSpec = values.store ?? process.env.SYNAPSE_STORE;
  try {
    parseStoreSpec(storeSpec);
  } catch (error) {
    throw new UsageError(`${(error as Error).message}\n\n${serveUsage}`);
  }
  const tlsCert = values["tls-cert"];
  const tlsKey = values["tls-key"];
  const tls =
    tlsCert !== undefined && tlsKey !== undefined
      ? { cert: await flagFile("--tls-cert", tlsCert, readFile), key: await flagFile("--tls-key", tlsKey, readFile) }
      : undefined;
  // The operator's bindings of ids to keys: trusted by the agent, and the names its registry lets those keys register.
  const trustStorePath = values["trust-store"];
  const trustStore = trustStorePath === undefined ? undefined : await flagFile("--trust-store", trustStorePath, (path) => TrustStore.load(path));

  // The store first: a data dir another server holds is refused before its identity files are touched.
  const storage: Storage = await openStorageWaiting(() => openStorage(storeSpec, { dataDir, fsync, logger }), storeWaitMs, logger);
  let identity: AgentIdentity;
  try {
    const loaded = await loadOrCreateIdentity(dataDir, {
      agentId: values["agent-id"],
      agentName: values["agent-name"],
      defaultAgentName: "Synapse reference agent",
      systemId: values["system-id"],
    });
    identity = loaded.identity;
    if (loaded.created) logger.info({ data_dir: dataDir, key_id: identity.key.keyId }, "created a new agent identity");
  } catch (error) {
    await storage.close();
    throw error;
  }
  const defaults = defaultAgentCapabilities();
  const capabilities = defaultAgentCapabilities({
    agentName: identity.agentName,
    supportedTaskTypes: REFERENCE_TASK_TYPES.map((taskType) => ({
      ...taskType,
      ...(escalation ? { escalation } : {}),
      ...(confidentialOnly.has(taskType.type) ? { requiresConfidentiality: true } : {}),
    })),
    maxFileSize: BigInt(maxFileSize ?? DEFAULT_MAX_FILE_SIZE),
    maxConcurrentTasks: maxConcurrentTasks ?? defaults.maxConcurrentTasks,
    maxTaskDurationSeconds: maxTaskDurationSeconds ?? defaults.maxTaskDurationSeconds,
  });
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
      clockSkewMs,
      retentionMs,
      leaseMs: runLeaseMs,
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
          leaseMs: registryLeaseMs,
          admins,
          outbound,
          bindings: trustStore,
          openNames: Boolean(values["registry-open-names"]),
          limits: registryLimits,
          auditRetentionMs: retentionMs,
          storage: { directory: storage.directory, catalogue: storage.catalogue, messages: storage.tasks },
        })
      : undefined;
    if (registry !== undefined && values["registry-open-names"]) {
      logger.warn("--registry-open-names: any agent id not yet registered goes to the first key that registers it; for closed or development networks only");
    }
    if (values["a2a-open"] && !values["no-a2a"]) {
      logger.warn("--a2a-open: A2A callers without credentials are admitted, all as one anonymous requester that reads and steers the others' anonymous tasks; for local use only");
    }
    const server = await startServer({
      agent,
      registry,
      a2a: values["no-a2a"]
        ? undefined
        : { open: values["a2a-open"] === true, defaultSkill: a2aSkill ?? (taskTypes.includes(DEFAULT_A2A_SKILL) ? DEFAULT_A2A_SKILL : undefined), publicUrl: values["advertise-url"], pushStore: storage.a2aPush },
      groups,
      ...listenOptions,
      tls,
      logger,
      metrics: !values["no-metrics"],
    });
    // `synapse backup` asks through the data dir's control socket; the copy is taken while the server serves.
    const closeControl = await listenForControl(
      dataDir,
      (request) =>
        writeBackup({
          dataDir,
          to: request.to,
          agentId: identity.agentId,
          keyId: identity.key.keyId,
          store: storage.kind,
          copyStore: storage.backup?.bind(storage),
        }),
      logger,
    );
    try {
      await serveUntilSignalled(server, registry !== undefined, values.join, values["advertise-url"], identity, agent.provider, logger);
    } finally {
      await closeControl();
    }
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
  let unwatchParent = () => {};
  const stopped = new Promise<void>((done) => {
    const stop = (signal: NodeJS.Signals) => {
      logger.info({ signal }, "signal received");
      process.off("SIGTERM", stop);
      process.off("SIGINT", stop);
      unwatchParent();
      stopping = Promise.resolve(membership?.leave())
        .then(() => server.close())
        .then(done, done);
    };
    process.on("SIGTERM", stop);
    process.on("SIGINT", stop);
    if (startedByNpm()) {
      unwatchParent = whenParentExits(() => {
        logger.info("the npm process that started this server has exited; stopping as on SIGTERM");
        stop("SIGTERM");
      });
    }
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
