// The console in a real browser, as a requester uses it: Debian's Chromium,
// headless, driven by playwright-core against a real agent server on
// 127.0.0.1. The page makes its own key (non-extractable, in IndexedDB),
// submits tasks signed in the browser, watches their paths through the
// state machine, answers a need-info form, approves, modifies and rejects
// decisions, cancels, reads a streamed result, and marks an event that was
// tampered with on the way as invalid. Screenshots go to
// test-artifacts/console/. Needs Chromium and a built console:
// npm run test:browser.
import { fromBinary, toBinary } from "@bufbuild/protobuf";
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { WatchRequestSchema, WatchResponseSchema } from "../../gen/synapse/v1/p2p_pb.js";
import { TaskState } from "../../gen/synapse/v1/payloads_pb.js";
import type { TaskHandler } from "../../src/agent/handler.js";
import { referenceHandlers } from "../../src/agent/reference/index.js";
import { REFERENCE_TASK_TYPES } from "../../src/agent/reference/task-types.js";
import { startTestServer, type TestServer } from "../helpers/server.js";
import { launchChromium, openConsole, screenshot, type ConsolePage } from "./harness.js";

/** A decision with a deadline and a second escalation level, which the reference agent never asks. */
const paymentRelease: TaskHandler = {
  async executeTask(ctx) {
    const answer = await ctx.askHuman({
      code: "payment_over_limit",
      message: "The payment is over the team's limit.",
      taskSummary: `release ${String(ctx.payload.amount)} EUR`,
      blockedReason: "amount above 1000 EUR",
      escalationLevel: 2,
      deadline: new Date(Date.now() + 10 * 60 * 1000),
      options: [{ field: "amount", value: ctx.payload.amount ?? 0, prosCons: "release the whole amount", confidence: 80 }],
    });
    return { output: { released: answer.fields.amount ?? null, action: answer.action, decided_by: answer.decidedBy.userName } };
  },
};

const TIMEOUT = 20_000;

describe("the console in Chromium, as a requester", () => {
  let server: TestServer;
  let browser: Browser;
  let session: ConsolePage;
  let page: Page;
  const tasks = { analysed: "" };

  beforeAll(async () => {
    server = await startTestServer({
      agentId: "agent_console_test",
      handlers: new Map([...referenceHandlers(), ["payment_release", paymentRelease]]),
      capabilities: {
        supportedTaskTypes: [
          ...REFERENCE_TASK_TYPES,
          {
            type: "payment_release",
            name: "Payment release",
            description: "Releases a payment after a person decides.",
            inputSchema: JSON.stringify({ type: "object", properties: { amount: { type: "number" } }, required: ["amount"] }),
            outputSchema: JSON.stringify({ type: "object" }),
          },
        ],
      },
    });
    browser = await launchChromium();
    session = await openConsole(browser, server.url);
    page = session.page;
  });
  afterAll(async () => {
    await browser?.close();
    await server?.close();
  });

  /** Fills the New task form and sends it; resolves with the new task's id once its page is open. */
  async function submit(taskType: string, payload: object, options: { approval?: boolean } = {}): Promise<string> {
    await page.locator('nav a[data-route="new"]').click();
    await page.getByTestId("task-type").selectOption(taskType);
    await page.getByTestId("task-payload").fill(JSON.stringify(payload));
    if (options.approval) await page.getByTestId("require-approval").check();
    // The form is kept between submissions; its status must never show the task sent before as this one.
    const before = await page.getByTestId("submit-status").getAttribute("data-task-id");
    await page.getByTestId("submit-task").click();
    if (before !== null) expect(await page.getByTestId("submit-status").getAttribute("data-task-id")).not.toBe(before);
    const status = page.locator('[data-testid="submit-status"][data-task-id]');
    await status.waitFor({ state: "attached", timeout: TIMEOUT });
    const taskId = (await status.getAttribute("data-task-id")) ?? "";
    // The page switches to the new task by itself.
    await page.locator(`[data-testid="task-detail"][data-task-id="${taskId}"] [data-testid="task-id"]`).waitFor({ timeout: TIMEOUT });
    return taskId;
  }

  /** Waits until the open task's graph shows `state` as the current one. */
  async function graphReaches(state: string): Promise<void> {
    await page.locator(`[data-testid="state-graph"][data-current="${state}"]`).waitFor({ timeout: TIMEOUT });
  }

  async function pathOf(): Promise<string[]> {
    return page.getByTestId("state-path").locator("li[data-state]").evaluateAll((items) => items.map((item) => item.getAttribute("data-state") ?? ""));
  }

  async function events(): Promise<Array<{ sequence: string | null; type: string | null; verified: string | null }>> {
    return page.getByTestId("event").evaluateAll((rows) => rows.map((row) => ({ sequence: row.getAttribute("data-sequence"), type: row.getAttribute("data-type"), verified: row.getAttribute("data-verified") })));
  }

  async function allVerified(): Promise<void> {
    expect(await page.getByTestId("log-verdict").getAttribute("data-all-verified")).toBe("true");
    const rows = await events();
    expect(rows.length).toBeGreaterThan(0);
    expect(rows.map((row) => row.sequence)).toEqual(rows.map((_, index) => String(index + 1)));
    for (const row of rows) expect(row.verified).toBe("true");
  }

  it("tells a new identity with no tasks where the command line's tasks are", async () => {
    const empty = page.getByTestId("task-rows").getByTestId("no-tasks");
    await empty.waitFor({ timeout: TIMEOUT });
    expect(await empty.textContent()).toContain("~/.synapse/agent.key");
    expect(await empty.locator('a[href="#/identity"]').count()).toBe(1);
    expect(await empty.locator('a[href="#/new"]').count()).toBe(1);
    await screenshot(page, "00-no-tasks");
  });

  it("shows the agent from GetCapabilities and a key the page cannot read", async () => {
    await page.locator('nav a[data-route="agent"]').click();
    const declared = server.capabilities.getCapabilities();
    expect(await page.getByTestId("agent-id").textContent()).toBe(declared.agentId);
    expect(await page.getByTestId("agent-name").textContent()).toBe(declared.agentName);
    expect(await page.getByTestId("agent-key-id").textContent()).toBe(declared.keyId);
    expect(await page.getByTestId("protocol-version").textContent()).toBe("1.0.0");
    const types = await page.getByTestId("task-types").locator("li").evaluateAll((items) => items.map((item) => item.getAttribute("data-task-type")));
    expect(types).toEqual(declared.supportedTaskTypes.map((taskType) => taskType.type));
    expect(await page.getByTestId("agent-registry").textContent()).toBe("not hosted here");
    expect(await page.getByTestId("nav-registry").isHidden()).toBe(true);

    await page.locator('nav a[data-route="identity"]').click();
    expect(await page.getByTestId("requester-id").textContent()).toMatch(/^agent_[0-9a-f]{32}$/);
    expect(await page.getByTestId("key-backend").getAttribute("data-backend")).toBe("webcrypto");
    expect(await page.getByTestId("key-source").textContent()).toBe("made in this browser");
    // The key in IndexedDB is a CryptoKey that refuses to be exported.
    // (A script string: this file is compiled without the DOM's types.)
    const stored = await page.evaluate(`(async () => {
      const db = await new Promise((resolve, reject) => {
        const req = indexedDB.open("synapse-console");
        req.onsuccess = () => resolve(req.result);
        req.onerror = () => reject(req.error);
      });
      const record = await new Promise((resolve, reject) => {
        const req = db.transaction("kv").objectStore("kv").get("identity");
        req.onsuccess = () => resolve(req.result);
        req.onerror = () => reject(req.error);
      });
      const exported = await crypto.subtle.exportKey("jwk", record.privateKey).then(() => "exported", (error) => error.name);
      return { extractable: record.privateKey.extractable, hasSeed: record.seed !== undefined, exported };
    })()`);
    expect(stored).toEqual({ extractable: false, hasSeed: false, exported: "InvalidAccessError" });
    await screenshot(page, "01-identity");
  });

  it("submits a text_analysis task and watches its graph reach completed, every event verified", async () => {
    // 12 words in 2 sentences, by the reference handler's rules.
    const taskId = await submit("text_analysis", { text: "The console signs this task in the browser. Every event is verified." });
    tasks.analysed = taskId;
    await graphReaches("completed");
    const path = await pathOf();
    expect(path.slice(0, 3)).toEqual(["idle", "pending", "confirmed"]);
    expect(path.at(-1)).toBe("completed");
    await allVerified();
    const rows = await events();
    expect(rows[0]?.type).toBe("p2p:task_confirm");
    expect(rows.at(-1)?.type).toBe("p2p:task_complete");
    expect(await page.locator('[data-testid="state-graph"] [data-state="completed"]').getAttribute("data-current")).toBe("true");
    expect(await page.locator('[data-testid="state-graph"] [data-state="need_human"]').getAttribute("data-visited")).toBe("false");
    expect(await page.locator('[data-testid="state-graph"] .edge.taken').count()).toBe(path.length - 1);

    const result = JSON.parse((await page.getByTestId("task-result").textContent()) ?? "") as { words?: number; sentences?: number };
    expect(result).toMatchObject({ words: 12, sentences: 2 });
    expect(await page.getByTestId("task-result-panel").getAttribute("data-signed")).toBe("true");

    // A row of the history opens to the decoded header and payload of the signed bytes.
    const last = page.getByTestId("event").last();
    await last.locator("summary").click();
    expect(await last.locator("pre").first().textContent()).toContain(`"taskId": "${taskId}"`);
    expect(await last.locator("pre").nth(1).textContent()).toContain('"words": 12');

    // The agent recorded the task for the key the browser made.
    await page.locator('nav a[data-route="identity"]').click();
    const requesterId = (await page.getByTestId("requester-id").textContent()) ?? "";
    const record = await server.agent.reader.getTask(taskId, requesterId);
    expect(record.state).toBe(TaskState.COMPLETED);
    expect(record.requester.keyId).toBe(await page.getByTestId("requester-key-id").textContent());

    await page.goto(`${server.url}/console#/tasks/${taskId}`);
    await graphReaches("completed");
    await screenshot(page, "02-task-completed");
  });

  it("shows a summarization's question in the inbox and completes it with the answer from the form", async () => {
    const text = "Agents talk. Agents sign what they say. People answer questions. The console shows it all.";
    const taskId = await submit("summarization", { text });
    await graphReaches("info_needed");
    expect(await page.getByTestId("task-detail").getByTestId("question").getAttribute("data-kind")).toBe("info");

    await page.locator('nav a[data-route="inbox"]').click();
    const item = page.locator(`[data-testid="inbox-item"][data-task-id="${taskId}"]`);
    await item.waitFor({ timeout: TIMEOUT });
    expect(await page.getByTestId("inbox-count").textContent()).toBe("1");
    const input = item.locator('input[data-field="max_sentences"]');
    // Prefilled with the suggested value; the alternatives are offered as choices.
    expect(await input.inputValue()).toBe("3");
    expect(await item.locator("[data-choice]").evaluateAll((chips) => chips.map((chip) => chip.getAttribute("data-choice")))).toEqual(["3", "1", "5"]);
    await screenshot(page, "03-inbox-need-info");
    await item.locator('[data-choice="1"]').click();
    expect(await input.inputValue()).toBe("1");
    await item.getByTestId("provide-info").click();
    await item.waitFor({ state: "detached", timeout: TIMEOUT });
    await page.getByTestId("inbox-empty").waitFor({ timeout: TIMEOUT });
    expect(await page.getByTestId("inbox-count").isHidden()).toBe(true);

    await page.goto(`${server.url}/console#/tasks/${taskId}`);
    await graphReaches("completed");
    expect(await pathOf()).toEqual(expect.arrayContaining(["pending", "info_needed", "info_provided", "completed"]));
    await allVerified();
    const result = JSON.parse((await page.getByTestId("task-result").textContent()) ?? "") as { sentences?: string[] };
    expect(result.sentences).toHaveLength(1);
  });

  it("approves a task that asks for approval, after taking the decision up", async () => {
    const taskId = await submit("text_analysis", { text: "Approve me. Then run." }, { approval: true });
    await graphReaches("need_human");
    const question = page.getByTestId("task-detail").getByTestId("question");
    expect(await question.getAttribute("data-kind")).toBe("decision");
    expect(await question.getByTestId("escalation").getAttribute("data-level")).toBe("1");
    // What the level means is on the page, and in the badge's tooltip.
    expect(await question.getByTestId("escalation").getAttribute("title")).toContain("who decides, by seniority");
    expect(await question.getByTestId("escalation-help").textContent()).toContain("escalation level 1 (team)");
    expect(await question.getByTestId("escalation-help").textContent()).toContain("no deadline");
    // The option's box says what it is: the value the decision sends for the field.
    expect(await question.getByTestId("options-help").textContent()).toContain("the value the agent proposes");
    expect(await question.locator('label[for]:has(+ input[data-field="approved"])').textContent()).toContain("Value of approved");
    await question.getByTestId("take-up").click();
    await graphReaches("human_deciding");
    await screenshot(page, "04-decision");
    await page.getByTestId("task-detail").getByTestId("question").getByTestId("approve").click();
    await graphReaches("completed");
    expect(await pathOf()).toEqual(expect.arrayContaining(["need_human", "human_deciding", "human_approved", "completed"]));
    await allVerified();
    expect(taskId).not.toBe("");
  });

  it("modifies a decision's option, with the escalation level and a countdown to the deadline", async () => {
    await submit("payment_release", { amount: 1200 });
    await graphReaches("need_human");
    const question = page.getByTestId("task-detail").getByTestId("question");
    expect(await question.getByTestId("escalation").getAttribute("data-level")).toBe("2");
    expect(await question.getByTestId("escalation").textContent()).toContain("manager");
    expect(await question.getByTestId("escalation-help").textContent()).toContain("If nobody decides by the deadline, the task fails.");
    const countdown = question.getByTestId("deadline-countdown");
    await expect.poll(() => countdown.textContent(), { timeout: TIMEOUT }).toMatch(/^\d+:\d\d left$/);
    const amount = question.locator('input[data-field="amount"]');
    expect(await amount.inputValue()).toBe("1200");
    await amount.fill("900");
    await question.locator('input[name="decided-by"]').fill("Dana");
    await question.getByTestId("modify").click();
    await graphReaches("completed");
    const result = JSON.parse((await page.getByTestId("task-result").textContent()) ?? "") as Record<string, unknown>;
    expect(result).toEqual({ released: 900, action: "modify", decided_by: "Dana" });
  });

  it("rejects a decision only with a reason, and the task fails", async () => {
    await submit("summarization", { text: "Reject me. Please.", max_sentences: 1 }, { approval: true });
    await graphReaches("need_human");
    const question = page.getByTestId("task-detail").getByTestId("question");
    await question.getByTestId("reject").click();
    expect(await question.getByTestId("form-status").textContent()).toContain("say why you reject");
    await question.getByTestId("rejection-reason").fill("not this week");
    await question.getByTestId("reject").click();
    await graphReaches("failed");
    expect(await pathOf()).toEqual(expect.arrayContaining(["need_human", "human_rejected", "failed"]));
    expect(await page.getByTestId("task-error").textContent()).toContain("not this week");
    await allVerified();
  });

  it("cancels a running task", async () => {
    const csv = ["n", ...Array.from({ length: 200 }, (_, i) => String(i))].join("\n");
    await submit("data_analysis", { csv, delay_ms_per_row: 200 });
    await graphReaches("executing");
    await page.getByTestId("task-detail").getByTestId("cancel-form").locator("input").fill("changed my mind");
    await page.getByTestId("task-detail").getByTestId("cancel-task").click();
    await graphReaches("cancelled");
    expect((await pathOf()).slice(-2)).toEqual(["executing", "cancelled"]);
    expect(await page.getByTestId("task-detail").getByTestId("cancel-form").count()).toBe(0);
    await allVerified();
    await screenshot(page, "05-cancelled");
  });

  it("downloads a streamed result with ReadResult and checks it against the signed digest", async () => {
    await submit("data_analysis", { csv: "a,b\n1,2\n3,4\n", include_rows: true });
    await graphReaches("completed");
    await page.getByTestId("result-download").click();
    const check = page.locator('[data-testid="result-check"][data-ok]');
    await check.waitFor({ timeout: TIMEOUT });
    expect(await check.getAttribute("data-ok")).toBe("true");
    expect(await check.textContent()).toContain("match the signed task_complete");
    expect(await page.getByTestId("result-save").getAttribute("download")).toMatch(/\.json$/);
  });

  it("lists the tasks live, filtered by state and type, and opens one by keyboard", async () => {
    await page.locator('nav a[data-route="tasks"]').click();
    const rows = page.getByTestId("task-row");
    await expect.poll(() => rows.count(), { timeout: TIMEOUT }).toBe(7);
    await page.getByTestId("filter-state").selectOption("finished");
    await page.getByTestId("filter-type").selectOption("summarization");
    await expect.poll(() => rows.evaluateAll((all) => all.map((row) => row.getAttribute("data-state"))), { timeout: TIMEOUT }).toEqual(["failed", "completed"]);
    await page.getByTestId("filter-state").selectOption("cancelled");
    await page.getByTestId("filter-type").selectOption("");
    await expect.poll(() => rows.evaluateAll((all) => all.map((row) => row.getAttribute("data-state"))), { timeout: TIMEOUT }).toEqual(["cancelled"]);
    await page.getByTestId("filter-state").selectOption("");
    await expect.poll(() => rows.count(), { timeout: TIMEOUT }).toBe(7);

    // Ids are shown as head…tail, which tells apart UUIDv7 ids of the same second; the text is the
    // whole id (selecting and copying it copies all of it), and so is the tooltip.
    // (A script string: this file is compiled without the DOM's types.)
    const ids = (await page.evaluate(`[...document.querySelectorAll('[data-testid="task-row"]')].map((row) => {
      const code = row.querySelector('[data-testid="row-task-id"]');
      const selection = getSelection();
      selection.selectAllChildren(code);
      const copied = selection.toString();
      selection.removeAllRanges();
      return { id: row.dataset.taskId, text: code.textContent, title: code.title, copied, shown: code.offsetWidth, middle: code.querySelector(".id-middle")?.offsetWidth };
    })`)) as Array<{ id: string; text: string; title: string; copied: string; shown: number; middle?: number }>;
    expect(ids).toHaveLength(7);
    for (const id of ids) {
      expect(id).toMatchObject({ text: id.id, title: id.id, copied: id.id, middle: 0 });
      expect(id.shown).toBeLessThan(170); // 15 characters' room, not a UUID's 36
    }
    // No column is cut off at the list's edge.
    const pane = await page.locator(".list-pane").evaluate((element) => ({ scroll: element.scrollWidth, client: element.clientWidth }));
    expect(pane.scroll).toBeLessThanOrEqual(pane.client);

    // Keyboard: focus the first row's link, Enter opens the task and moves focus to its heading.
    await rows.first().locator("a").focus();
    await page.keyboard.press("Enter");
    await page.locator("#task-title:focus").waitFor({ timeout: TIMEOUT });
    // It stays there while the task's stream fills the page in.
    await page.getByTestId("log-verdict").waitFor({ timeout: TIMEOUT });
    expect(await page.evaluate("document.activeElement?.id")).toBe("task-title");
    expect(await page.evaluate("location.hash")).toMatch(/^#\/tasks\//);
    await screenshot(page, "06-list");
  });

  it("marks an event changed on the way as invalid and stops the path before it", async () => {
    // Between the server and the page, flip one bit of the signed payload of the task's last event.
    let tampered = 0;
    await page.route("**/synapse.v1.P2PService/Watch", async (route) => {
      const body = route.request().postDataBuffer();
      const request = body ? fromBinary(WatchRequestSchema, body.subarray(5)) : undefined;
      if (request?.taskId !== tasks.analysed) return route.continue();
      const response = await route.fetch();
      const bytes = await response.body();
      // gRPC-web frames: a flag byte, a 4-byte length, the message (flag 0x80: the trailers).
      const frames: Buffer[] = [];
      let lastEvent = -1;
      for (let at = 0; at < bytes.length; at += 5 + bytes.readUInt32BE(at + 1)) {
        const frame = bytes.subarray(at, at + 5 + bytes.readUInt32BE(at + 1));
        if (frame[0] === 0 && fromBinary(WatchResponseSchema, frame.subarray(5)).kind.case === "event") lastEvent = frames.length;
        frames.push(frame);
      }
      const message = fromBinary(WatchResponseSchema, frames[lastEvent]!.subarray(5));
      const envelope = message.kind.case === "event" ? message.kind.value.message?.envelope : undefined;
      envelope!.payload[envelope!.payload.length - 1]! ^= 1;
      const encoded = toBinary(WatchResponseSchema, message);
      const header = Buffer.alloc(5);
      header.writeUInt32BE(encoded.length, 1);
      frames[lastEvent] = Buffer.concat([header, encoded]);
      tampered++;
      await route.fulfill({ response, body: Buffer.concat(frames) });
    });
    await page.goto(`${server.url}/console#/inbox`);
    await page.goto(`${server.url}/console#/tasks/${tasks.analysed}`);
    const verdict = page.locator('[data-testid="log-verdict"][data-all-verified="false"]');
    await verdict.waitFor({ timeout: TIMEOUT });
    expect(tampered).toBe(1);
    const rows = await events();
    const bad = rows.at(-1)!;
    expect(bad.verified).toBe("false");
    expect(rows.slice(0, -1).every((row) => row.verified === "true")).toBe(true);
    expect(await page.locator(`[data-testid="event"][data-sequence="${bad.sequence}"] [data-testid="event-verification"]`).textContent()).toBe("✗ invalid");
    expect(await verdict.textContent()).toContain("signature does not verify");
    // The path the signatures prove stops before the changed event.
    expect(await page.getByTestId("state-graph").getAttribute("data-current")).not.toBe("completed");
    expect(await page.locator(`[data-testid="state-path"] [data-broken="${bad.sequence}"]`).count()).toBe(1);
    // The result the changed event carries is not presented as signed.
    expect(await page.getByTestId("task-result-panel").getAttribute("data-signed")).toBe("false");
    await screenshot(page, "07-tampered");
    await page.unroute("**/synapse.v1.P2PService/Watch");
  });

  it("counts a log of one event in the singular", async () => {
    await submit("text_analysis", {});
    await graphReaches("rejected");
    expect(await page.getByTestId("log-verdict").textContent()).toBe("The 1 event verified ✓");
  });

  it("logged no errors in the browser", () => {
    expect(session.errors).toEqual([]);
  });
});
