// The `synapse` command (the built dist/src/cli/main.js, as a child process)
// against agents built on the official A2A SDK (@a2a-js/sdk), on each
// binding: submit (--wait, --watch, at once), status, watch, cancel,
// provide-info and decide for input-required, the card's signature (signed,
// unsigned, tampered), and the same lines, JSON fields and exit statuses as
// against a Synapse agent (`synapse serve`).
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { expectProtoJsonNames, runCli, startServe, type ServeProcess } from "./helpers/cli.js";
import { tempDir } from "./helpers/server.js";
import { askingExecutor, completingExecutor, decidingExecutor, startSdkAgent, streamingExecutor, type SdkAgent } from "./helpers/a2a-sdk-agent.js";

interface TaskJson {
  taskId: string;
  taskType?: string;
  state: string;
  statusMessage?: string;
  result?: { output?: unknown };
  pendingInfo?: { question: string; missingFields: Array<{ field: string; reason: string }> };
  pendingDecision?: { decisionId: string; options: Array<{ field: string }> };
  error?: { code: string; message: string };
  a2a?: { id: string; status: { state: string } };
}

let completing: SdkAgent;
let asking: SdkAgent;
let deciding: SdkAgent;
let streaming: SdkAgent;
let env: NodeJS.ProcessEnv;

beforeAll(async () => {
  [completing, asking, deciding, streaming] = await Promise.all([
    startSdkAgent(completingExecutor, { signed: true }),
    startSdkAgent(askingExecutor),
    startSdkAgent(decidingExecutor),
    startSdkAgent(streamingExecutor()),
  ]);
  env = { SYNAPSE_HOME: await tempDir("synapse-cli-a2a-home-") };
});
afterAll(async () => {
  await Promise.all([completing?.close(), asking?.close(), deciding?.close(), streaming?.close()]);
});

const cli = (...args: string[]) => runCli(args, { env });
/** Several runs of the command each: more than the default timeout on a busy machine. */
const SEVERAL_RUNS = 90_000;
const json = <T>(text: string) => JSON.parse(text) as T;

describe.each([
  ["grpc", "GRPC"],
  ["jsonrpc", "JSONRPC"],
  ["rest", "HTTP+JSON"],
] as const)("synapse against an @a2a-js/sdk agent over --binding %s", (flag, binding) => {
  it("submits and waits: the completed task, its result, exit 0; the card's signature checked", async () => {
    const text = await cli("submit", completing.url, "--binding", flag, "--type", "echo", "--payload", '{"city":"Oslo"}', "--wait");
    expect(text.code).toBe(0);
    const lines = text.stdout.trim().split("\n");
    expect(lines[0]).toMatch(/^task \S+ \(echo\): completed, 100% - done$/);
    expect(lines[1]).toBe('result: {"echo":{"city":"Oslo"}}');
    expect(text.stderr).toContain(`over ${binding}`);
    expect(text.stderr).toContain("signature verified (kid card-key)");

    const out = await cli("submit", completing.url, "--binding", flag, "--payload", '{"n":1}', "--wait", "--json");
    expect(out.code).toBe(0);
    const sent = json<{ taskId: string; reply: null; task: TaskJson }>(out.stdout);
    expectProtoJsonNames(sent);
    expectProtoJsonNames(sent.task);
    expect(sent.reply).toBeNull();
    expect(sent.task.taskId).toBe(sent.taskId);
    expect(sent.task.state).toBe("TASK_STATE_COMPLETED");
    expect(sent.task.result?.output).toEqual({ echo: { n: 1 } });
    expect(sent.task.a2a?.status.state).toBe("TASK_STATE_COMPLETED");

    const status = await cli("status", completing.url, sent.taskId, "--binding", flag, "--json");
    expect(status.code).toBe(0);
    expect(json<TaskJson>(status.stdout)).toMatchObject({ taskId: sent.taskId, state: "TASK_STATE_COMPLETED", result: { output: { echo: { n: 1 } } } });
  }, SEVERAL_RUNS);

  it("asks for information (exit 3), says how to answer, and completes after provide-info", async () => {
    const asked = await cli("submit", asking.url, "--binding", flag, "--payload", '{"q":"weather"}', "--wait");
    expect(asked.code).toBe(3);
    const taskId = /^task (\S+):/.exec(asked.stdout)![1]!;
    expect(asked.stdout).toContain("info_needed");
    expect(asked.stdout).toContain("needs information: which city?\n  city: the forecast needs a city\n");
    expect(asked.stdout).toContain(`answer with: synapse provide-info ${asking.url} ${taskId} --set city=VALUE`);
    const status = await cli("status", asking.url, taskId, "--binding", flag, "--json");
    expect(status.code).toBe(3);
    expect(json<TaskJson>(status.stdout).pendingInfo?.missingFields).toEqual([{ field: "city", reason: "the forecast needs a city" }]);

    const provided = await cli("provide-info", asking.url, taskId, "--binding", flag, "--set", "city=Bergen", "--wait", "--json");
    expect(provided.code).toBe(0);
    const task = json<{ reply: null; task: TaskJson }>(provided.stdout).task;
    expect(task.state).toBe("TASK_STATE_COMPLETED");
    expect(task.result?.output).toEqual({ answer: { city: "Bergen" }, forecast: "sunny" });
  }, SEVERAL_RUNS);

  it("asks for a decision (exit 3); decide --approve completes it, --reject fails it (exit 1)", async () => {
    const asked = await cli("submit", deciding.url, "--binding", flag, "--payload", '{"pay":100}', "--wait");
    expect(asked.code).toBe(3);
    const taskId = /^task (\S+):/.exec(asked.stdout)![1]!;
    expect(asked.stdout).toContain("need_human");
    expect(asked.stdout).toContain("needs a human decision (escalation level 1): approve the payment?");
    expect(asked.stdout).toContain('  option amount=100: within budget');
    expect(asked.stdout).toContain(`decide with: synapse decide ${deciding.url} ${taskId} --approve | --modify --set KEY=VALUE | --reject [--note TEXT]`);
    const approved = await cli("decide", deciding.url, taskId, "--binding", flag, "--approve", "--set", "amount=90", "--wait", "--json");
    expect(approved.code).toBe(0);
    expect(json<{ task: TaskJson }>(approved.stdout).task.result?.output).toEqual({ decision: "approve", fields: { amount: 90 } });

    const second = /^task (\S+):/.exec((await cli("submit", deciding.url, "--binding", flag, "--payload", "{}", "--wait")).stdout)![1]!;
    const rejected = await cli("decide", deciding.url, second, "--binding", flag, "--reject", "--reason", "too much", "--wait");
    expect(rejected.code).toBe(1);
    expect(rejected.stdout).toContain("failed");
    expect(rejected.stdout).toContain("error: execution_failed: rejected: too much");
  }, SEVERAL_RUNS);

  it("submits --watch: one line per event until the task completes, then the task", async () => {
    const watched = await cli("submit", streaming.url, "--binding", flag, "--payload", '{"count":3,"delayMs":40}', "--watch");
    expect(watched.code).toBe(0);
    const lines = watched.stdout.trim().split("\n");
    expect(lines[0]).toMatch(/^submitted task \S+$/);
    expect(lines.slice(1, 7)).toEqual([
      "#1 a2a:task -> pending",
      "#2 a2a:status_update -> executing streaming",
      '#3 a2a:artifact_update -> executing chunk-1: "chunk 1 of 3"',
      '#4 a2a:artifact_update -> executing chunk-2: "chunk 2 of 3"',
      '#5 a2a:artifact_update -> executing chunk-3: "chunk 3 of 3"',
      "#6 a2a:status_update -> completed streamed 3 chunks",
    ]);
    expect(lines[7]).toMatch(/^task \S+: completed, 100% - streamed 3 chunks$/);

    const ndjson = await cli("submit", streaming.url, "--binding", flag, "--payload", '{"count":2,"delayMs":40}', "--watch", "--json");
    expect(ndjson.code).toBe(0);
    const [head, ...rest] = ndjson.stdout.trim().split("\n{");
    expect(json<{ taskId: string; reply: null }>(head!).reply).toBeNull();
    const events = rest.map((line) => json<{ kind: string; sequence: number; state: string; type: string }>(`{${line}`));
    expect(events.map((e) => [e.kind, e.sequence, e.type, e.state])).toEqual([
      ["event", 1, "a2a:task", "PENDING"],
      ["event", 2, "a2a:status_update", "EXECUTING"],
      ["event", 3, "a2a:artifact_update", "EXECUTING"],
      ["event", 4, "a2a:artifact_update", "EXECUTING"],
      ["event", 5, "a2a:status_update", "COMPLETED"],
    ]);
  }, SEVERAL_RUNS);

  it("watches a running task to its end, cancels another (exit 0), and shows the cancelled one", async () => {
    const running = await cli("submit", streaming.url, "--binding", flag, "--payload", '{"count":3,"delayMs":1200}');
    expect(running.code).toBe(0);
    const taskId = /^task (\S+):/.exec(running.stdout)![1]!;
    const watched = await cli("watch", streaming.url, taskId, "--binding", flag);
    expect(watched.code).toBe(0);
    expect(watched.stdout).toMatch(/^#1 a2a:task -> (pending|executing)/);
    expect(watched.stdout.trim().split("\n").at(-1)).toMatch(/a2a:status_update -> completed streamed 3 chunks$/);

    const long = /^task (\S+):/.exec((await cli("submit", streaming.url, "--binding", flag, "--payload", '{"count":100,"delayMs":100}')).stdout)![1]!;
    const cancelled = await cli("cancel", streaming.url, long, "--binding", flag, "--json");
    expect(cancelled.code).toBe(0);
    expect(json<{ reply: null; task: TaskJson }>(cancelled.stdout).task.state).toBe("TASK_STATE_CANCELLED");
    // Watching a task that has ended shows it as it ended (A2A refuses to subscribe to it).
    const after = await cli("watch", streaming.url, long, "--binding", flag);
    expect(after.code).toBe(1);
    expect(after.stdout.trim()).toBe("#1 a2a:task -> cancelled");
    // Cancelling a completed task is refused: exit 1 with A2A's error.
    const refused = await cli("cancel", streaming.url, taskId, "--binding", flag);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain("(TaskNotCancelable)");
  }, SEVERAL_RUNS);

  it("reports an unknown task with A2A's TaskNotFound, exit 1", async () => {
    const missing = await cli("status", completing.url, "no-such-task", "--binding", flag);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toMatch(/synapse: .*\(TaskNotFound\)/);
  });
});

describe("telling A2A agents from Synapse agents", () => {
  let served: ServeProcess;
  beforeAll(async () => {
    served = await startServe(["--data-dir", await tempDir()]);
  });
  afterAll(async () => {
    expect(await served.stop()).toBe(0);
  });

  it("shows an A2A task in the same lines and JSON fields as a Synapse task", async () => {
    const synapse = await cli("submit", served.url, "--type", "text_analysis", "--payload", '{"text":"Agents talk."}', "--wait");
    const a2a = await cli("submit", completing.url, "--type", "text_analysis", "--payload", '{"text":"Agents talk."}', "--wait");
    expect([synapse.code, a2a.code]).toEqual([0, 0]);
    const shape = (stdout: string) => stdout.trim().split("\n").map((line) => line.replace(/^task \S+ \((\w+)\): (\w+), (\d+)%.*$/, "task ID ($1): $2, $3%").replace(/^result: .*$/, "result: JSON"));
    expect(shape(a2a.stdout)).toEqual(shape(synapse.stdout));

    const synapseJson = json<{ taskId: string; task: TaskJson }>((await cli("submit", served.url, "--type", "text_analysis", "--payload", '{"text":"x"}', "--wait", "--json")).stdout);
    const a2aJson = json<{ taskId: string; task: TaskJson }>((await cli("submit", completing.url, "--type", "text_analysis", "--payload", '{"text":"x"}', "--wait", "--json")).stdout);
    for (const out of [synapseJson, a2aJson]) {
      expect(Object.keys(out).sort()).toEqual(["reply", "task", "taskId"]);
      expect(out.task).toMatchObject({ taskId: out.taskId, taskType: "text_analysis", state: "TASK_STATE_COMPLETED", progress: 100 });
    }
    // Every field of the A2A task's view is a field Synapse's tasks have (its A2A form aside).
    const synapseStatus = json<Record<string, unknown>>((await cli("status", served.url, synapseJson.taskId, "--json")).stdout);
    const a2aStatus = json<Record<string, unknown>>((await cli("status", completing.url, a2aJson.taskId, "--json")).stdout);
    expect(Object.keys(a2aStatus).filter((key) => key !== "a2a" && !(key in synapseStatus))).toEqual([]);
  }, SEVERAL_RUNS);

  it("calls a Synapse agent over Synapse, and --a2a or a card URL over A2A", async () => {
    const plain = await cli("submit", served.url, "--type", "text_analysis", "--payload", '{"text":"x"}', "--json");
    expect(json<{ reply: { type: string } }>(plain.stdout).reply.type).toBe("p2p:task_confirm");
    expect(plain.stderr).not.toContain("A2A agent");
    const byCard = await cli("submit", completing.cardUrl, "--payload", "{}", "--wait");
    expect(byCard.code).toBe(0);
    expect(byCard.stderr).toContain('A2A agent "sdk test agent"');
    const forced = await cli("status", completing.url, "no-such-task", "--a2a");
    expect(forced.stderr).toContain("(TaskNotFound)");
  }, SEVERAL_RUNS);

  it("says when the card is unsigned, and refuses a card changed after it was signed", async () => {
    const unsigned = await cli("submit", asking.url, "--payload", "{}");
    expect(unsigned.stderr).toContain("unsigned card");
    const tampered = await startSdkAgent(completingExecutor, { signed: true, tamper: true });
    try {
      const refused = await cli("submit", tampered.url, "--payload", "{}", "--wait");
      expect(refused.code).toBe(1);
      expect(refused.stderr).toContain("(CardSignatureInvalid)");
      expect(refused.stdout).toBe("");
    } finally {
      await tampered.close();
    }
  }, SEVERAL_RUNS);

  it("gives up a --wait after --timeout with a clear error, exit 1", async () => {
    const waited = await cli("submit", streaming.url, "--payload", '{"count":5,"delayMs":1000}', "--wait", "--timeout", "1");
    expect(waited.code).toBe(1);
    expect(waited.stderr).toContain("no answer within 1 s");
  });

  it("names the URL's failure when it serves neither kind of agent", async () => {
    const nothing = await cli("status", "http://127.0.0.1:1", "some-task");
    expect(nothing.code).toBe(1);
    expect(nothing.stderr).toMatch(/^synapse: /);
  });
});
