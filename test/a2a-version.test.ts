// The A2A-Version and A2A-Extensions service parameters (version.ts): how a
// request's version is read, and the same refusal on the gRPC binding as on
// the JSON ones (through a real server onto the fake service).
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { A2AService } from "../gen/lf/a2a/v1/a2a_pb.js";
import { a2aErrorKind } from "../src/a2a/errors.js";
import { activateExtensions, requestedExtensions, requestedVersion, versionError } from "../src/a2a/version.js";
import { startFakeA2AServer, type FakeA2AServer } from "./helpers/a2a-http.js";

describe("requestedVersion", () => {
  it("reads Major.Minor from the header, else the query; none is 0.3; nonsense is no version", () => {
    const h = (value?: string) => new Headers(value === undefined ? {} : { "A2A-Version": value });
    expect(requestedVersion(h("1.0"))).toBe("1.0");
    expect(requestedVersion(h(" 1.0.7 "))).toBe("1.0");
    expect(requestedVersion(h("1"))).toBe("1.0");
    expect(requestedVersion(h())).toBe("0.3");
    expect(requestedVersion(h(""))).toBe("0.3");
    expect(requestedVersion(h(), new URLSearchParams("A2A-Version=1.0"))).toBe("1.0");
    expect(requestedVersion(h("0.3"), new URLSearchParams("A2A-Version=1.0"))).toBe("0.3");
    expect(requestedVersion(h("v1"))).toBeUndefined();
    expect(versionError(h("1.0"))).toBeUndefined();
    const refused = versionError(h("0.3"))!;
    expect(a2aErrorKind(refused)).toBe("VersionNotSupported");
    expect(refused.code).toBe(Code.FailedPrecondition);
  });
});

describe("extensions", () => {
  it("parses the comma-separated list once each, and activates only the supported ones", () => {
    const requestHeader = new Headers({ "A2A-Extensions": "urn:a, urn:b,,urn:a" });
    expect(requestedExtensions(requestHeader)).toEqual(["urn:a", "urn:b"]);
    const responseHeader = new Headers();
    expect(activateExtensions({ requestHeader, responseHeader }, new Set(["urn:b", "urn:c"]))).toEqual(["urn:b"]);
    expect(responseHeader.get("A2A-Extensions")).toBe("urn:b");
    const required = () => activateExtensions({ requestHeader, responseHeader: new Headers() }, new Set(["urn:c"]), ["urn:c"]);
    expect(() => required()).toThrow(ConnectError);
    try {
      required();
    } catch (error) {
      expect(a2aErrorKind(error)).toBe("ExtensionSupportRequired");
    }
  });
});

describe("the gRPC binding", () => {
  let server: FakeA2AServer;
  beforeAll(async () => {
    server = await startFakeA2AServer();
  });
  afterAll(() => server.close());

  it("refuses a call without a version we speak before the service sees it", async () => {
    const client = createClient(A2AService, createGrpcTransport({ baseUrl: server.url }));
    const before = server.fake.calls.length;
    const refused = await client.getExtendedAgentCard({}).catch((error: unknown) => ConnectError.from(error));
    expect(refused).toBeInstanceOf(ConnectError);
    expect((refused as ConnectError).code).toBe(Code.FailedPrecondition);
    expect(a2aErrorKind(refused)).toBe("VersionNotSupported");
    expect(server.fake.calls.length).toBe(before);
    const card = await client.getExtendedAgentCard({}, { headers: { "A2A-Version": "1.0" } });
    expect(card.name).toBe("fake");
  });
});
