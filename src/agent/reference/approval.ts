// withApprovalGate: wraps a handler so a task whose payload sets
// require_approval waits for a human decision before it runs.
import type { TaskHandler } from "../handler.js";

export function withApprovalGate(handler: TaskHandler): TaskHandler {
  const gated: TaskHandler = {
    // A resumed run gets the recorded approval back from askHuman without asking again.
    resumable: handler.resumable,
    async executeTask(ctx) {
      if (ctx.payload.require_approval === true) {
        // A rejection rejects this promise and so fails the task; a "modify" answer
        // reaches the inner handler through ctx.payload, which the engine updates.
        await ctx.askHuman({
          code: "approval_required",
          message: "This task asks for a human approval before it runs.",
          taskSummary: `${ctx.taskType} task ${ctx.taskId}`,
          blockedReason: "require_approval is set",
          escalationLevel: 1,
          options: [{ field: "approved", value: true, prosCons: "run the task as submitted", confidence: 100 }],
        });
      }
      return handler.executeTask(ctx);
    },
  };
  const validate = handler.validateTask;
  if (validate !== undefined) gated.validateTask = (task) => validate.call(handler, task);
  return gated;
}
