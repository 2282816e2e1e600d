// Backup and restore as an operator runs them: `synapse backup` of a serving
// agent (the server takes the copy through its control socket) and of a
// stopped one, `synapse restore` into a fresh data dir, and the restored
// agent serving every task the backup held with its signed event log intact.
import { appendFile, mkdir, readFile, stat, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runCli, startServe, type ServeProcess } from "./helpers/cli.js";
import { tempDir } from "./helpers/server.js";

const json = (stdout: string) => JSON.parse(stdout) as Record<string, unknown>;

describe("synapse backup and restore", () => {
  let home: string;
  let dataDir: string;
  let server: ServeProcess | undefined;
  const submitted: string[] = [];

  const cli = (args: string[]) => runCli([...args, "--home", home]);

  beforeAll(async () => {
    home = await tempDir("synapse-backup-home-");
    dataDir = await tempDir("synapse-backup-data-");
    server = await startServe(["--data-dir", dataDir]);
    for (let i = 0; i < 4; i++) {
      const taskId = `backup-done-${i}`;
      const done = await cli(["submit", server.url, "--task-id", taskId, "--type", "text_analysis", "--payload", JSON.stringify({ text: `Task ${i}. Kept.` }), "--wait"]);
      expect(done.code, done.stderr).toBe(0);
      submitted.push(taskId);
    }
    // One still waits for information when the copy is taken.
    const waiting = await cli(["submit", server.url, "--task-id", "backup-waiting", "--type", "summarization", "--payload", JSON.stringify({ text: "One. Two. Three." }), "--wait"]);
    expect(waiting.code, waiting.stderr).toBe(3);
    submitted.push("backup-waiting");
  }, 120_000);

  afterAll(async () => {
    await server?.stop();
  });

  it("copies a serving agent without stopping it, and the copy restores into a new data dir that serves every task", async () => {
    const backupDir = join(await tempDir("synapse-backup-out-"), "copy");
    const taken = await runCli(["backup", backupDir, "--data-dir", dataDir, "--json"]);
    expect(taken.code, taken.stderr).toBe(0);
    const manifest = json(taken.stdout);
    expect(manifest).toMatchObject({ online: true, agentId: server!.agentId, store: "sqlite", storeCopied: true });
    expect((manifest.files as Array<{ name: string }>).map((f) => f.name).sort()).toEqual(["agent.key", "encryption.key", "identity.json", "synapse.db"]);
    expect((await stat(join(backupDir, "agent.key"))).mode & 0o777).toBe(0o600);
    expect((await stat(join(backupDir, "encryption.key"))).mode & 0o777).toBe(0o600);

    // The server kept serving during and after the copy; a task taken after it is not in the backup.
    const after = await cli(["submit", server!.url, "--task-id", "after-backup", "--type", "text_analysis", "--payload", '{"text":"Later."}', "--wait"]);
    expect(after.code, after.stderr).toBe(0);

    const restoredDir = join(await tempDir("synapse-restored-"), "data");
    const restored = await runCli(["restore", backupDir, "--data-dir", restoredDir, "--json"]);
    expect(restored.code, restored.stderr).toBe(0);
    expect(json(restored.stdout)).toMatchObject({ agentId: server!.agentId, tasks: submitted.length });

    const second = await startServe(["--data-dir", restoredDir]);
    try {
      expect(second.agentId).toBe(server!.agentId);
      const listed = await cli(["tasks", second.url, "--json"]);
      expect(listed.code, listed.stderr).toBe(0);
      const ids = (json(listed.stdout).tasks as Array<{ taskId: string }>).map((t) => t.taskId).sort();
      expect(ids).toEqual([...submitted].sort());
      for (const taskId of submitted.filter((id) => id !== "backup-waiting")) {
        // watch verifies every event's signature against the agent's key, which the restored agent still holds, until the task's end.
        const watched = await cli(["watch", second.url, taskId, "--from", "1", "--json"]);
        expect(watched.code, `${taskId}: ${watched.stderr}`).toBe(0);
        const events = watched.stdout.trim().split("\n");
        expect(events.length).toBeGreaterThanOrEqual(2);
        expect(events.at(-1)).toMatch(/TASK_COMPLETE|task_complete/);
      }
      const waiting = await cli(["status", second.url, "backup-waiting", "--json"]);
      expect(waiting.code, waiting.stderr).toBe(3);
      // The waiting task goes on from where the backup left it.
      const answered = await cli(["provide-info", second.url, "backup-waiting", "--set", "max_sentences=1", "--wait"]);
      expect(answered.code, answered.stderr).toBe(0);
    } finally {
      await second.stop();
    }
  }, 120_000);

  it("refuses to restore over an existing agent, a damaged backup and a backup into a non-empty directory", async () => {
    const backupDir = join(await tempDir("synapse-backup-out-"), "copy");
    expect((await runCli(["backup", backupDir, "--data-dir", dataDir])).code).toBe(0);

    const busy = await runCli(["restore", backupDir, "--data-dir", dataDir]);
    expect(busy.code).toBe(1);
    expect(busy.stderr).toMatch(/exists: restore into a new data dir/);

    const occupied = await tempDir("synapse-backup-occupied-");
    await writeFile(join(occupied, "something"), "x");
    const notEmpty = await runCli(["backup", occupied, "--data-dir", dataDir]);
    expect(notEmpty.code).toBe(1);
    expect(notEmpty.stderr).toMatch(/is not empty/);

    await appendFile(join(backupDir, "synapse.db"), Buffer.from([0]));
    const target = join(await tempDir("synapse-restored-"), "data");
    const damaged = await runCli(["restore", backupDir, "--data-dir", target]);
    expect(damaged.code).toBe(1);
    expect(damaged.stderr).toMatch(/differs from the manifest/);
    await expect(stat(join(target, "agent.key"))).rejects.toThrow();

    expect((await runCli(["restore", backupDir])).code).toBe(2);
    expect((await runCli(["backup"])).code).toBe(2);
  }, 60_000);

  it("copies a stopped agent directly, and refuses a dir that is no agent's", async () => {
    const stoppedDir = await tempDir("synapse-backup-stopped-");
    const once = await startServe(["--data-dir", stoppedDir]);
    const done = await cli(["submit", once.url, "--task-id", "offline-1", "--type", "text_analysis", "--payload", '{"text":"Offline."}', "--wait"]);
    expect(done.code, done.stderr).toBe(0);
    expect(await once.stop()).toBe(0);
    // A rotated encryption key: the retired one is still opened for its overlap, so it travels too.
    const rotated = await runCli(["keygen", "--home", stoppedDir, "--rotate-encryption", "--json"]);
    expect(rotated.code, rotated.stderr).toBe(0);
    const retired = (json(rotated.stdout).retiredEncryptionKeys as Array<{ keyId: string }>).map((key) => `encryption-retired/${key.keyId}.key`);
    expect(retired).toHaveLength(1);

    const backupDir = join(await tempDir("synapse-backup-out-"), "copy");
    const taken = await runCli(["backup", backupDir, "--data-dir", stoppedDir, "--json"]);
    expect(taken.code, taken.stderr).toBe(0);
    expect(json(taken.stdout)).toMatchObject({ online: false, agentId: once.agentId, storeCopied: true });
    const restoredDir = join(await tempDir("synapse-restored-"), "data");
    const restored = await runCli(["restore", backupDir, "--data-dir", restoredDir, "--json"]);
    expect(json(restored.stdout)).toMatchObject({ tasks: 1 });
    expect(await readFile(join(restoredDir, "agent.key"), "utf8")).toBe(await readFile(join(stoppedDir, "agent.key"), "utf8"));
    for (const name of ["encryption.key", ...retired]) {
      expect(await readFile(join(restoredDir, name), "utf8"), name).toBe(await readFile(join(stoppedDir, name), "utf8"));
      expect((await stat(join(restoredDir, name))).mode & 0o777, name).toBe(0o600);
    }

    const empty = await tempDir("synapse-backup-empty-");
    await mkdir(join(empty, "nothing"));
    const refused = await runCli(["backup", join(empty, "out"), "--data-dir", join(empty, "nothing")]);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(/not an agent's data dir/);
  }, 60_000);
});
