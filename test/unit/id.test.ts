/** Type-prefixed, time-sortable ids (STYLE.md "Names"): job_..., exe_... */
import { describe, expect, it } from "vitest";
import {
  executionIdFloor,
  MAX_SHARDS,
  newId,
  newJobId,
  occurrenceId,
  oneOffExecutionId,
  SHARD_MARK,
  shardOfId,
  timeOfId,
} from "../../src/core/id";

const ALPHABET = "0123456789abcdefghjkmnpqrstvwxyz";
const zeros = new Uint8Array(16);
const bytes = (...values: number[]) => Uint8Array.from({ length: 16 }, (_, i) => values[i % values.length]!);

describe("newId", () => {
  it.each(["job", "exe"] as const)("%s ids: prefix, 26 chars of Crockford-style base32 after it", (prefix) => {
    const id = newId(prefix, 1_767_366_245_123, bytes(1, 200, 37, 255));
    expect(id.startsWith(`${prefix}_`)).toBe(true);
    expect(id).toHaveLength(prefix.length + 1 + 26);
    expect(id).toMatch(/^(job|exe)_[0-9a-hjkmnp-tv-z]{26}$/); // no i, l, o, u
  });

  it("encodes the time in the first 10 chars, big-endian base32", () => {
    expect(newId("job", 0, zeros)).toBe("job_00000000000000000000000000");
    expect(newId("job", 1, zeros).slice(4, 14)).toBe("0000000001");
    expect(newId("job", 31, zeros).slice(4, 14)).toBe("000000000z");
    expect(newId("job", 32, zeros).slice(4, 14)).toBe("0000000010");
    expect(newId("job", 32 ** 2 * 5 + 32 * 17 + 31, zeros).slice(4, 14)).toBe("00000005hz");
    expect(newId("job", 32 ** 10 - 1, zeros).slice(4, 14)).toBe("zzzzzzzzzz");
  });

  it("takes 16 chars of randomness from the given bytes (mod 32)", () => {
    expect(newId("exe", 0, bytes(0)).slice(14)).toBe("0".repeat(16));
    expect(newId("exe", 0, bytes(31)).slice(14)).toBe("z".repeat(16));
    expect(newId("exe", 0, bytes(32)).slice(14)).toBe("0".repeat(16));
    expect(newId("exe", 0, bytes(255)).slice(14)).toBe("z".repeat(16));
    expect(
      newId(
        "exe",
        0,
        Uint8Array.from({ length: 16 }, (_, i) => i),
      ).slice(14),
    ).toBe(ALPHABET.slice(0, 16));
  });

  it("is pure: same inputs, same id; another random, another id", () => {
    const r = bytes(9, 8, 7, 6, 5);
    expect(newId("job", 1_767_366_245_123, r)).toBe(newId("job", 1_767_366_245_123, r));
    expect(newId("job", 1_767_366_245_123, r)).not.toBe(newId("job", 1_767_366_245_123, bytes(9, 8, 7, 6, 4)));
  });

  it("sorts by creation time as plain strings (ms resolution), whatever the randomness", () => {
    const times = [
      0, 1, 31, 32, 33, 1_023, 1_024, 999_999, 1_000_000, 1_767_366_245_122, 1_767_366_245_123, 1_767_366_246_000, 4_102_444_800_000,
    ];
    const ids = times.map((t, i) => newId("exe", t, bytes(255 - i * 19, i * 7)));
    expect([...ids].sort()).toEqual(ids);
    for (let i = 1; i < ids.length; i++) expect(ids[i - 1]! < ids[i]!).toBe(true);
  });

  it("uses a 32-char alphabet in ASCII order, which is what makes ids sortable", () => {
    const produced =
      newId(
        "exe",
        0,
        Uint8Array.from({ length: 16 }, (_, i) => i),
      ).slice(14) +
      newId(
        "exe",
        0,
        Uint8Array.from({ length: 16 }, (_, i) => i + 16),
      ).slice(14);
    expect(produced).toBe(ALPHABET);
    expect([...produced].sort().join("")).toBe(produced);
  });
});

describe("timeOfId and executionIdFloor: due-time bounds as id bounds", () => {
  it("reads back the time an id was made at, undefined for what is no id", () => {
    for (const at of [0, 1, 1_767_366_245_123, 32 ** 10 - 1]) expect(timeOfId(newId("exe", at, bytes(7, 9)))).toBe(at);
    expect(timeOfId(occurrenceId(newId("job", 5, bytes(3)), 1_767_366_245_123))).toBe(1_767_366_245_123);
    expect(timeOfId("exe_")).toBeUndefined();
    expect(timeOfId("exe_000000000u0000000000000000")).toBeUndefined(); // u is not in the alphabet
  });

  it("sorts at or below every id of its instant and above every earlier one", () => {
    const at = 1_767_366_245_123;
    const floor = executionIdFloor(at);
    for (const random of [zeros, bytes(255), bytes(1, 200, 37)]) {
      expect(newId("exe", at, random) >= floor).toBe(true);
      expect(newId("exe", at - 1, random) < floor).toBe(true);
      expect(newId("exe", at + 1, random) >= executionIdFloor(at + 1)).toBe(true);
    }
  });
});

describe("shards in ids (db/shards.ts: a job's shard from its id alone)", () => {
  it("a job id names its shard, and so do its executions' ids (one-off and occurrence)", () => {
    for (const shard of [0, 1, 2, 31, 32, 1023]) {
      const id = newJobId(1_767_366_245_123, bytes(7, 200, 13), shard);
      expect(id).toMatch(/^job_[0-9a-z]{26}$/);
      expect(shardOfId(id)).toBe(shard);
      expect(shardOfId(oneOffExecutionId(id))).toBe(shard);
      expect(shardOfId(occurrenceId(id, 1_800_000_000_000))).toBe(shard);
      expect(timeOfId(id)).toBe(1_767_366_245_123);
    }
  });

  it("an id from before shards (no mark: the alphabet never writes it) is shard 0's", () => {
    const old = newId("job", 1_767_366_245_123, bytes(31, 30, 29));
    expect(old.slice(-16)).not.toContain(SHARD_MARK);
    expect(shardOfId(old)).toBe(0);
  });

  it("refuses a shard an id cannot name; a mark followed by no shard is null", () => {
    expect(() => newJobId(0, zeros, MAX_SHARDS)).toThrow(RangeError);
    expect(() => newJobId(0, zeros, -1)).toThrow(RangeError);
    expect(shardOfId(`job_0000000000${SHARD_MARK}!!0000000000000`)).toBeNull();
  });

  it("13 random digits stay: ids of one shard and instant differ by their randomness", () => {
    const ids = new Set(Array.from({ length: 1_000 }, () => newJobId(0, crypto.getRandomValues(new Uint8Array(16)), 3)));
    expect(ids.size).toBe(1_000);
  });
});
