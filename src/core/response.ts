/** Classification of a target's answer (DESIGN.md, "HTTP targets"). */
import type { FailureKind } from "./backoff";

export type DeliveryOutcome =
  | { kind: "succeeded"; httpStatus: number; excerpt: string }
  | { kind: "failed"; failure: FailureKind; httpStatus: number | null; error: string; retryAfterMs?: number };

/** 2xx succeed; 408, 429, 5xx retry; every other status is permanent (redirects are not followed). */
export function classifyStatus(status: number): "succeeded" | FailureKind {
  if (status >= 200 && status < 300) return "succeeded";
  if (status === 408 || status === 429 || status >= 500) return "retryable";
  return "permanent";
}

/** Retry-After as delay-seconds or an HTTP-date, relative to now; undefined when absent or malformed. */
export function parseRetryAfterMs(header: string | null, now: number): number | undefined {
  if (header === null) return undefined;
  const trimmed = header.trim();
  if (/^\d+$/.test(trimmed)) return Number(trimmed) * 1000;
  const at = Date.parse(trimmed);
  if (!Number.isFinite(at)) return undefined;
  return Math.max(0, at - now);
}

export const EXCERPT_BYTES = 1024;

/** A bounded excerpt of a body or error kept on the attempt. */
export function excerpt(text: string, limit = EXCERPT_BYTES): string {
  return text.length <= limit ? text : `${text.slice(0, limit)}…`;
}
