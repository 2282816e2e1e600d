// An agent serving a task type of its own, "echo", on PORT (default 8080).
import { serveAgent, type TaskOutput, type TaskTypeHandler } from "synapse-connect/server";

const echo: TaskTypeHandler = {
  description: "Returns its text; asks for the text when it is missing, and for a human's approval when `approve` is true",
  // Decided before the task is confirmed: a task without text waits for the requester to provide it.
  validateTask: (task) => (typeof task.payload.text === "string" ? { kind: "accept" } : { kind: "need_info", fields: [{ field: "text", reason: "what to echo" }] }),
  async executeTask(task): Promise<TaskOutput> {
    await task.progress(50, "echoing");
    if (task.payload.approve !== true) return { output: { text: task.payload.text ?? null } };
    const answer = await task.askHuman({ code: "approval_required", message: `May I echo "${String(task.payload.text)}"?` });
    // A human who modifies the task changes its payload: echo what they decided.
    return { output: { text: task.payload.text ?? null, approvedBy: answer.decidedBy.userName } };
  },
};

const server = await serveAgent({ handlers: { echo }, dataDir: ".echo-agent", port: Number(process.env.PORT ?? 8080) });
console.log(`echo agent ${server.agent.agentId} listening on ${server.url}`);
for (const signal of ["SIGINT", "SIGTERM"] as const) process.once(signal, () => void server.close());
