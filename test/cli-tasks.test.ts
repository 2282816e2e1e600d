// The task commands as a user types them, against `synapse serve` in its own
// process: submit, status, watch, tasks, cancel, provide-info, decide,
// token and envelope (with plain HTTP, as curl would send them).
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { expectProtoJsonNames, runCli, startServe, type ServeProcess } from "./helpers/cli.js";
import { tempDir } from "./helpers/server.js";

let served: ServeProcess;
let env: NodeJS.ProcessEnv;

beforeAll(async () => {
  served = await startServe(["--data-dir", await tempDir()]);
  env = { SYNAPSE_HOME: await tempDir("synapse-cli-home-") };
});
afterAll(async () => {
  expect(await served.stop()).toBe(0);
});

const cli = (...args: string[]) => runCli(args, { env });
const json = <T>(text: string) => JSON.parse(text) as T;

interface TaskJson {
  taskId: string;
  state: string;
  result?: { output?: Record<string, unknown> };
  pendingInfo?: { missingFields: Array<{ field: string; suggestedValue?: unknown }> };
  pendingDecision?: { decisionId: string };
  error?: { code: string };
}

describe("synapse submit, status, tasks", () => {
  it("submits and waits for the result", async () => {
    const result = await cli("submit", served.url, "--type", "text_analysis", "--payload", '{"text":"Hello agents. Hello world."}', "--wait", "--json");
    expect(result.code).toBe(0);
    const out = json<{ taskId: string; reply: { type: string }; task: TaskJson }>(result.stdout);
    expect(out.reply.type).toBe("p2p:task_confirm");
    expectProtoJsonNames(out);
    // The CLI makes time-ordered (version 7) task ids.
    expect(out.taskId).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab]/);
    expect(out.task.state).toBe("TASK_STATE_COMPLETED");
    expect(out.task.result?.output).toMatchObject({ words: 4, sentences: 2 });

    const status = await cli("status", served.url, out.taskId, "--json");
    expect(status.code).toBe(0);
    expect(json<TaskJson>(status.stdout).state).toBe("TASK_STATE_COMPLETED");
    const text = await cli("status", served.url, out.taskId);
    expect(text.code).toBe(0);
    expect(text.stdout).toContain("completed, 100%");

    const listed = json<{ tasks: TaskJson[]; nextPageToken: string }>((await cli("tasks", served.url, "--json", "--state", "completed")).stdout);
    expectProtoJsonNames(listed);
    expect(listed.nextPageToken).toBe("");
    expect(listed.tasks.map((t) => t.taskId)).toContain(out.taskId);
  });

  it("uses a usage error for a bad payload, and a protocol error for a refused task", async () => {
    const bad = await cli("submit", served.url, "--type", "text_analysis", "--payload", "{nope");
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain("--payload is not JSON");
    const rejected = await cli("submit", served.url, "--type", "poetry", "--payload", "{}", "--json");
    expect(rejected.code).toBe(1);
    const rejectedId = json<{ taskId: string; task: TaskJson }>(rejected.stdout);
    expect(rejectedId.task.state).toBe("TASK_STATE_REJECTED");
    // status reports the same outcome with the same exit status.
    expect((await cli("status", served.url, rejectedId.taskId)).code).toBe(1);
  });

  it("answers a refusal (a task that is not yours, or none) with exit 1 and the protocol code", async () => {
    const missing = await cli("status", served.url, "no-such-task");
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain("task_not_found");
  });
});

describe("need-info and human decisions from the command line", () => {
  it("asks for max_sentences (exit 3) and completes after provide-info", async () => {
    const asked = await cli("submit", served.url, "--type", "summarization", "--payload", '{"text":"One fish. Two fish. Red fish. Blue fish."}', "--wait", "--json");
    expect(asked.code).toBe(3);
    const out = json<{ taskId: string; task: TaskJson }>(asked.stdout);
    expect(out.task.pendingInfo?.missingFields[0]).toMatchObject({ field: "max_sentences", suggestedValue: 3 });
    const text = await cli("status", served.url, out.taskId);
    expect(text.code).toBe(3);
    expect(text.stdout).toContain("provide-info");

    const provided = await cli("provide-info", served.url, out.taskId, "--set", "max_sentences=2", "--wait", "--json");
    expect(provided.code).toBe(0);
    const task = json<{ task: TaskJson }>(provided.stdout).task;
    expect(task.state).toBe("TASK_STATE_COMPLETED");
    expect(task.result?.output).toMatchObject({ sentences: ["One fish.", "Two fish."] });
  });

  it("approves, modifies and rejects", async () => {
    const submit = async () => {
      const result = await cli("submit", served.url, "--type", "text_analysis", "--payload", '{"text":"a b c. a b. a.","require_approval":true}', "--wait", "--json");
      expect(result.code).toBe(3);
      return json<{ taskId: string; task: TaskJson }>(result.stdout);
    };
    const first = await submit();
    expect(first.task.state).toBe("TASK_STATE_NEED_HUMAN");
    expect((await cli("status", served.url, first.taskId)).code).toBe(3);
    const approved = await cli("decide", served.url, first.taskId, "--approve", "--note", "fine", "--wait", "--json");
    expect(json<{ task: TaskJson }>(approved.stdout).task.state).toBe("TASK_STATE_COMPLETED");

    const second = await submit();
    const modified = await cli("decide", served.url, second.taskId, "--modify", "--set", "top=1", "--wait", "--json");
    const output = json<{ task: TaskJson }>(modified.stdout).task.result?.output as { top_words: unknown[] };
    expect(output.top_words).toEqual([{ word: "a", count: 3 }]);

    const third = await submit();
    const rejected = await cli("decide", served.url, third.taskId, "--reject", "--reason", "no", "--wait", "--json");
    expect(rejected.code).toBe(1);
    expect(json<{ task: TaskJson }>(rejected.stdout).task.error?.code).toBe("ERROR_CODE_HUMAN_REJECTED");
    expect((await cli("status", served.url, third.taskId)).code).toBe(1);

    const usage = await cli("decide", served.url, third.taskId, "--approve", "--reject");
    expect(usage.code).toBe(2);
  });
});

describe("watch and cancel", () => {
  it("watches a task as NDJSON and cancels it", async () => {
    const csv = ["n", ...Array.from({ length: 200 }, (_, i) => String(i))].join("\n");
    const submitted = json<{ taskId: string }>(
      (await cli("submit", served.url, "--type", "data_analysis", "--payload", JSON.stringify({ csv, delay_ms_per_row: 25 }), "--json")).stdout,
    );
    const watching = cli("watch", served.url, submitted.taskId, "--json");
    await new Promise((resolve) => setTimeout(resolve, 600));
    const cancelled = await cli("cancel", served.url, submitted.taskId, "--reason", "enough", "--json");
    // The cancel did what was asked: exit 0, with the signed task_ack.
    expect(cancelled.code).toBe(0);
    expect(json<{ reply: { type: string }; task: TaskJson }>(cancelled.stdout)).toMatchObject({ reply: { type: "p2p:task_ack" }, task: { state: "TASK_STATE_CANCELLED" } });
    const watched = await watching;
    expect(watched.code).toBe(1);
    const lines = watched.stdout.trim().split("\n").map((line) => json<{ kind: string; sequence?: number; type?: string; state?: string }>(line));
    const events = lines.filter((line) => line.kind === "event");
    expect(events[0]).toMatchObject({ sequence: 1, type: "p2p:task_confirm" });
    expect(events.at(-1)).toMatchObject({ type: "p2p:task_ack", state: "CANCELLED" });
    expect(events.map((e) => e.sequence)).toEqual(events.map((_, i) => i + 1));

    const from = await cli("watch", served.url, submitted.taskId, "--from", String(events.length), "--json");
    expect(from.stdout.trim().split("\n")).toHaveLength(1);
    expect(from.code).toBe(1);
    // Past the last event the stream holds only the snapshot: the exit status still tells the outcome.
    expect((await cli("watch", served.url, submitted.taskId, "--from", String(events.length + 1), "--json")).code).toBe(1);

    // The task as status shows it now: cancelled (exit 1), with the requester's reason.
    const status = await cli("status", served.url, submitted.taskId);
    expect(status.code).toBe(1);
    expect(status.stdout).toContain("cancelled: enough");
    expect(status.stdout).not.toContain("error:");
    // Cancelling it again is refused: it has ended.
    const again = await cli("cancel", served.url, submitted.taskId);
    expect(again.code).toBe(1);
    expect(again.stderr).toContain("task_already_completed");
  });

  it("cancel prints the signed acknowledgement and exits 0", async () => {
    const submitted = json<{ taskId: string }>(
      (await cli("submit", served.url, "--type", "data_analysis", "--payload", JSON.stringify({ csv: "n\n1\n2\n3", delay_ms_per_row: 5000 }), "--json")).stdout,
    );
    const cancelled = await cli("cancel", served.url, submitted.taskId, "--reason", "changed my mind");
    expect(cancelled.code).toBe(0);
    expect(cancelled.stdout.trim()).toMatch(new RegExp(`^p2p:task_ack #\\d+: task ${submitted.taskId} is cancelled \\(changed my mind\\)$`));
    expect(cancelled.stdout).not.toContain("error");
  });
});

describe("curl's view: token and envelope", () => {
  it("a token authorizes plain HTTP GetTask and ListTasks", async () => {
    const submitted = json<{ taskId: string }>((await cli("submit", served.url, "--type", "text_analysis", "--payload", '{"text":"x."}', "--wait", "--json")).stdout);
    const token = (await cli("token", served.url)).stdout.trim();
    expect(token.split(".")).toHaveLength(3);
    const res = await fetch(`${served.url}/synapse.v1.P2PService/GetTask`, {
      method: "POST",
      headers: { "Content-Type": "application/json", Authorization: `Bearer ${token}` },
      body: JSON.stringify({ task_id: submitted.taskId }),
    });
    expect(res.status).toBe(200);
    expect(((await res.json()) as { task: TaskJson }).task.state).toBe("TASK_STATE_COMPLETED");
    const list = await fetch(`${served.url}/synapse.v1.P2PService/ListTasks?encoding=json&message=${encodeURIComponent("{}")}`, { headers: { Authorization: `Bearer ${token}` } });
    expect(((await list.json()) as { tasks: TaskJson[] }).tasks.length).toBeGreaterThan(0);
    const anonymous = await fetch(`${served.url}/synapse.v1.P2PService/GetTask`, { method: "POST", headers: { "Content-Type": "application/json" }, body: "{}" });
    expect(anonymous.status).toBe(401);
  });

  it("an envelope from `synapse envelope` goes through curl-style JSON Send", async () => {
    const request = (await cli("envelope", served.url, "--type", "text_analysis", "--payload", '{"text":"Curl works."}', "--wait", "10")).stdout;
    const res = await fetch(`${served.url}/synapse.v1.P2PService/Send`, { method: "POST", headers: { "Content-Type": "application/json" }, body: request });
    expect(res.status).toBe(200);
    const body = (await res.json()) as { reply: { view: { header: { messageType: string } } }; task: TaskJson };
    expect(body.reply.view.header.messageType).toBe("MESSAGE_TYPE_TASK_CONFIRM");
    expect(body.task.state).toBe("TASK_STATE_COMPLETED");
    // The same bytes again: the same reply, and no second task.
    const again = await fetch(`${served.url}/synapse.v1.P2PService/Send`, { method: "POST", headers: { "Content-Type": "application/json" }, body: request });
    expect(((await again.json()) as { task: TaskJson }).task.taskId).toBe(body.task.taskId);
    // Piped into decode, the reply verifies.
    const decoded = await runCli(["decode"], { env, input: JSON.stringify(body) });
    expect(json<{ verified: boolean; messageType: string }>(decoded.stdout)).toMatchObject({ verified: true, messageType: "p2p:task_confirm" });
  });

  it("synapse envelope takes --type like submit, and --task-type as well", async () => {
    const typeOf = (stdout: string) => {
      const { envelope } = json<{ envelope: { payload: string } }>(stdout);
      return Buffer.from(envelope.payload, "base64").toString("latin1");
    };
    const spelled = await cli("envelope", served.url, "--task-type", "summarization", "--payload", "{}");
    expect(spelled.code).toBe(0);
    expect(typeOf(spelled.stdout)).toContain("summarization");
    const both = await cli("envelope", served.url, "--type", "summarization", "--task-type", "summarization", "--payload", "{}");
    expect(both.code).toBe(0);
    const differ = await cli("envelope", served.url, "--type", "summarization", "--task-type", "text_analysis");
    expect(differ.code).toBe(2);
    const none = await cli("envelope", served.url, "--payload", "{}");
    expect(none.code).toBe(2);
    expect(none.stderr).toContain("--type is required");
    const notObject = await cli("envelope", served.url, "--type", "summarization", "--payload", "[1]");
    expect(notObject.code).toBe(2);
  });
});
