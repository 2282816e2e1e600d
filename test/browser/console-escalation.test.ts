// An escalated decision in two consoles (Chromium, against a server on
// 127.0.0.1 whose text_analysis declares an escalation policy: level 1 the
// requester for a moment, level 2 a named contact). The requester's console
// sees the decision climb to level 2 and its form give way to a note naming
// the contact; the contact's console (its key imported) opens the task by
// id, decides it, and both see it complete with every event verified,
// though the events are addressed to the requester.
import { create } from "@bufbuild/protobuf";
import { durationFromMs } from "@bufbuild/protobuf/wkt";
import type { Browser } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { EscalationPolicySchema, SupportedTaskTypeSchema } from "../../gen/synapse/v1/capabilities_pb.js";
import { REFERENCE_TASK_TYPES } from "../../src/agent/reference/task-types.js";
import type { AgentIdentity } from "../../src/agent/identity.js";
import { keyToPem } from "../../src/crypto/keys.js";
import { requesterIdentity, startTestServer, type TestServer } from "../helpers/server.js";
import { launchChromium, openConsole, screenshot, waitReady, type ConsolePage } from "./harness.js";

const TIMEOUT = 20_000;

describe("an escalated decision in the console", () => {
  let server: TestServer;
  let contact: AgentIdentity;
  let browser: Browser;
  let requester: ConsolePage;
  let manager: ConsolePage;
  let taskId = "";

  beforeAll(async () => {
    contact = await requesterIdentity();
    const escalation = create(EscalationPolicySchema, {
      levels: [
        // Short: nobody answers at level 1 here.
        { requester: true, timeout: durationFromMs(1_000) },
        { agentIds: [contact.agentId], timeout: durationFromMs(10 * 60 * 1000) },
      ],
    });
    const taskTypes = REFERENCE_TASK_TYPES.map((taskType) => (taskType.type === "text_analysis" ? create(SupportedTaskTypeSchema, { ...taskType, escalation }) : taskType));
    server = await startTestServer({ capabilities: { supportedTaskTypes: taskTypes } });
    browser = await launchChromium();
    requester = await openConsole(browser, server.url);
  });
  afterAll(async () => {
    await browser?.close();
    await server?.close();
  });

  it("shows the requester the decision escalated past it, naming the contact", async () => {
    const { page } = requester;
    await page.locator('nav a[data-route="new"]').click();
    await page.getByTestId("task-type").selectOption("text_analysis");
    await page.getByTestId("task-payload").fill(JSON.stringify({ text: "Escalate me. Then decide." }));
    await page.getByTestId("require-approval").check();
    await page.getByTestId("submit-task").click();
    const status = page.locator('[data-testid="submit-status"][data-task-id]');
    await status.waitFor({ state: "attached", timeout: TIMEOUT });
    taskId = (await status.getAttribute("data-task-id")) ?? "";

    const question = page.getByTestId("task-detail").getByTestId("question");
    await question.locator('[data-testid="escalation"][data-level="2"]').waitFor({ timeout: TIMEOUT });
    expect(await question.getByTestId("deciders").textContent()).toContain(contact.agentId);
    // The level is explained from the task type's policy: the last of two, after which the task fails.
    expect(await question.getByTestId("escalation-help").textContent()).toBe(
      "This decision is at escalation level 2 of 2 (manager): the level says who may decide it. If nobody decides by the deadline, the task fails.",
    );
    expect(await question.getByTestId("read-only").textContent()).toContain(`only ${contact.agentId} may decide`);
    expect(await question.getByTestId("decision-form").count()).toBe(0);
    // Still the requester's task: it may cancel it, but has no question of its own to answer.
    expect(await page.getByTestId("task-detail").getByTestId("cancel-form").count()).toBe(1);
    expect(await page.getByTestId("inbox-count").isHidden()).toBe(true);
    await screenshot(page, "12-escalated-requester");
  });

  it("lets the contact open the task by id and decide it", async () => {
    manager = await openConsole(browser, server.url, "#/identity");
    const { page } = manager;
    await page.getByTestId("import-key").fill(keyToPem(contact.key));
    await Promise.all([page.waitForEvent("load"), page.getByTestId("import-submit").click()]);
    await waitReady(page);
    expect(await page.getByTestId("whoami").textContent()).toBe(contact.agentId);

    await page.locator('nav a[data-route="inbox"]').click();
    await page.getByTestId("open-task-id").fill(taskId);
    await page.getByTestId("open-task-submit").click();
    const detail = page.getByTestId("task-detail");
    const question = detail.getByTestId("question");
    await question.getByTestId("decision-form").waitFor({ timeout: TIMEOUT });
    expect(await question.getByTestId("escalation").getAttribute("data-level")).toBe("2");
    expect(await question.getByTestId("deciders").textContent()).toBe(" · decided by you");
    // The requester's messages are not the contact's to send.
    expect(await question.getByTestId("take-up").count()).toBe(0);
    expect(await detail.getByTestId("cancel-form").count()).toBe(0);
    await screenshot(page, "13-escalated-contact");

    await question.locator('input[name="decided-by"]').fill("The manager");
    await question.getByTestId("approve").click();
    await detail.locator('[data-testid="state-graph"][data-current="completed"]').waitFor({ timeout: TIMEOUT });
    expect(await detail.getByTestId("log-verdict").getAttribute("data-all-verified")).toBe("true");
  });

  it("shows the requester the task completed", async () => {
    const detail = requester.page.getByTestId("task-detail");
    await detail.locator('[data-testid="state-graph"][data-current="completed"]').waitFor({ timeout: TIMEOUT });
    expect(await detail.getByTestId("log-verdict").getAttribute("data-all-verified")).toBe("true");
    const path = await detail.getByTestId("state-path").locator("li[data-state]").evaluateAll((items) => items.map((item) => item.getAttribute("data-state")));
    expect(path).toEqual(expect.arrayContaining(["need_human", "human_approved", "completed"]));
  });

  it("logged no errors in either browser", () => {
    expect(requester.errors).toEqual([]);
    expect(manager.errors).toEqual([]);
  });
});
