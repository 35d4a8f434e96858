/**
 * Times and durations at the API edge ("validate at the door", STYLE.md habit 8): a malformed
 * runAt or delay must be refused when the job is created, never misread as another time.
 */
import { describe, expect, it } from "vitest";
import { MAX_INSTANT, parseDurationMs, parseInstant, toRfc3339 } from "../../src/core/when";

describe("parseDurationMs", () => {
  it.each<[string | number, number]>([
    ["500ms", 500],
    ["0ms", 0],
    ["30s", 30_000],
    ["5m", 300_000],
    ["2h", 7_200_000],
    ["1d", 86_400_000],
    ["1.5s", 1_500],
    ["0.5m", 30_000],
    ["1.0005s", 1_001], // rounded to whole ms
    [" 30s ", 30_000], // surrounding whitespace tolerated
    [0, 0],
    [1_500, 1_500],
    [86_400_000, 86_400_000],
    [1.4, 1],
    [1.6, 2],
  ])("%j -> %i ms", (input, expected) => {
    expect(parseDurationMs(input)).toBe(expected);
  });

  it.each<[string | number]>([
    [""],
    ["   "],
    ["5"], // a bare number in a string has no unit
    ["-1s"],
    ["5 s"],
    ["1w"],
    ["1y"],
    ["5S"],
    ["ms"],
    [".5s"],
    ["5.s"],
    ["1h30m"],
    ["PT5M"],
    ["Infinity"],
    ["NaN"],
    ["1e3ms"],
    [Number.NaN],
    [-1],
    [-0.4],
    [Number.POSITIVE_INFINITY],
    [Number.NEGATIVE_INFINITY],
  ])("refuses %j", (input) => {
    expect(parseDurationMs(input)).toBeUndefined();
  });
});

describe("parseInstant", () => {
  it.each<[string | number, number]>([
    ["2026-01-02T15:04:05Z", Date.UTC(2026, 0, 2, 15, 4, 5)],
    ["2026-01-02T15:04:05z", Date.UTC(2026, 0, 2, 15, 4, 5)],
    ["2026-01-02t15:04:05Z", Date.UTC(2026, 0, 2, 15, 4, 5)],
    ["2026-01-02 15:04:05Z", Date.UTC(2026, 0, 2, 15, 4, 5)], // RFC 3339 allows a space
    ["2026-01-02T15:04:05+00:00", Date.UTC(2026, 0, 2, 15, 4, 5)],
    ["2026-01-02T15:04:05-00:00", Date.UTC(2026, 0, 2, 15, 4, 5)],
    ["2026-01-02T15:04:05+02:00", Date.UTC(2026, 0, 2, 13, 4, 5)],
    ["2026-01-02T15:04:05-07:30", Date.UTC(2026, 0, 2, 22, 34, 5)],
    ["2026-01-02T00:30:00+05:30", Date.UTC(2026, 0, 1, 19, 0, 0)], // crosses midnight
    ["2026-01-02T15:04:05.123Z", Date.UTC(2026, 0, 2, 15, 4, 5, 123)],
    ["2026-01-02T15:04:05.1Z", Date.UTC(2026, 0, 2, 15, 4, 5, 100)],
    ["2026-01-02T15:04:05.123456+01:00", Date.UTC(2026, 0, 2, 14, 4, 5, 123)],
    ["2024-02-29T12:00:00Z", Date.UTC(2024, 1, 29, 12)], // leap day
    ["1970-01-01T00:00:00Z", 0],
    [0, 0],
    [1_767_366_245_000, 1_767_366_245_000],
    [MAX_INSTANT, MAX_INSTANT], // the end of year 9999, the last instant accepted
    ["9999-12-31T23:59:59.999Z", MAX_INSTANT],
  ])("%j -> %i", (input, expected) => {
    expect(parseInstant(input)).toBe(expected);
  });

  it.each<[string | number]>([
    ["2026-01-02T15:04:05"], // no offset: ambiguous local time
    ["2026-01-02"],
    ["2026-01-02T15:04Z"], // seconds are required
    ["2026-1-2T15:04:05Z"],
    ["2026-01-02T15:04:05+0200"],
    ["2026-01-02T15:04:05 +02:00"],
    ["2026-01-02T15:04:05+24:00"],
    ["2026-13-01T00:00:00Z"],
    ["2026-01-02T15:04:05.Z"],
    [" 2026-01-02T15:04:05Z"],
    ["Fri, 02 Jan 2026 15:04:05 GMT"],
    ["tomorrow"],
    ["now"],
    [""],
    ["1767366245000"], // epoch ms must be a JSON number, not a string
    [MAX_INSTANT + 1], // past year 9999: dates stop formatting and cron libraries stop computing
    [Number.MAX_SAFE_INTEGER],
    [-1],
    [1.5],
    [Number.NaN],
    [Number.POSITIVE_INFINITY],
    [2 ** 53],
  ])("refuses %j", (input) => {
    expect(parseInstant(input)).toBeUndefined();
  });

  it.each<[string]>([
    // Date.parse rolls these over into another day; a job must not silently fire on a date nobody asked for
    ["2026-02-30T00:00:00Z"],
    ["2026-02-29T00:00:00Z"], // 2026 is not a leap year
    ["2026-04-31T12:00:00Z"],
    ["2026-01-02T24:00:00Z"], // RFC 3339 hours are 00-23
  ])("refuses the impossible calendar time %j instead of rolling it over", (input) => {
    expect(parseInstant(input)).toBeUndefined();
  });
});

describe("toRfc3339", () => {
  it.each<[number | null | undefined, string | null]>([
    [null, null],
    [undefined, null],
    [0, "1970-01-01T00:00:00.000Z"],
    [Date.UTC(2026, 0, 2, 15, 4, 5, 123), "2026-01-02T15:04:05.123Z"],
  ])("%j -> %j", (at, expected) => {
    expect(toRfc3339(at)).toBe(expected);
  });

  it("round-trips through parseInstant", () => {
    for (const at of [0, 1, 999, 1_767_366_245_123, 4_102_444_800_000]) expect(parseInstant(toRfc3339(at)!)).toBe(at);
  });
});
