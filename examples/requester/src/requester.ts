// Submits an "echo" task to the agent at AGENT_URL and prints every signed event until the task ends.
import { createIdentity, stateName, TaskState } from "synapse-connect";
import { messageToJson, SynapseClient, taskOutput } from "synapse-connect/client";

const client = await SynapseClient.connect({ baseUrl: process.env.AGENT_URL ?? "http://127.0.0.1:8080", identity: createIdentity() });
const { taskId } = await client.submit("echo", { text: process.argv[2] ?? "hello" });
console.log(`submitted ${taskId} to ${client.executor.agentId}`);

// Each event is verified against the agent's key and checked against the task state machine.
for await (const item of client.watch(taskId)) {
  if (item.kind === "event") console.log(`${item.sequence} ${messageToJson(item.event).type} -> ${stateName(item.state)}`);
}

const task = await client.getTask(taskId);
console.log(`${stateName(task.state)} ${JSON.stringify(taskOutput(task))}`);
process.exitCode = task.state === TaskState.COMPLETED ? 0 : 1;
