// The text_analysis task: character, word and sentence counts and the most
// frequent words. Also home of the word and sentence rules summarization shares.
import { ErrorCode } from "../../../gen/synapse/v1/errors_pb.js";
import { TaskFailure, type TaskHandler } from "../handler.js";
import { counted } from "../../text/plural.js";

/** Letters and digits, with inner apostrophes kept ("don't", "l’eau"). */
const WORD = /[\p{L}\p{N}]+(?:['’][\p{L}\p{N}]+)*/gu;
const HAS_WORD = /[\p{L}\p{N}]/u;
const TERMINATORS = new Set([".", "!", "?", "。", "！", "？"]);
/** Closing quotes and brackets right after a terminator stay with its sentence. */
const CLOSERS = new Set(['"', "'", "”", "’", "»", ")", "]"]);

export type WordCount = { word: string; count: number };

export type TextStats = {
  characters: number;
  words: number;
  sentences: number;
  top_words: WordCount[];
};

/** The words of a text, as written (not lower-cased). */
export function wordsOf(text: string): string[] {
  return text.match(WORD) ?? [];
}

/**
 * Splits after each run of . ! ? 。 ！ ？ and returns the trimmed sentences
 * with their terminators. Segments without a letter or digit ("...") are
 * dropped, so a text without terminators is one sentence and a blank one none.
 */
export function splitSentences(text: string): string[] {
  const sentences: string[] = [];
  const keep = (segment: string): void => {
    const trimmed = segment.trim();
    if (HAS_WORD.test(trimmed)) sentences.push(trimmed);
  };
  let start = 0;
  let i = 0;
  // Indexing UTF-16 units is safe: every terminator and closer is in the BMP.
  while (i < text.length) {
    if (!TERMINATORS.has(text.charAt(i))) {
      i++;
      continue;
    }
    while (i < text.length && TERMINATORS.has(text.charAt(i))) i++;
    while (i < text.length && CLOSERS.has(text.charAt(i))) i++;
    keep(text.slice(start, i));
    start = i;
  }
  keep(text.slice(start));
  return sentences;
}

/** Counts words by their lower-cased form. */
export function wordFrequencies(words: readonly string[]): Map<string, number> {
  const counts = new Map<string, number>();
  for (const word of words) {
    const key = word.toLowerCase();
    counts.set(key, (counts.get(key) ?? 0) + 1);
  }
  return counts;
}

/** Code points, as `[...text].length` counts them (a lone surrogate is one), without an array of them. */
export function codePoints(text: string): number {
  let count = text.length;
  for (let i = 0; i < text.length - 1; i++) {
    const unit = text.charCodeAt(i);
    if (unit >= 0xd800 && unit <= 0xdbff) {
      const next = text.charCodeAt(i + 1);
      if (next >= 0xdc00 && next <= 0xdfff) {
        count--; // a surrogate pair is one code point
        i++;
      }
    }
  }
  return count;
}

export function analyzeText(text: string, top = 5): TextStats {
  const words = wordsOf(text);
  const top_words = [...wordFrequencies(words)]
    .map(([word, count]) => ({ word, count }))
    // Code-unit order rather than localeCompare, so results never depend on the host's locale.
    .sort((a, b) => b.count - a.count || (a.word < b.word ? -1 : a.word > b.word ? 1 : 0))
    .slice(0, Math.max(0, top));
  return {
    characters: codePoints(text),
    words: words.length,
    sentences: splitSentences(text).length,
    top_words,
  };
}

function readTop(value: unknown): number {
  if (value === undefined || value === null) return 5;
  if (typeof value !== "number" || !Number.isInteger(value) || value < 1 || value > 100) {
    throw new TaskFailure(ErrorCode.INVALID_PARAMS, "top must be an integer from 1 to 100");
  }
  return value;
}

export const textAnalysisHandler: TaskHandler = {
  // Pure computation over the payload: running it again after a restart is safe.
  resumable: true,
  async executeTask(ctx) {
    const text = ctx.payload.text;
    if (typeof text !== "string") throw new TaskFailure(ErrorCode.INVALID_PARAMS, "text must be a string");
    const output = analyzeText(text, readTop(ctx.payload.top));
    await ctx.progress(100, "analysed");
    return { output, outputType: "json", summary: `${counted(output.words, "word")}, ${counted(output.sentences, "sentence")}` };
  },
};
