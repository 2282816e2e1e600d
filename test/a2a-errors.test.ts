import { Code, ConnectError } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { a2aError, a2aErrorKind, findErrorInfo, findFieldViolations } from "../src/a2a/errors.js";

describe("A2A errors", () => {
  it("carry the spec's gRPC code and an ErrorInfo naming the kind", () => {
    const error = a2aError("TaskNotFound", "no task t-1", { metadata: { taskId: "t-1" } });
    expect(error.code).toBe(Code.NotFound);
    expect(findErrorInfo(error)).toEqual({ reason: "TASK_NOT_FOUND", domain: "a2a-protocol.org", metadata: { taskId: "t-1" } });
    expect(a2aErrorKind(error)).toBe("TaskNotFound");
    expect(a2aError("TaskNotCancelable", "x").code).toBe(Code.FailedPrecondition);
    expect(a2aError("ContentTypeNotSupported", "x").code).toBe(Code.InvalidArgument);
    expect(a2aError("InvalidAgentResponse", "x").code).toBe(Code.Internal);
    expect(a2aErrorKind(a2aError("VersionNotSupported", "x"))).toBe("VersionNotSupported");
  });

  it("name missing fields as a BadRequest detail", () => {
    const error = a2aError("InvalidParams", "missing text", { fieldViolations: [{ field: "text", description: "required" }] });
    expect(error.code).toBe(Code.InvalidArgument);
    expect(a2aErrorKind(error)).toBe("InvalidParams");
    expect(findFieldViolations(error)).toEqual([{ field: "text", description: "required" }]);
  });

  it("read nothing from errors that carry no A2A ErrorInfo", () => {
    expect(a2aErrorKind(new ConnectError("plain", Code.Internal))).toBeUndefined();
    expect(a2aErrorKind(new Error("plain"))).toBeUndefined();
  });
});
