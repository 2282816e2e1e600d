// The console in Chromium as an operator uses it, against a real server
// that hosts a registry and names an operator key (--operator). A new
// browser identity sees none of another requester's tasks; after importing
// the operator's agent.key it lists every task (paged, filtered, updated
// live as the requester answers), opens them read-only with their signed
// history verified, and steers none. The registry view shows the agents
// with their leases and compliance, the catalogue with every version, and
// the audit trail. Screenshots go to test-artifacts/console/.
import { create } from "@bufbuild/protobuf";
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { RiskLevel } from "../../gen/synapse/v1/capabilities_pb.js";
import { CapabilityStatus, CapabilityType, GovernedCapabilitySchema } from "../../gen/synapse/v1/registry_pb.js";
import type { AgentIdentity } from "../../src/agent/identity.js";
import type { SynapseClient } from "../../src/client/requester.js";
import { keyToPem } from "../../src/crypto/keys.js";
import { silentLogger } from "../../src/log.js";
import { joinRegistry, type Membership } from "../../src/registry/join.js";
import { connectClient, requesterIdentity, startTestServer, type TestServer } from "../helpers/server.js";
import { launchChromium, openConsole, screenshot, waitReady, type ConsolePage } from "./harness.js";

const TIMEOUT = 20_000;

describe("the console in Chromium, as an operator, with a registry", () => {
  let server: TestServer;
  let member: TestServer;
  let membership: Membership;
  let operator: AgentIdentity;
  let requester: SynapseClient;
  let browser: Browser;
  let session: ConsolePage;
  let page: Page;
  const tasks = { waiting: "", done: "" };

  beforeAll(async () => {
    operator = await requesterIdentity();
    server = await startTestServer({ agentId: "agent_console_registry", registry: {}, operators: [operator.key.keyId] });
    member = await startTestServer();
    membership = await joinRegistry({ registryUrl: server.url, identity: member.agent.identity, provider: member.agent.provider, endpointUrl: member.url, logger: silentLogger });
    // A static capability in two versions: the second supersedes the first, and the audit trail says so.
    const capability = (version: string) =>
      create(GovernedCapabilitySchema, {
        code: "invoice_duplicate_rule",
        name: "Duplicate invoice rule",
        capabilityType: CapabilityType.RULE,
        domain: "finance",
        inputSchema: '{"type":"object"}',
        outputSchema: "{}",
        riskLevel: RiskLevel.MEDIUM,
        owner: "finance risk team",
        version,
        status: CapabilityStatus.ACTIVE,
      });
    await server.registry!.catalogue.register(capability("v1"), "alice");
    await server.registry!.catalogue.register(capability("v2"), "bob");

    requester = await connectClient(server);
    tasks.done = (await requester.submit("text_analysis", { text: "Operators read. Requesters steer." }, { waitMs: 10_000 })).taskId;
    tasks.waiting = (await requester.submit("summarization", { text: "One. Two. Three." })).taskId;
    // Enough finished tasks for a second page (the list shows 20 a page).
    for (let i = 0; i < 20; i++) await requester.submit("text_analysis", { text: `Task number ${i}.` }, { waitMs: 10_000 });

    browser = await launchChromium();
    session = await openConsole(browser, server.url);
    page = session.page;
  });
  afterAll(async () => {
    await browser?.close();
    await membership?.leave();
    await member?.close();
    await server?.close();
  });

  const rows = () => page.getByTestId("task-row");

  it("shows a new identity none of another requester's tasks", async () => {
    await page.locator('nav a[data-route="tasks"]').click();
    await page.getByTestId("task-rows").getByText("No tasks yet").waitFor({ timeout: TIMEOUT });
    expect(await rows().count()).toBe(0);
    // Opening one by its id reads as a task that does not exist.
    await page.goto(`${server.url}/console#/tasks/${tasks.waiting}`);
    await page.getByTestId("task-missing").waitFor({ timeout: TIMEOUT });
    expect(await page.getByTestId("task-missing").textContent()).toMatch(/^(not_found|task_not_found|NotFound)/i);
  });

  it("imports the operator's agent.key and then lists every task, paged and filtered", async () => {
    await page.locator('nav a[data-route="identity"]').click();
    await page.getByTestId("import-key").fill(keyToPem(operator.key));
    await Promise.all([page.waitForEvent("load"), page.getByTestId("import-submit").click()]);
    await waitReady(page);
    expect(await page.getByTestId("whoami").textContent()).toBe(operator.agentId);
    await page.locator('nav a[data-route="identity"]').click();
    expect(await page.getByTestId("requester-key-id").textContent()).toBe(operator.key.keyId);
    expect(await page.getByTestId("key-source").textContent()).toBe("imported");
    expect(await page.getByTestId("key-backend").getAttribute("data-backend")).toBe("webcrypto");

    await page.locator('nav a[data-route="tasks"]').click();
    await expect.poll(() => rows().count(), { timeout: TIMEOUT }).toBe(20);
    // The note is drawn with the rows; wait for it as for them rather than reading it once.
    await page.getByTestId("operator-note").waitFor({ state: "visible", timeout: TIMEOUT });
    expect(await page.getByTestId("page-label").textContent()).toBe("page 1");
    await page.getByTestId("page-older").click();
    await expect.poll(() => page.getByTestId("page-label").textContent(), { timeout: TIMEOUT }).toBe("page 2");
    await expect.poll(() => rows().count(), { timeout: TIMEOUT }).toBe(2);
    expect(await page.getByTestId("page-older").isDisabled()).toBe(true);
    // The oldest two: the waiting summarization and the first text_analysis.
    expect(await rows().evaluateAll((all) => all.map((row) => row.getAttribute("data-task-id")))).toEqual([tasks.waiting, tasks.done]);
    await page.getByTestId("page-newer").click();
    await expect.poll(() => page.getByTestId("page-label").textContent(), { timeout: TIMEOUT }).toBe("page 1");

    await page.getByTestId("filter-type").selectOption("summarization");
    await expect.poll(() => rows().evaluateAll((all) => all.map((row) => row.getAttribute("data-task-id"))), { timeout: TIMEOUT }).toEqual([tasks.waiting]);
    expect(await rows().first().getAttribute("data-state")).toBe("info_needed");
    await screenshot(page, "08-operator-list");
  });

  it("opens another requester's task read-only, verified, and follows it live as the requester answers", async () => {
    await rows().first().locator("a").click();
    const detail = page.getByTestId("task-detail");
    await detail.locator('[data-testid="state-graph"][data-current="info_needed"]').waitFor({ timeout: TIMEOUT });
    expect(await detail.getByTestId("task-requester").textContent()).toContain(requester.agentId);
    expect(await detail.getByTestId("read-only").textContent()).toContain("only its requester");
    expect(await detail.getByTestId("info-form").count()).toBe(0);
    expect(await detail.getByTestId("cancel-form").count()).toBe(0);
    // The events are addressed to the requester, and verify as such.
    expect(await detail.getByTestId("log-verdict").getAttribute("data-all-verified")).toBe("true");
    await page.locator('nav a[data-route="inbox"]').click();
    const item = page.locator(`[data-testid="inbox-item"][data-task-id="${tasks.waiting}"]`);
    await item.waitFor({ timeout: TIMEOUT });
    expect(await item.getByTestId("read-only").count()).toBe(1);
    // Not the operator's to answer: no count on the Inbox link.
    expect(await page.getByTestId("inbox-count").isHidden()).toBe(true);
    await screenshot(page, "09-operator-inbox");

    await page.goto(`${server.url}/console#/tasks/${tasks.waiting}`);
    await detail.locator('[data-testid="state-graph"][data-current="info_needed"]').waitFor({ timeout: TIMEOUT });
    await requester.provideInfo(tasks.waiting, { max_sentences: 2 });
    await detail.locator('[data-testid="state-graph"][data-current="completed"]').waitFor({ timeout: TIMEOUT });
    expect(await detail.getByTestId("log-verdict").getAttribute("data-all-verified")).toBe("true");
    const result = JSON.parse((await detail.getByTestId("task-result").textContent()) ?? "") as { sentences?: string[] };
    expect(result.sentences).toEqual(["One.", "Two."]);
    await screenshot(page, "10-operator-task");
  });

  it("shows the registry: agents with lease health and compliance, the catalogue's versions, the audit trail", async () => {
    await page.locator('nav a[data-route="agent"]').click();
    expect(await page.getByTestId("agent-registry").textContent()).toBe("hosted here");
    await page.getByTestId("nav-registry").click();
    const agent = page.locator(`[data-testid="registry-agent"][data-agent-id="${member.agent.identity.agentId}"]`);
    await agent.waitFor({ timeout: TIMEOUT });
    expect(await agent.getAttribute("data-health")).toBe("healthy");
    expect(await agent.textContent()).toContain("left");
    expect(await agent.getByTestId("compliance").getAttribute("data-level")).not.toBe("");
    expect(await agent.textContent()).toContain("text_analysis");

    const versions = page.locator('[data-testid="registry-capability"][data-capability-id^="cap_invoice_duplicate_rule_"]');
    expect(await versions.evaluateAll((all) => all.map((row) => `${row.getAttribute("data-capability-id")} ${row.getAttribute("data-status")}`)).then((list) => list.sort())).toEqual([
      "cap_invoice_duplicate_rule_v1 inactive",
      "cap_invoice_duplicate_rule_v2 active",
    ]);
    await page.getByRole("button", { name: "Audit trail of cap_invoice_duplicate_rule_v1" }).click();
    await expect.poll(() => page.getByTestId("audit-title").textContent(), { timeout: TIMEOUT }).toBe("Audit trail of cap_invoice_duplicate_rule_v1");
    const audit = page.getByTestId("audit-event");
    const kinds = await audit.evaluateAll((all) => all.map((row) => row.getAttribute("data-kind")));
    expect(kinds.length).toBeGreaterThanOrEqual(2);
    expect(kinds.at(-1)).toBe("registered");
    // Newest first: v2 superseded it, by the registry's own hand.
    expect(kinds[0]).toBe("status_changed");
    expect(await audit.first().textContent()).toContain("active → inactive");
    expect(await audit.first().textContent()).toContain("superseded by v2");
    expect(await audit.last().textContent()).toContain("alice");
    await screenshot(page, "11-registry");
  });

  it("logged no errors in the browser", () => {
    expect(session.errors).toEqual([]);
  });
});
