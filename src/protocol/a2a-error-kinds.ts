// The errors A2A v1.0 names (specification section 5.4), plus the standard
// ones every binding has: the one list the server's bindings and the A2A
// client both speak in.

/** An error A2A v1.0 names (its section 5.4), or a standard one every binding has (invalid params, unauthenticated, ...). */
export type A2ASpecErrorKind =
  | "TaskNotFound"
  | "TaskNotCancelable"
  | "PushNotificationNotSupported"
  | "UnsupportedOperation"
  | "ContentTypeNotSupported"
  | "InvalidAgentResponse"
  | "ExtendedAgentCardNotConfigured"
  | "ExtensionSupportRequired"
  | "VersionNotSupported"
  | "InvalidParams"
  | "InvalidRequest"
  | "MethodNotFound"
  | "ParseError"
  | "Unauthenticated"
  | "PermissionDenied"
  | "ResourceExhausted"
  | "Unavailable"
  | "Internal";

/** The error domain the specification gives its google.rpc.ErrorInfo details. */
export const A2A_ERROR_DOMAIN = "a2a-protocol.org";
