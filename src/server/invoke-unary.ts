// A unary method called through the interceptors, as connect-es's
// invokeUnaryImplementation does it, with one difference: the call's
// AbortSignal is read only by code that asks for it. connect-es copies the
// signal into the request the interceptors see and into the handler's
// context up front, so every call made one; Node gives each AbortSignal
// three hidden classes of its own in the old generation (about 1% of a
// signed Send's CPU, and garbage for the full GCs), and a waited Send, the
// common call, listens through callAbortKey instead (call-abort.ts). What
// else the short paths keep of connect-es's pipeline: short-call.ts.
import { create, type DescMessage, type MessageShape } from "@bufbuild/protobuf";
import type { ContextValues, HandlerContext, Interceptor, MethodImplSpec, StreamRequest, StreamResponse, UnaryRequest, UnaryResponse } from "@connectrpc/connect";

type UnarySpec<I extends DescMessage, O extends DescMessage> = Extract<MethodImplSpec<I, O>, { kind: "unary" }>;
type AnyFn = (req: UnaryRequest | StreamRequest) => Promise<UnaryResponse | StreamResponse>;

/** A request's signal: the context's, made when first read. One function for every request, so they share a hidden class. */
function contextSignal(this: { context: HandlerContext }): AbortSignal {
  return this.context.signal;
}

/**
 * The request the interceptors see; its signal is the context's, read when
 * asked for. The signal is an own enumerable property (an accessor), so a
 * request an interceptor copies ({ ...req, header }) carries it, as
 * connect-es's plain request objects do.
 */
class UnaryCallRequest<I extends DescMessage, O extends DescMessage> implements UnaryRequest<I, O> {
  declare readonly signal: AbortSignal;
  readonly stream = false;
  readonly method: UnarySpec<I, O>["method"];
  readonly service: UnarySpec<I, O>["method"]["parent"];
  readonly requestMethod: string;
  readonly url: string;
  readonly header: Headers;
  readonly contextValues: ContextValues;

  constructor(
    readonly message: MessageShape<I>,
    spec: UnarySpec<I, O>,
    private readonly context: HandlerContext,
  ) {
    this.method = spec.method;
    this.service = spec.method.parent;
    this.requestMethod = context.requestMethod;
    this.url = context.url;
    this.header = context.requestHeader;
    this.contextValues = context.values;
    Object.defineProperty(this, "signal", { get: contextSignal, enumerable: true });
  }
}

/**
 * The handler's context for a request an interceptor may have replaced
 * (connect-es's mergeRequest), field by field: a spread of the context
 * followed by fields gives every such object a hidden class of its own.
 */
export function contextFor(context: HandlerContext, req: UnaryRequest | StreamRequest): HandlerContext {
  return {
    method: context.method,
    timeoutMs: context.timeoutMs,
    requestMethod: context.requestMethod,
    responseHeader: context.responseHeader,
    responseTrailer: context.responseTrailer,
    protocolName: context.protocolName,
    url: context.url,
    service: req.service,
    requestHeader: req.header,
    signal: req.signal,
    values: req.contextValues,
  };
}

/** What an interceptor's response carries back to the call (connect-es's copyHeaders): `to` made equal to `from`. */
export function copyHeaders(from: Headers, to: Headers): void {
  if (from === to) return;
  to.forEach((_, key) => to.delete(key));
  from.forEach((value, key) => to.set(key, value));
}

/** Calls a unary method's implementation through `interceptors`; resolves with its output message. */
export async function invokeUnary<I extends DescMessage, O extends DescMessage>(
  spec: UnarySpec<I, O>,
  context: HandlerContext,
  input: MessageShape<I>,
  interceptors: readonly Interceptor[],
): Promise<MessageShape<O>> {
  const request = new UnaryCallRequest(input, spec, context);
  const implementation = async (req: UnaryRequest<I, O>): Promise<UnaryResponse<I, O>> => {
    const output = await spec.impl(req.message, req === request ? context : contextFor(context, req));
    return {
      stream: false,
      message: create(spec.method.output, output),
      method: spec.method,
      service: spec.method.parent,
      header: context.responseHeader,
      trailer: context.responseTrailer,
    };
  };
  // The first interceptor is the outermost, as connect-es applies them.
  const next = interceptors.reduceRight<AnyFn>((inner, interceptor) => interceptor(inner), implementation as unknown as AnyFn);
  const response = (await next(request)) as UnaryResponse<I, O>;
  copyHeaders(response.header, context.responseHeader);
  copyHeaders(response.trailer, context.responseTrailer);
  return response.message;
}
