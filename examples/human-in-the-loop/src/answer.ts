// Submits an "echo" task without its text and asking for approval, then answers the agent's
// questions with lines typed (or piped) on standard input: the text, then y or n.
import { createInterface } from "node:readline";
import { createIdentity, stateName, TaskState } from "synapse-connect";
import { SynapseClient, taskOutput } from "synapse-connect/client";

const lines = createInterface({ input: process.stdin })[Symbol.asyncIterator](); // keeps lines piped in before they are asked for
const ask = async (question: string) => (console.log(question), String((await lines.next()).value ?? "").trim());

const client = await SynapseClient.connect({ baseUrl: process.env.AGENT_URL ?? "http://127.0.0.1:8080", identity: createIdentity() });
const { taskId } = await client.submit("echo", { approve: true });
for await (const item of client.watch(taskId)) {
  if (item.kind === "event" && item.state === TaskState.INFO_NEEDED) {
    const { pendingInfo } = await client.getTask(taskId);
    const answers: Record<string, string> = {};
    for (const { field, reason } of pendingInfo!.missingFields) answers[field] = await ask(`The agent needs ${field} (${reason}):`);
    await client.provideInfo(taskId, answers);
  } else if (item.kind === "event" && item.state === TaskState.NEED_HUMAN) {
    const { pendingDecision } = await client.getTask(taskId);
    const approved = (await ask(`The agent asks: ${pendingDecision!.reason!.message} [y/n]`)) === "y";
    await client.decide(taskId, approved ? { action: "approve", decidedBy: { userName: process.env.USER ?? "" } } : { action: "reject", rejectionReason: "declined" });
  }
}
const task = await client.getTask(taskId);
console.log(`${stateName(task.state)} ${JSON.stringify(taskOutput(task) ?? task.error?.message ?? null)}`);
process.exitCode = task.state === TaskState.COMPLETED ? 0 : 1;
lines.return?.(); // stop reading standard input so the process can exit
