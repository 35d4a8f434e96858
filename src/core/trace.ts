/**
 * W3C Trace Context (https://www.w3.org/TR/trace-context/): a job created inside a trace keeps
 * its `traceparent` and `tracestate`, and each attempt is a child span of it, sent to the target
 * as a `traceparent` of the same trace with the attempt's own span id.
 *
 * An attempt's span id is derived from its execution id and attempt number, not drawn at random:
 * the consumer, the API and the console compute the same id without storing it (no row written),
 * and a duplicate delivery of one attempt carries the same span, as it is the same attempt.
 */

/** What a job keeps of the trace it was created in. */
export interface TraceContext {
  /** version 00: `00-<32 hex trace id>-<16 hex parent id>-<2 hex flags>` */
  traceparent: string;
  /** vendors' state, passed on as given */
  tracestate?: string;
}

export interface Traceparent {
  traceId: string;
  parentId: string;
  flags: string;
}

const TRACEPARENT = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?$/;
const ZERO_TRACE = "0".repeat(32);
const ZERO_SPAN = "0".repeat(16);
const MASK_64 = 0xffffffffffffffffn;
/** The spec's limit a vendor may drop at; ours is a hard one so a job's spec stays small. */
export const TRACESTATE_MAX_LENGTH = 512;

/**
 * Parses a traceparent as the spec says a receiver must: version ff and all-zero ids are invalid;
 * version 00 is exactly four fields; a later version may carry more after a dash, which is ignored.
 * Returns null for anything else.
 */
export function parseTraceparent(value: string): Traceparent | null {
  const match = TRACEPARENT.exec(value.trim());
  if (!match) return null;
  const [, version, traceId, parentId, flags, rest] = match as unknown as [string, string, string, string, string, string | undefined];
  if (version === "ff" || traceId === ZERO_TRACE || parentId === ZERO_SPAN) return null;
  if (version === "00" && rest !== undefined) return null;
  return { traceId, parentId, flags };
}

/**
 * A tracestate as passed on: at most TRACESTATE_MAX_LENGTH characters of printable ASCII (the
 * spec's list-members are a subset; vendors validate their own members), spaces around it dropped.
 * A control character anywhere, at an end too, makes it unusable (trim() dropped those at the ends,
 * so a body's "\tx" was taken and "x\ty" refused: issue 36 item 9). Null: not usable.
 */
export function usableTracestate(value: string): string | null {
  if (!/^[\x20-\x7e]*$/.test(value)) return null;
  const trimmed = value.replace(/^ +| +$/g, "");
  return trimmed.length <= TRACESTATE_MAX_LENGTH ? trimmed : null;
}

/**
 * The trace context of a create request's headers, or null: an invalid traceparent is ignored,
 * with its tracestate, as the spec tells a receiver (the request is not refused for it).
 */
export function traceOfHeaders(traceparent: string | undefined, tracestate: string | undefined): TraceContext | null {
  if (traceparent === undefined) return null;
  const parent = parseTraceparent(traceparent);
  if (!parent) return null;
  const state = tracestate === undefined ? null : usableTracestate(tracestate);
  return { traceparent: formatTraceparent(parent), ...(state ? { tracestate: state } : {}) };
}

/**
 * Version 00, which is what this side speaks (a later version's extra fields are dropped). Flags
 * this side does not know are passed on as zero, as the spec says: only sampled (0x01) and
 * Level 2's random (0x02) are kept.
 */
export function formatTraceparent(t: Traceparent): string {
  const flags = (Number.parseInt(t.flags, 16) & 0x03).toString(16).padStart(2, "0");
  return `00-${t.traceId}-${t.parentId}-${flags}`;
}

/**
 * The span id of an execution's attempt: 64 bits of FNV-1a over "<executionId>:<attempt>", mixed
 * by MurmurHash3's finalizer so that neighbouring attempts and ids differ in every digit, never
 * all zeros (invalid in the spec).
 */
export function attemptSpanId(executionId: string, attempt: number): string {
  const input = `${executionId}:${attempt}`;
  let hash = 0xcbf29ce484222325n;
  for (let i = 0; i < input.length; i++) {
    hash ^= BigInt(input.charCodeAt(i));
    hash = (hash * 0x100000001b3n) & MASK_64;
  }
  hash ^= hash >> 33n;
  hash = (hash * 0xff51afd7ed558ccdn) & MASK_64;
  hash ^= hash >> 33n;
  hash = (hash * 0xc4ceb9fe1a85ec53n) & MASK_64;
  hash ^= hash >> 33n;
  const hex = hash.toString(16).padStart(16, "0");
  return hex === ZERO_SPAN ? "0000000000000001" : hex;
}

/** What an attempt is sent: its own traceparent, and the job's tracestate. */
export interface AttemptTrace {
  traceparent: string;
  tracestate?: string;
}

/**
 * The headers an attempt carries: the job's trace, with this attempt as the parent span. Null for a
 * stored traceparent that does not parse (only parsed ones are stored; never expected).
 */
export function attemptTraceHeaders(trace: TraceContext, executionId: string, attempt: number): AttemptTrace | null {
  const parent = parseTraceparent(trace.traceparent);
  if (!parent) return null;
  const traceparent = formatTraceparent({ ...parent, parentId: attemptSpanId(executionId, attempt) });
  return trace.tracestate === undefined ? { traceparent } : { traceparent, tracestate: trace.tracestate };
}
