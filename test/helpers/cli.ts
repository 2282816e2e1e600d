// Runs the built `synapse` command as a user would.
import { spawn, type ChildProcess } from "node:child_process";
import { fileURLToPath } from "node:url";

export const CLI = fileURLToPath(new URL("../../dist/src/cli/main.js", import.meta.url));

export interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

export function runCli(args: string[], options: { input?: string; env?: NodeJS.ProcessEnv; cwd?: string } = {}): Promise<CliResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [CLI, ...args], { env: { ...process.env, ...options.env }, cwd: options.cwd });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
    child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
    child.on("error", reject);
    child.on("close", (code) => resolve({ code, stdout, stderr }));
    child.stdin.end(options.input ?? "");
  });
}

export interface ServeProcess {
  child: ChildProcess;
  url: string;
  /** The agent id it serves as. */
  agentId: string;
  stdout: () => string;
  stderr: () => string;
  /** Resolves with the exit code once it has exited (by itself or stopped). */
  exited: Promise<number | null>;
  /** Sends a signal and resolves with the exit code. */
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

/** Starts `synapse serve` on an ephemeral port and waits for its URL; `onStderr` hears its log lines meanwhile. */
export function startServe(args: string[], env: NodeJS.ProcessEnv = {}, onStderr?: (text: string) => void, options: { cwd?: string } = {}): Promise<ServeProcess> {
  return new Promise((resolve, reject) => {
    const port = env.PORT === undefined ? ["--port", "0"] : [];
    const child = spawn(process.execPath, [CLI, "serve", ...port, ...args], { env: { ...process.env, ...env }, cwd: options.cwd });
    let stdout = "";
    let stderr = "";
    const exited = new Promise<number | null>((done) => child.once("exit", (code) => done(code)));
    child.stderr.on("data", (d: Buffer) => {
      stderr += d.toString();
      onStderr?.(stderr);
    });
    child.stdout.on("data", (d: Buffer) => {
      stdout += d.toString();
      const match = /synapse agent (\S+) listening on (\S+)/.exec(stdout);
      if (match) {
        resolve({
          child,
          url: match[2]!,
          agentId: match[1]!,
          stdout: () => stdout,
          stderr: () => stderr,
          exited,
          stop: (signal = "SIGTERM") => {
            child.kill(signal);
            return exited;
          },
        });
      }
    });
    child.once("exit", (code) => reject(new Error(`serve exited with ${code}: ${stderr}`)));
  });
}

/** The CLI's --json output names its fields as proto JSON does (camelCase); user data inside keeps its own names. */
export function expectProtoJsonNames(value: unknown, path = "output"): void {
  if (value === null || typeof value !== "object" || Array.isArray(value)) return;
  for (const key of Object.keys(value)) {
    if (/[_-]/.test(key)) throw new Error(`${path}.${key} is not a proto JSON (camelCase) name`);
  }
}
