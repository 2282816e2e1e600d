// The reference agent's handlers by task type, each behind the approval gate.
import type { TaskHandler } from "../handler.js";
import { withApprovalGate } from "./approval.js";
import { dataAnalysisHandler } from "./data-analysis.js";
import { summarizationHandler } from "./summarization.js";
import { textAnalysisHandler } from "./text-analysis.js";

export function referenceHandlers(): Map<string, TaskHandler> {
  return new Map<string, TaskHandler>([
    ["text_analysis", withApprovalGate(textAnalysisHandler)],
    ["summarization", withApprovalGate(summarizationHandler)],
    ["data_analysis", withApprovalGate(dataAnalysisHandler)],
  ]);
}
