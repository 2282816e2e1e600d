// `synapse serve` as an operator runs it: GET /metrics on the RPC port,
// traces exported over OTLP/HTTP to the collector named by --otlp-endpoint
// or the OTEL_EXPORTER_OTLP_* variables (and the last spans flushed on
// SIGTERM), call log lines carrying the trace id; and how those settings
// are read.
import { describe, expect, it } from "vitest";
import { otlpTracesUrl } from "../src/observability/tracing.js";
import { traceIdOf } from "../src/observability/trace-context.js";
import { runCli, startServe } from "./helpers/cli.js";
import { userClient } from "./helpers/group-agents.js";
import { delta, scrape, total } from "./helpers/metrics.js";
import { OTLP_KIND, startOtlpReceiver } from "./helpers/otlp.js";
import { tempDir } from "./helpers/server.js";

const GET_CAPABILITIES = "synapse.v1.CapabilitiesService/GetCapabilities";

describe("synapse serve with metrics and traces", () => {
  it("serves /metrics, exports each call's span to --otlp-endpoint, and logs the call with its trace id", async () => {
    const receiver = await startOtlpReceiver();
    try {
      const served = await startServe(["--data-dir", await tempDir(), "--otlp-endpoint", receiver.url]);
      const before = await scrape(served.url);
      expect((await runCli(["capabilities", served.url, "--protocol", "grpc"])).code).toBe(0);
      const after = await scrape(served.url);
      expect(total(after, "synapse_rpc_requests_total", { procedure: GET_CAPABILITIES, protocol: "grpc", code: "ok" }) - total(before, "synapse_rpc_requests_total", { procedure: GET_CAPABILITIES, protocol: "grpc", code: "ok" })).toBe(1);
      expect(await served.stop("SIGTERM")).toBe(0);

      // The spans left in the batch went out at shutdown.
      const calls = receiver.spans.filter((s) => s.name === GET_CAPABILITIES && s.attributes["rpc.system"] === "grpc");
      expect(calls).toHaveLength(1);
      expect(calls[0]).toMatchObject({ kind: OTLP_KIND.server, parentSpanId: "" });
      expect(calls[0]!.resource).toMatchObject({ "service.name": "synapse", "synapse.agent.id": served.agentId });
      expect(receiver.paths.every((path) => path === "/v1/traces")).toBe(true);
      const logged = served
        .stderr()
        .split("\n")
        .filter((line) => line.includes(`"procedure":"/${GET_CAPABILITIES}"`) && line.includes('"protocol":"grpc"'))
        .map((line) => JSON.parse(line) as { trace_id?: string });
      expect(logged).toHaveLength(1);
      expect(logged[0]!.trace_id).toBe(calls[0]!.traceId);
    } finally {
      await receiver.close();
    }
  });

  it("counts group messages taken and the group events the host signs", async () => {
    const served = await startServe(["--data-dir", await tempDir(), "--store", "memory"]);
    try {
      const coordinator = await userClient(served.url);
      const before = await scrape(served.url);
      await coordinator.create("observed", { name: "observed" });
      const after = await scrape(served.url);
      expect(delta(before, after, "synapse_messages_total", { type: "a2n:group_create", direction: "received" })).toBe(1);
      expect(delta(before, after, "synapse_messages_total", { type: "a2n:group_event", direction: "sent" })).toBe(1);
      expect(delta(before, after, "synapse_rpc_requests_total", { procedure: "synapse.v1.GroupService/Send", protocol: "connect", code: "ok" })).toBe(1);
      const logged = served
        .stderr()
        .split("\n")
        .filter((line) => line.includes('"procedure":"/synapse.v1.GroupService/Send"'))
        .map((line) => JSON.parse(line) as Record<string, unknown>);
      expect(logged).toHaveLength(1);
      expect(logged[0]).toMatchObject({ message_type: "a2n:group_create", sender: coordinator.agentId, receiver: served.agentId, trace_id: expect.stringMatching(/^[0-9a-f]{32}$/) });
    } finally {
      expect(await served.stop()).toBe(0);
    }
  });

  it("takes the collector from OTEL_EXPORTER_OTLP_ENDPOINT; --no-metrics turns /metrics off", async () => {
    const receiver = await startOtlpReceiver();
    try {
      const served = await startServe(["--data-dir", await tempDir(), "--no-metrics"], { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, OTEL_SERVICE_NAME: "agent-one" });
      expect((await fetch(`${served.url}/metrics`)).status).toBe(404);
      expect((await runCli(["capabilities", served.url])).code).toBe(0);
      expect(await served.stop("SIGTERM")).toBe(0);
      const calls = receiver.spans.filter((s) => s.name === GET_CAPABILITIES);
      expect(calls).toHaveLength(1);
      expect(calls[0]!.resource["service.name"]).toBe("agent-one");
    } finally {
      await receiver.close();
    }
  });

  it("refuses an --otlp-endpoint that is not a URL with a usage error", async () => {
    const result = await runCli(["serve", "--port", "0", "--data-dir", await tempDir(), "--otlp-endpoint", "collector:4318"]);
    expect(result.code).toBe(2);
    expect(result.stderr).toContain("--otlp-endpoint");
  });
});

describe("tracing settings", () => {
  it("reads the traces URL from the flag, then the OTEL variables, and none when they are off", () => {
    expect(otlpTracesUrl(undefined, {})).toBeUndefined();
    expect(otlpTracesUrl("http://127.0.0.1:4318", {})).toBe("http://127.0.0.1:4318/v1/traces");
    expect(otlpTracesUrl("http://127.0.0.1:4318/v1/traces", {})).toBe("http://127.0.0.1:4318/v1/traces");
    expect(otlpTracesUrl("http://127.0.0.1:4318/prefix/", {})).toBe("http://127.0.0.1:4318/prefix/v1/traces");
    expect(otlpTracesUrl(undefined, { OTEL_EXPORTER_OTLP_ENDPOINT: "http://127.0.0.1:4318" })).toBe("http://127.0.0.1:4318/v1/traces");
    // The per-signal variable is used as it is, and wins over the base one.
    expect(otlpTracesUrl(undefined, { OTEL_EXPORTER_OTLP_ENDPOINT: "http://127.0.0.1:1", OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: "http://127.0.0.1:2/custom" })).toBe("http://127.0.0.1:2/custom");
    expect(otlpTracesUrl(undefined, { OTEL_EXPORTER_OTLP_ENDPOINT: "http://127.0.0.1:4318", OTEL_SDK_DISABLED: "true" })).toBeUndefined();
    expect(otlpTracesUrl(undefined, { OTEL_EXPORTER_OTLP_ENDPOINT: "http://127.0.0.1:4318", OTEL_TRACES_EXPORTER: "none" })).toBeUndefined();
    // The flag is the operator's explicit choice.
    expect(otlpTracesUrl("http://127.0.0.1:9", { OTEL_SDK_DISABLED: "true" })).toBe("http://127.0.0.1:9/v1/traces");
    expect(() => otlpTracesUrl("not a url", {})).toThrow(TypeError);
    expect(() => otlpTracesUrl("collector:4318", {})).toThrow(TypeError);
    expect(() => otlpTracesUrl(undefined, { OTEL_EXPORTER_OTLP_ENDPOINT: "grpc://127.0.0.1:4317" })).toThrow(TypeError);
  });

  it("reads the trace id of a traceparent for log lines, and none from an invalid one", () => {
    expect(traceIdOf("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")).toBe("4bf92f3577b34da6a3ce929d0e0e4736");
    expect(traceIdOf("00-00000000000000000000000000000000-00f067aa0ba902b7-01")).toBeUndefined();
    expect(traceIdOf("garbage")).toBeUndefined();
    expect(traceIdOf("")).toBeUndefined();
    expect(traceIdOf(undefined)).toBeUndefined();
  });
});
