// The peer bench's load generator: the Go program in bench/peer/loadgen,
// built once per run into a temporary directory. Its Go code for the
// protocols is generated there first, with buf (the repository's
// devDependency) and the pinned protoc-gen-go / protoc-gen-go-grpc (installed
// from the Go module proxy into bench/peer/loadgen/.bin on first use), from
// proto/synapse/v1 and from bench/peer/loadgen/proto (the A2A calls).
import { spawn, spawnSync } from "node:child_process";
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { delimiter, join } from "node:path";
import { fileURLToPath } from "node:url";

/** The repository root, from dist/bench/peer (compiled) or bench/peer (source). */
const ROOT = fileURLToPath(new URL(import.meta.url.includes("/dist/") ? "../../../" : "../../", import.meta.url));
const SOURCE = join(ROOT, "bench", "peer", "loadgen");
const BIN = join(SOURCE, ".bin");

const PLUGINS = [
  { pkg: "google.golang.org/protobuf/cmd/protoc-gen-go", version: "v1.36.12" },
  { pkg: "google.golang.org/grpc/cmd/protoc-gen-go-grpc", version: "v1.6.2" },
] as const;

/** Go is not installed (or not on PATH): the peer bench cannot run. */
export class GoMissingError extends Error {}

export interface Loadgen {
  path: string;
  remove(): void;
}

/** Whether `go` runs, and its version line. */
export function goVersion(): string | undefined {
  const result = spawnSync("go", ["version"], { encoding: "utf8" });
  return result.status === 0 ? result.stdout.trim() : undefined;
}

function run(file: string, args: string[], options: { cwd: string; env?: NodeJS.ProcessEnv }, what: string): void {
  const result = spawnSync(file, args, { ...options, encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });
  if (result.status !== 0) {
    const output = `${result.stdout ?? ""}${result.stderr ?? ""}`.trim() || (result.error?.message ?? `exit ${result.status}`);
    throw new Error(`${what} failed:\n${output}`);
  }
}

/** `go install PKG@VERSION` into BIN unless the binary there already is that version (as interop/go-tool.sh does). */
function installPlugin(pkg: string, version: string, progress: (message: string) => void): void {
  const binary = join(BIN, pkg.split("/").at(-1)!);
  if (existsSync(binary)) {
    const info = spawnSync("go", ["version", "-m", binary], { encoding: "utf8" });
    if (info.status === 0 && info.stdout.split("\n").some((line) => /^\s*mod\s/.test(line) && line.split(/\s+/).includes(version))) return;
  }
  progress(`installing ${pkg}@${version} into ${BIN}`);
  mkdirSync(BIN, { recursive: true });
  run("go", ["install", `${pkg}@${version}`], { cwd: ROOT, env: { ...process.env, GOBIN: BIN } }, `go install ${pkg}@${version}`);
}

export function buildLoadgen(progress: (message: string) => void): Loadgen {
  const go = goVersion();
  if (go === undefined) {
    throw new GoMissingError("the peer bench needs Go (1.26 or later) on PATH to build its load generator (bench/peer/loadgen); install it from https://go.dev/dl/ or your package manager");
  }
  progress(`building the load generator (${go})`);
  for (const { pkg, version } of PLUGINS) installPlugin(pkg, version, progress);
  const dir = mkdtempSync(join(tmpdir(), "synapse-peer-loadgen-"));
  const remove = () => rmSync(dir, { recursive: true, force: true });
  try {
    for (const name of readdirSync(SOURCE)) {
      if (name.endsWith(".go") || name === "go.mod" || name === "go.sum") cpSync(join(SOURCE, name), join(dir, name));
    }
    const gen = join(dir, "gen");
    const template = JSON.stringify({
      version: "v2",
      managed: { enabled: true, override: [{ file_option: "go_package_prefix", value: "synapse-peer-loadgen/gen" }] },
      plugins: [
        { local: "protoc-gen-go", out: gen, opt: ["paths=source_relative"] },
        { local: "protoc-gen-go-grpc", out: gen, opt: ["paths=source_relative"] },
      ],
    });
    const buf = join(ROOT, "node_modules", ".bin", "buf");
    const env = { ...process.env, PATH: `${BIN}${delimiter}${process.env.PATH ?? ""}` };
    run(buf, ["generate", "proto", "--path", "proto/synapse/v1", "--template", template], { cwd: ROOT, env }, "buf generate (proto/synapse/v1)");
    run(buf, ["generate", "bench/peer/loadgen/proto", "--template", template], { cwd: ROOT, env }, "buf generate (bench/peer/loadgen/proto)");
    run("go", ["build", "-o", join(dir, "loadgen"), "."], { cwd: dir }, "go build (bench/peer/loadgen)");
  } catch (error) {
    remove();
    throw error;
  }
  return { path: join(dir, "loadgen"), remove };
}

/** What every load mode prints (see bench/peer/loadgen/load.go). */
export interface LoadLine {
  mode: string;
  concurrency: number;
  requests: number;
  warmup_requests: number;
  errors: number;
  seconds: number;
  rps: number;
  p50_ms: number;
  p99_ms: number;
  server_cpu_ms: number | null;
  /** The load generator's own CPU time over the measured seconds (it shares the cores with the server). */
  generator_cpu_ms: number | null;
  first_error?: string;
}

/** What the synapse-watch mode prints (see bench/peer/loadgen/watch.go). */
export interface WatchLine {
  mode: string;
  watchers: number;
  connections: number;
  opened: number;
  open_ms: number;
  send_ms: number;
  received: number;
  fanout_ms: number;
  fanout_p50_ms: number;
  heartbeats: number;
  open_cpu_ms: number | null;
  fanout_cpu_ms: number | null;
  errors: number;
  first_error?: string;
}

/** Runs the load generator once and returns its JSON line; a failure carries its stderr. */
export function runLoadgen<T>(loadgen: Loadgen, args: string[]): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const child = spawn(loadgen.path, args, { stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.setEncoding("utf8").on("data", (chunk: string) => (stdout += chunk));
    child.stderr.setEncoding("utf8").on("data", (chunk: string) => (stderr += chunk));
    child.once("error", reject);
    child.once("close", (code, signal) => {
      const line = stdout.trim().split("\n").at(-1) ?? "";
      if (code !== 0 || line === "") {
        reject(new Error(`load generator ${args.slice(0, 4).join(" ")} ${signal ?? `exited ${code}`}: ${stderr.trim() || stdout.trim()}`));
        return;
      }
      try {
        resolve(JSON.parse(line) as T);
      } catch {
        reject(new Error(`load generator printed ${JSON.stringify(line)}`));
      }
    });
  });
}
