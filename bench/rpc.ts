// The default bench (npm run bench with no mode): measures, in one process
// against a real agent server on 127.0.0.1 (memory store), the cost of a
// signed task submission relative to a bare unary call, over gRPC and
// Connect JSON, then Ed25519 throughput of node:crypto and tweetnacl.
import { cpus } from "node:os";
import type { BenchOptions } from "./args.js";
import { cryptoBench, MESSAGE_BYTES } from "./crypto.js";
import { runLoad, type Call } from "./measure.js";
import { type Report, type RpcRow } from "./report.js";
import { startBenchServer } from "./server.js";
import { BASELINE, baselineCall, BENCH_PROTOCOLS, SIGNED, signedCall, TEXT, type BenchProtocol } from "./workloads.js";

const WARMUP_SECONDS = 1;
const CRYPTO_SECONDS = 1;
const CRYPTO_WARMUP_SECONDS = 0.25;

export async function rpcBench(options: BenchOptions, progress: (message: string) => void): Promise<Report> {
  const bench = await startBenchServer();
  progress(`server at ${bench.server.url}`);
  const rpc: RpcRow[] = [];
  try {
    const measure = async (workload: string, protocol: BenchProtocol, call: Call, baselineRps?: number) => {
      progress(`${workload} over ${protocol}: ${WARMUP_SECONDS} s warm-up, ${options.seconds} s at concurrency ${options.concurrency}`);
      await runLoad(call, options.concurrency, WARMUP_SECONDS * 1000);
      const result = await runLoad(call, options.concurrency, options.seconds * 1000);
      const row: RpcRow = {
        workload,
        protocol,
        requests: result.requests,
        seconds: result.seconds,
        rps: result.rps,
        p50_ms: result.p50Ms,
        p99_ms: result.p99Ms,
        ratio_to_baseline: baselineRps === undefined ? null : result.rps / baselineRps,
      };
      rpc.push(row);
      return row;
    };
    const baselines = new Map<BenchProtocol, number>();
    for (const protocol of BENCH_PROTOCOLS) {
      baselines.set(protocol, (await measure(BASELINE, protocol, baselineCall(bench.server.url, protocol))).rps);
    }
    for (const protocol of BENCH_PROTOCOLS) {
      await measure(SIGNED, protocol, await signedCall(bench.server.url, protocol, bench.requester), baselines.get(protocol));
    }
  } finally {
    await bench.close();
  }

  progress(`Ed25519 sign and verify, ${CRYPTO_SECONDS} s each after ${CRYPTO_WARMUP_SECONDS} s warm-up`);
  const crypto = cryptoBench(CRYPTO_SECONDS, CRYPTO_WARMUP_SECONDS);
  // The default implementation (first) against the portable one.
  const byDefault = crypto[0];
  const nacl = crypto.find((row) => row.implementation === "tweetnacl");
  if (byDefault === undefined || nacl === undefined) throw new Error("crypto bench returned no results");

  return {
    config: {
      seconds: options.seconds,
      concurrency: options.concurrency,
      warmup_seconds: WARMUP_SECONDS,
      text_chars: TEXT.length,
      crypto_seconds: CRYPTO_SECONDS,
      crypto_message_bytes: MESSAGE_BYTES,
      node: process.version,
      cpu: cpus()[0]?.model ?? "unknown",
      cpus: cpus().length,
    },
    rpc,
    crypto,
    crypto_ratio: { sign: byDefault.sign_ops / nacl.sign_ops, verify: byDefault.verify_ops / nacl.verify_ops },
  };
}

