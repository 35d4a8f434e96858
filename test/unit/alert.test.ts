/** Alert digests' pure rules (src/core/alert.ts): when the next may go, what waits, truncation with its count. */
import { describe, expect, it } from "vitest";
import { addPending, type Death, digestOf, nextDigestAt, PENDING_MAX } from "../../src/core/alert";

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
