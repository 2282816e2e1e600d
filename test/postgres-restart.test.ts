// Two `synapse serve` instances of one agent on one PostgreSQL cluster of
// their own, under a steady load of signed Sends spread across both, while
// the cluster restarts (fast, immediate) and its postmaster is killed -9:
// no instance exits, every acknowledged task is found and completes, none
// twice, every failed call is UNAVAILABLE with a retry-after, and health is
// SERVING again within 2 s of PostgreSQL accepting connections; a Watch and
// the callback outbox carry on across a restart. An instance
// started while PostgreSQL is down waits for it and then serves.
import { create } from "@bufbuild/protobuf";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Health, HealthCheckResponse_ServingStatus as ServingStatus } from "../gen/grpc/health/v1/health_pb.js";
import { MessageType } from "../gen/synapse/v1/envelope_pb.js";
import { ErrorCode } from "../gen/synapse/v1/errors_pb.js";
import { TaskRequestPayloadSchema, TaskState } from "../gen/synapse/v1/payloads_pb.js";
import { findPostgresBin, startCluster, type Cluster } from "../scripts/postgres-cluster.js";
import { SynapseClient } from "../src/client/requester.js";
import { findErrorDetail } from "../src/protocol/errors.js";
import { eventFromBytes } from "../src/store/codec.js";
import { callbackReceiver, tcpGate } from "./helpers/agent-process.js";
import { runCli, startServe, type ServeProcess } from "./helpers/cli.js";
import { scrape } from "./helpers/metrics.js";
import { requesterIdentity, tempDir } from "./helpers/server.js";

/** SERVING again at most this long after PostgreSQL accepts connections. */
const BACK_WITHIN_MS = 2000;
/** The load: this many callers, each pausing this long between Sends. */
const CALLERS = 4;
const PAUSE_MS = 20;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const canRun = findPostgresBin() !== undefined || process.env.SYNAPSE_REQUIRE_POSTGRES === "1";
if (!canRun) process.stdout.write("\n  PostgreSQL restart tests did not run: they need initdb and pg_ctl (Debian's postgresql package) to restart a cluster of their own\n\n");

interface Failure {
  code: Code;
  retryAfterSeconds: number | undefined;
  protocolCode: ErrorCode | undefined;
}

describe.skipIf(!canRun)("two instances on one PostgreSQL that restarts", () => {
  let cluster: Cluster;
  let dataDir: string;
  const instances: ServeProcess[] = [];
  const clients: SynapseClient[] = [];
  /** Tasks whose Send was acknowledged (a signed task_confirm), and every task id sent at all. */
  const acknowledged = new Set<string>();
  const sent = new Set<string>();
  /** The load's acknowledged tasks, in order (its requester may read them at either instance). */
  const loadTasks: string[] = [];
  let failures: Failure[] = [];
  /** Every failed call of the whole run, and replies to the load other than task_confirm. */
  const allFailures: Failure[] = [];
  const otherReplies: MessageType[] = [];
  let loadRunning = true;
  let load: Promise<void>;

  const serveArgs = () => ["--data-dir", dataDir, "--store", cluster.url, "--run-lease", "2", "--log-level", "warn"];
  const accepts = async (): Promise<boolean> => {
    const client = new pg.Client({ connectionString: cluster.url, connectionTimeoutMillis: 1000 });
    client.on("error", () => undefined);
    try {
      await client.connect();
      await client.query("SELECT 1");
      return true;
    } catch {
      return false;
    } finally {
      await client.end().catch(() => undefined);
    }
  };
  const healthOf = async (url: string): Promise<ServingStatus | "error"> => {
    try {
      return (await createClient(Health, createGrpcTransport({ baseUrl: url })).check({ service: "" }, { timeoutMs: 1000 })).status;
    } catch {
      return "error";
    }
  };

  async function caller(index: number): Promise<void> {
    for (let n = 0; loadRunning; n++) {
      const client = clients[(index + n) % clients.length]!;
      const taskId = crypto.randomUUID();
      sent.add(taskId);
      try {
        const { reply } = await client.submit("text_analysis", { text: `Call ${n} of caller ${index}. It counts words.` }, { taskId });
        if (reply?.type === MessageType.TASK_CONFIRM) {
          acknowledged.add(taskId);
          loadTasks.push(taskId);
        } else {
          otherReplies.push(reply?.type ?? MessageType.UNSPECIFIED);
        }
      } catch (error) {
        const connectError = ConnectError.from(error);
        const detail = findErrorDetail(connectError);
        const failure = { code: connectError.code, retryAfterSeconds: detail?.retryAfterSeconds, protocolCode: detail?.code };
        failures.push(failure);
        allFailures.push(failure);
      }
      await sleep(PAUSE_MS);
    }
  }

  beforeAll(async () => {
    // Durable settings: an immediate restart or a killed postmaster must not lose what was committed.
    cluster = await startCluster({ durable: true });
    dataDir = await tempDir("synapse-pg-restart-");
    // One data dir: the same key files, so one agent identity at both.
    instances.push(await startServe(serveArgs()));
    instances.push(await startServe(serveArgs()));
    const identity = await requesterIdentity();
    // No retries: every failed call is counted, as an outage shows it to a client.
    for (const instance of instances) clients.push(await SynapseClient.connect({ baseUrl: instance.url, identity, transport: { protocol: "grpc" }, sendRetries: 0 }));
    load = Promise.all(Array.from({ length: CALLERS }, (_, i) => caller(i))).then(() => undefined);
  }, 60_000);

  afterAll(async () => {
    loadRunning = false;
    await load;
    await Promise.all(instances.map((instance) => instance.stop("SIGTERM")));
    cluster?.stop();
  }, 30_000);

  /** Runs one outage under load and measures it, per instance. */
  async function outage(name: string, cause: () => Promise<void>) {
    await sleep(400);
    const okBefore = acknowledged.size;
    failures = [];
    const notServingSeen = instances.map(() => false);
    let watching = true;
    const statuses = instances.map(() => ServingStatus.SERVING as ServingStatus | "error");
    const servingAgainAt = instances.map(() => 0);
    const watch = Promise.all(
      instances.map(async (instance, i) => {
        while (watching) {
          const status = await healthOf(instance.url);
          statuses[i] = status;
          if (status === ServingStatus.NOT_SERVING) {
            notServingSeen[i] = true;
            servingAgainAt[i] = 0;
          } else if (status === ServingStatus.SERVING && notServingSeen[i] && servingAgainAt[i] === 0) {
            servingAgainAt[i] = Date.now();
          }
          await sleep(25);
        }
      }),
    );
    const started = Date.now();
    let causeDone = false;
    const caused = cause().finally(() => (causeDone = true));
    // First PostgreSQL goes down (pg_ctl may take a moment to begin) ...
    while (!causeDone && (await accepts())) await sleep(10);
    // ... and it is back once a fresh connection gets an answer (pg_ctl -w returns only then).
    while (!(await accepts())) await sleep(25);
    const acceptingAt = Date.now();
    await caused;
    // Service returns within the bound, at both instances.
    while (servingAgainAt.some((at, i) => notServingSeen[i] && at === 0) && Date.now() - acceptingAt < BACK_WITHIN_MS + 3000) await sleep(25);
    await sleep(400);
    watching = false;
    await watch;
    const figures = {
      case: name,
      outageMs: acceptingAt - started,
      failedCalls: failures.length,
      acknowledgedDuring: acknowledged.size - okBefore,
      servingAgainAfterAcceptMs: servingAgainAt.map((at) => (at === 0 ? null : at - acceptingAt)),
    };
    console.log(`[postgres restart] ${JSON.stringify(figures)}`);
    expect(instances.map((instance) => instance.child.exitCode)).toEqual([null, null]);
    for (const failure of failures) {
      expect(failure).toMatchObject({ code: Code.Unavailable, protocolCode: ErrorCode.AGENT_NOT_READY });
      expect(failure.retryAfterSeconds).toBeGreaterThan(0);
    }
    // Each instance noticed the outage, and was SERVING again within the bound.
    expect(notServingSeen).toEqual([true, true]);
    for (const at of servingAgainAt) expect(at - acceptingAt).toBeLessThanOrEqual(BACK_WITHIN_MS);
    expect(statuses).toEqual([ServingStatus.SERVING, ServingStatus.SERVING]);
    // And the load goes on: new Sends are acknowledged at both.
    const after = acknowledged.size;
    const goesOnBy = Date.now() + 10_000;
    while (acknowledged.size <= after && Date.now() < goesOnBy) await sleep(50);
    expect(acknowledged.size).toBeGreaterThan(after);
  }

  it("pg_ctl restart -m fast", () => outage("restart -m fast", () => cluster.restart("fast")), 30_000);

  it("pg_ctl restart -m immediate", () => outage("restart -m immediate", () => cluster.restart("immediate")), 30_000);

  it("kill -9 of the postmaster, then a start", () =>
    outage("kill -9 postmaster", async () => {
      await cluster.killPostmaster();
      await cluster.start();
    }), 30_000);

  it("a Watch at one instance hears, after a restart, of what was committed at the other", async () => {
    // Asked for information at admission: the task waits, and a Watch at instance 1 waits with it.
    const asked = await clients[0]!.submit("summarization", { text: "One. Two. Three." }, { waitMs: 10_000 });
    expect(asked.task?.state).toBe(TaskState.INFO_NEEDED);
    sent.add(asked.taskId);
    const states: TaskState[] = [];
    const watching = (async () => {
      for await (const item of clients[1]!.watch(asked.taskId)) if (item.kind === "event") states.push(item.state);
    })();
    await cluster.restart("fast");
    while (!(await accepts())) await sleep(25);
    // Answered at instance 0 once the database is back; instance 1 learns of it through the store.
    let answered: Awaited<ReturnType<SynapseClient["provideInfo"]>> | undefined;
    for (let i = 0; i < 100 && answered === undefined; i++) {
      answered = await clients[0]!.provideInfo(asked.taskId, { max_sentences: 1 }, { waitMs: 10_000 }).catch((error: unknown) => {
        expect(ConnectError.from(error).code).toBe(Code.Unavailable);
        return undefined;
      });
      if (answered === undefined) await sleep(100);
    }
    expect(answered?.task?.state).toBe(TaskState.COMPLETED);
    acknowledged.add(asked.taskId);
    await watching;
    expect(states.at(-1)).toBe(TaskState.COMPLETED);
  }, 30_000);

  it("the callback outbox carries on after a restart: every event pushed, in order", async () => {
    const receiver = await callbackReceiver(() => clients[0]!.executor.publicKey);
    // Closed at first: the first pushes fail and wait out their backoff across the outage.
    const gate = await tcpGate(receiver.port);
    try {
      const pushed: Array<{ taskId: string; last: number }> = [];
      for (let i = 0; i < 6; i++) {
        const client = clients[i % 2]!;
        const taskId = crypto.randomUUID();
        sent.add(taskId);
        const request = create(TaskRequestPayloadSchema, { task: { id: taskId, type: "text_analysis", payload: { text: `Pushed ${i}.` } }, callbackUrl: gate.url });
        const result = await client.sendEnvelope(client.envelope(MessageType.TASK_REQUEST, request, { taskId }), 10_000);
        expect(result.task?.state).toBe(TaskState.COMPLETED);
        acknowledged.add(taskId);
        pushed.push({ taskId, last: Number(result.task!.lastSequence) });
      }
      await cluster.restart("immediate");
      while (!(await accepts())) await sleep(25);
      gate.open();
      const deliveredOf = (taskId: string) => receiver.deliveries.filter((d) => d.taskId === taskId).map((d) => d.sequence);
      for (let i = 0; i < 300 && !pushed.every(({ taskId, last }) => deliveredOf(taskId).includes(last)); i++) await sleep(50);
      for (const { taskId, last } of pushed) {
        const sequences = deliveredOf(taskId);
        expect(sequences).toEqual([...sequences].sort((a, b) => a - b));
        expect([...new Set(sequences)]).toEqual(Array.from({ length: last }, (_, i) => i + 1));
      }
    } finally {
      await gate.close();
      await receiver.close();
    }
  }, 30_000);

  it("a start while PostgreSQL is down waits for it, and serves once it is up", async () => {
    // The running instances say in /metrics that the store is down, and again when it is back.
    const storeUp = async () => (await scrape(instances[0]!.url)).samples.get("synapse_store_up");
    expect(await storeUp()).toBe(1);
    await cluster.halt("fast");
    for (let i = 0; i < 100 && (await storeUp()) !== 0; i++) await sleep(50);
    expect(await storeUp()).toBe(0);
    // Without the flag it waits, logging each try (with a growing pause), and does not listen meanwhile.
    let tries = 0;
    const starting = startServe(serveArgs(), {}, (log) => (tries = log.split("the state store does not answer yet").length - 1));
    let started: ServeProcess | undefined;
    void starting.then((instance) => (started = instance), () => undefined);
    // A bad --store-wait is a usage error (exit 2); --store-wait 0 does not wait: it exits 1 at once, saying why.
    const [typo, impatient] = await Promise.all([
      runCli(["serve", "--port", "0", "--data-dir", await tempDir("synapse-pg-typo-"), "--store", cluster.url, "--store-wait", "soon"]),
      runCli(["serve", "--port", "0", "--data-dir", await tempDir("synapse-pg-nowait-"), "--store", cluster.url, "--store-wait", "0"]),
    ]);
    expect(typo.code).toBe(2);
    expect(typo.stderr).toContain("--store-wait must be a duration");
    expect(impatient.code).toBe(1);
    expect(impatient.stderr).toContain("could not connect to PostgreSQL");
    for (let i = 0; i < 300 && tries < 3; i++) await sleep(50);
    expect(tries).toBeGreaterThanOrEqual(3);
    expect(started).toBeUndefined();
    const startAt = Date.now();
    await cluster.start();
    const late = await starting;
    instances.push(late);
    for (let i = 0; i < 100 && (await storeUp()) !== 1; i++) await sleep(50);
    expect(await storeUp()).toBe(1);
    console.log(`[postgres restart] ${JSON.stringify({ case: "start while down", triesWhileDown: tries, listeningAfterPostgresStartMs: Date.now() - startAt })}`);
    const client = await SynapseClient.connect({ baseUrl: late.url, identity: await requesterIdentity(), transport: { protocol: "grpc" } });
    const taskId = crypto.randomUUID();
    sent.add(taskId);
    const done = await client.submit("text_analysis", { text: "Late. But serving." }, { taskId, waitMs: 10_000 });
    expect(done.task?.state).toBe(TaskState.COMPLETED);
    acknowledged.add(taskId);
    expect(await healthOf(late.url)).toBe(ServingStatus.SERVING);
  }, 30_000);

  it("lost no acknowledged task, duplicated none, and every one completes", async () => {
    loadRunning = false;
    await load;
    expect(instances.map((instance) => instance.child.exitCode)).toEqual([null, null, null]);
    // Every call that failed, in and between the outages (the load went on while PostgreSQL was stopped), failed UNAVAILABLE with a retry-after.
    expect(allFailures.filter((failure) => failure.code !== Code.Unavailable || failure.protocolCode !== ErrorCode.AGENT_NOT_READY || !failure.retryAfterSeconds)).toEqual([]);
    expect(otherReplies).toEqual([]);
    const db = new pg.Client({ connectionString: cluster.url });
    await db.connect();
    try {
      const ids = [...acknowledged];
      let rows: Array<{ task_id: string; state: number }> = [];
      for (let i = 0; i < 200; i++) {
        ({ rows } = await db.query("SELECT task_id, state FROM tasks WHERE task_id = ANY($1)", [ids]));
        if (rows.length === ids.length && rows.every((row) => row.state === TaskState.COMPLETED)) break;
        await sleep(100);
      }
      expect(rows.length).toBe(ids.length);
      expect(rows.filter((row) => row.state !== TaskState.COMPLETED)).toEqual([]);
      // Every task in the database is one Send's; each log is gapless with exactly one ending (no second run recorded twice).
      const all = await db.query<{ task_id: string }>("SELECT task_id FROM tasks");
      expect(all.rows.every((row) => sent.has(row.task_id))).toBe(true);
      const events = await db.query<{ task_id: string; sequence: number; envelope: Buffer }>("SELECT task_id, sequence, envelope FROM task_events ORDER BY task_id, sequence");
      const logs = new Map<string, { next: number; endings: number }>();
      for (const row of events.rows) {
        const log = logs.get(row.task_id) ?? { next: 1, endings: 0 };
        expect(Number(row.sequence)).toBe(log.next++);
        const type = eventFromBytes(row.task_id, Number(row.sequence), row.envelope).header.messageType;
        if (type === MessageType.TASK_COMPLETE || type === MessageType.TASK_FAILED || type === MessageType.TASK_REJECT) log.endings++;
        logs.set(row.task_id, log);
      }
      for (const id of ids) expect(logs.get(id)?.endings).toBe(1);
      console.log(`[postgres restart] ${JSON.stringify({ sent: sent.size, acknowledged: ids.length, failed: allFailures.length, stored: all.rows.length })}`);
    } finally {
      await db.end();
    }
    // Read back through the API, one event log per instance: gapless, and exactly one ending.
    for (const [i, taskId] of loadTasks.slice(-6).entries()) {
      const client = clients[i % 2]!;
      const endings: MessageType[] = [];
      let expected = 1;
      for await (const item of client.watch(taskId)) {
        if (item.kind !== "event") continue;
        expect(item.sequence).toBe(expected++);
        if (item.event.type === MessageType.TASK_COMPLETE || item.event.type === MessageType.TASK_FAILED) endings.push(item.event.type);
      }
      expect(endings).toEqual([MessageType.TASK_COMPLETE]);
    }
  }, 40_000);
  it("an idle instance reports the outage too (its notification connection drops), and its return", async () => {
    expect(loadRunning).toBe(false);
    const waitFor = async (status: ServingStatus) => {
      const since = Date.now();
      while (Date.now() - since < 5000 && (await Promise.all(instances.map((instance) => healthOf(instance.url)))).some((s) => s !== status)) await sleep(25);
      return Date.now() - since;
    };
    await cluster.halt("fast");
    const downAfterMs = await waitFor(ServingStatus.NOT_SERVING);
    await cluster.start();
    while (!(await accepts())) await sleep(25);
    const upAfterMs = await waitFor(ServingStatus.SERVING);
    console.log(`[postgres restart] ${JSON.stringify({ case: "idle instances", notServingAfterStopMs: downAfterMs, servingAfterAcceptMs: upAfterMs })}`);
    expect(downAfterMs).toBeLessThan(2000);
    expect(upAfterMs).toBeLessThanOrEqual(BACK_WITHIN_MS);
  }, 30_000);
});
