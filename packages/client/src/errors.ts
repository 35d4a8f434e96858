/** The API answered with an error: its envelope `{error: {code, message, field}}`, or `http_<status>` without one. */
export class SchedulerError extends Error {
  /** the HTTP status of the answer */
  readonly status: number;
  /** machine-readable: invalid_field, not_found, rate_limited, idempotency_key_reused, ...; http_<status> without an envelope */
  readonly code: string;
  /** the field at fault (`target.url`, `jobs[3].target.url`), or null */
  readonly field: string | null;
  /** the answer's Retry-After in milliseconds (as sent, not capped), or null without one */
  readonly retryAfterMs: number | null;

  constructor(init: { status: number; code: string; message: string; field?: string | null; retryAfterMs?: number | null }) {
    super(init.message);
    this.name = "SchedulerError";
    this.status = init.status;
    this.code = init.code;
    this.field = init.field ?? null;
    this.retryAfterMs = init.retryAfterMs ?? null;
  }
}

/**
 * No answer (connection failed, timed out, or the body broke off) after the retries the call allows.
 * For a change, whether the server applied it is unknown: read the resource before acting again.
 */
export class SchedulerNetworkError extends Error {
  /** what fetch threw on the last attempt (a TypeError, a TimeoutError DOMException, ...) */
  override readonly cause: unknown;

  constructor(message: string, cause: unknown) {
    super(message, { cause });
    this.name = "SchedulerNetworkError";
    this.cause = cause;
  }
}
