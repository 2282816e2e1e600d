// The operator console in a real browser: Debian's Chromium, headless,
// driven by playwright-core against a real agent server. The page reads the
// capabilities, signs a text_analysis task in the browser, sends it and
// watches it over gRPC-web, and verifies every event. Needs Chromium and a
// built console: npm run test:browser.
import { chromium, type Browser, type Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { TaskState } from "../../gen/synapse/v1/payloads_pb.js";
import { startTestServer, type TestServer } from "../helpers/server.js";

const CHROMIUM_ARGS = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
];

describe("operator console in Chromium", () => {
  let server: TestServer;
  let browser: Browser;
  let page: Page;
  /** Script errors, failed loads and CSP violations the page reports. */
  const pageErrors: string[] = [];

  beforeAll(async () => {
    server = await startTestServer({ agentId: "agent_console_test" });
    // launch() gives every browser a fresh temporary profile (user data dir) and removes it on close.
    browser = await chromium.launch({ executablePath: process.env.CHROMIUM_PATH ?? "/usr/bin/chromium", args: CHROMIUM_ARGS });
    page = await browser.newPage();
    page.on("pageerror", (error) => pageErrors.push(error.message));
    page.on("console", (message) => {
      if (message.type() === "error") pageErrors.push(message.text());
    });
  });
  afterAll(async () => {
    await browser?.close();
    await server?.close();
  });

  it("shows the agent's capabilities from GetCapabilities", async () => {
    const response = await page.goto(`${server.url}/console`);
    expect(response?.status()).toBe(200);
    expect(response?.headers()["content-security-policy"]).toContain("script-src 'self'");
    await page.locator('[data-testid="status"][data-ready="true"]').waitFor({ timeout: 15_000 });

    const declared = server.capabilities.getCapabilities();
    expect(await page.getByTestId("agent-id").textContent()).toBe("agent_console_test");
    expect(await page.getByTestId("agent-id").textContent()).toBe(declared.agentId);
    expect(await page.getByTestId("agent-name").textContent()).toBe(declared.agentName);
    expect(await page.getByTestId("agent-key-id").textContent()).toBe(declared.keyId);
    expect(await page.getByTestId("agent-key-check").textContent()).toContain("✓");
    expect(await page.getByTestId("protocol-version").textContent()).toBe("1.0.0");
    expect(await page.getByTestId("max-file-size").textContent()).toBe("10 MiB");
    expect(await page.getByTestId("max-concurrent-tasks").textContent()).toBe(String(declared.maxConcurrentTasks));
    expect(await page.getByTestId("max-task-duration").textContent()).toBe(`${declared.maxTaskDurationSeconds} s`);
    const types = await Promise.all((await page.getByTestId("task-types").locator("li").all()).map((item) => item.getAttribute("data-task-type")));
    expect(types).toEqual(declared.supportedTaskTypes.map((taskType) => taskType.type));
    expect(await page.getByTestId("task-payload").inputValue()).toContain('"text"');
    expect(await page.getByTestId("requester-id").textContent()).toMatch(/^agent_[0-9a-f]{32}$/);
  });

  it("submits a text_analysis task and shows every event verified and the result", async () => {
    // 12 words in 2 sentences, by the reference handler's rules.
    const text = "The console signs this task in the browser. Every event is verified.";
    await page.getByTestId("task-type").selectOption("text_analysis");
    await page.getByTestId("task-payload").fill(JSON.stringify({ text }));
    await page.getByTestId("submit-task").click();

    const outcome = page.locator('[data-testid="task-outcome"][data-outcome]');
    await outcome.waitFor({ timeout: 20_000 });
    expect(await outcome.getAttribute("data-outcome")).toBe("completed");
    expect(await outcome.getAttribute("data-all-verified")).toBe("true");
    expect(await page.getByTestId("task-state").textContent()).toBe("completed");
    expect(await page.getByTestId("send-reply").textContent()).toBe("p2p:task_confirm ✓");

    const rows = [];
    for (const row of await page.getByTestId("event").all()) {
      rows.push({ sequence: await row.getAttribute("data-sequence"), verified: await row.getAttribute("data-verified"), cells: await row.locator("td").allTextContents() });
    }
    // At least confirm and complete: a progress report that the completion follows within
    // 100 ms is coalesced away by the engine, as it is for this short text.
    expect(rows.length).toBeGreaterThanOrEqual(2);
    expect(rows.map((row) => row.sequence)).toEqual(rows.map((_, index) => String(index + 1)));
    for (const row of rows) {
      expect(row.verified).toBe("true");
      expect(row.cells[3]).toBe("✓");
    }
    expect(rows[0]?.cells[1]).toBe("p2p:task_confirm");
    expect(rows.at(-1)?.cells[1]).toBe("p2p:task_complete");
    expect(rows.at(-1)?.cells[2]).toBe("completed");

    const result = JSON.parse((await page.getByTestId("task-result").textContent()) ?? "") as { words?: number; sentences?: number };
    expect(result.words).toBe(12);
    expect(result.sentences).toBe(2);

    // The agent recorded the task for the console's requester, whose browser-made key id it pinned.
    const taskId = (await page.getByTestId("task-id").textContent()) ?? "";
    const requesterId = (await page.getByTestId("requester-id").textContent()) ?? "";
    const record = await server.agent.reader.getTask(taskId, requesterId);
    expect(record.state).toBe(TaskState.COMPLETED);
    expect(record.requester.keyId).toBe(await page.getByTestId("requester-key-id").textContent());
    expect(pageErrors).toEqual([]);
  });
});
