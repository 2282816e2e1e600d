// `synapse serve` as a child process on 127.0.0.1, with a fresh data dir, so
// a benchmark measures the server as an operator runs it: its own process,
// its own RSS and CPU time, nothing shared with the load generator.
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

/** The built CLI, next to this file once compiled (dist/bench -> dist/src/cli). */
const CLI = fileURLToPath(new URL("../src/cli/main.js", import.meta.url));
const START_TIMEOUT_MS = 30_000;
const STOP_TIMEOUT_MS = 15_000;

export interface ChildServerOptions {
  /** A short name for progress lines. */
  label: string;
  /** Extra `synapse serve` flags (--store, --fsync, ...). */
  args: readonly string[];
  /** Lines the server writes to stderr (it runs with --log-level warn). */
  onStderr?: (line: string) => void;
  /**
   * Run node with --trace-gc (it only reports, it forces nothing) to know the
   * V8 heap left after each full GC; line-buffered through stdbuf when
   * available, so the last report is not held in a pipe buffer.
   */
  traceGc?: boolean;
  /** Flags for node itself, before the CLI (--max-semi-space-size=8, say). */
  nodeFlags?: readonly string[];
  /** The built CLI to run (another build's, to compare); default this build's. */
  cli?: string;
}

export interface HeapReport {
  /** V8 heap in use right after the last full (mark-compact) GC, bytes. */
  afterFullGcBytes: number;
  /** Full GCs so far. */
  fullGcs: number;
}

export interface ProcessSample {
  /** Resident set size (VmRSS), bytes. */
  rssBytes: number;
  /** Peak resident set size so far (VmHWM), bytes. */
  peakRssBytes: number;
  /** User plus system CPU time so far, milliseconds. */
  cpuMs: number;
}

export interface ChildServer {
  label: string;
  pid: number;
  url: string;
  dataDir: string;
  /** Reads /proc/PID/status and /proc/PID/stat (Linux). */
  sample(): ProcessSample;
  /** The last full GC's report, with traceGc; null before the first one. */
  heap(): HeapReport | null;
  /** Whether the process has exited (and how), for error messages. */
  exited(): string | undefined;
  /** SIGTERM, then SIGKILL if it does not stop; removes the data dir. */
  stop(): Promise<void>;
}

// Children still running when the bench exits (an error, Ctrl-C) are killed.
const live = new Set<{ child: ChildProcess; dataDir: string }>();
process.on("exit", () => {
  for (const { child, dataDir } of live) {
    child.kill("SIGKILL");
    rmSync(dataDir, { recursive: true, force: true });
  }
});

const CLOCK_TICKS_PER_SECOND = 100; // USER_HZ on Linux
const STDBUF = "/usr/bin/stdbuf";
/** A --trace-gc line of a full GC: "Mark-Compact 180.3 (200.1) -> 150.2 (201.0) MB". */
const FULL_GC = /Mark-Compact(?: \(reduce\))? [\d.]+ \([\d.]+\) -> ([\d.]+) \([\d.]+\) MB/;

/** RSS, peak RSS and CPU time of process `pid` (Linux /proc). */
export function readSample(pid: number): ProcessSample {
  const status = readFileSync(`/proc/${pid}/status`, "utf8");
  const kb = (field: string) => {
    const match = new RegExp(`^${field}:\\s+(\\d+) kB`, "m").exec(status);
    if (match === null) throw new Error(`no ${field} in /proc/${pid}/status`);
    return Number(match[1]) * 1024;
  };
  // Fields after the command name (which may hold spaces) in /proc/PID/stat: utime is the 14th field, stime the 15th.
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  const ticks = Number(fields[11]) + Number(fields[12]);
  return { rssBytes: kb("VmRSS"), peakRssBytes: kb("VmHWM"), cpuMs: (ticks * 1000) / CLOCK_TICKS_PER_SECOND };
}

export async function startChildServer(options: ChildServerOptions): Promise<ChildServer> {
  const dataDir = mkdtempSync(join(tmpdir(), `synapse-bench-${options.label.replace(/[^a-z0-9]+/gi, "-")}-`));
  const serve = [...(options.nodeFlags ?? []), options.cli ?? CLI, "serve", "--host", "127.0.0.1", "--port", "0", "--data-dir", dataDir, "--log-level", "warn", ...options.args];
  // stdbuf execs node in the same process, so the pid is the server's.
  const [file, args] = !options.traceGc
    ? [process.execPath, serve]
    : existsSync(STDBUF)
      ? [STDBUF, ["-oL", process.execPath, "--trace-gc", ...serve]]
      : [process.execPath, ["--trace-gc", ...serve]];
  const child = spawn(file, args, { stdio: ["ignore", "pipe", "pipe"] });
  const entry = { child, dataDir };
  live.add(entry);
  let exit: string | undefined;
  const exitedPromise = new Promise<void>((resolve) => {
    child.once("exit", (code, signal) => {
      exit = signal === null ? `exited with code ${code}` : `killed by ${signal}`;
      resolve();
    });
  });
  const stderrTail: string[] = [];
  let stderrBuffer = "";
  child.stderr?.setEncoding("utf8").on("data", (chunk: string) => {
    stderrBuffer += chunk;
    const lines = stderrBuffer.split("\n");
    stderrBuffer = lines.pop() ?? "";
    for (const line of lines) {
      if (line === "") continue;
      stderrTail.push(line);
      if (stderrTail.length > 20) stderrTail.shift();
      options.onStderr?.(line);
    }
  });
  const failure = (what: string) => new Error(`${options.label} server ${what}${stderrTail.length ? `:\n${stderrTail.join("\n")}` : ""}`);

  let heap: HeapReport | null = null;
  let stdoutBuffer = "";
  const stdoutLines: ((line: string) => void)[] = [
    (line) => {
      const gc = FULL_GC.exec(line);
      if (gc !== null) heap = { afterFullGcBytes: Number(gc[1]) * 2 ** 20, fullGcs: (heap?.fullGcs ?? 0) + 1 };
    },
  ];
  child.stdout?.setEncoding("utf8").on("data", (chunk: string) => {
    stdoutBuffer += chunk;
    const lines = stdoutBuffer.split("\n");
    stdoutBuffer = lines.pop() ?? "";
    for (const line of lines) for (const listener of stdoutLines) listener(line);
  });

  let url: string;
  try {
    url = await new Promise<string>((resolve, reject) => {
      const timer = setTimeout(() => reject(failure(`did not print its URL within ${START_TIMEOUT_MS / 1000} s`)), START_TIMEOUT_MS);
      stdoutLines.push((line) => {
        const match = / listening on (\S+)/.exec(line);
        if (match?.[1] !== undefined) {
          clearTimeout(timer);
          resolve(match[1]);
        }
      });
      void exitedPromise.then(() => {
        clearTimeout(timer);
        reject(failure(exit ?? "exited"));
      });
    });
  } catch (error) {
    child.kill("SIGKILL");
    live.delete(entry);
    rmSync(dataDir, { recursive: true, force: true });
    throw error;
  }

  const pid = child.pid;
  if (pid === undefined) throw failure("has no pid");
  return {
    label: options.label,
    pid,
    url,
    dataDir,
    sample: () => {
      if (exit !== undefined) throw failure(exit);
      return readSample(pid);
    },
    heap: () => heap,
    exited: () => exit,
    async stop() {
      if (exit === undefined) {
        child.kill("SIGTERM");
        const timer = setTimeout(() => child.kill("SIGKILL"), STOP_TIMEOUT_MS);
        await exitedPromise;
        clearTimeout(timer);
      }
      live.delete(entry);
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}
