// gRPC trailers on the short paths: a success with no trailers of the
// handler's is the one constant status; anything else is built as
// connect-es builds it, the handler's trailers and the error's status kept.
import { Code, ConnectError, type HandlerContext } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { addGrpcTrailers, type NodeResponse } from "../src/server/short-call.js";

function trailersOf(responseTrailer: Headers, failure?: ConnectError): Record<string, string> {
  const written: Record<string, string> = {};
  const res = { addTrailers: (headers: Record<string, string>) => Object.assign(written, headers) } as unknown as NodeResponse;
  addGrpcTrailers(res, { responseTrailer } as HandlerContext, failure);
  return written;
}

describe("gRPC trailers", () => {
  it("are the OK status alone for a success with none of the handler's", () => {
    expect(trailersOf(new Headers())).toEqual({ "grpc-status": "0" });
  });

  it("keep the handler's trailers beside the status", () => {
    expect(trailersOf(new Headers({ "x-served-by": "a" }))).toEqual({ "grpc-status": "0", "x-served-by": "a" });
  });

  it("carry a failure's code and message", () => {
    const written = trailersOf(new Headers(), new ConnectError("no such task", Code.NotFound));
    expect(written["grpc-status"]).toBe(String(Code.NotFound));
    expect(decodeURIComponent(written["grpc-message"]!)).toBe("no such task");
  });
});
