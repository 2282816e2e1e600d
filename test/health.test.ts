// gRPC health checking against a real server over gRPC/h2c: Check per
// service, NOT_FOUND for unknown ones, Watch through a graceful shutdown.
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Health, HealthCheckResponse_ServingStatus as ServingStatus } from "../gen/grpc/health/v1/health_pb.js";
import type { RunningServer } from "../src/server/server.js";
import { startTestServer } from "./helpers/server.js";
import { createServer as createHttpServer } from "node:http";
import type { AddressInfo } from "node:net";
import { ServerHealth } from "../src/server/health.js";
import { healthRoute } from "../src/server/health-route.js";

describe("health Check", () => {
  let server: RunningServer;
  beforeAll(async () => {
    server = await startTestServer();
  });
  afterAll(() => server.close());

  for (const service of ["", "synapse.v1.P2PService", "synapse.v1.CapabilitiesService", "grpc.reflection.v1.ServerReflection", "grpc.health.v1.Health"]) {
    it(`reports "${service}" SERVING`, async () => {
      const client = createClient(Health, createGrpcTransport({ baseUrl: server.url }));
      expect((await client.check({ service })).status).toBe(ServingStatus.SERVING);
    });
  }

  it("answers an unknown service with NOT_FOUND", async () => {
    const client = createClient(Health, createGrpcTransport({ baseUrl: server.url }));
    const error = await client.check({ service: "synapse.v1.NoSuchService" }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ConnectError);
    expect((error as ConnectError).code).toBe(Code.NotFound);
  });
});

describe("health Watch", () => {
  it("sends SERVING, then NOT_SERVING when the server closes, then ends", async () => {
    const server = await startTestServer({ shutdownGraceMs: 5_000 });
    const client = createClient(Health, createGrpcTransport({ baseUrl: server.url }));
    const statuses: Array<[string, ServingStatus]> = [];
    const watch = async (service: string) => {
      for await (const response of client.watch({ service })) {
        statuses.push([service, response.status]);
        if (statuses.filter(([s]) => s === service).length === 1) started.get(service)?.();
      }
    };
    const started = new Map<string, () => void>();
    const first = ["", "synapse.v1.P2PService"].map((service) => new Promise<void>((resolve) => started.set(service, resolve)));
    const ends = ["", "synapse.v1.P2PService"].map((service) => watch(service).catch((e: unknown) => e));
    await Promise.all(first);
    expect(statuses).toEqual(expect.arrayContaining([["", ServingStatus.SERVING], ["synapse.v1.P2PService", ServingStatus.SERVING]]));

    const before = Date.now();
    await server.close();
    // The watches ended on the drain signal, not at the end of the grace period.
    expect(Date.now() - before).toBeLessThan(4_000);
    // The server ends the watches with UNAVAILABLE; the client may see CANCELED instead when the
    // listener destroys the session before those trailers are flushed (a race in close(), not here).
    for (const end of await Promise.all(ends)) {
      expect(end).toBeInstanceOf(ConnectError);
      expect([Code.Unavailable, Code.Canceled]).toContain((end as ConnectError).code);
    }
    for (const service of ["", "synapse.v1.P2PService"]) {
      expect(statuses.filter(([s]) => s === service).map(([, status]) => status)).toEqual([ServingStatus.SERVING, ServingStatus.NOT_SERVING]);
    }
  });

  it("sends SERVICE_UNKNOWN for an unknown service and keeps the stream open", async () => {
    const server = await startTestServer();
    try {
      const client = createClient(Health, createGrpcTransport({ baseUrl: server.url }));
      const abort = new AbortController();
      const responses = client.watch({ service: "synapse.v1.NoSuchService" }, { signal: abort.signal })[Symbol.asyncIterator]();
      const first = await responses.next();
      expect(first.done).toBe(false);
      expect(first.value?.status).toBe(ServingStatus.SERVICE_UNKNOWN);
      const next = responses.next();
      const open = await Promise.race([next.then(() => false), new Promise<boolean>((resolve) => setTimeout(() => resolve(true), 200))]);
      expect(open).toBe(true);
      abort.abort();
      await expect(next).rejects.toMatchObject({ code: Code.Canceled });
    } finally {
      await server.close();
    }
  });
});

describe("GET /healthz", () => {
  it("answers 200 with the overall status while the server serves, and refuses other methods", async () => {
    const server = await startTestServer();
    try {
      const ok = await fetch(`${server.url}/healthz`);
      expect(ok.status).toBe(200);
      expect(ok.headers.get("cache-control")).toBe("no-store");
      expect(await ok.json()).toEqual({ status: "SERVING" });
      const head = await fetch(`${server.url}/healthz`, { method: "HEAD" });
      expect(head.status).toBe(200);
      const post = await fetch(`${server.url}/healthz`, { method: "POST" });
      expect(post.status).toBe(405);
      expect(post.headers.get("allow")).toBe("GET, HEAD");
    } finally {
      await server.close();
    }
  });

  it("answers 503 once the overall status is not SERVING", async () => {
    const health = new ServerHealth();
    const http = createHttpServer(healthRoute(health, (_req, res) => res.writeHead(404).end()));
    await new Promise<void>((resolve) => http.listen(0, "127.0.0.1", resolve));
    const url = `http://127.0.0.1:${(http.address() as AddressInfo).port}`;
    try {
      expect((await fetch(`${url}/healthz`)).status).toBe(200);
      health.set("", ServingStatus.NOT_SERVING);
      const down = await fetch(`${url}/healthz`);
      expect(down.status).toBe(503);
      expect(await down.json()).toEqual({ status: "NOT_SERVING" });
      expect((await fetch(`${url}/elsewhere`)).status).toBe(404);
    } finally {
      await new Promise((resolve) => http.close(resolve));
    }
  });
});
