/**
 * The daylight-saving rule of src/core/cron.ts (its header comment), checked against an oracle that
 * shares no code with it: every minute (or second) around a transition is formatted with Intl, the
 * local wall times a test-only matcher accepts are collected, each is mapped to the earliest grid
 * instant whose wall time is at or after it, and the deduplicated instants must be exactly what
 * iterating occurrenceAfter returns. Then properties over random instants (fast-check).
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { occurrenceAfter, occurrencesAfter, type Schedule } from "../../src/core/cron";

const SECOND = 1_000;
const MINUTE = 60_000;
const HOUR = 3_600_000;
const at = (iso: string) => Date.parse(iso);
const iso = (ms: number) => new Date(ms).toISOString();
const schedule = (cron: string, timezone: string): Schedule => ({
  cron,
  timezone,
  startAt: null,
  endAt: null,
  maxOccurrences: null,
  catchUp: "one",
});

const formats = new Map<string, Intl.DateTimeFormat>();

/** The local wall time shown at instant `at` (whole seconds), written as epoch ms as if the zone were UTC. */
function wallOf(zone: string, at: number): number {
  let format = formats.get(zone);
  if (!format) {
    format = new Intl.DateTimeFormat("en-US", {
      timeZone: zone,
      hourCycle: "h23",
      year: "numeric",
      month: "2-digit",
      day: "2-digit",
      hour: "2-digit",
      minute: "2-digit",
      second: "2-digit",
    });
    formats.set(zone, format);
  }
  const parts = format.formatToParts(at);
  const part = (type: string) => Number(parts.find((p) => p.type === type)!.value);
  return Date.UTC(part("year"), part("month") - 1, part("day"), part("hour"), part("minute"), part("second"));
}

/** Values of one cron field, for the shapes used here: *, n, a-b, lists, * /n and a-b/n. */
function valuesOf(field: string, min: number, max: number): Set<number> {
  const values = new Set<number>();
  for (const item of field.split(",")) {
    const [range = "", step = "1"] = item.split("/");
    const [lo, hi] = range === "*" ? [min, max] : range.includes("-") ? range.split("-").map(Number) : [Number(range), Number(range)];
    for (let v = lo!; v <= hi!; v += Number(step)) values.add(v);
  }
  return values;
}

/** A test-only cron matcher on wall times; day of month and month must be "*". */
function matcherOf(cron: string): (wall: number) => boolean {
  const fields = cron.split(" ");
  const [second, minute, hour, dayOfMonth, month, dayOfWeek] = fields.length === 6 ? fields : ["0", ...fields];
  if (dayOfMonth !== "*" || month !== "*") throw new Error(`the oracle's matcher does not read "${cron}"`);
  const seconds = valuesOf(second!, 0, 59);
  const minutes = valuesOf(minute!, 0, 59);
  const hours = valuesOf(hour!, 0, 23);
  const days = valuesOf(dayOfWeek!, 0, 6);
  return (wall) => {
    const d = new Date(wall);
    return seconds.has(d.getUTCSeconds()) && minutes.has(d.getUTCMinutes()) && hours.has(d.getUTCHours()) && days.has(d.getUTCDay());
  };
}

interface Grid {
  instants: number[];
  /** the largest wall time shown up to each instant: the clock goes back at fall-back */
  peaks: number[];
}
const grids = new Map<string, Grid>();

function gridOf(zone: string, from: number, to: number, step: number): Grid {
  const key = `${zone} ${from} ${to} ${step}`;
  let grid = grids.get(key);
  if (!grid) {
    grid = { instants: [], peaks: [] };
    let peak = -Infinity;
    for (let t = from; t <= to; t += step) {
      peak = Math.max(peak, wallOf(zone, t));
      grid.instants.push(t);
      grid.peaks.push(peak);
    }
    grids.set(key, grid);
  }
  return grid;
}

/** The instants in (from, to] at which `cron` fires by the rule, by brute force over a grid of `step`. */
function oracle(cron: string, zone: string, from: number, to: number, step: number): number[] {
  const { instants, peaks } = gridOf(zone, from, to, step);
  const matches = matcherOf(cron);
  const out: number[] = [];
  let i = 0;
  for (let wall = peaks[0]! + step; wall <= peaks[peaks.length - 1]!; wall += step) {
    if (!matches(wall)) continue;
    while (peaks[i]! < wall) i++; // the earliest instant whose wall time is at or after this one
    if (out[out.length - 1] !== instants[i]) out.push(instants[i]!);
  }
  return out;
}

/** What iterating occurrenceAfter fires in (from, to]. */
function fired(cron: string, zone: string, from: number, to: number): number[] {
  const s = schedule(cron, zone);
  const out: number[] = [];
  // stops if occurrences fail to increase, so a broken implementation fails instead of looping
  for (let t = occurrenceAfter(s, from), last = from; t !== null && t > last && t <= to; last = t, t = occurrenceAfter(s, t)) out.push(t);
  return out;
}

const TRANSITIONS = [
  { zone: "Europe/Berlin", change: "spring-forward 02:00 -> 03:00", at: at("2026-03-29T01:00:00Z") },
  { zone: "Europe/Berlin", change: "fall-back 03:00 -> 02:00", at: at("2026-10-25T01:00:00Z") },
  { zone: "America/New_York", change: "spring-forward 02:00 -> 03:00", at: at("2026-03-08T07:00:00Z") },
  { zone: "America/New_York", change: "fall-back 02:00 -> 01:00", at: at("2026-11-01T06:00:00Z") },
  { zone: "Australia/Lord_Howe", change: "fall-back 02:00 -> 01:30", at: at("2026-04-04T15:00:00Z") },
  { zone: "Australia/Lord_Howe", change: "spring-forward 02:00 -> 02:30", at: at("2026-10-03T15:30:00Z") },
  { zone: "Asia/Tokyo", change: "none (no daylight saving)", at: at("2026-03-29T01:00:00Z") },
];

const MINUTE_PATTERNS = [
  "30 2 * * *",
  "0,30 2 * * *",
  "*/30 2 * * *",
  "*/15 * * * *",
  "0-59/20 2 * * *",
  "* 2 * * *",
  "0 * * * *",
  "* * * * *",
  "30 2 * * 0",
  "30 2 * * 1-5",
  "0 3 * * *",
  "30 1 * * *",
  "* 1 * * *",
  "45 1,2 * * *",
];
const SECOND_PATTERNS = ["0 30 2 * * *", "*/20 * 2 * * *", "*/20 * 1 * * *", "* 30 2 * * *", "15 */10 * * * *"];

describe.each(TRANSITIONS)("$zone, $change at $at: occurrenceAfter equals the brute-force oracle", ({ zone, at: transition }) => {
  it("the window holds the transition (or none, for a zone without daylight saving)", () => {
    const shift = wallOf(zone, transition) - wallOf(zone, transition - SECOND) - SECOND;
    expect(shift !== 0).toBe(zone !== "Asia/Tokyo");
  });

  it.each(MINUTE_PATTERNS)("%s, every minute of the 30 hours around it", (cron) => {
    const [from, to] = [transition - 15 * HOUR, transition + 15 * HOUR];
    expect(fired(cron, zone, from, to).map(iso)).toEqual(oracle(cron, zone, from, to, MINUTE).map(iso));
  });

  it.each(SECOND_PATTERNS)("%s, every second of the 3 hours around it", (cron) => {
    const [from, to] = [transition - 90 * MINUTE, transition + 90 * MINUTE];
    expect(fired(cron, zone, from, to).map(iso)).toEqual(oracle(cron, zone, from, to, SECOND).map(iso));
  });
});

describe("properties over random instants (fast-check)", () => {
  const offsetMsAt = (zone: string, t: number) => wallOf(zone, t) - Math.floor(t / SECOND) * SECOND;
  const nearTransition = fc
    .tuple(fc.constantFrom(...TRANSITIONS), fc.integer({ min: -6 * HOUR, max: 6 * HOUR }))
    .map(([{ zone, at }, d]) => ({ zone, after: at + d }));
  const anyTime = fc.record({
    zone: fc.constantFrom("Europe/Berlin", "America/New_York", "Australia/Lord_Howe", "America/St_Johns", "Asia/Kathmandu", "UTC"),
    after: fc.integer({ min: at("2026-01-01T00:00:00Z"), max: at("2027-01-01T00:00:00Z") }),
  });
  const cases = fc.tuple(fc.oneof(nearTransition, anyTime), fc.constantFrom(...MINUTE_PATTERNS, ...SECOND_PATTERNS));

  it("occurrences are strictly increasing, each local wall time fires at most once, and each matches or is a spring-forward instant", () => {
    fc.assert(
      fc.property(cases, ([{ zone, after }, cron]) => {
        const matches = matcherOf(cron);
        const firings = occurrencesAfter(schedule(cron, zone), after, 10);
        expect(firings).toHaveLength(10);
        let [previous, previousWall] = [after, -Infinity];
        for (const t of firings) {
          expect(t).toBeGreaterThan(previous);
          const wall = wallOf(zone, t);
          expect(wall).toBeGreaterThan(previousWall);
          const springForward = offsetMsAt(zone, t) > offsetMsAt(zone, t - SECOND);
          expect(matches(wall) || springForward).toBe(true);
          [previous, previousWall] = [t, wall];
        }
      }),
      { numRuns: 300 },
    );
  });

  it("the occurrence after any instant just before an occurrence is that occurrence", () => {
    fc.assert(
      fc.property(cases, fc.integer({ min: 1, max: 999 }), ([{ zone, after }, cron], before) => {
        const s = schedule(cron, zone);
        for (const t of occurrencesAfter(s, after, 5)) expect(occurrenceAfter(s, t - before)).toBe(t);
      }),
      { numRuns: 300 },
    );
  });
});
