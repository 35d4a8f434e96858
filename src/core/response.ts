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

/** A bounded excerpt (in UTF-16 units) of a body or error kept on the attempt, never splitting a character. */
export function excerpt(text: string, limit = EXCERPT_LENGTH): string {
  if (text.length <= limit) return text;
  const last = text.charCodeAt(limit - 1);
  const end = last >= 0xd800 && last <= 0xdbff ? limit - 1 : limit;
  return `${text.slice(0, end)}…`;
}
