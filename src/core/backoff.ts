/** Retry policy and the decision after a failed attempt (invariant 6). Pure: rand is passed in. */
export interface RetryPolicy {
  maxAttempts: number;
  initialDelayMs: number;
  maxDelayMs: number;
  factor: number;
  /** fraction of the delay that is randomized, 0 = deterministic, 1 = full jitter */
  jitter: number;
}

export const DEFAULT_RETRY_POLICY: RetryPolicy = {
  maxAttempts: 5,
  initialDelayMs: 1_000,
  maxDelayMs: 300_000,
  factor: 2,
  jitter: 0.2,
};

/** min(maxDelay, initialDelay * factor^(attempt-1)), then up to `jitter` of it taken off at random. */
export function retryDelayMs(policy: RetryPolicy, attempt: number, rand: number): number {
  const exponential = policy.initialDelayMs * policy.factor ** Math.max(0, attempt - 1);
  const capped = Math.min(policy.maxDelayMs, exponential);
  return Math.round(capped * (1 - policy.jitter * rand));
}

export type FailureKind = "retryable" | "permanent";

export type AfterFailure = { kind: "retry"; dueAt: number; delayMs: number } | { kind: "dead"; reason: "permanent" | "attempts_exhausted" };

/**
 * attemptsUsed counts attempts since the last redrive (the budget), including the one that failed.
 * A target's Retry-After wins over the computed delay when longer, but never past maxDelayMs.
 */
export function decideAfterFailure(input: {
  policy: RetryPolicy;
  attemptsUsed: number;
  failure: FailureKind;
  retryAfterMs?: number | undefined;
  now: number;
  rand: number;
}): AfterFailure {
  if (input.failure === "permanent") return { kind: "dead", reason: "permanent" };
  if (input.attemptsUsed >= input.policy.maxAttempts) return { kind: "dead", reason: "attempts_exhausted" };
  let delayMs = retryDelayMs(input.policy, input.attemptsUsed, input.rand);
  if (input.retryAfterMs !== undefined && input.retryAfterMs > delayMs) {
    delayMs = Math.min(input.policy.maxDelayMs, input.retryAfterMs);
  }
  return { kind: "retry", dueAt: input.now + delayMs, delayMs };
}

/** A dispatch nobody claimed is sent again after this long, whether or not anything overtook it. */
export const MAX_DISPATCH_WAIT_MS = 600_000;

/**
 * When an unclaimed dispatch counts as lost and is sent again (failure row "message lost"): once a
 * dispatch of the same bucket sent at least `timeoutMs` after it was claimed (it was overtaken by
 * that much), `timeoutMs` after it was sent; otherwise only after MAX_DISPATCH_WAIT_MS. Production's
 * queues do not promise order (docs/platform-limits.md): a queue that is slow, or reorders messages
 * sent within `timeoutMs` of each other, gets no copies.
 */
export function redispatchAt(sentAt: number, overtaken: boolean, timeoutMs: number): number {
  return sentAt + (overtaken ? timeoutMs : MAX_DISPATCH_WAIT_MS);
}
