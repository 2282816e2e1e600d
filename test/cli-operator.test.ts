// `synapse serve --operator KEY_ID` as the README shows it: an operator key
// made with `synapse keygen`, a server that names it, and `synapse tasks`
// with that key listing another requester's tasks (filtered by type), while
// the requester lists only its own. A value that is not a key id is refused.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runCli, startServe, type ServeProcess } from "./helpers/cli.js";
import { tempDir } from "./helpers/server.js";

let served: ServeProcess;
let ops: string;
let requester: string;

/** The key id `synapse keygen` prints, as the README reads it. */
async function keyIdOf(home: string): Promise<string> {
  const shown = await runCli(["keygen", "--home", home]);
  return /^key id: *(\S+)$/m.exec(shown.stdout)![1]!;
}

beforeAll(async () => {
  ops = await tempDir("synapse-ops-");
  requester = await tempDir("synapse-requester-");
  served = await startServe(["--data-dir", await tempDir(), `--operator=${await keyIdOf(ops)}`]);
});
afterAll(async () => {
  expect(await served.stop()).toBe(0);
});

interface Listed {
  tasks: Array<{ taskId: string; taskType: string; requester: { agentId: string } }>;
}

describe("synapse serve --operator", () => {
  it("lets the operator's key list every requester's tasks, by type, and the requester only its own", async () => {
    const submitted = await runCli(["submit", served.url, "--home", requester, "--type", "text_analysis", "--payload", '{"text":"Seen by the operator."}', "--wait", "--json"]);
    expect(submitted.code).toBe(0);
    const taskId = (JSON.parse(submitted.stdout) as { taskId: string }).taskId;

    const asOperator = await runCli(["tasks", served.url, "--home", ops, "--type", "text_analysis", "--json"]);
    expect(asOperator.code).toBe(0);
    const listed = JSON.parse(asOperator.stdout) as Listed;
    expect(listed.tasks.map((t) => t.taskId)).toContain(taskId);
    expect(listed.tasks.every((t) => t.taskType === "text_analysis")).toBe(true);
    const otherType = JSON.parse((await runCli(["tasks", served.url, "--home", ops, "--type", "summarization", "--json"])).stdout) as Listed;
    expect(otherType.tasks).toEqual([]);

    const own = JSON.parse((await runCli(["tasks", served.url, "--home", await tempDir("synapse-stranger-"), "--json"])).stdout) as Listed;
    expect(own.tasks).toEqual([]);
  }, 60_000);

  it("refuses an --operator that is not a key id", async () => {
    const refused = await runCli(["serve", "--port", "0", "--data-dir", await tempDir(), "--operator", "agent_one"]);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain("--operator takes a key id");
  });
});
