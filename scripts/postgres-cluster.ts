// A throwaway PostgreSQL cluster for tests and benchmarks: initdb into a
// temporary directory, a free port on 127.0.0.1, fast and unsafe settings
// (no fsync: the data is thrown away) unless asked to be durable, stopped
// and deleted afterwards.
// initdb refuses to run as root, so as root the cluster runs as the
// `postgres` user.
import { execFile, execFileSync, spawnSync } from "node:child_process";
import { chownSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";

export interface Cluster {
  /** postgres://user@127.0.0.1:port/postgres */
  url: string;
  /** A URL for another database on the same cluster. */
  urlFor(database: string): string;
  stop(): void;
  // The controls below run pg_ctl in a child process without blocking the caller's event loop,
  // so that a test's load and probes go on meanwhile.
  /** `pg_ctl restart` in the given shutdown mode (fast: disconnect clients; immediate: abort, crash recovery at start). */
  restart(mode: "smart" | "fast" | "immediate"): Promise<void>;
  /** `pg_ctl stop` in the given mode, leaving the data directory for `start`. */
  halt(mode: "smart" | "fast" | "immediate"): Promise<void>;
  /** SIGKILL to the postmaster (its backends notice and exit); `start` brings it back after crash recovery. */
  killPostmaster(): Promise<void>;
  /** Starts the stopped or killed cluster again on the same port. */
  start(): Promise<void>;
}

/** Where initdb is: on PATH, or in Debian's /usr/lib/postgresql/<version>/bin. */
export function findPostgresBin(): string | undefined {
  for (const dir of (process.env.PATH ?? "").split(":")) if (dir && existsSync(join(dir, "initdb")) && existsSync(join(dir, "pg_ctl"))) return dir;
  const debian = "/usr/lib/postgresql";
  if (existsSync(debian)) {
    for (const version of readdirSync(debian).sort().reverse()) {
      const bin = join(debian, version, "bin");
      if (existsSync(join(bin, "initdb"))) return bin;
    }
  }
  return undefined;
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

function userIds(name: string): { uid: number; gid: number } | undefined {
  const result = spawnSync("id", ["-u", name], { encoding: "utf8" });
  if (result.status !== 0) return undefined;
  const gid = spawnSync("id", ["-g", name], { encoding: "utf8" });
  return { uid: Number(result.stdout.trim()), gid: Number(gid.stdout.trim()) };
}

export interface ClusterOptions {
  /** Keep the cluster here (created when missing, reused when present); default a temporary directory, deleted at stop. */
  dir?: string;
  /** Default a free port. */
  port?: number;
  /**
   * Keep PostgreSQL's durable defaults (fsync, synchronous_commit,
   * full_page_writes on), so that a benchmark compares stores doing the same
   * work, and a kept cluster keeps its data; tests leave this off.
   */
  durable?: boolean;
}

export async function startCluster(options: ClusterOptions = {}): Promise<Cluster> {
  const bin = findPostgresBin();
  if (bin === undefined) throw new Error("initdb not found (install Debian's postgresql package)");
  const keep = options.dir !== undefined;
  const dir = options.dir ?? mkdtempSync(join(tmpdir(), "synapse-pg-"));
  mkdirSync(dir, { recursive: true });
  const data = join(dir, "data");
  const asRoot = process.getuid?.() === 0;
  const owner = asRoot ? userIds("postgres") : undefined;
  if (asRoot && owner === undefined) throw new Error("running as root, and there is no postgres user to run the cluster as");
  if (owner) chownSync(dir, owner.uid, owner.gid);
  const run = (command: string, args: string[]) => {
    const [file, argv] = asRoot ? ["runuser", ["-u", "postgres", "--", join(bin, command), ...args]] : [join(bin, command), args];
    execFileSync(file, argv, { stdio: ["ignore", "pipe", "pipe"], cwd: dir });
  };
  const user = asRoot ? "postgres" : (process.env.USER ?? "postgres");
  if (!existsSync(join(data, "PG_VERSION"))) run("initdb", ["-D", data, "-U", user, "--auth=trust", "--no-sync", "-E", "UTF8"]);
  const port = options.port ?? (await freePort());
  const fast = options.durable ? [] : ["-c fsync=off", "-c synchronous_commit=off", "-c full_page_writes=off"];
  const settings = ["-c listen_addresses=127.0.0.1", `-c port=${port}`, `-c unix_socket_directories=${dir}`, ...fast, "-c max_connections=400"].join(" ");
  const ctlArgs = (action: string, mode?: string) => ["-D", data, "-l", join(dir, "log"), "-o", settings, ...(mode ? ["-m", mode] : []), "-w", "-t", "60", action];
  run("pg_ctl", ctlArgs("start"));
  const runAsync = (command: string, args: string[]) => {
    const [file, argv] = asRoot ? ["runuser", ["-u", "postgres", "--", join(bin, command), ...args]] : [join(bin, command), args];
    return new Promise<void>((resolve, reject) => {
      execFile(file, argv, { cwd: dir }, (error, _stdout, stderr) => (error ? reject(new Error(`${command} ${args.at(-1)}: ${error.message} ${stderr}`)) : resolve()));
    });
  };
  const base = `postgres://${user}@127.0.0.1:${port}`;
  return {
    url: `${base}/postgres`,
    urlFor: (database) => `${base}/${database}`,
    stop() {
      try {
        run("pg_ctl", ["-D", data, "-m", keep ? "fast" : "immediate", "-w", "stop"]);
      } finally {
        if (!keep) rmSync(dir, { recursive: true, force: true });
      }
    },
    restart: (mode) => runAsync("pg_ctl", ctlArgs("restart", mode)),
    halt: (mode) => runAsync("pg_ctl", ctlArgs("stop", mode)),
    async killPostmaster() {
      // The first line of postmaster.pid is the postmaster's pid.
      const pid = Number(readFileSync(join(data, "postmaster.pid"), "utf8").split("\n")[0]);
      process.kill(pid, "SIGKILL");
      for (let i = 0; i < 500 && alive(pid); i++) await new Promise((resolve) => setTimeout(resolve, 10));
    },
    async start() {
      // Backends orphaned by a killed postmaster may hold its shared memory a moment longer: start refuses until they are gone.
      for (let attempt = 1; ; attempt++) {
        try {
          return await runAsync("pg_ctl", ctlArgs("start"));
        } catch (error) {
          if (attempt >= 20) throw error;
          await new Promise((resolve) => setTimeout(resolve, 100));
        }
      }
    },
  };
}
