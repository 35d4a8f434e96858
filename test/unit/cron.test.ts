// Recurring schedules (issue 4): occurrences across time zones and DST, bounds, catch-up policies.
import { describe, expect, it } from "vitest";
import { cronProblem, MAX_CATCH_UP, MISSED_AFTER_MS, occurrenceAfter, occurrencesAfter, planOccurrence, type Schedule } from "../../src/core/cron";

const at = (iso: string) => Date.parse(iso);
const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());
const schedule = (cron: string, timezone = "UTC", extra: Partial<Schedule> = {}): Schedule => ({
  cron, timezone, startAt: null, endAt: null, maxOccurrences: null, catchUp: "one", ...extra,
});
const next = (s: Schedule, from: string, n: number) => occurrencesAfter(s, at(from), n).map(iso);

describe("cron occurrences", () => {
  it.each([
    ["*/15 * * * *", "UTC", "2026-01-01T00:07:00Z", ["2026-01-01T00:15:00.000Z", "2026-01-01T00:30:00.000Z", "2026-01-01T00:45:00.000Z"]],
    ["0 9 * * 1-5", "Europe/Berlin", "2026-01-02T09:00:00Z", ["2026-01-05T08:00:00.000Z", "2026-01-06T08:00:00.000Z", "2026-01-07T08:00:00.000Z"]],
    ["0 9 * * 1-5", "America/New_York", "2026-07-03T14:00:00Z", ["2026-07-06T13:00:00.000Z", "2026-07-07T13:00:00.000Z", "2026-07-08T13:00:00.000Z"]],
    ["*/2 * * * * *", "UTC", "2026-01-01T00:00:00.500Z", ["2026-01-01T00:00:02.000Z", "2026-01-01T00:00:04.000Z", "2026-01-01T00:00:06.000Z"]],
    ["30 * * * * *", "UTC", "2026-01-01T00:00:00Z", ["2026-01-01T00:00:30.000Z", "2026-01-01T00:01:30.000Z", "2026-01-01T00:02:30.000Z"]],
    ["0 12 L * *", "UTC", "2026-01-15T00:00:00Z", ["2026-01-31T12:00:00.000Z", "2026-02-28T12:00:00.000Z", "2026-03-31T12:00:00.000Z"]],
    ["0 0 31 * *", "UTC", "2026-01-31T12:00:00Z", ["2026-03-31T00:00:00.000Z", "2026-05-31T00:00:00.000Z", "2026-07-31T00:00:00.000Z"]],
    ["0 0 29 2 *", "UTC", "2026-01-01T00:00:00Z", ["2028-02-29T00:00:00.000Z", "2032-02-29T00:00:00.000Z", "2036-02-29T00:00:00.000Z"]],
  ])("%s in %s after %s", (cron, zone, from, expected) => {
    expect(next(schedule(cron, zone), from, 3)).toEqual(expected);
  });

  it("moves a local time skipped by spring-forward to the first valid time, no skipped day (Europe/Berlin, 29 Mar 2026)", () => {
    // 02:30 does not exist on 29 March in Berlin; the run happens at 03:00 CEST (01:00Z)
    expect(next(schedule("30 2 * * *", "Europe/Berlin"), "2026-03-27T12:00:00Z", 3)).toEqual([
      "2026-03-28T01:30:00.000Z",
      "2026-03-29T01:00:00.000Z",
      "2026-03-30T00:30:00.000Z",
    ]);
  });

  it("runs a local time repeated by fall-back once, not twice (Europe/Berlin, 25 Oct 2026)", () => {
    expect(next(schedule("30 2 * * *", "Europe/Berlin"), "2026-10-23T12:00:00Z", 3)).toEqual([
      "2026-10-24T00:30:00.000Z",
      "2026-10-25T00:30:00.000Z",
      "2026-10-26T01:30:00.000Z",
    ]);
  });

  it("handles America/New_York spring-forward (8 Mar 2026) and fall-back (1 Nov 2026)", () => {
    const [spring, ...after] = occurrencesAfter(schedule("30 2 * * *", "America/New_York"), at("2026-03-07T12:00:00Z"), 3);
    // 02:30 EST does not exist on 8 March: exactly one run that day, in the hour after 02:00 local
    expect(after.map(iso)).toEqual(["2026-03-09T06:30:00.000Z", "2026-03-10T06:30:00.000Z"]);
    expect(spring).toBeGreaterThanOrEqual(at("2026-03-08T06:30:00Z"));
    expect(spring).toBeLessThanOrEqual(at("2026-03-08T07:30:00Z"));
    expect(next(schedule("30 1 * * *", "America/New_York"), "2026-10-31T12:00:00Z", 3)).toEqual([
      "2026-11-01T05:30:00.000Z", // the first 01:30 (EDT); the repeated 01:30 EST does not run again
      "2026-11-02T06:30:00.000Z",
      "2026-11-03T06:30:00.000Z",
    ]);
  });

  it("keeps a daily local time across DST: 9:00 Berlin is 08:00Z in winter and 07:00Z in summer", () => {
    const s = schedule("0 9 * * *", "Europe/Berlin");
    expect(iso(occurrenceAfter(s, at("2026-03-28T12:00:00Z")))).toBe("2026-03-29T07:00:00.000Z");
    expect(iso(occurrenceAfter(s, at("2026-10-24T12:00:00Z")))).toBe("2026-10-25T08:00:00.000Z");
  });

  it("respects startAt and endAt", () => {
    const s = schedule("0 * * * *", "UTC", { startAt: at("2026-01-01T05:00:00Z"), endAt: at("2026-01-01T07:00:00Z") });
    expect(next(s, "2026-01-01T00:00:00Z", 5)).toEqual(["2026-01-01T05:00:00.000Z", "2026-01-01T06:00:00.000Z", "2026-01-01T07:00:00.000Z"]);
  });

  it("stops listing at maxOccurrences", () => {
    const s = schedule("0 * * * *", "UTC", { maxOccurrences: 3 });
    expect(occurrencesAfter(s, at("2026-01-01T00:00:00Z"), 10, 1)).toHaveLength(2);
  });
});

describe("cron validation", () => {
  it.each([
    ["0 9 * * 1-5", "Europe/Berlin", null],
    ["*/2 * * * * *", "UTC", null],
    ["61 * * * *", "UTC", "cron"],
    ["* * *", "UTC", "cron"],
    ["* * * * * * *", "UTC", "cron"],
    ["not a cron", "UTC", "cron"],
    ["0 9 * * *", "Mars/Olympus", "timezone"],
    ["0 9 * * *", "", "timezone"],
  ])("%s in %s -> problem with %s", (cron, zone, field) => {
    expect(cronProblem(cron, zone)?.field ?? null).toBe(field);
  });
});

describe("catch-up after downtime", () => {
  const everyMinute = (catchUp: Schedule["catchUp"]) => schedule("* * * * *", "UTC", { catchUp });
  const due = at("2026-01-01T00:00:00Z");
  const anHourLater = due + 3_600_000 + 5_000;

  it("on time: runs and continues with the following occurrence", () => {
    for (const policy of ["none", "one", "all"] as const) {
      expect(planOccurrence(everyMinute(policy), due, 1, due + 20)).toEqual({ run: true, next: { at: due + 60_000, ordinal: 2 } });
    }
  });

  it("one (default): the missed window fires once, then the schedule continues from now", () => {
    const plan = planOccurrence(everyMinute("one"), due, 1, anHourLater);
    expect(plan.run).toBe(true);
    expect(iso(plan.next!.at)).toBe("2026-01-01T01:01:00.000Z");
  });

  it("none: a missed occurrence is skipped, the schedule continues from now", () => {
    const plan = planOccurrence(everyMinute("none"), due, 1, anHourLater);
    expect(plan.run).toBe(false);
    expect(iso(plan.next!.at)).toBe("2026-01-01T01:01:00.000Z");
    // late by less than MISSED_AFTER_MS is not missed
    expect(planOccurrence(everyMinute("none"), due, 1, due + MISSED_AFTER_MS - 1).run).toBe(true);
  });

  it("all: every missed occurrence fires in turn, bounded to the most recent MAX_CATCH_UP", () => {
    const plan = planOccurrence(everyMinute("all"), due, 1, due + 5 * 60_000 + 5_000);
    expect(plan.run).toBe(true);
    expect(plan.next!.at).toBe(due + 60_000); // the next missed one, not now
    const long = planOccurrence(everyMinute("all"), due, 1, anHourLater);
    // an hour of minutes is 60 < MAX_CATCH_UP: all of them; a day is more: only the last MAX_CATCH_UP
    expect(long.next!.at).toBe(due + 60_000);
    const day = planOccurrence(everyMinute("all"), due, 1, due + 86_400_000 + 5_000);
    expect(day.next!.at).toBe(due + 86_400_000 - (MAX_CATCH_UP - 1) * 60_000);
  });

  it("ends at maxOccurrences and at endAt", () => {
    expect(planOccurrence(schedule("* * * * *", "UTC", { maxOccurrences: 3 }), due, 3, due).next).toBeNull();
    expect(planOccurrence(schedule("* * * * *", "UTC", { maxOccurrences: 3 }), due, 2, due).next).toEqual({ at: due + 60_000, ordinal: 3 });
    expect(planOccurrence(schedule("* * * * *", "UTC", { endAt: due + 30_000 }), due, 1, due).next).toBeNull();
  });
});
