/** Classification of a target's answer (DESIGN.md, "HTTP targets"). */

import type { HandlerResult } from "../../packages/handler/src/protocol";
import type { FailureKind } from "./backoff";

/** httpStatus is null for a handler Worker (no HTTP) and for a request that never got an answer. */
export type DeliveryOutcome =
  | { kind: "succeeded"; httpStatus: number | null; excerpt: string }
  | { kind: "failed"; failure: FailureKind; httpStatus: number | null; error: string; retryAfterMs?: number };

/** 2xx succeed; 408, 429, 5xx retry; every other status is permanent (redirects are not followed). */
export function classifyStatus(status: number): "succeeded" | FailureKind {
  if (status >= 200 && status < 300) return "succeeded";
  if (status === 408 || status === 429 || status >= 500) return "retryable";
  return "permanent";
}

const HTTP_DATE = /^(Mon|Tue|Wed|Thu|Fri|Sat|Sun), \d{2} (Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) \d{4} \d{2}:\d{2}:\d{2} GMT$/;

/** Retry-After as delay-seconds or an IMF-fixdate, relative to now; undefined when absent or malformed. */
export function parseRetryAfterMs(header: string | null, now: number): number | undefined {
  if (header === null) return undefined;
  const trimmed = header.trim();
  if (/^\d+$/.test(trimmed)) return Number(trimmed) * 1000;
  if (!HTTP_DATE.test(trimmed)) return undefined; // Date.parse would read "1.5" or "-1" as a date
  const at = Date.parse(trimmed);
  if (!Number.isFinite(at)) return undefined;
  return Math.max(0, at - now);
}

export const EXCERPT_LENGTH = 1024;

/**
 * What is kept of a successful attempt's response (a failure's is in its error, up to
 * EXCERPT_LENGTH): enough to recognise it, little enough that every succeeded attempt carries it.
 */
export const RESPONSE_EXCERPT_LENGTH = 256;

/** A bounded excerpt (in UTF-16 units) of a body or error kept on the attempt, never splitting a character. */
export function excerpt(text: string, limit = EXCERPT_LENGTH): string {
  if (text.length <= limit) return text;
  const last = text.charCodeAt(limit - 1);
  const end = last >= 0xd800 && last <= 0xdbff ? limit - 1 : limit;
  return `${text.slice(0, end)}…`;
}

/**
 * A handler Worker's answer (packages/handler/src/protocol.ts), classified like an HTTP answer:
 * returning nothing, a string (kept as the detail) or `succeeded` is success; `retry` is retryable
 * (no sooner than its retryAfterMs); `permanent` fails the execution. Anything else it returns is
 * a contract error: permanent, since retrying the same code returns the same thing.
 */
export function classifyHandlerResult(result: unknown): DeliveryOutcome {
  if (result === undefined || result === null) return { kind: "succeeded", httpStatus: null, excerpt: "" };
  if (typeof result === "string") return { kind: "succeeded", httpStatus: null, excerpt: excerpt(result) };
  const r = result as Partial<HandlerResult> & { detail?: unknown; error?: unknown; retryAfterMs?: unknown };
  const error = typeof r.error === "string" ? excerpt(r.error) : "";
  switch (r.outcome) {
    case "succeeded":
      return { kind: "succeeded", httpStatus: null, excerpt: typeof r.detail === "string" ? excerpt(r.detail) : "" };
    case "retry": {
      const after =
        typeof r.retryAfterMs === "number" && Number.isFinite(r.retryAfterMs) && r.retryAfterMs >= 0
          ? Math.ceil(r.retryAfterMs)
          : undefined;
      return {
        kind: "failed",
        failure: "retryable",
        httpStatus: null,
        error: error || "the handler asked for a retry",
        ...(after === undefined ? {} : { retryAfterMs: after }),
      };
    }
    case "permanent":
      return { kind: "failed", failure: "permanent", httpStatus: null, error: error || "the handler failed it permanently" };
    default:
      return {
        kind: "failed",
        failure: "permanent",
        httpStatus: null,
        error: excerpt(`the handler returned ${describeValue(result)}, not a HandlerResult (outcome succeeded, retry or permanent)`),
      };
  }
}

/** A short description of any value, even one JSON cannot write (a BigInt, a cycle). */
function describeValue(value: unknown): string {
  try {
    return String(JSON.stringify(value)).slice(0, 200);
  } catch {
    return typeof value;
  }
}
