/**
 * The use-cases' refusals, each answered in one error envelope: { error: { code, message, field } }
 * (api/app.ts). Every code is in ERRORS with its HTTP status and what it means: the one place a
 * code's status is written (BullMQ's finished-errors), so a code cannot answer two statuses. The
 * message, which names the request's own values, is written where the refusal is found.
 */
import type { z } from "zod";
import { findUnfaithful } from "../core/json-text";

export const ERRORS = {
  invalid_field: { status: 400, means: "a field's value is refused; `field` names it" },
  unknown_field: { status: 400, means: "a field the route does not take (schemas are strict)" },
  invalid_json: { status: 400, means: "the body is not JSON" },
  invalid_body: { status: 400, means: "the body is not UTF-8" },
  unauthorized: { status: 401, means: "no valid API key" },
  not_found: { status: 404, means: "no such thing of the caller's tenant (another tenant's looks the same)" },
  archive_not_configured: { status: 404, means: "no R2 bucket is bound as ARCHIVE" },
  method_not_allowed: { status: 405, means: "the path exists, not with this method (Allow lists them)" },
  conflict: { status: 409, means: "the job changed meanwhile: read it and try again" },
  idempotency_key_reused: { status: 409, means: "the Idempotency-Key was used with another request" },
  idempotency_job_purged: { status: 409, means: "the key's job left the history and the archive does not hold it" },
  not_cancelable: { status: 409, means: "the job already ended" },
  not_active: { status: 409, means: "the job is not active (pause)" },
  not_paused: { status: 409, means: "the job is not paused (resume)" },
  not_changeable: { status: 409, means: "the job is canceled or completed (change)" },
  not_recurring: { status: 409, means: "pause and resume are for recurring jobs" },
  not_dead: { status: 409, means: "the execution is not dead (redrive)" },
  job_canceled: { status: 409, means: "the dead execution's job is canceled (redrive)" },
  job_inactive: { status: 409, means: "the job is paused or canceled (redrive)" },
  stale_lease: { status: 409, means: "the lease is no longer the caller's" },
  // a bucket's refusals of a redrive (protocol/bucket.ts RESULT_MESSAGES), answered as the bucket gave them
  duplicate: { status: 409, means: "the execution is live, finished or rescheduled" },
  unknown: { status: 409, means: "the bucket does not hold the execution" },
  not_due: { status: 409, means: "the execution waits for its due time" },
  not_offered: { status: 409, means: "the execution is not waiting for a pull worker" },
  offered: { status: 409, means: "the execution waits in its pull queue" },
  payload_too_large: { status: 413, means: "the body is larger than the route takes" },
  unsupported_media_type: { status: 415, means: "the body is not application/json" },
  rate_limited: { status: 429, means: "over the key's rate limit (Retry-After)" },
  internal: { status: 500, means: "a dependency failed; nothing accepted before was lost" },
  shard_unavailable: { status: 503, means: "a D1 shard the request needs did not answer (Retry-After)" },
  shards_lowered: { status: 503, means: "fewer D1 shards are bound than the deployment has had (Retry-After)" },
  unavailable: { status: 503, means: "an object the request needs did not answer" },
  shards_full: { status: 507, means: "every D1 shard is full: nothing was stored" },
} as const satisfies Record<string, { status: number; means: string }>;

export type ErrorCode = keyof typeof ERRORS;
export type ErrorStatus = (typeof ERRORS)[ErrorCode]["status"];

/** A code another party answered (a bucket's refusal, a debounce object's answer): one of ours, else conflict. */
export function errorCodeOf(code: string): ErrorCode {
  return Object.hasOwn(ERRORS, code) ? (code as ErrorCode) : "conflict";
}

export class ApiError extends Error {
  readonly status: ErrorStatus;
  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly field: string | null = null,
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
    this.status = ERRORS[code].status;
  }
}

export function errorBody(code: ErrorCode, message: string, field: string | null = null) {
  return { error: { code, message, field } };
}

/** "jobs[3].target.url" from a zod path, with an optional prefix. */
export function fieldPath(path: ReadonlyArray<PropertyKey>, prefix = ""): string {
  let out = prefix;
  for (const part of path) {
    if (typeof part === "number") out += `[${part}]`;
    else {
      // a key that is not well-formed Unicode is shown escaped, so the error itself is valid text
      const name = typeof part === "string" && !part.isWellFormed() ? JSON.stringify(part).slice(1, -1) : String(part);
      out += out ? `.${name}` : name;
    }
  }
  return out;
}

/** The first zod issue as a 400 naming its field. */
export function fromZodError(error: z.ZodError, prefix = ""): ApiError {
  const issue = error.issues[0]!;
  if (issue.code === "unrecognized_keys") {
    const key = issue.keys[0] || '""'; // an empty key still gets a visible name
    const field = fieldPath([...issue.path, key], prefix);
    return new ApiError("unknown_field", `unknown field "${field}"`, field);
  }
  const field = fieldPath(issue.path, prefix) || "body"; // an empty path is the request body itself
  return new ApiError("invalid_field", `${field}: ${issue.message}`, field);
}

/** A 400 naming the first value of a request that could not be stored and sent as given (core/json-text.ts). */
export function refuseUnfaithful(raw: unknown, prefix = ""): void {
  const found = findUnfaithful(raw);
  if (!found) return;
  const field = fieldPath(found.path, prefix) || "body";
  const freeForm = found.path[0] === "metadata" || (found.path[0] === "target" && found.path[1] === "body");
  const message = `${field}: ${found.problem}${freeForm && found.advice ? `; ${found.advice}` : ""}`;
  throw new ApiError("invalid_field", message, field);
}
