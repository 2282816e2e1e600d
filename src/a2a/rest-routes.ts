// The HTTP+JSON/REST binding's routes (specification section 11.3) and how a
// request becomes the RPC's request message: path parameters and the
// optional leading /{tenant} segment into their fields, query parameters
// (section 11.5: camelCase names, enums by name, booleans as true/false,
// timestamps as ISO 8601, repeated fields repeated or comma-separated) for
// GET and DELETE, and the ProtoJSON body for POST.
import { ScalarType, type DescField, type DescMessage, type DescMethod, type JsonObject, type JsonValue } from "@bufbuild/protobuf";
import { a2aError } from "./errors.js";
import { methodNamed } from "./http-call.js";

export type Verb = "GET" | "POST" | "DELETE";

export interface RouteCall {
  method: DescMethod;
  /** Whether the request message comes in the body (POST); otherwise from the query. */
  body: boolean;
}

interface Route {
  pattern: RegExp;
  /** The request fields (JSON names) the pattern's groups fill, in order. */
  params: readonly string[];
  verbs: Partial<Record<Verb, RouteCall>>;
}

function rpc(name: string, body: boolean): RouteCall {
  const method = methodNamed(name);
  if (method === undefined) throw new TypeError(`lf.a2a.v1.A2AService has no method ${name}`);
  return { method, body };
}

const SEGMENT = "([^/]+)";
/** Checked in order: a path the first pattern matches is that route's, whatever the verb (another verb is 405). */
const ROUTES: readonly Route[] = [
  { pattern: /^\/message:send$/, params: [], verbs: { POST: rpc("SendMessage", true) } },
  { pattern: /^\/message:stream$/, params: [], verbs: { POST: rpc("SendStreamingMessage", true) } },
  { pattern: new RegExp(`^/tasks/${SEGMENT}:cancel$`), params: ["id"], verbs: { POST: rpc("CancelTask", true) } },
  // The specification says POST; GET is served too, for EventSource.
  { pattern: new RegExp(`^/tasks/${SEGMENT}:subscribe$`), params: ["id"], verbs: { POST: rpc("SubscribeToTask", true), GET: rpc("SubscribeToTask", false) } },
  {
    pattern: new RegExp(`^/tasks/${SEGMENT}/pushNotificationConfigs/${SEGMENT}$`),
    params: ["taskId", "id"],
    verbs: { GET: rpc("GetTaskPushNotificationConfig", false), DELETE: rpc("DeleteTaskPushNotificationConfig", false) },
  },
  {
    pattern: new RegExp(`^/tasks/${SEGMENT}/pushNotificationConfigs$`),
    params: ["taskId"],
    verbs: { POST: rpc("CreateTaskPushNotificationConfig", true), GET: rpc("ListTaskPushNotificationConfigs", false) },
  },
  { pattern: new RegExp(`^/tasks/${SEGMENT}$`), params: ["id"], verbs: { GET: rpc("GetTask", false) } },
  { pattern: /^\/tasks$/, params: [], verbs: { GET: rpc("ListTasks", false) } },
  { pattern: /^\/extendedAgentCard$/, params: [], verbs: { GET: rpc("GetExtendedAgentCard", false) } },
];

export interface RouteMatch {
  route: Route;
  /** The path parameters (and tenant), by the request fields' JSON names. */
  fields: Record<string, string>;
}

function decode(segment: string): string | undefined {
  try {
    return decodeURIComponent(segment);
  } catch {
    return undefined;
  }
}

function matchOne(path: string): RouteMatch | undefined {
  for (const route of ROUTES) {
    const groups = route.pattern.exec(path);
    if (groups === null) continue;
    const fields: Record<string, string> = {};
    for (const [index, name] of route.params.entries()) {
      const value = decode(groups[index + 1]!);
      if (value === undefined) return undefined;
      fields[name] = value;
    }
    return { route, fields };
  }
  return undefined;
}

/**
 * The route of a path under the binding's prefix: as it is, or after a first
 * segment that names the tenant (a path that is a route without it is never
 * read as a tenant's: /tasks/tasks is GetTask of the task "tasks").
 */
export function matchRoute(path: string): RouteMatch | undefined {
  const plain = matchOne(path);
  if (plain !== undefined) return plain;
  const tenantEnd = path.indexOf("/", 1);
  if (tenantEnd <= 1) return undefined;
  const tenant = decode(path.slice(1, tenantEnd));
  const rest = matchOne(path.slice(tenantEnd));
  if (tenant === undefined || tenant === "" || rest === undefined) return undefined;
  return { route: rest.route, fields: { ...rest.fields, tenant } };
}

/** The verbs a route answers (for Allow). */
export function verbsOf(match: RouteMatch): Verb[] {
  return Object.keys(match.route.verbs) as Verb[];
}

export function callOf(match: RouteMatch, verb: string): RouteCall | undefined {
  return match.route.verbs[verb as Verb];
}

const TRUE_FALSE = new Map([
  ["true", true],
  ["false", false],
]);

function fieldOf(schema: DescMessage, name: string): DescField | undefined {
  return schema.fields.find((field) => field.jsonName === name || field.name === name);
}

/** One query value as the JSON the field's ProtoJSON parser takes. */
function queryValue(field: DescField, value: string): JsonValue {
  const kind = field.fieldKind === "list" ? field.listKind : field.fieldKind;
  if (kind === "enum") return /^-?\d+$/.test(value) ? Number(value) : value;
  if (kind === "message") {
    const typeName = field.fieldKind === "list" || field.fieldKind === "message" ? field.message?.typeName : undefined;
    if (typeName === "google.protobuf.Timestamp") return value;
    throw a2aError("InvalidParams", `${field.jsonName} is an object and cannot be given in the query; POST it in a body`);
  }
  const scalar = field.fieldKind === "list" || field.fieldKind === "scalar" ? field.scalar : undefined;
  if (scalar === ScalarType.BOOL) {
    const bool = TRUE_FALSE.get(value);
    if (bool === undefined) throw a2aError("InvalidParams", `${field.jsonName} must be true or false, not ${JSON.stringify(value.slice(0, 32))}`);
    return bool;
  }
  return value; // strings as they are; ProtoJSON takes numbers as decimal strings and checks them
}

/** The request message's JSON from the query (fields it does not name, A2A-Version among them, are ignored). */
export function queryJson(schema: DescMessage, query: URLSearchParams): JsonObject {
  const json: JsonObject = {};
  for (const name of new Set(query.keys())) {
    const field = fieldOf(schema, name);
    if (field === undefined || field.fieldKind === "map") continue;
    const values = query.getAll(name);
    if (field.fieldKind === "list") {
      json[field.jsonName] = values.flatMap((value) => value.split(",")).filter((value) => value !== "").map((value) => queryValue(field, value));
    } else {
      json[field.jsonName] = queryValue(field, values[values.length - 1]!);
    }
  }
  return json;
}

/** The request body's JSON: an object, or an empty body for requests whose path says everything. */
export function bodyJson(text: string): JsonObject {
  if (text.trim() === "") return {};
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (error) {
    throw a2aError("ParseError", `the body is not valid JSON: ${(error as Error).message}`);
  }
  if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) throw a2aError("InvalidParams", "the body must be a JSON object: the request message");
  return parsed as JsonObject;
}
