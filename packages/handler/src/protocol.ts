/**
 * The contract between edge-scheduler and a handler Worker it calls over a service binding: the
 * scheduler calls the binding's `deliver(delivery)` RPC method once per attempt, and classifies
 * what it returns or throws like an HTTP answer. The scheduler imports these types from here, so
 * the two sides cannot drift.
 */

/** The RPC method the scheduler calls on the bound entrypoint. */
export const HANDLER_METHOD = "deliver";

/** What one attempt carries. */
export interface HandlerDelivery<Payload = unknown> {
  /** the execution's id: the same on every attempt and duplicate delivery, so use it as your idempotency key */
  executionId: string;
  jobId: string;
  /**
   * the tenant whose job this is: a Worker granted to several tenants must check that what the
   * payload names belongs to this tenant
   */
  tenant: string;
  /** 1, 2, … */
  attempt: number;
  /** when the execution was due, RFC 3339 */
  dueAt: string;
  /** the job's target.payload (any JSON value; null when it has none) */
  payload: Payload;
  /**
   * W3C trace context, when the job was created in a trace: this attempt's span as the parent
   * (the same trace id as the job's, a new span id per attempt). Start your spans under it.
   */
  traceparent?: string;
  /** the job's tracestate, passed on as given */
  tracestate?: string;
}

/**
 * What `deliver` returns. Returning nothing (undefined) or a string (kept as the detail) is success
 * too, so a plain WorkerEntrypoint works; a throw is a retryable failure (like a 5xx), its
 * message kept.
 */
export type HandlerResult =
  | { outcome: "succeeded"; detail?: string }
  /** retried with the job's backoff, no sooner than retryAfterMs if given */
  | { outcome: "retry"; error: string; retryAfterMs?: number }
  /** fails the execution at once (dead, reason permanent), like a 4xx */
  | { outcome: "permanent"; error: string };
