// The documented ways to run the server pass a SIGTERM on to it: `npm start`
// (its script execs the server, so npm's signal reaches it) and a wrapper
// that keeps the server as a child of a shell, as `npx synapse serve` does
// (a server started by npm stops once that parent has gone). In each case
// the server shuts down gracefully, its process is gone and its port closed.
import { execFile, spawn, type ChildProcess } from "node:child_process";
import { cp, mkdir, mkdtemp, rm } from "node:fs/promises";
import net from "node:net";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import { CLI } from "./helpers/cli.js";
import { tempDir } from "./helpers/server.js";

const ROOT = fileURLToPath(new URL("..", import.meta.url));
const run = promisify(execFile);

interface Wrapped {
  wrapper: ChildProcess;
  url: string;
  output: () => string;
  exited: Promise<number | null>;
}

/**
 * What `npm start` builds from, copied into test-artifacts/ (it finds the
 * project's node_modules from there): its build then writes the copy's
 * dist/, not the one the other tests are running.
 */
async function projectCopy(): Promise<string> {
  await mkdir(join(ROOT, "test-artifacts"), { recursive: true });
  const copy = await mkdtemp(join(ROOT, "test-artifacts", "npm-start-"));
  for (const path of ["package.json", "tsconfig.json", "tsconfig.build.json", "src", "gen", "bench", "scripts", "test/fixtures"]) {
    await mkdir(join(copy, path, ".."), { recursive: true });
    await cp(join(ROOT, path), join(copy, path), { recursive: true });
  }
  return copy;
}

/** Spawns a wrapper whose output will carry the server's listening line, and waits for that line. */
function startWrapped(command: string, args: string[], env: NodeJS.ProcessEnv, cwd = ROOT): Promise<Wrapped> {
  return new Promise((resolve, reject) => {
    const wrapper = spawn(command, args, { cwd, env: { ...process.env, ...env }, stdio: ["ignore", "pipe", "pipe"] });
    let output = "";
    const exited = new Promise<number | null>((done) => wrapper.once("exit", (code) => done(code)));
    const collect = (d: Buffer) => {
      output += d.toString();
      const match = /listening on (http:\/\/\S+)/.exec(output);
      if (match) resolve({ wrapper, url: match[1]!, output: () => output, exited });
    };
    wrapper.stdout!.on("data", collect);
    wrapper.stderr!.on("data", collect);
    wrapper.once("exit", (code) => reject(new Error(`the wrapper exited with ${code} before the server listened: ${output}`)));
  });
}

/** The pid of the `serve` process among the wrapper's children. */
async function serverPid(wrapperPid: number): Promise<number> {
  const { stdout } = await run("ps", ["-o", "pid=,args=", "--ppid", String(wrapperPid)]);
  const line = stdout.split("\n").find((row) => row.includes("main.js serve"));
  if (line === undefined) throw new Error(`no serve process under ${wrapperPid}: ${stdout}`);
  return Number(line.trim().split(/\s+/)[0]);
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

async function gone(pid: number, withinMs: number): Promise<boolean> {
  const until = Date.now() + withinMs;
  while (alive(pid) && Date.now() < until) await new Promise((done) => setTimeout(done, 50));
  return !alive(pid);
}

/** A server a failed assertion left running is not left behind. */
function stopLeftOver(pid: number): void {
  if (alive(pid)) process.kill(pid, "SIGKILL");
}

function portRefuses(url: string): Promise<boolean> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve) => {
    const socket = net.connect(Number(port), hostname);
    socket.once("connect", () => {
      socket.destroy();
      resolve(false);
    });
    socket.once("error", (error: NodeJS.ErrnoException) => resolve(error.code === "ECONNREFUSED"));
  });
}

describe("SIGTERM to the process that runs the server", () => {
  it("npm start: the signal sent to npm shuts the server down gracefully", async () => {
    const dataDir = await tempDir();
    const project = await projectCopy();
    try {
      // npm start builds first: that takes a while on a busy machine.
      const started = await startWrapped("npm", ["start", "--", "--port", "0", "--data-dir", dataDir, "--log-level", "info"], {}, project);
      const server = await serverPid(started.wrapper.pid!);
      try {
        expect(alive(server)).toBe(true);
        started.wrapper.kill("SIGTERM");
        expect(await gone(server, 15_000)).toBe(true);
        await started.exited;
        expect(await portRefuses(started.url)).toBe(true);
        expect(started.output()).toContain('"signal":"SIGTERM","msg":"signal received"');
        expect(started.output()).toContain('"msg":"stopped"');
      } finally {
        stopLeftOver(server);
      }
    } finally {
      await rm(project, { recursive: true, force: true });
    }
  }, 240_000);

  it("a shell started by npm that keeps the server as its child (as npx does): the server stops once the shell has gone", async () => {
    const dataDir = await tempDir();
    // `; exit $?` keeps the shell from exec-ing the server: it stays the server's parent.
    const script = '"$0" "$@"; exit $?';
    const started = await startWrapped("/bin/sh", ["-c", script, process.execPath, CLI, "serve", "--port", "0", "--data-dir", dataDir], { npm_lifecycle_event: "npx" });
    const server = await serverPid(started.wrapper.pid!);
    try {
      started.wrapper.kill("SIGTERM");
      await started.exited;
      expect(await gone(server, 15_000)).toBe(true);
      expect(await portRefuses(started.url)).toBe(true);
      expect(started.output()).toContain("the npm process that started this server has exited");
      expect(started.output()).toContain('"msg":"stopped"');
    } finally {
      stopLeftOver(server);
    }
  }, 60_000);

  it("a server not started by npm is not tied to its parent", async () => {
    const dataDir = await tempDir();
    const script = '"$0" "$@"; exit $?';
    const env: NodeJS.ProcessEnv = { npm_lifecycle_event: undefined };
    const started = await startWrapped("/bin/sh", ["-c", script, process.execPath, CLI, "serve", "--port", "0", "--data-dir", dataDir], env);
    const server = await serverPid(started.wrapper.pid!);
    started.wrapper.kill("SIGTERM");
    await started.exited;
    try {
      // Well past the parent watch's interval.
      await new Promise((done) => setTimeout(done, 1500));
      expect(alive(server)).toBe(true);
      expect(await portRefuses(started.url)).toBe(false);
    } finally {
      process.kill(server, "SIGTERM");
      expect(await gone(server, 15_000)).toBe(true);
    }
  }, 60_000);
});
