// The A2A-js peer (a2a-agent.ts) as a child process on 127.0.0.1, on free
// ports it picks itself, sampled through /proc like `synapse serve`.
import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { readSample, type ProcessSample } from "../child-server.js";

const AGENT = fileURLToPath(new URL("./a2a-agent.js", import.meta.url));
const START_TIMEOUT_MS = 30_000;
const STOP_TIMEOUT_MS = 10_000;

export interface A2AChild {
  pid: number;
  grpcUrl: string;
  jsonRpcUrl: string;
  sample(): ProcessSample;
  stop(): Promise<void>;
}

const live = new Set<() => void>();
process.on("exit", () => {
  for (const kill of live) kill();
});

export async function startA2AChild(onStderr: (line: string) => void): Promise<A2AChild> {
  const child = spawn(process.execPath, [AGENT, "--host", "127.0.0.1", "--grpc-port", "0", "--http-port", "0"], { stdio: ["ignore", "pipe", "pipe"] });
  const kill = () => child.kill("SIGKILL");
  live.add(kill);
  let exit: string | undefined;
  const exited = new Promise<void>((resolve) =>
    child.once("exit", (code, signal) => {
      exit = signal === null ? `exited with code ${code}` : `killed by ${signal}`;
      resolve();
    }),
  );
  const tail: string[] = [];
  let partial = "";
  child.stderr.setEncoding("utf8").on("data", (chunk: string) => {
    const lines = (partial + chunk).split("\n");
    partial = lines.pop() ?? "";
    for (const line of lines.filter((l) => l !== "")) {
      tail.push(line);
      if (tail.length > 20) tail.shift();
      onStderr(line);
    }
  });
  const failure = (what: string) => new Error(`a2a-js peer ${what}${tail.length ? `:\n${tail.join("\n")}` : ""}`);

  let urls: { grpc: string; jsonRpc: string };
  try {
    urls = await new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(failure(`did not start within ${START_TIMEOUT_MS / 1000} s`)), START_TIMEOUT_MS);
      let stdout = "";
      child.stdout.setEncoding("utf8").on("data", (chunk: string) => {
        stdout += chunk;
        const match = /listening grpc=(\S+) jsonrpc=(\S+)/.exec(stdout);
        if (match?.[1] !== undefined && match[2] !== undefined) {
          clearTimeout(timer);
          resolve({ grpc: match[1], jsonRpc: match[2] });
        }
      });
      void exited.then(() => {
        clearTimeout(timer);
        reject(failure(exit ?? "exited"));
      });
    });
  } catch (error) {
    kill();
    live.delete(kill);
    throw error;
  }
  const pid = child.pid;
  if (pid === undefined) throw failure("has no pid");
  return {
    pid,
    grpcUrl: urls.grpc,
    jsonRpcUrl: urls.jsonRpc,
    sample() {
      if (exit !== undefined) throw failure(exit);
      return readSample(pid);
    },
    async stop() {
      if (exit === undefined) {
        child.kill("SIGTERM");
        const timer = setTimeout(kill, STOP_TIMEOUT_MS);
        await exited;
        clearTimeout(timer);
      }
      live.delete(kill);
    },
  };
}
