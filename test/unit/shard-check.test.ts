/**
 * checkShardCount (issue 35, item 9): requests share the answer of a look at the recorded shard
 * count, never a pending query. A request canceled mid-query leaves its D1 promise pending forever
 * (the platform never settles I/O of a request that is gone); a request that awaited it would hang.
 */
import { describe, expect, it } from "vitest";
import { dbOf } from "../../src/db/kit";
import { checkShardCount, Shards, ShardsLowered } from "../../src/db/shards";

/** A D1 binding whose first query never settles (its request was canceled), then answers `recorded` as shard 0's shard count. */
function d1WhoseFirstQueryHangs(recorded: number): D1Database {
  let queries = 0;
  const statement = () => {
    const hangs = queries++ === 0;
    const answer = <T>(value: T) => (hangs ? new Promise<T>(() => {}) : Promise.resolve(value));
    const self = {
      bind: () => self,
      raw: () => answer([[String(recorded)]]),
      all: () => answer({ results: [{ value: String(recorded) }], success: true, meta: {} }),
      run: () => answer({ results: [], success: true, meta: {} }),
      first: () => answer({ value: String(recorded) }),
    };
    return self;
  };
  return { prepare: statement, batch: async () => [], exec: async () => ({}) } as unknown as D1Database;
}

const settledWithin = <T>(promise: Promise<T>, ms: number) =>
  Promise.race([
    promise.then(
      () => "settled" as const,
      () => "settled" as const,
    ),
    new Promise<"pending">((r) => setTimeout(() => r("pending"), ms)),
  ]);

describe("checkShardCount", () => {
  it("a request after one whose query never settles asks on its own, and goes on", async () => {
    const shards = new Shards([{ index: 0, binding: "DB", db: dbOf(d1WhoseFirstQueryHangs(1)) }]);
    const first = checkShardCount(shards, 1_000);
    expect(await settledWithin(first, 50)).toBe("pending");
    expect(await settledWithin(checkShardCount(shards, 1_001), 2_000)).toBe("settled");
  });

  it("shares a found answer: fewer shards than recorded are refused without asking again", async () => {
    const shards = new Shards([{ index: 0, binding: "DB", db: dbOf(d1WhoseFirstQueryHangs(3)) }]);
    void checkShardCount(shards, 1_000);
    await expect(checkShardCount(shards, 1_001)).rejects.toBeInstanceOf(ShardsLowered);
    await expect(checkShardCount(shards, 1_002)).rejects.toBeInstanceOf(ShardsLowered);
  });
});
