// The objects a task makes on the hot path keep one shared hidden class and
// fast properties. Each of these once cost a dictionary-mode object or a new
// hidden class per task, which V8 allocates in the old generation: garbage
// for full GCs, the largest single cost of a signed task after Ed25519 and
// SQLite. V8 answers for itself here (natives syntax, in a child process);
// the fixture runs 400 tasks through a real server, since some shapes only
// split once V8 has optimized the code that makes them.
import { execFile } from "node:child_process";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";

const FIXTURE = fileURLToPath(new URL("./fixtures/hidden-classes.mjs", import.meta.url));
const shared = { sameHiddenClass: true, fastProperties: true };

describe("hidden classes of a task's objects", () => {
  it("are shared between tasks, with fast properties", async () => {
    const { stdout } = await promisify(execFile)(process.execPath, ["--allow-natives-syntax", FIXTURE], { timeout: 60_000 });
    const report = JSON.parse(stdout.trim().split("\n").at(-1)!);
    expect(report.finished).toBe(400);
    // The probe tells a dictionary-mode object when it sees one.
    expect(report.control.fastProperties).toBe(false);
    expect(report.handlerContext).toEqual(shared);
    expect(report.completionPatch).toEqual(shared);
    expect(report.taskResult).toEqual(shared);
    expect(report.taskRow).toEqual(shared);
  }, 90_000);
});
