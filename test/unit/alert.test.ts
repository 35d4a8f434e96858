/**
 * Alert digests' pure rules (src/core/alert.ts): when the next may go, what waits, truncation with
 * its count; a flow key's throttle episode (chained slow-downs) and when it passes its threshold.
 */
import { describe, expect, it } from "vitest";
import {
  addPending,
  addThrottle,
  type Death,
  digestOf,
  nextDigestAt,
  PENDING_MAX,
  THROTTLE_EPISODE_GAP_MS,
  THROTTLED_MAX,
  type ThrottleEpisode,
  throttleAlertDue,
  throttleCheckAt,
  throttleEpisodeAfter,
} from "../../src/core/alert";

const death = (i: number): Death => ({
  executionId: `exe_${String(i).padStart(26, "0")}`,
  jobId: `job_${i}`,
  deadAt: 1_000 + i,
  deadReason: "attempts_exhausted",
  attempts: 3,
  lastHttpStatus: 500,
  lastError: "HTTP 500",
});

describe("nextDigestAt", () => {
  it("goes at once after none, else 10 s after the last", () => {
    expect(nextDigestAt(null, 5_000)).toBe(5_000);
    expect(nextDigestAt(5_000, 6_000)).toBe(15_000);
    expect(nextDigestAt(5_000, 20_000)).toBe(20_000);
  });
});

describe("addPending", () => {
  it("keeps each execution once and counts what is beyond PENDING_MAX", () => {
    const first = addPending([], 0, [death(1), death(2), death(1)]);
    expect(first.pending.map((d) => d.executionId)).toEqual([death(1).executionId, death(2).executionId]);
    const full = addPending(
      [],
      0,
      Array.from({ length: PENDING_MAX + 5 }, (_, i) => death(i)),
    );
    expect(full.pending).toHaveLength(PENDING_MAX);
    expect(full.dropped).toBe(5);
  });
});

describe("digestOf", () => {
  it("lists 3 deaths, oldest first, untruncated", () => {
    const { body, listed } = digestOf("acme", [death(3), death(1), death(2)], 0, 10_000);
    expect(listed).toBe(3);
    expect(body).toMatchObject({ type: "executions.dead", tenant: "acme", count: 3, truncated: 0, sentAt: "1970-01-01T00:00:10.000Z" });
    expect((body.executions as { jobId: string }[]).map((e) => e.jobId)).toEqual(["job_1", "job_2", "job_3"]);
  });

  it("lists at most 100 and counts the rest, those beyond PENDING_MAX included", () => {
    const { body, listed } = digestOf(
      "acme",
      Array.from({ length: 150 }, (_, i) => death(i)),
      7,
      0,
    );
    expect(listed).toBe(100);
    expect(body).toMatchObject({ count: 157, truncated: 57 });
    expect(body.executions as unknown[]).toHaveLength(100);
  });
});

describe("throttle episodes", () => {
  const withThreshold = (e: ThrottleEpisode, thresholdMs: number | null): ThrottleEpisode => ({ ...e, thresholdMs });

  it("a first slow-down begins an episode; one within the gap after it ended continues it, a later one begins another", () => {
    const first = throttleEpisodeAfter(null, 40_000, 0);
    expect(first).toEqual({ began: true, episode: { since: 0, until: 40_000, thresholdMs: null, reported: false } });
    const e = withThreshold(first.episode, 60_000);
    // extended while on, and again just within the gap after it ended
    expect(throttleEpisodeAfter(e, 50_000, 10_000)).toEqual({ began: false, episode: { ...e, until: 50_000 } });
    expect(throttleEpisodeAfter(e, 90_000, 40_000 + THROTTLE_EPISODE_GAP_MS)).toEqual({ began: false, episode: { ...e, until: 90_000 } });
    // a shorter Retry-After inside the episode does not shorten it
    expect(throttleEpisodeAfter(e, 20_000, 10_000).episode.until).toBe(40_000);
    const later = throttleEpisodeAfter({ ...e, reported: true }, 200_000, 40_001 + THROTTLE_EPISODE_GAP_MS);
    expect(later).toEqual({ began: true, episode: { since: 70_001, until: 200_000, thresholdMs: null, reported: false } });
  });

  it("is due once throttled without a break for longer than the threshold, while still throttled, once", () => {
    const e: ThrottleEpisode = { since: 0, until: 120_000, thresholdMs: 60_000, reported: false };
    expect(throttleAlertDue(e, 60_000)).toBe(false); // longer than, not as long as
    expect(throttleAlertDue(e, 60_001)).toBe(true);
    expect(throttleAlertDue(e, 120_000)).toBe(false); // its slow-down ended
    expect(throttleAlertDue({ ...e, reported: true }, 60_001)).toBe(false);
    expect(throttleAlertDue({ ...e, thresholdMs: null }, 60_001)).toBe(false);
    expect(throttleAlertDue(null, 60_001)).toBe(false);
  });

  it("looks again when the threshold passes, only if the current slow-down lasts past it", () => {
    const e: ThrottleEpisode = { since: 0, until: 120_000, thresholdMs: 60_000, reported: false };
    expect(throttleCheckAt(e)).toBe(60_001);
    expect(throttleCheckAt({ ...e, until: 30_000 })).toBeNull(); // under the threshold: nothing to look at
    expect(throttleCheckAt({ ...e, reported: true })).toBeNull();
    expect(throttleCheckAt({ ...e, thresholdMs: null })).toBeNull();
    // two chained slow-downs of 40 s: the second one carries it past 60 s
    const chained = throttleEpisodeAfter({ ...e, until: 40_000 }, 90_000, 50_000).episode;
    expect(throttleCheckAt(chained)).toBe(60_001);
    expect(throttleAlertDue(chained, 60_001)).toBe(true);
  });

  it("keeps one entry per key, at most THROTTLED_MAX, and lists them in the digest oldest first", () => {
    const t = (key: string, since: number) => ({ key, since, throttledUntil: since + 90_000, thresholdMs: 60_000 });
    expect(addThrottle([t("a", 5), t("b", 1)], t("a", 9))).toEqual([t("b", 1), t("a", 9)]);
    const full = Array.from({ length: THROTTLED_MAX }, (_, i) => t(`k${i}`, i));
    expect(addThrottle(full, t("new", 1))).toHaveLength(THROTTLED_MAX);
    const { body } = digestOf("acme", [], 0, 100_000, 100, [t("b", 2_000), t("a", 1_000)]);
    expect(body).toMatchObject({ type: "flow.throttled", count: 0, truncated: 0, executions: [] });
    expect(body.throttled).toEqual([
      { key: "a", since: "1970-01-01T00:00:01.000Z", throttledUntil: "1970-01-01T00:01:31.000Z", thresholdMs: 60_000 },
      { key: "b", since: "1970-01-01T00:00:02.000Z", throttledUntil: "1970-01-01T00:01:32.000Z", thresholdMs: 60_000 },
    ]);
    expect(digestOf("acme", [death(1)], 0, 100_000, 100, [t("a", 1_000)]).body.type).toBe("executions.dead");
  });
});
