/**
 * Retry delay and the decision after a failed attempt (invariant 6; failure row "target keeps failing").
 */
import { describe, expect, it } from "vitest";
import {
  DEFAULT_RETRY_POLICY,
  decideAfterFailure,
  MAX_DISPATCH_WAIT_MS,
  type RetryPolicy,
  redispatchAt,
  retryDelayMs,
} from "../../src/core/backoff";

const policy = (overrides: Partial<RetryPolicy> = {}): RetryPolicy => ({ ...DEFAULT_RETRY_POLICY, jitter: 0, ...overrides });

describe("retryDelayMs (invariant 6)", () => {
  it.each([
    // [initialDelayMs, factor, maxDelayMs, attempt, expected]
    [1_000, 2, 300_000, 1, 1_000],
    [1_000, 2, 300_000, 2, 2_000],
    [1_000, 2, 300_000, 3, 4_000],
    [1_000, 2, 300_000, 5, 16_000],
    [1_000, 2, 300_000, 9, 256_000],
    [1_000, 2, 300_000, 10, 300_000], // 512_000 capped
    [1_000, 2, 300_000, 60, 300_000],
    [1_000, 2, 300_000, 5_000, 300_000], // factor^n overflows to Infinity, still the cap
    [500, 3, 100_000, 1, 500],
    [500, 3, 100_000, 4, 13_500],
    [500, 3, 100_000, 6, 100_000], // 121_500 capped
    [250, 1, 10_000, 7, 250], // factor 1 = constant delay
    [1_500, 1.5, 60_000, 3, 3_375],
    [0, 2, 60_000, 4, 0],
    [1_000, 2, 300_000, 0, 1_000], // attempt below 1 is treated as the first
  ])("initial %i, factor %d, max %i, attempt %i -> %i ms with jitter 0", (initialDelayMs, factor, maxDelayMs, attempt, expected) => {
    const p = policy({ initialDelayMs, factor, maxDelayMs });
    expect(retryDelayMs(p, attempt, 0)).toBe(expected);
    expect(retryDelayMs(p, attempt, 0.999)).toBe(expected); // jitter 0 ignores rand
  });

  it.each([0.2, 0.5, 1])("jitter %d takes between 0 and that fraction of the delay off", (jitter) => {
    const p = policy({ jitter });
    for (const attempt of [1, 3, 7, 12]) {
      const full = Math.min(p.maxDelayMs, p.initialDelayMs * p.factor ** (attempt - 1));
      expect(retryDelayMs(p, attempt, 0)).toBe(full);
      expect(retryDelayMs(p, attempt, 1)).toBe(Math.round(full * (1 - jitter)));
      for (const rand of [0.1, 0.37, 0.5, 0.99]) {
        const d = retryDelayMs(p, attempt, rand);
        expect(d).toBeGreaterThanOrEqual(Math.round(full * (1 - jitter)));
        expect(d).toBeLessThanOrEqual(full);
      }
    }
  });

  it("default policy: 1s, 2s, 4s, 8s before jitter, jitter 0.2 keeps at least 80%", () => {
    expect([1, 2, 3, 4].map((a) => retryDelayMs(DEFAULT_RETRY_POLICY, a, 0))).toEqual([1_000, 2_000, 4_000, 8_000]);
    expect([1, 2, 3, 4].map((a) => retryDelayMs(DEFAULT_RETRY_POLICY, a, 1))).toEqual([800, 1_600, 3_200, 6_400]);
  });

  it("never exceeds maxDelayMs, whatever rand", () => {
    const p = policy({ jitter: 0.5, maxDelayMs: 7_000 });
    for (let attempt = 1; attempt <= 30; attempt++) {
      for (const rand of [0, 0.25, 0.75, 1]) expect(retryDelayMs(p, attempt, rand)).toBeLessThanOrEqual(7_000);
    }
  });
});

describe("decideAfterFailure (invariant 6)", () => {
  const now = 1_700_000_000_000;
  const base = { policy: policy({ maxAttempts: 5 }), now, rand: 0 };

  it("a permanent failure is dead at once, attempts left or not", () => {
    for (const attemptsUsed of [1, 2, 5, 9]) {
      expect(decideAfterFailure({ ...base, attemptsUsed, failure: "permanent" })).toEqual({ kind: "dead", reason: "permanent" });
    }
  });

  it.each([5, 6, 100])("a retryable failure with attemptsUsed %i of 5 is dead: attempts_exhausted", (attemptsUsed) => {
    expect(decideAfterFailure({ ...base, attemptsUsed, failure: "retryable" })).toEqual({ kind: "dead", reason: "attempts_exhausted" });
  });

  it("maxAttempts 1 means no retry at all", () => {
    expect(decideAfterFailure({ ...base, policy: policy({ maxAttempts: 1 }), attemptsUsed: 1, failure: "retryable" })).toEqual({
      kind: "dead",
      reason: "attempts_exhausted",
    });
  });

  it.each([
    [1, 1_000],
    [2, 2_000],
    [3, 4_000],
    [4, 8_000],
  ])("retryable failure after attempt %i retries after %i ms, dueAt = now + delay", (attemptsUsed, delayMs) => {
    expect(decideAfterFailure({ ...base, attemptsUsed, failure: "retryable" })).toEqual({ kind: "retry", dueAt: now + delayMs, delayMs });
  });

  it("passes rand to the jitter", () => {
    const decision = decideAfterFailure({ ...base, policy: policy({ jitter: 0.5 }), attemptsUsed: 3, failure: "retryable", rand: 1 });
    expect(decision).toEqual({ kind: "retry", dueAt: now + 2_000, delayMs: 2_000 });
  });

  it.each([
    // [attemptsUsed, retryAfterMs, expected delay]
    [1, 30_000, 30_000], // longer Retry-After wins
    [1, 1_001, 1_001],
    [1, 999_999_999, 300_000], // ...but never past maxDelayMs
    [4, 300_001, 300_000],
    [3, 1_000, 4_000], // shorter Retry-After is ignored
    [3, 0, 4_000],
    [3, 4_000, 4_000], // equal: the computed delay
  ])("attempt %i with Retry-After %i ms waits %i ms (invariant 6)", (attemptsUsed, retryAfterMs, delayMs) => {
    expect(decideAfterFailure({ ...base, attemptsUsed, failure: "retryable", retryAfterMs })).toEqual({
      kind: "retry",
      dueAt: now + delayMs,
      delayMs,
    });
  });

  it("Retry-After does not revive an execution out of attempts or permanently failed", () => {
    expect(decideAfterFailure({ ...base, attemptsUsed: 5, failure: "retryable", retryAfterMs: 10_000 })).toEqual({
      kind: "dead",
      reason: "attempts_exhausted",
    });
    expect(decideAfterFailure({ ...base, attemptsUsed: 1, failure: "permanent", retryAfterMs: 10_000 })).toEqual({
      kind: "dead",
      reason: "permanent",
    });
  });
});

describe("redispatchAt (failure row: message lost, without copies for a slow queue)", () => {
  it.each<[string, boolean, number]>([
    ["overtaken: DISPATCH_TIMEOUT_MS after the send", true, 1_000 + 10_000],
    ["not overtaken: only after MAX_DISPATCH_WAIT_MS", false, 1_000 + MAX_DISPATCH_WAIT_MS],
  ])("%s", (_name, overtaken, expected) => {
    expect(redispatchAt(1_000, overtaken, 10_000)).toBe(expected);
  });

  it("waits ten minutes for a dispatch nothing overtook", () => {
    expect(MAX_DISPATCH_WAIT_MS).toBe(600_000);
  });
});
