/**
 * Partitioning (DESIGN.md "Partitioning and time buckets"): a job's bucket must never change, or
 * its executions and leases would move to another single writer; ids must spread evenly so no
 * bucket Durable Object becomes the bottleneck.
 */
import { describe, expect, it } from "vitest";
import { bucketName, bucketOf, bucketOfExecution, bucketOfJob, fireQueueOf } from "../../src/core/bucketing";
import { newId, occurrenceId, oneOffExecutionId } from "../../src/core/id";
import { mulberry32 } from "./prng";

/** Reference FNV-1a 32-bit over UTF-16 code units, in BigInt, independent of the Math.imul version. */
function fnv1aReference(s: string): number {
  let hash = 0x811c9dc5n;
  for (let i = 0; i < s.length; i++) {
    hash ^= BigInt(s.charCodeAt(i));
    hash = (hash * 0x01000193n) & 0xffffffffn;
  }
  return Number(hash);
}

describe("bucketOf", () => {
  it.each([
    // published FNV-1a 32-bit test vectors; 2^32 buckets exposes the raw hash
    ["", 0x811c9dc5],
    ["a", 0xe40c292c],
    ["foobar", 0xbf9cf968],
  ])("is FNV-1a: %j hashes to %i", (input, hash) => {
    expect(bucketOf(input, 2 ** 32)).toBe(hash);
  });

  it.each([
    // pinned: changing these re-homes every existing job to another bucket
    ["job_01jd0000000000000000000000", 32, 24],
    ["job_0000000000zzzzzzzzzzzzzzzz", 32, 1],
    ["job_1h2j3k4m5n6p7q8r9s0tvwxyz0", 32, 0],
    ["job_abc", 32, 7],
    ["job_01jd0000000000000000000000", 4, 0],
    ["job_0000000000zzzzzzzzzzzzzzzz", 4, 1],
    ["job_abc", 4, 3],
  ])("%s with %i buckets is bucket %i (stable across releases)", (id, buckets, expected) => {
    expect(bucketOf(id, buckets)).toBe(expected);
    expect(bucketOf(id, buckets)).toBe(expected); // same id, same bucket
  });

  it("matches an independent FNV-1a implementation on generated ids", () => {
    const rand = mulberry32(7);
    for (let i = 0; i < 2_000; i++) {
      const bytes = Uint8Array.from({ length: 16 }, () => Math.floor(rand() * 256));
      const id = newId("job", 1_700_000_000_000 + i, bytes);
      expect(bucketOf(id, 2 ** 32)).toBe(fnv1aReference(id));
      expect(bucketOf(id, 32)).toBe(fnv1aReference(id) % 32);
    }
  });

  it("is always an integer in [0, buckets)", () => {
    const rand = mulberry32(11);
    for (const buckets of [1, 2, 3, 7, 32, 64, 1000]) {
      for (let i = 0; i < 200; i++) {
        const b = bucketOf(`job_${rand().toString(36)}`, buckets);
        expect(Number.isInteger(b)).toBe(true);
        expect(b).toBeGreaterThanOrEqual(0);
        expect(b).toBeLessThan(buckets);
      }
    }
  });

  it.each([32, 7])("spreads 100k generated job ids evenly over %i buckets (within 10% of the mean, chi-square sane)", (buckets) => {
    const rand = mulberry32(buckets);
    const counts = new Array<number>(buckets).fill(0);
    const n = 100_000;
    const start = 1_700_000_000_000;
    for (let i = 0; i < n; i++) {
      // ids created close together in time share their time prefix: only the random tail differs
      const bytes = Uint8Array.from({ length: 16 }, () => Math.floor(rand() * 256));
      counts[bucketOf(newId("job", start + Math.floor(i / 100), bytes), buckets)]!++;
    }
    const mean = n / buckets;
    for (const c of counts) {
      expect(c).toBeGreaterThan(mean * 0.9);
      expect(c).toBeLessThan(mean * 1.1);
    }
    // chi-square with (buckets - 1) degrees of freedom; mean = df, sd = sqrt(2 df): 6 sd is far out
    const chi2 = counts.reduce((sum, c) => sum + (c - mean) ** 2 / mean, 0);
    const df = buckets - 1;
    expect(chi2).toBeLessThan(df + 6 * Math.sqrt(2 * df));
  });

  it("spreads ids sharing their random tail but not their time (sequential creation)", () => {
    const counts = new Array<number>(32).fill(0);
    const tail = new Uint8Array(16);
    for (let i = 0; i < 32_000; i++) counts[bucketOf(newId("job", 1_700_000_000_000 + i, tail), 32)]!++;
    for (const c of counts) {
      expect(c).toBeGreaterThan(1_000 * 0.9);
      expect(c).toBeLessThan(1_000 * 1.1);
    }
  });
});

describe("bucketName", () => {
  it("names the Durable Object bucket-<k>", () => {
    expect(bucketName(0)).toBe("bucket-0");
    expect(bucketName(31)).toBe("bucket-31");
  });
});

describe("fireQueueOf", () => {
  it.each([
    [0, 4, 0],
    [1, 4, 1],
    [3, 4, 3],
    [4, 4, 0],
    [31, 4, 3],
    [17, 1, 0],
    [5, 3, 2],
  ])("bucket %i with %i queues -> queue %i", (bucket, queues, expected) => {
    expect(fireQueueOf(bucket, queues)).toBe(expected);
  });

  it("spreads 32 buckets evenly over 4 queues", () => {
    const counts = [0, 0, 0, 0];
    for (let b = 0; b < 32; b++) counts[fireQueueOf(b, 4)]!++;
    expect(counts).toEqual([8, 8, 8, 8]);
  });
});

describe("bucketOfJob and bucketOfExecution", () => {
  it("puts every execution of a job in the job's bucket, from the execution id alone", () => {
    for (let i = 0; i < 200; i++) {
      const jobId = newId("job", 1_700_000_000_000 + i, crypto.getRandomValues(new Uint8Array(16)));
      const bucket = bucketOfJob(jobId, 32);
      expect(bucketOfExecution(oneOffExecutionId(jobId), 32)).toBe(bucket);
      expect(bucketOfExecution(occurrenceId(jobId, 1_800_000_000_000 + i * 60_000), 32)).toBe(bucket);
    }
  });

  it("hashes the random part of the id with FNV-1a", () => {
    const jobId = "job_01234567890123456789abcdef";
    expect(bucketOfJob(jobId, 2 ** 32)).toBe(fnv1aReference(jobId.slice(-16)));
  });
});
