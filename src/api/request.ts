/** What every routes file reads from a request the same way: the JSON body, its size limit, headers, the query, a cursor. */
import type { Context } from "hono";
import { bodyLimit } from "hono/body-limit";
import { parseJsonBytes } from "../core/json-text";
import { type TraceContext, traceOfHeaders } from "../core/trace";
import { MAX_JSON_DEPTH } from "../schemas/job-input";
import { ApiError, fieldPath } from "../use-cases/errors";
import { decodeCursor } from "../use-cases/present";
import type { ApiEnv } from "./context";

export const SINGLE_BODY_BYTES = 128 * 1024;
export const BATCH_BODY_BYTES = 16 * 1024 * 1024;

export const limit = (maxSize: number) =>
  bodyLimit({
    maxSize,
    onError: () => {
      throw new ApiError("payload_too_large", `the request body is larger than ${maxSize} bytes`, "body");
    },
  });

/**
 * A JSON request body, read as bytes so nothing is lost before validation: a media type other
 * than JSON is a 415 (an absent one is read as JSON), bytes that are not UTF-8 or not JSON are a
 * 400, and values that cannot be kept as sent come back as markers validation refuses by field.
 */
export async function readJson(c: Context<ApiEnv>, options: { emptyIs?: unknown } = {}): Promise<unknown> {
  const type = c.req.header("content-type");
  if (type !== undefined && !isJsonMediaType(type)) {
    throw new ApiError("unsupported_media_type", `send the body as application/json (UTF-8), not ${type.slice(0, 100)}`, "content-type");
  }
  const bytes = new Uint8Array(await c.req.arrayBuffer());
  if (bytes.byteLength === 0 && "emptyIs" in options) return options.emptyIs;
  const parsed = parseJsonBytes(bytes, MAX_JSON_DEPTH);
  if (parsed.ok) return parsed.value;
  if (parsed.problem === "not_json") throw new ApiError("invalid_json", "the request body is not valid JSON", "body");
  if (parsed.problem === "not_utf8") throw new ApiError("invalid_body", "the request body is not valid UTF-8", "body");
  const field = fieldPath(parsed.path) || "body";
  throw new ApiError("invalid_field", `${field}: must not nest deeper than ${MAX_JSON_DEPTH} levels`, field);
}

/** application/json or application/*+json, in UTF-8 (the only charset JSON has, RFC 8259). */
function isJsonMediaType(header: string): boolean {
  const [essence = "", ...parameters] = header.split(";").map((p) => p.trim().toLowerCase());
  const json = essence === "application/json" || /^application\/[a-z0-9.+-]+\+json$/.test(essence);
  const charset = parameters
    .find((p) => p.startsWith("charset="))
    ?.slice("charset=".length)
    .replace(/"/g, "");
  return json && (charset === undefined || charset === "utf-8" || charset === "utf8");
}

/** The create request's W3C trace context: its jobs belong to that trace (an invalid one is ignored, as the spec says). */
export function traceHeaders(c: Context<ApiEnv>): TraceContext | null {
  return traceOfHeaders(c.req.header("traceparent"), c.req.header("tracestate"));
}

/** The Idempotency-Key header, if sent: 1 to 200 characters of well-formed text. */
export function idempotencyKeyHeader(c: Context<ApiEnv>): string | undefined {
  const key = c.req.header("idempotency-key");
  if (key !== undefined && (key.length === 0 || key.length > 200 || !key.isWellFormed())) {
    throw new ApiError("invalid_field", "Idempotency-Key must be 1 to 200 characters", "Idempotency-Key");
  }
  return key;
}

/** The query of a list route: each parameter at most once (a repeated one is ambiguous, so refused). */
export function singleQuery(c: Context<ApiEnv>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, values] of Object.entries(c.req.queries())) {
    if (values.length > 1) throw new ApiError("invalid_field", `${name} is given ${values.length} times; give it once`, name);
    out[name] = values[0]!;
  }
  return out;
}

/** A list's cursor as the request gave it (undefined: the first page); one this API did not hand out is a 400. */
export function cursorOf(cursor: string | undefined): { at: number; id: string } | undefined {
  if (cursor === undefined) return undefined;
  const decoded = decodeCursor(cursor);
  if (decoded === null) throw badCursor();
  return decoded;
}

export function badCursor(): ApiError {
  return new ApiError("invalid_field", "cursor is not one this API returned", "cursor");
}

export function notFound(what: string): ApiError {
  // another tenant's id is indistinguishable from a missing one
  return new ApiError("not_found", `${what} not found`, "id");
}
