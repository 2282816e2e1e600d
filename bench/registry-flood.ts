// A flood of registrations from made-up identities against a real registry
// (`synapse serve --registry` as a child process), to see what stays behind
// once their leases have run out: the registry's RSS and data-dir size at
// start, after the flood, and after every flooded agent was dropped.
//
//   npm run build && node dist/bench/registry-flood.js [--count N] [--lease SECONDS]
//     [--concurrency N] [--settle SECONDS] [--warmup N] [--cli PATH] [-- SERVE_FLAGS...]
//
// --warmup N floods and expires N registrations first, and measures from
// there: what a registry that has run a while keeps, not its cold start.
//
// Every identity is a fresh key with the id derived from it, as anyone can
// make; their endpoint is one small HTTP server here that answers the
// registry's confirmation calls (GetCapabilities, GetSupportedInterfaces) as
// whichever identity its path names, with the registry's own task types.
import { createClient } from "@connectrpc/connect";
import { readdirSync, statSync } from "node:fs";
import type http from "node:http";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { CapabilitiesService } from "../gen/synapse/v1/capabilities_pb.js";
import { RegistryService } from "../gen/synapse/v1/registry_pb.js";
import { createTransport } from "../src/client/transport.js";
import { startChildServer, type ChildServer } from "./child-server.js";
import { mintAgents, registrationOf, startImpersonatingEndpoint } from "./minted-agents.js";

const MiB = 2 ** 20;

/** Bytes of every file under `dir`. */
function dirBytes(dir: string): number {
  let total = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    total += entry.isDirectory() ? dirBytes(path) : statSync(path).size;
  }
  return total;
}

interface Sample {
  rssMiB: number;
  dataDirMiB: number;
  /** V8 heap kept by the last full GC. */
  heapMiB: number;
}

function sample(registry: ChildServer): Sample {
  return { rssMiB: registry.sample().rssBytes / MiB, dataDirMiB: dirBytes(registry.dataDir) / MiB, heapMiB: (registry.heap()?.afterFullGcBytes ?? 0) / MiB };
}

const line = (label: string, at: Sample, start?: Sample) =>
  `${label.padEnd(22)} rss ${at.rssMiB.toFixed(1).padStart(7)} MiB${start ? ` (${(at.rssMiB - start.rssMiB >= 0 ? "+" : "")}${(at.rssMiB - start.rssMiB).toFixed(1)})` : ""}` +
  `   heap after full GC ${at.heapMiB.toFixed(1).padStart(6)} MiB   data dir ${at.dataDirMiB.toFixed(1).padStart(7)} MiB${start ? ` (${(at.dataDirMiB - start.dataDirMiB >= 0 ? "+" : "")}${(at.dataDirMiB - start.dataDirMiB).toFixed(1)})` : ""}`;

async function main(): Promise<void> {
  const { values, positionals } = parseArgs({
    options: {
      count: { type: "string", default: "1000" },
      lease: { type: "string", default: "2" },
      concurrency: { type: "string", default: "8" },
      settle: { type: "string", default: "20" },
      warmup: { type: "string", default: "0" },
      cli: { type: "string" },
    },
    allowPositionals: true,
  });
  const count = Number(values.count);
  const leaseSeconds = Number(values.lease);
  const concurrency = Number(values.concurrency);
  const settleSeconds = Number(values.settle);

  const registry = await startChildServer({ label: "registry-flood", args: ["--registry", "--lease", String(leaseSeconds), ...positionals], cli: values.cli, traceGc: true });
  let endpoint: http.Server | undefined;
  try {
    const transport = createTransport(registry.url);
    const self = createClient(CapabilitiesService, transport);
    const template = (await self.getCapabilities({})).capabilities!;
    const { interfaces } = await self.getSupportedInterfaces({});
    const warmup = Number(values.warmup);
    const minted = mintAgents(warmup + count);
    const answering = await startImpersonatingEndpoint(minted, template, interfaces);
    endpoint = answering.server;
    const rpc = createClient(RegistryService, transport);
    const receiver = { agentId: template.agentId, systemId: template.systemId };
    const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

    /** Registers agents [from, to) with `concurrency` at once. */
    const flood = async (from: number, to: number) => {
      let next = from;
      let registered = 0;
      const refused = new Map<string, number>();
      const began = Date.now();
      await Promise.all(
        Array.from({ length: concurrency }, async () => {
          for (let index = next++; index < to; index = next++) {
            try {
              await rpc.register({ envelope: registrationOf(minted[index]!, answering.urlOf(index), template, interfaces, receiver) });
              registered++;
            } catch (error) {
              const reason = error instanceof Error ? error.message.slice(0, 80) : String(error);
              refused.set(reason, (refused.get(reason) ?? 0) + 1);
            }
          }
        }),
      );
      return { registered, refused, seconds: (Date.now() - began) / 1000 };
    };
    /** Dropped three leases after the lease ran out (the default), then swept; then time for the GC. */
    const expire = async () => {
      await sleep(4 * leaseSeconds * 1000 + 2000);
      const left = (await rpc.findAgents({ includeUnhealthy: true, pageSize: 500 })).agents.length;
      const capabilities = (await rpc.listCapabilities({ pageSize: 500 })).capabilities.length;
      await sleep(settleSeconds * 1000);
      return `agents left ${left}, capabilities listed ${capabilities} (first page)`;
    };

    // The registry settles after its start before the first sample.
    await sleep(2000);
    const cold = sample(registry);
    process.stdout.write(`${line("start (cold)", cold)}\n`);
    let start = cold;
    if (warmup > 0) {
      const warm = await flood(0, warmup);
      const left = await expire();
      start = sample(registry);
      process.stdout.write(`${line(`after ${warm.registered} warm-up`, start, cold)}   ${left}\n`);
    }

    const { registered, refused, seconds } = await flood(warmup, warmup + count);
    const flooded = sample(registry);
    process.stdout.write(`${line("after flood", flooded, start)}   ${registered} registered in ${seconds.toFixed(1)} s (${(registered / seconds).toFixed(0)}/s)\n`);
    for (const [reason, times] of refused) process.stdout.write(`  refused ${times}x: ${reason}\n`);
    const left = await expire();
    process.stdout.write(`${line("after expiry", sample(registry), start)}   ${left}\n`);
  } finally {
    endpoint?.close();
    await registry.stop();
  }
}

main().catch((error: unknown) => {
  process.stderr.write(`${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exitCode = 1;
});
