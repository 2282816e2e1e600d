// The server's last word on errors, through its real adapter and a real
// socket in every protocol: whatever a service throws (a plain ConnectError
// echoing 100 KB, unary or mid-stream) or connect-es raises before any
// handler runs (an unparseable body) arrives as a bounded, typed status.
import { Code, ConnectError, type ConnectRouter } from "@connectrpc/connect";
import http from "node:http";
import http2 from "node:http2";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CapabilitiesService } from "../gen/synapse/v1/capabilities_pb.js";
import { P2PService } from "../gen/synapse/v1/p2p_pb.js";
import { silentLogger } from "../src/log.js";
import { ErrorCode } from "../gen/synapse/v1/errors_pb.js";
import { MAX_ERROR_MESSAGE_CHARS, protocolError } from "../src/protocol/errors.js";
import { createRequestHandler } from "../src/server/adapter.js";
import { shapeErrors } from "../src/server/error-shape.js";
import { createListener, type Listener } from "../src/server/listener.js";
import { clientFor, PROTOCOLS, refusal } from "./helpers/protocols.js";

const HUGE = "e".repeat(100 * 1024);
let listener: Listener;
let url: string;

beforeAll(async () => {
  const routes = (router: ConnectRouter) => {
    router.service(CapabilitiesService, {
      getCapabilities() {
        throw new ConnectError(`echo ${HUGE}`, Code.FailedPrecondition);
      },
      getTaskTypeCapabilities() {
        // Over 1 KiB of trailer: gRPC-web compresses it for a client that accepts gzip.
        throw protocolError(ErrorCode.PERMISSION_DENIED, "d".repeat(1000), { status: Code.FailedPrecondition });
      },
    });
    router.service(P2PService, {
      async *watch() {
        yield {};
        throw new ConnectError(`echo ${HUGE}`, Code.FailedPrecondition);
      },
    });
  };
  const handler = createRequestHandler({ routes, logger: silentLogger, readMaxBytes: 1 << 20, writeMaxBytes: 1 << 20, interceptors: [shapeErrors(silentLogger)] });
  listener = createListener({ handler });
  const { port } = await listener.listen(0, "127.0.0.1");
  url = `http://127.0.0.1:${port}`;
});
afterAll(() => listener.destroyAll());

describe("any error the server answers with", () => {
  for (const protocol of PROTOCOLS) {
    it(`is bounded over ${protocol.name}, unary and mid-stream`, async () => {
      const unary = await refusal(clientFor(CapabilitiesService, protocol, url).getCapabilities({}));
      const stream = await refusal(clientFor(P2PService, protocol, url).watch({ taskId: "t" }));
      for (const answer of [unary, stream]) {
        expect(answer.code).toBe(Code.FailedPrecondition);
        expect(answer.message.length).toBeLessThanOrEqual(MAX_ERROR_MESSAGE_CHARS);
        expect(answer.message).toMatch(/^echo e+…\(102405 chars\)$/);
      }
    });
  }

  it("gets through a gRPC-web trailer large enough to be compressed", async () => {
    const answer = await refusal(clientFor(CapabilitiesService, PROTOCOLS[3]!, url).getTaskTypeCapabilities({ taskType: "t" }));
    expect(answer.code).toBe(Code.FailedPrecondition);
    expect(answer.detail?.message.length).toBeGreaterThan(900);
  });

  it("is INVALID_ARGUMENT with message_format_invalid for an unparseable body, in every binary protocol", async () => {
    // Field 1 of the request, length-delimited, with a length past the end.
    const garbage = Buffer.from([0x0a, 0xff, 0x01]);
    const framed = Buffer.concat([Buffer.from([0, 0, 0, 0, garbage.length]), garbage]);
    const path = "/synapse.v1.CapabilitiesService/GetCapabilities";
    const connect = await h1(path, "application/proto", garbage);
    expect(connect.status).toBe(400);
    expect(JSON.parse(connect.body.toString())).toMatchObject({ code: "invalid_argument", details: [{ type: "synapse.v1.ErrorDetail" }] });
    const web = await h1(path, "application/grpc-web+proto", framed);
    expect(web.body.subarray(5).toString()).toMatch(/grpc-status: 3\r\n/);
    expect(web.body.subarray(5).toString()).toMatch(/grpc-status-details-bin: /);
    const grpc = await h2(path, "application/grpc", framed);
    expect(grpc["grpc-status"]).toBe("3");
    expect(grpc["grpc-status-details-bin"]).toBeDefined();
  });
});

function h1(path: string, contentType: string, body: Buffer): Promise<{ status: number; body: Buffer }> {
  return new Promise((resolve, reject) => {
    const req = http.request(`${url}${path}`, { method: "POST", headers: { "content-type": contentType } }, (res) => {
      const parts: Buffer[] = [];
      res.on("data", (part: Buffer) => parts.push(part));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(parts) }));
    });
    req.on("error", reject);
    req.end(body);
  });
}

function h2(path: string, contentType: string, body: Buffer): Promise<http2.IncomingHttpHeaders> {
  const session = http2.connect(url);
  return new Promise<http2.IncomingHttpHeaders>((resolve, reject) => {
    const stream = session.request({ ":method": "POST", ":path": path, "content-type": contentType, te: "trailers" });
    let status: http2.IncomingHttpHeaders = {};
    stream.on("response", (headers) => (status = headers));
    stream.on("trailers", (trailers) => (status = { ...status, ...trailers }));
    stream.on("close", () => resolve(status));
    stream.on("error", reject);
    stream.resume();
    stream.end(body);
  }).finally(() => session.close());
}
