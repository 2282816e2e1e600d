// Confidential tasks as a user types them: `synapse submit --confidential`
// against a real `synapse serve`, answered and read back by later commands
// (each a new process holding only the key in SYNAPSE_HOME), decoded, and
// refused in the clear where the agent requires it.
import { toJson } from "@bufbuild/protobuf";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { EnvelopeSchema } from "../gen/synapse/v1/envelope_pb.js";
import { loadOrCreateIdentity } from "../src/agent/identity.js";
import { SynapseClient } from "../src/client/requester.js";
import { runCli, startServe, type ServeProcess } from "./helpers/cli.js";
import { tempDir } from "./helpers/server.js";

let served: ServeProcess;
let home: string;
let env: NodeJS.ProcessEnv;

beforeAll(async () => {
  served = await startServe(["--data-dir", await tempDir(), "--confidential-only", "text_analysis"]);
  home = await tempDir("synapse-cli-confidential-");
  env = { SYNAPSE_HOME: home };
});
afterAll(() => served.stop());

describe("synapse submit --confidential", () => {
  it("asks, is answered and completes across processes, and decodes with the key in the home", async () => {
    const taskId = `secret-${Date.now()}`;
    const asked = await runCli(["submit", served.url, "--task-id", taskId, "--confidential", "--type", "summarization", "--payload", '{"text":"Red goes first. Blue waits. Green never moves."}', "--wait", "--json"], { env });
    expect(asked.code, asked.stderr).toBe(3);
    const sent = JSON.parse(asked.stdout) as { task: { state: string; pendingInfo: { question: string } } };
    expect(sent.task.state).toBe("TASK_STATE_INFO_NEEDED");
    expect(sent.task.pendingInfo.question).toMatch(/sentences/);

    const answered = await runCli(["provide-info", served.url, taskId, "--set", "max_sentences=1", "--wait"], { env });
    expect(answered.code, answered.stderr).toBe(0);
    const status = await runCli(["status", served.url, taskId, "--json"], { env });
    expect(status.code, status.stderr).toBe(0);
    const task = JSON.parse(status.stdout) as { state: string; result: { output: { summary: string } }; confidential: { taskKeyId: string } };
    expect(task.state).toBe("TASK_STATE_COMPLETED");
    expect(task.result.output.summary).toBe("Red goes first.");
    expect(task.confidential.taskKeyId).toMatch(/^[A-Za-z0-9_-]{22}$/);

    // The task's complete event, as it travels: sealed; decode opens it with the key in the home.
    const { identity } = await loadOrCreateIdentity(home);
    const client = await SynapseClient.connect({ baseUrl: served.url, identity });
    let last;
    for await (const item of client.watch(taskId)) if (item.kind === "event") last = item.event.envelope;
    const envelopeJson = JSON.stringify(toJson(EnvelopeSchema, last!));
    const sealedOnly = await runCli(["decode"], { env, input: envelopeJson });
    expect(sealedOnly.code).toBe(1);
    expect(JSON.parse(sealedOnly.stdout).error.code).toBe("encryption_key_unknown");
    const decoded = await runCli(["decode", "--url", served.url], { env, input: envelopeJson });
    expect(decoded.code, decoded.stderr).toBe(0);
    const shown = JSON.parse(decoded.stdout) as { verified: boolean; messageType: string; payload: { result: { output: { summary: string } } } };
    expect(shown.verified).toBe(true);
    expect(shown.messageType).toBe("p2p:task_complete");
    expect(shown.payload.result.output.summary).toBe("Red goes first.");
  });

  it("is the only way into a type served with --confidential-only: a plaintext request exits 1 with confidentiality_required", async () => {
    const plain = await runCli(["submit", served.url, "--type", "text_analysis", "--payload", '{"text":"in the clear"}', "--wait", "--json"], { env });
    expect(plain.code).toBe(1);
    expect(plain.stdout + plain.stderr).toContain("confidentiality_required");
    const sealed = await runCli(["submit", served.url, "--type", "text_analysis", "--confidential", "--payload", '{"text":"sealed words"}', "--wait", "--json"], { env });
    expect(sealed.code, sealed.stderr).toBe(0);
    expect((JSON.parse(sealed.stdout) as { task: { result: { output: { words: number } } } }).task.result.output.words).toBe(2);
  });
});
