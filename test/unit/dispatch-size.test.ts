/**
 * The size of a bucket's sendBatch calls (src/bucket/dispatch.ts): Cloudflare Queues refuses a
 * sendBatch over 256 KB (docs/capacity.md P2; miniflare: 288,000 bytes), and a refused send is
 * undone and the same pass taken again a second later, so a pass that large would never dispatch.
 * Large groups (FIRE_GROUP_SIZE up to 100), large passes (FIRE_BATCH_LIMIT has no maximum) and long
 * tenant ids must still go in calls below it, every execution once. (Found by review.)
 */
import { describe, expect, it } from "vitest";
import { fireBatches } from "../../src/bucket/dispatch";
import type { FireRef } from "../../src/bucket/protocol";
import type { BucketState } from "../../src/bucket/state";

const refs = (n: number, tenant: string): FireRef[] =>
  Array.from({ length: n }, (_, i) => ({ executionId: `exe_01kb${String(i).padStart(22, "0")}`, tenant, dueAt: 1_764_662_400_000 + i }));

function largestCallBytes(groupSize: number, passSize: number, tenant: string): number {
  const s = { bucket: 31, config: { FIRE_GROUP_SIZE: groupSize } } as unknown as BucketState;
  const sent = refs(passSize, tenant);
  const calls = fireBatches(s, { fresh: sent, again: [] });
  // every execution in exactly one group of one call, in order; no call over 100 messages
  expect(calls.flatMap((c) => c.groups.flatMap((g) => g.executions))).toEqual(sent);
  for (const c of calls) expect(c.groups.length).toBeLessThanOrEqual(100);
  return Math.max(...calls.map((c) => c.groups.reduce((sum, g) => sum + JSON.stringify(g).length + 100, 0)));
}

describe("a bucket's sendBatch calls stay below the queue's 256 KB", () => {
  it("shipped shape (6) stays far below 256 KB", () => {
    expect(largestCallBytes(6, 2_000, "acme")).toBeLessThan(100_000);
  });
  it("FIRE_GROUP_SIZE 100 with the default FIRE_BATCH_LIMIT and a 50-character tenant id: split by bytes", () => {
    expect(largestCallBytes(100, 2_000, "t".repeat(50))).toBeLessThanOrEqual(256 * 1024);
  });
  it("FIRE_GROUP_SIZE 50 with FIRE_BATCH_LIMIT 5,000: split by bytes", () => {
    expect(largestCallBytes(50, 5_000, "acme")).toBeLessThanOrEqual(256 * 1024);
  });
});
