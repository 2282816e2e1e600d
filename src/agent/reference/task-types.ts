// The reference agent's task types as SupportedTaskType declarations, with
// the JSON Schemas (draft-07) their payloads and results are checked against.
import { create } from "@bufbuild/protobuf";
import { RiskLevel, SupportedTaskTypeSchema, type SupportedTaskType } from "../../../gen/synapse/v1/capabilities_pb.js";

const approval = {
  require_approval: {
    type: "boolean",
    description: "When true, the task waits for a human decision (p2p:human_decision) before it runs.",
  },
};

const schema = (value: object) => JSON.stringify({ $schema: "http://json-schema.org/draft-07/schema#", ...value });

/** Catalogue metadata: a registry lists each task type as a governed capability (CAPABILITY_TYPE_TASK). */
const governance = (domain: string, scenarios: string[], intents: string[]) => ({
  domain,
  scenarios,
  intents,
  permissionRequired: [],
  riskLevel: RiskLevel.LOW,
  owner: "synapse reference agent",
  version: "1.0.0",
});

export const TEXT_ANALYSIS: SupportedTaskType = create(SupportedTaskTypeSchema, {
  type: "text_analysis",
  name: "Text analysis",
  description: "Counts characters, words and sentences of a text and lists its most frequent words.",
  estimatedTime: "1ms-1s",
  capabilities: ["text_statistics", "word_frequency"],
  governance: governance("text", ["document_review", "content_audit"], ["analyze", "measure"]),
  inputSchema: schema({
    type: "object",
    properties: {
      text: { type: "string", description: "The text to analyse." },
      top: { type: "integer", minimum: 1, maximum: 100, description: "How many top words to list (default 5)." },
      ...approval,
    },
    required: ["text"],
  }),
  outputSchema: schema({
    type: "object",
    properties: {
      characters: { type: "integer", minimum: 0 },
      words: { type: "integer", minimum: 0 },
      sentences: { type: "integer", minimum: 0 },
      top_words: {
        type: "array",
        items: {
          type: "object",
          properties: { word: { type: "string" }, count: { type: "integer", minimum: 1 } },
          required: ["word", "count"],
        },
      },
    },
    required: ["characters", "words", "sentences", "top_words"],
  }),
});

export const SUMMARIZATION: SupportedTaskType = create(SupportedTaskTypeSchema, {
  type: "summarization",
  name: "Extractive summarization",
  description:
    "Picks the text's highest-scoring sentences, in their original order. Asks for max_sentences with p2p:task_need_info when it is missing.",
  estimatedTime: "1ms-1s",
  capabilities: ["extractive_summary"],
  governance: governance("text", ["document_review", "briefing"], ["summarize", "explain"]),
  inputSchema: schema({
    type: "object",
    properties: {
      text: { type: "string", description: "The text to summarize." },
      max_sentences: { type: "integer", minimum: 1, maximum: 50, description: "How many sentences the summary keeps." },
      ...approval,
    },
    required: ["text"],
  }),
  outputSchema: schema({
    type: "object",
    properties: {
      summary: { type: "string" },
      sentences: { type: "array", items: { type: "string" } },
      original_sentences: { type: "integer", minimum: 0 },
    },
    required: ["summary", "sentences", "original_sentences"],
  }),
});

export const DATA_ANALYSIS: SupportedTaskType = create(SupportedTaskTypeSchema, {
  type: "data_analysis",
  name: "CSV column statistics",
  description:
    "Computes count, min, max and mean of every numeric column of a CSV with a header row, reporting progress per row. The CSV is the payload's csv text, or a file of any size uploaded with POST /upload and named csv in the request's uploads. Large outputs are offered through ReadResult.",
  estimatedTime: "1ms-10min",
  capabilities: ["csv", "descriptive_statistics"],
  governance: governance("data", ["report_preparation", "data_quality"], ["analyze", "monitor"]),
  inputSchema: schema({
    type: "object",
    properties: {
      csv: { type: "string", description: "CSV text; the first row names the columns. Leave it out to analyse the upload the request names csv." },
      delay_ms_per_row: { type: "integer", minimum: 0, maximum: 60000, description: "Pause after each row (to watch or cancel)." },
      include_rows: { type: "boolean", description: "Also return every parsed row (a large output, streamed)." },
      ...approval,
    },
  }),
  outputSchema: schema({
    type: "object",
    properties: {
      rows: { type: "integer", minimum: 0 },
      columns: {
        type: "object",
        additionalProperties: {
          type: "object",
          properties: {
            count: { type: "integer", minimum: 0 },
            min: { type: ["number", "null"] },
            max: { type: ["number", "null"] },
            mean: { type: ["number", "null"] },
          },
          required: ["count", "min", "max", "mean"],
        },
      },
      parsed_rows: { type: "array", items: { type: "object" } },
    },
    required: ["rows", "columns"],
  }),
});

export const REFERENCE_TASK_TYPES: readonly SupportedTaskType[] = [TEXT_ANALYSIS, SUMMARIZATION, DATA_ANALYSIS];
