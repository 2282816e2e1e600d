// `synapse serve --heap-growth`: the bound reaches V8 (a process churning
// promoted garbage runs full GCs far more often under it than under V8's own
// sizing), node's own flag wins over it, and a bad value is a usage error.
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import { runCli } from "./helpers/cli.js";
import { tempDir } from "./helpers/server.js";

const run = promisify(execFile);
const HEAP = new URL("../dist/src/cli/heap.js", import.meta.url).href;

/** Full GCs in a child node that applies boundHeapGrowth(percent) and then keeps ~64 MiB live while pushing ~800 MiB through the old space. */
async function fullGcs(percent: number, nodeFlags: string[] = []): Promise<number> {
  const script = `
    const { boundHeapGrowth } = await import(${JSON.stringify(HEAP)});
    const { PerformanceObserver, constants } = await import("node:perf_hooks");
    boundHeapGrowth(${percent});
    let major = 0;
    new PerformanceObserver((list) => { for (const entry of list.getEntries()) if (entry.detail?.kind === constants.NODE_PERFORMANCE_GC_MAJOR) major++; }).observe({ entryTypes: ["gc"] });
    const ring = new Array(16384).fill(null);
    for (let i = 0; i < 200_000; i++) ring[i % ring.length] = { i, payload: new Array(512).fill(i) };
    await new Promise((done) => setTimeout(done, 50));
    console.log(major);
  `;
  const { stdout } = await run(process.execPath, [...nodeFlags, "--input-type=module", "-e", script], { timeout: 60_000 });
  return Number(stdout.trim());
}

describe("--heap-growth", () => {
  it("makes V8 collect the old space far sooner than its own sizing does", async () => {
    const bounded = await fullGcs(10);
    const unbounded = await fullGcs(0);
    expect(bounded).toBeGreaterThanOrEqual(3 * Math.max(1, unbounded));
  }, 120_000);

  it("leaves node's own --heap-growing-percent in charge", async () => {
    const fromNode = await fullGcs(10, ["--heap-growing-percent=400"]);
    const bounded = await fullGcs(10);
    expect(bounded).toBeGreaterThanOrEqual(3 * Math.max(1, fromNode));
  }, 120_000);

  it("refuses a value that is not a percentage", async () => {
    const result = await runCli(["serve", "--port", "0", "--data-dir", await tempDir(), "--heap-growth", "ten"]);
    expect(result.code).toBe(2);
    expect(result.stderr).toContain("--heap-growth must be a non-negative integer");
  });
});
