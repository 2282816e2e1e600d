// The summarization task: extractive, keeping the sentences whose words are
// most frequent in the whole text. Asks for max_sentences when it is missing.
import type { JsonValue } from "@bufbuild/protobuf";
import { ErrorCode } from "../../../gen/synapse/v1/errors_pb.js";
import { TaskFailure, type MissingFieldSpec, type TaskHandler, type Validation } from "../handler.js";
import { splitSentences, wordFrequencies, wordsOf } from "./text-analysis.js";
import { counted } from "../../text/plural.js";

export { splitSentences };

/** Words too common to say what a sentence is about. */
export const STOPWORDS: ReadonlySet<string> = new Set([
  "a", "an", "and", "are", "as", "at", "be", "been", "but", "by", "for", "from", "had", "has", "have", "he",
  "i", "in", "is", "it", "its", "not", "of", "on", "or", "she", "that", "the", "they", "this", "to", "was",
  "we", "were", "with", "you",
]);

export type Summary = { summary: string; sentences: string[]; original_sentences: number };

const MAX_SENTENCES_FIELD: MissingFieldSpec = {
  field: "max_sentences",
  reason: "how many sentences the summary should keep",
  suggestedValue: 3,
  alternatives: [1, 5],
};
const MAX_SENTENCES_QUESTION = "How many sentences should the summary keep?";

function contentWords(text: string): string[] {
  return wordsOf(text)
    .map((word) => word.toLowerCase())
    .filter((word) => !STOPWORDS.has(word));
}

/** Each sentence's mean whole-text frequency of its content words (0 when it has none). */
export function scoreSentences(sentences: readonly string[], text: string): number[] {
  const frequencies = wordFrequencies(contentWords(text));
  return sentences.map((sentence) => {
    const words = contentWords(sentence);
    if (words.length === 0) return 0;
    const total = words.reduce((sum, word) => sum + (frequencies.get(word) ?? 0), 0);
    return total / words.length;
  });
}

/** The top maxSentences by score, earlier first on ties, returned in original order. */
export function selectSentences(sentences: readonly string[], scores: readonly number[], maxSentences: number): string[] {
  const kept = sentences
    .map((_, index) => index)
    .sort((a, b) => (scores[b] ?? 0) - (scores[a] ?? 0) || a - b)
    .slice(0, Math.max(0, maxSentences))
    .sort((a, b) => a - b);
  return kept.map((index) => sentences[index] ?? "");
}

export function summarize(text: string, maxSentences: number): Summary {
  const all = splitSentences(text);
  const kept = selectSentences(all, scoreSentences(all, text), maxSentences);
  return { summary: kept.join(" "), sentences: kept, original_sentences: all.length };
}

const isAbsent = (value: JsonValue | undefined): boolean => value === undefined || value === null;

function isValidMax(value: JsonValue | undefined): value is number {
  return typeof value === "number" && Number.isInteger(value) && value >= 1 && value <= 50;
}

export const summarizationHandler: TaskHandler = {
  // Pure computation over the payload: running it again after a restart is safe.
  resumable: true,
  validateTask(task): Validation {
    const value = task.payload.max_sentences;
    if (isAbsent(value)) return { kind: "need_info", fields: [MAX_SENTENCES_FIELD], question: MAX_SENTENCES_QUESTION };
    if (!isValidMax(value)) {
      return { kind: "reject", code: ErrorCode.INVALID_PARAMS, message: "max_sentences must be an integer from 1 to 50" };
    }
    return { kind: "accept" };
  },

  async executeTask(ctx) {
    const text = ctx.payload.text;
    if (typeof text !== "string") throw new TaskFailure(ErrorCode.INVALID_PARAMS, "text must be a string");
    let max = ctx.payload.max_sentences;
    // Reached only when the engine ran the task without validateTask's need_info round.
    if (isAbsent(max)) {
      const answer = await ctx.askForInfo([MAX_SENTENCES_FIELD], MAX_SENTENCES_QUESTION);
      max = answer.max_sentences ?? ctx.payload.max_sentences;
    }
    if (!isValidMax(max)) throw new TaskFailure(ErrorCode.INVALID_PARAMS, "max_sentences must be an integer from 1 to 50");

    const all = splitSentences(text);
    const scores = scoreSentences(all, text);
    await ctx.progress(50, `scored ${counted(all.length, "sentence")}`);
    const kept = selectSentences(all, scores, max);
    const output: Summary = { summary: kept.join(" "), sentences: kept, original_sentences: all.length };
    await ctx.progress(100, "summarized");
    return { output, outputType: "json", summary: `kept ${kept.length} of ${counted(all.length, "sentence")}` };
  },
};
