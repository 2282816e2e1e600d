// The reference agent's task handlers through a fake TaskContext: text
// analysis, summarization, CSV statistics, the approval gate, and their
// outputs checked against the task types' output schemas.
import type { JsonObject, JsonValue } from "@bufbuild/protobuf";
import fc from "fast-check";
import { Ajv, type SchemaObject, type ValidateFunction } from "ajv";
import { describe, expect, it } from "vitest";
import type { SupportedTaskType } from "../gen/synapse/v1/capabilities_pb.js";
import { ErrorCode } from "../gen/synapse/v1/errors_pb.js";
import {
  TaskFailure,
  type HumanAnswer,
  type HumanQuestion,
  type MissingFieldSpec,
  type TaskContext,
  type TaskHandler,
  type TaskInput,
  type TaskOutput,
} from "../src/agent/handler.js";
import { withApprovalGate } from "../src/agent/reference/approval.js";
import { columnStats, dataAnalysisHandler, parseCsv } from "../src/agent/reference/data-analysis.js";
import { referenceHandlers } from "../src/agent/reference/index.js";
import { splitSentences, summarizationHandler, summarize } from "../src/agent/reference/summarization.js";
import { DATA_ANALYSIS, SUMMARIZATION, TEXT_ANALYSIS } from "../src/agent/reference/task-types.js";
import { analyzeText, codePoints, textAnalysisHandler } from "../src/agent/reference/text-analysis.js";
import { silentLogger } from "../src/log.js";

type ProgressCall = { percent: number; message: string | undefined };

interface FakeOptions {
  /** What askForInfo resolves with (also merged into the payload, as the engine does). */
  info?: JsonObject;
  /** What askHuman resolves with, or an error it rejects with. */
  human?: HumanAnswer | Error;
  controller?: AbortController;
  onProgress?: (call: ProgressCall) => void;
}

interface Fake {
  ctx: TaskContext;
  progress: ProgressCall[];
  infoRequests: Array<{ fields: MissingFieldSpec[]; question: string | undefined }>;
  humanQuestions: HumanQuestion[];
}

const approval: HumanAnswer = {
  action: "approve",
  fields: { approved: true },
  notes: "",
  decidedBy: { userId: "u-1", userName: "Test Reviewer", role: "reviewer" },
};

function taskInput(taskType: string, payload: JsonObject): TaskInput {
  return { taskId: "t-1", taskType, payload, requester: { agentId: "agent-r", systemId: "system-r" }, requestMessageId: "m-1" };
}

function fakeContext(taskType: string, payload: JsonObject, options: FakeOptions = {}): Fake {
  const progress: ProgressCall[] = [];
  const infoRequests: Fake["infoRequests"] = [];
  const humanQuestions: HumanQuestion[] = [];
  const ctx: TaskContext = {
    ...taskInput(taskType, { ...payload }),
    attempt: 1,
    signal: (options.controller ?? new AbortController()).signal,
    trace: { traceparent: "", tracestate: "", traceId: "", sessionId: "", correlationId: "" },
    logger: silentLogger,
    uploads: { files: [], get: () => undefined, open: () => (async function* () {})() },
    async progress(percent, message) {
      const call = { percent, message };
      progress.push(call);
      options.onProgress?.(call);
    },
    async askForInfo(fields, question) {
      infoRequests.push({ fields, question });
      const answer = options.info ?? {};
      Object.assign(ctx.payload, answer);
      return answer;
    },
    async askHuman(question) {
      humanQuestions.push(question);
      const answer = options.human ?? approval;
      if (answer instanceof Error) throw answer;
      if (answer.action === "modify") Object.assign(ctx.payload, answer.fields);
      return answer;
    },
  };
  return { ctx, progress, infoRequests, humanQuestions };
}

function run(handler: TaskHandler, taskType: string, payload: JsonObject, options: FakeOptions = {}) {
  const fake = fakeContext(taskType, payload, options);
  return { fake, result: handler.executeTask(fake.ctx) };
}

/** The TaskFailure a call throws (fails the test when it throws something else or nothing). */
function failureOf(fn: () => unknown): TaskFailure {
  try {
    fn();
  } catch (error) {
    expect(error).toBeInstanceOf(TaskFailure);
    return error as TaskFailure;
  }
  throw new Error("expected a TaskFailure, nothing was thrown");
}

async function rejectionOf(promise: Promise<unknown>): Promise<TaskFailure> {
  const error: unknown = await promise.then(
    () => undefined,
    (reason: unknown) => reason,
  );
  expect(error).toBeInstanceOf(TaskFailure);
  return error as TaskFailure;
}

const ajv = new Ajv({ allowUnionTypes: true });
const validators = new Map<string, ValidateFunction>();

function expectMatchesOutputSchema(type: SupportedTaskType, output: JsonValue | undefined): void {
  let validate = validators.get(type.type);
  if (validate === undefined) {
    validate = ajv.compile(JSON.parse(type.outputSchema) as SchemaObject);
    validators.set(type.type, validate);
  }
  expect(validate(output), ajv.errorsText(validate.errors)).toBe(true);
}

function streamJson(output: TaskOutput): JsonObject {
  const data = output.stream?.data;
  if (!(data instanceof Uint8Array)) throw new Error("expected a Uint8Array stream");
  return JSON.parse(new TextDecoder().decode(data)) as JsonObject;
}

describe("analyzeText", () => {
  it("counts code points, words and sentences of a known text", () => {
    const text = "Hello, world! It's 2024. Done 😀";
    expect(text.length).toBe(32); // the emoji is two UTF-16 units but one code point
    expect(analyzeText(text)).toEqual({
      characters: 31,
      words: 5,
      sentences: 3,
      top_words: [
        { word: "2024", count: 1 },
        { word: "done", count: 1 },
        { word: "hello", count: 1 },
        { word: "it's", count: 1 },
        { word: "world", count: 1 },
      ],
    });
  });

  it("lower-cases words, keeps curly apostrophes inside words and treats a run of terminators as one", () => {
    const stats = analyzeText("The cat saw the other cat. The dog’s ball? Gone!!");
    expect(stats.characters).toBe(49);
    expect(stats.words).toBe(10);
    expect(stats.sentences).toBe(3);
    expect(stats.top_words).toEqual([
      { word: "the", count: 3 },
      { word: "cat", count: 2 },
      { word: "ball", count: 1 },
      { word: "dog’s", count: 1 },
      { word: "gone", count: 1 },
    ]);
  });

  it("orders equal counts by word and limits the list to top", () => {
    expect(analyzeText("d B c b A a", 3).top_words).toEqual([
      { word: "a", count: 2 },
      { word: "b", count: 2 },
      { word: "c", count: 1 },
    ]);
    expect(analyzeText("one two", 10).top_words).toHaveLength(2);
  });

  it("splits on full-width terminators", () => {
    expect(analyzeText("你好。再见！")).toEqual({
      characters: 6,
      words: 2,
      sentences: 2,
      top_words: [
        { word: "你好", count: 1 },
        { word: "再见", count: 1 },
      ],
    });
  });

  it("counts characters as code points, as spreading the string does: pairs once, lone surrogates once each", () => {
    expect(codePoints("a😀b")).toBe(3);
    expect(codePoints("\ud83d")).toBe(1);
    expect(codePoints("x\ude00\ud83d")).toBe(3);
    // Any UTF-16 code units, surrogates often: lone ones, pairs, and pairs out of order.
    const unit = fc.oneof(fc.integer({ min: 0xd800, max: 0xdfff }), fc.integer({ min: 0, max: 0xffff }));
    const text = fc.array(unit, { maxLength: 80 }).map((units) => String.fromCharCode(...units));
    fc.assert(fc.property(text, (sample) => codePoints(sample) === [...sample].length), { numRuns: 1000 });
  });

  it("gives zeros for empty and blank text and one sentence without a terminator", () => {
    expect(analyzeText("")).toEqual({ characters: 0, words: 0, sentences: 0, top_words: [] });
    expect(analyzeText("  \n\t")).toEqual({ characters: 4, words: 0, sentences: 0, top_words: [] });
    expect(analyzeText("no terminator here").sentences).toBe(1);
    expect(analyzeText("...").sentences).toBe(0);
  });
});

describe("textAnalysisHandler", () => {
  it("returns the statistics, a summary and one progress report", async () => {
    const { fake, result } = run(textAnalysisHandler, "text_analysis", { text: "A b b. C!", top: 2 });
    const out = await result;
    expect(out).toEqual({
      output: {
        characters: 9,
        words: 4,
        sentences: 2,
        top_words: [
          { word: "b", count: 2 },
          { word: "a", count: 1 },
        ],
      },
      outputType: "json",
      summary: "4 words, 2 sentences",
    });
    expect(fake.progress).toEqual([{ percent: 100, message: "analysed" }]);
    expectMatchesOutputSchema(TEXT_ANALYSIS, out.output);
  });

  it("fails with INVALID_PARAMS on a missing text or a bad top", async () => {
    expect((await rejectionOf(run(textAnalysisHandler, "text_analysis", {}).result)).code).toBe(ErrorCode.INVALID_PARAMS);
    for (const top of [0, 1.5, "5", 101]) {
      const failure = await rejectionOf(run(textAnalysisHandler, "text_analysis", { text: "x", top }).result);
      expect(failure.code).toBe(ErrorCode.INVALID_PARAMS);
    }
  });
});

describe("summarization", () => {
  // Content-word frequencies: cats 2, dogs 2, the rest 1 ("and" is a stopword).
  // Scores: 3/2, 4/3, 5/3 and 1, so the third sentence ranks first, then the first.
  const text = "Cats purr. Dogs bark loudly. Cats and dogs play. Birds sing.";

  it("splits sentences after terminator runs, keeping terminators and closing quotes", () => {
    expect(splitSentences('Wait... what?! Yes. "Quoted." Then')).toEqual(["Wait...", "what?!", "Yes.", '"Quoted."', "Then"]);
    expect(splitSentences("  ")).toEqual([]);
    expect(splitSentences("one\ntwo")).toEqual(["one\ntwo"]);
  });

  it("keeps the best-scoring sentences in their original order", () => {
    expect(summarize(text, 2)).toEqual({
      summary: "Cats purr. Cats and dogs play.",
      sentences: ["Cats purr.", "Cats and dogs play."],
      original_sentences: 4,
    });
    expect(summarize(text, 1).sentences).toEqual(["Cats and dogs play."]);
    expect(summarize(text, 10).sentences).toHaveLength(4);
  });

  it("prefers the earlier sentence on equal scores", () => {
    expect(summarize("One two. Three four. Five six.", 2).sentences).toEqual(["One two.", "Three four."]);
    // "Zeta." and "Zeta alpha." both score 2.
    expect(summarize("Zeta. Alpha beta. Zeta alpha.", 1).sentences).toEqual(["Zeta."]);
  });

  it("handles text without sentences", () => {
    expect(summarize("", 3)).toEqual({ summary: "", sentences: [], original_sentences: 0 });
  });

  it("asks for max_sentences in validateTask only when it is absent", async () => {
    const validate = summarizationHandler.validateTask;
    if (validate === undefined) throw new Error("summarization must validate");
    expect(await validate(taskInput("summarization", { text }))).toEqual({
      kind: "need_info",
      fields: [
        {
          field: "max_sentences",
          reason: "how many sentences the summary should keep",
          suggestedValue: 3,
          alternatives: [1, 5],
        },
      ],
      question: "How many sentences should the summary keep?",
    });
    expect(await validate(taskInput("summarization", { text, max_sentences: 2 }))).toEqual({ kind: "accept" });
    expect(await validate(taskInput("summarization", { text, max_sentences: 0 }))).toMatchObject({
      kind: "reject",
      code: ErrorCode.INVALID_PARAMS,
    });
  });

  it("runs with max_sentences, reporting progress at 50 and 100", async () => {
    const { fake, result } = run(summarizationHandler, "summarization", { text, max_sentences: 2 });
    const out = await result;
    expect(out.output).toEqual(summarize(text, 2));
    expect(fake.progress.map((call) => call.percent)).toEqual([50, 100]);
    expect(fake.infoRequests).toEqual([]);
    expectMatchesOutputSchema(SUMMARIZATION, out.output);
  });

  it("asks for max_sentences with askForInfo when validateTask was skipped", async () => {
    const { fake, result } = run(summarizationHandler, "summarization", { text }, { info: { max_sentences: 1 } });
    const out = await result;
    expect(fake.infoRequests).toHaveLength(1);
    expect(fake.infoRequests[0]?.fields.map((field) => field.field)).toEqual(["max_sentences"]);
    expect(fake.infoRequests[0]?.question).toBe("How many sentences should the summary keep?");
    expect(out.output).toEqual({ summary: "Cats and dogs play.", sentences: ["Cats and dogs play."], original_sentences: 4 });
  });

  it("fails with INVALID_PARAMS when the answer has no usable max_sentences", async () => {
    const failure = await rejectionOf(run(summarizationHandler, "summarization", { text }, { info: { other: 1 } }).result);
    expect(failure.code).toBe(ErrorCode.INVALID_PARAMS);
  });
});

describe("parseCsv", () => {
  it("reads quoted fields, escaped quotes, embedded separators and newlines, and CRLF", () => {
    const csv = 'a,b,c\r\n"x, y","he said ""hi""",\r\n"multi\nline",3,""\r\n';
    expect(parseCsv(csv)).toEqual([
      ["a", "b", "c"],
      ["x, y", 'he said "hi"', ""],
      ["multi\nline", "3", ""],
    ]);
  });

  it("ignores one trailing newline only", () => {
    expect(parseCsv("a\n1")).toEqual([["a"], ["1"]]);
    expect(parseCsv("a\n1\n")).toEqual([["a"], ["1"]]);
    expect(parseCsv("a\n1\n\n")).toEqual([["a"], ["1"], [""]]);
    expect(parseCsv("")).toEqual([]);
  });

  it("fails with INVALID_PARAMS on an unterminated quote", () => {
    const failure = failureOf(() => parseCsv('a,b\n1,"never closed\n2,3\n'));
    expect(failure.code).toBe(ErrorCode.INVALID_PARAMS);
    expect(failure.message).toContain("line 2");
  });

  it("fails with INVALID_PARAMS on text after a closing quote", () => {
    expect(failureOf(() => parseCsv('"a"b\n')).code).toBe(ErrorCode.INVALID_PARAMS);
  });
});

describe("columnStats", () => {
  it("counts finite numbers only and rounds the mean to 6 decimals", () => {
    expect(columnStats(["1", "2", "2"])).toEqual({ count: 3, min: 1, max: 2, mean: 1.666667 });
    expect(columnStats(["0.1", "0.2"])).toEqual({ count: 2, min: 0.1, max: 0.2, mean: 0.15 });
    expect(columnStats([" -5 ", "1e3", "Infinity", "abc", "", "  "])).toEqual({ count: 2, min: -5, max: 1000, mean: 497.5 });
    expect(columnStats(["x", ""])).toEqual({ count: 0, min: null, max: null, mean: null });
  });
});

describe("dataAnalysisHandler", () => {
  it("computes per-column statistics with nulls for a non-numeric column", async () => {
    const csv = "name,score,age\nann,10,30\nbob, 20 ,x\ncy,,40\n";
    const out = await run(dataAnalysisHandler, "data_analysis", { csv }).result;
    expect(out.output).toEqual({
      rows: 3,
      columns: {
        name: { count: 0, min: null, max: null, mean: null },
        score: { count: 2, min: 10, max: 20, mean: 15 },
        age: { count: 2, min: 30, max: 40, mean: 35 },
      },
    });
    expect(out.summary).toBe("3 rows, 3 columns");
    expect(out.stream).toBeUndefined();
    expectMatchesOutputSchema(DATA_ANALYSIS, out.output);
  });

  it("treats missing cells as empty and fails on extra cells, naming the line", async () => {
    const short = await run(dataAnalysisHandler, "data_analysis", { csv: "a,b\n1\n2,4" }).result;
    expect(short.output).toEqual({
      rows: 2,
      columns: { a: { count: 2, min: 1, max: 2, mean: 1.5 }, b: { count: 1, min: 4, max: 4, mean: 4 } },
    });
    // The quoted newline makes the bad record start on line 4, not record 3.
    const failure = await rejectionOf(run(dataAnalysisHandler, "data_analysis", { csv: 'a,b\n"x\ny",2\n1,2,3\n' }).result);
    expect(failure.code).toBe(ErrorCode.INVALID_PARAMS);
    expect(failure.message).toContain("line 4");
  });

  it("fails with INVALID_PARAMS on empty CSV and bad parameters", async () => {
    const payloads: JsonObject[] = [{ csv: "" }, { csv: 5 }, { csv: "a\n1", delay_ms_per_row: -1 }, { csv: "a\n1", include_rows: "yes" }];
    for (const payload of payloads) {
      const failure = await rejectionOf(run(dataAnalysisHandler, "data_analysis", payload).result);
      expect(failure.code).toBe(ErrorCode.INVALID_PARAMS);
    }
  });

  it("reports progress whenever the integer percent rises, ending at 100", async () => {
    const csv = ["v", ...Array.from({ length: 250 }, (_, i) => String(i))].join("\n");
    const { fake, result } = run(dataAnalysisHandler, "data_analysis", { csv });
    await result;
    const percents = fake.progress.map((call) => call.percent);
    expect(percents).toHaveLength(100);
    for (let i = 1; i < percents.length; i++) expect(percents[i]).toBeGreaterThan(percents[i - 1] ?? Infinity);
    expect(fake.progress.at(-1)).toEqual({ percent: 100, message: "row 250 of 250" });

    const small = run(dataAnalysisHandler, "data_analysis", { csv: "v\n1\n2\n3" });
    await small.result;
    expect(small.fake.progress).toEqual([
      { percent: 33, message: "row 1 of 3" },
      { percent: 66, message: "row 2 of 3" },
      { percent: 100, message: "row 3 of 3" },
    ]);
  });

  it("stops promptly when cancelled during delay_ms_per_row", async () => {
    const controller = new AbortController();
    const reason = new Error("cancelled by the test");
    const started = Date.now();
    const { fake, result } = run(
      dataAnalysisHandler,
      "data_analysis",
      { csv: "v\n1\n2\n3\n4\n5", delay_ms_per_row: 10_000 },
      { controller, onProgress: () => setTimeout(() => controller.abort(reason), 20) },
    );
    await expect(result).rejects.toBe(reason);
    expect(Date.now() - started).toBeLessThan(1_000);
    expect(fake.progress).toEqual([{ percent: 20, message: "row 1 of 5" }]);
  });

  it("does not start when already cancelled", async () => {
    const controller = new AbortController();
    controller.abort();
    const { fake, result } = run(dataAnalysisHandler, "data_analysis", { csv: "v\n1" }, { controller });
    await expect(result).rejects.toMatchObject({ name: "AbortError" });
    expect(fake.progress).toEqual([]);
  });

  it("streams the parsed rows as JSON when include_rows is set", async () => {
    const csv = "name,score\nann,10\nbob,x\ncy\n";
    const out = await run(dataAnalysisHandler, "data_analysis", { csv, include_rows: true }).result;
    expect(out.output).toEqual({
      rows: 3,
      columns: {
        name: { count: 0, min: null, max: null, mean: null },
        score: { count: 1, min: 10, max: 10, mean: 10 },
      },
    });
    expect(out.stream?.contentType).toBe("application/json");
    const streamed = streamJson(out);
    expect(streamed).toEqual({
      ...(out.output as JsonObject),
      parsed_rows: [
        { name: "ann", score: 10 },
        { name: "bob", score: "x" },
        { name: "cy", score: "" },
      ],
    });
    expectMatchesOutputSchema(DATA_ANALYSIS, out.output);
    expectMatchesOutputSchema(DATA_ANALYSIS, streamed);
  });
});

describe("withApprovalGate", () => {
  function recordingHandler(events: string[]): TaskHandler {
    return {
      async executeTask(ctx) {
        events.push(`run ${JSON.stringify(ctx.payload)}`);
        return { output: "ran" };
      },
    };
  }

  it("asks a human exactly once before running when require_approval is true", async () => {
    const events: string[] = [];
    const gated = withApprovalGate(recordingHandler(events));
    const fake = fakeContext("text_analysis", { text: "x", require_approval: true });
    const ask = fake.ctx.askHuman.bind(fake.ctx);
    fake.ctx.askHuman = (question) => {
      events.push("ask");
      return ask(question);
    };
    expect(await gated.executeTask(fake.ctx)).toEqual({ output: "ran" });
    expect(events).toEqual(["ask", `run {"text":"x","require_approval":true}`]);
    expect(fake.humanQuestions).toEqual([
      {
        code: "approval_required",
        message: "This task asks for a human approval before it runs.",
        taskSummary: "text_analysis task t-1",
        blockedReason: "require_approval is set",
        escalationLevel: 1,
        options: [{ field: "approved", value: true, prosCons: "run the task as submitted", confidence: 100 }],
      },
    ]);
  });

  it("does not ask when require_approval is absent, false or not the boolean true", async () => {
    const payloads: JsonObject[] = [{}, { require_approval: false }, { require_approval: "true" }];
    for (const payload of payloads) {
      const events: string[] = [];
      const { fake, result } = run(withApprovalGate(recordingHandler(events)), "text_analysis", payload);
      await result;
      expect(fake.humanQuestions).toEqual([]);
      expect(events).toHaveLength(1);
    }
  });

  it("runs the inner handler on the payload as the engine updated it", async () => {
    const events: string[] = [];
    const modify: HumanAnswer = { ...approval, action: "modify", fields: { text: "changed" } };
    await run(withApprovalGate(recordingHandler(events)), "text_analysis", { text: "x", require_approval: true }, { human: modify })
      .result;
    expect(events).toEqual([`run {"text":"changed","require_approval":true}`]);
  });

  it("lets a failed askHuman propagate without running the task", async () => {
    const events: string[] = [];
    const refusal = new Error("the human rejected the task");
    const { result } = run(withApprovalGate(recordingHandler(events)), "text_analysis", { require_approval: true }, { human: refusal });
    await expect(result).rejects.toBe(refusal);
    expect(events).toEqual([]);
  });

  it("delegates validateTask unchanged and adds none when the inner handler has none", async () => {
    const gated = withApprovalGate(summarizationHandler);
    const input = taskInput("summarization", { text: "A. B." });
    expect(await gated.validateTask?.(input)).toEqual(await summarizationHandler.validateTask?.(input));
    expect(withApprovalGate(textAnalysisHandler).validateTask).toBeUndefined();
  });
});

describe("referenceHandlers", () => {
  it("maps the three task types to gated handlers whose outputs match their schemas", async () => {
    const handlers = referenceHandlers();
    expect([...handlers.keys()].sort()).toEqual(["data_analysis", "summarization", "text_analysis"]);
    const cases: Array<[SupportedTaskType, JsonObject]> = [
      [TEXT_ANALYSIS, { text: "One fish. Two fish!" }],
      [SUMMARIZATION, { text: "One fish. Two fish!", max_sentences: 1 }],
      [DATA_ANALYSIS, { csv: "a,b\n1,x\n" }],
    ];
    for (const [type, payload] of cases) {
      const handler = handlers.get(type.type);
      if (handler === undefined) throw new Error(`no handler for ${type.type}`);
      const { fake, result } = run(handler, type.type, { ...payload, require_approval: true });
      const out = await result;
      expect(fake.humanQuestions).toHaveLength(1);
      expectMatchesOutputSchema(type, out.output);
    }
  });
});
