// Recurring schedules (issue 4): occurrences across time zones and DST, bounds, catch-up policies.
// The daylight-saving rule (header of src/core/cron.ts) in readable cases; cron-dst.test.ts checks it
// against a brute-force oracle for every field shape and zone.
import { describe, expect, it } from "vitest";
import {
  canonicalTimeZone,
  cronProblem,
  MAX_CATCH_UP,
  MISSED_AFTER_MS,
  occurrenceAfter,
  occurrencesAfter,
  planOccurrence,
  type Schedule,
} from "../../src/core/cron";

const at = (iso: string) => Date.parse(iso);
const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());
const schedule = (cron: string, timezone = "UTC", extra: Partial<Schedule> = {}): Schedule => ({
  cron,
  timezone,
  startAt: null,
  endAt: null,
  maxOccurrences: null,
  catchUp: "one",
  ...extra,
});
const next = (s: Schedule, from: string, n: number) => occurrencesAfter(s, at(from), n).map(iso);

describe("cron occurrences", () => {
  it.each([
    ["*/15 * * * *", "UTC", "2026-01-01T00:07:00Z", ["2026-01-01T00:15:00.000Z", "2026-01-01T00:30:00.000Z", "2026-01-01T00:45:00.000Z"]],
    [
      "0 9 * * 1-5",
      "Europe/Berlin",
      "2026-01-02T09:00:00Z",
      ["2026-01-05T08:00:00.000Z", "2026-01-06T08:00:00.000Z", "2026-01-07T08:00:00.000Z"],
    ],
    [
      "0 9 * * 1-5",
      "America/New_York",
      "2026-07-03T14:00:00Z",
      ["2026-07-06T13:00:00.000Z", "2026-07-07T13:00:00.000Z", "2026-07-08T13:00:00.000Z"],
    ],
    [
      "*/2 * * * * *",
      "UTC",
      "2026-01-01T00:00:00.500Z",
      ["2026-01-01T00:00:02.000Z", "2026-01-01T00:00:04.000Z", "2026-01-01T00:00:06.000Z"],
    ],
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
    // 02:30 EST does not exist on 8 March: the run is at the transition, 03:00 EDT (07:00Z)
    expect(next(schedule("30 2 * * *", "America/New_York"), "2026-03-07T12:00:00Z", 3)).toEqual([
      "2026-03-08T07:00:00.000Z",
      "2026-03-09T06:30:00.000Z",
      "2026-03-10T06:30:00.000Z",
    ]);
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
    expect(next(s, "2026-01-01T00:00:00Z", 5)).toEqual([
      "2026-01-01T05:00:00.000Z",
      "2026-01-01T06:00:00.000Z",
      "2026-01-01T07:00:00.000Z",
    ]);
  });

  it("stops listing at maxOccurrences", () => {
    const s = schedule("0 * * * *", "UTC", { maxOccurrences: 3 });
    expect(occurrencesAfter(s, at("2026-01-01T00:00:00Z"), 10, 1)).toHaveLength(2);
  });
});

describe("daylight saving: the matches skipped by spring-forward fire once at the transition, a repeated time fires at its first occurrence", () => {
  const countIn = (s: Schedule, from: string, to: string) => {
    let n = 0;
    for (
      let t = occurrenceAfter(s, at(from) - 1), last = -Infinity;
      t !== null && t > last && t < at(to);
      last = t, t = occurrenceAfter(s, t)
    )
      n++;
    return n;
  };

  it.each([["*/30 2 * * *"], ["0,30 2 * * *"], ["0-59/20 2 * * *"]])(
    "%s in Europe/Berlin fires once at 03:00 CEST on 29 Mar 2026, and the day is not skipped",
    (cron) => {
      const [springDay, nextDay] = next(schedule(cron, "Europe/Berlin"), "2026-03-28T12:00:00Z", 3);
      expect(springDay).toBe("2026-03-29T01:00:00.000Z");
      expect(nextDay).toBe("2026-03-30T00:00:00.000Z");
    },
  );

  it("* 2 * * * fires once on the spring-forward day, at the transition (Europe/Berlin)", () => {
    expect(next(schedule("* 2 * * *", "Europe/Berlin"), "2026-03-29T00:00:00Z", 2)).toEqual([
      "2026-03-29T01:00:00.000Z",
      "2026-03-30T00:00:00.000Z",
    ]);
  });

  it("a skipped 02:00 and a matching 03:00 are one firing at the transition (Europe/Berlin)", () => {
    expect(next(schedule("0 3 * * *", "Europe/Berlin"), "2026-03-28T12:00:00Z", 2)).toEqual([
      "2026-03-29T01:00:00.000Z",
      "2026-03-30T01:00:00.000Z",
    ]);
    expect(next(schedule("0 2,3 * * *", "Europe/Berlin"), "2026-03-29T00:30:00Z", 2)).toEqual([
      "2026-03-29T01:00:00.000Z",
      "2026-03-30T00:00:00.000Z",
    ]);
  });

  it("0 * * * * fires 23 times on the spring-forward day and 24 on the fall-back day (Europe/Berlin)", () => {
    const hourly = schedule("0 * * * *", "Europe/Berlin");
    expect(next(hourly, "2026-03-28T23:30:00Z", 3)).toEqual([
      "2026-03-29T00:00:00.000Z",
      "2026-03-29T01:00:00.000Z",
      "2026-03-29T02:00:00.000Z",
    ]);
    expect(countIn(hourly, "2026-03-28T23:00:00Z", "2026-03-29T22:00:00Z")).toBe(23); // the local day, 23 h long
    // 02:00 CEST (00:00Z), then 03:00 CET (02:00Z): 02:00 CET, the repeated 02:00, does not fire
    expect(next(hourly, "2026-10-24T23:30:00Z", 3)).toEqual([
      "2026-10-25T00:00:00.000Z",
      "2026-10-25T02:00:00.000Z",
      "2026-10-25T03:00:00.000Z",
    ]);
    expect(countIn(hourly, "2026-10-24T22:00:00Z", "2026-10-25T23:00:00Z")).toBe(24); // the local day, 25 h long
  });

  it("* * * * * fires once per local minute: nothing during the repeated hour's second pass (Europe/Berlin)", () => {
    const everyMinute = schedule("* * * * *", "Europe/Berlin");
    expect(iso(occurrenceAfter(everyMinute, at("2026-10-25T00:59:00Z")))).toBe("2026-10-25T02:00:00.000Z");
    expect(iso(occurrenceAfter(everyMinute, at("2026-10-25T01:30:00Z")))).toBe("2026-10-25T02:00:00.000Z"); // inside the second pass
    expect(countIn(everyMinute, "2026-10-24T22:00:00Z", "2026-10-25T23:00:00Z")).toBe(24 * 60);
    expect(countIn(everyMinute, "2026-03-28T23:00:00Z", "2026-03-29T22:00:00Z")).toBe(23 * 60); // 02:00-02:59 and 03:00 fire once, at 03:00
  });

  it("handles a 30-minute shift (Australia/Lord_Howe: 02:00 -> 01:30 on 5 Apr 2026, 02:00 -> 02:30 on 4 Oct 2026)", () => {
    // fall-back: 01:30 and 01:45 (+11) fire, their repeats (+10:30) do not, then 02:00 (+10:30)
    expect(next(schedule("*/15 * * * *", "Australia/Lord_Howe"), "2026-04-04T14:20:00Z", 4)).toEqual([
      "2026-04-04T14:30:00.000Z",
      "2026-04-04T14:45:00.000Z",
      "2026-04-04T15:30:00.000Z",
      "2026-04-04T15:45:00.000Z",
    ]);
    // spring-forward: 02:00, 02:15 and 02:30 are one firing at the transition (02:30 +11), then 02:45
    expect(next(schedule("*/15 2 * * *", "Australia/Lord_Howe"), "2026-10-03T15:00:00Z", 3)).toEqual([
      "2026-10-03T15:30:00.000Z",
      "2026-10-03T15:45:00.000Z",
      "2026-10-04T15:00:00.000Z",
    ]);
  });

  it("a 6-field schedule follows the same rule to the second (Europe/Berlin)", () => {
    expect(next(schedule("0 30 2 * * *", "Europe/Berlin"), "2026-03-28T12:00:00Z", 2)).toEqual([
      "2026-03-29T01:00:00.000Z",
      "2026-03-30T00:30:00.000Z",
    ]);
    expect(next(schedule("*/20 * 2 * * *", "Europe/Berlin"), "2026-03-29T00:59:59Z", 2)).toEqual([
      "2026-03-29T01:00:00.000Z",
      "2026-03-30T00:00:00.000Z",
    ]);
    // after 02:59:40 CEST, the last match of the first pass, the next is 02:00:00 the following day: the repeated hour is silent
    expect(next(schedule("*/20 * 2 * * *", "Europe/Berlin"), "2026-10-25T00:59:40Z", 1)).toEqual(["2026-10-26T01:00:00.000Z"]);
  });

  it("a zone without daylight saving is unaffected (Asia/Tokyo)", () => {
    expect(next(schedule("30 2 * * *", "Asia/Tokyo"), "2026-03-28T12:00:00Z", 2)).toEqual([
      "2026-03-28T17:30:00.000Z",
      "2026-03-29T17:30:00.000Z",
    ]);
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
    ["0 9 * * *", "europe/berlin", null], // known, in another case: the API stores canonicalTimeZone's spelling
    ["0 9 * * *", "+05:30", "timezone"], // an offset, not a zone
  ])("%s in %s -> problem with %s", (cron, zone, field) => {
    expect(cronProblem(cron, zone)?.field ?? null).toBe(field);
  });
});

describe("canonicalTimeZone", () => {
  it.each([
    ["Europe/Berlin", "Europe/Berlin"],
    ["europe/berlin", "Europe/Berlin"],
    ["EUROPE/BERLIN", "Europe/Berlin"],
    ["america/new_york", "America/New_York"],
    ["utc", "UTC"],
    ["UTC", "UTC"],
    ["etc/gmt-14", "Etc/GMT-14"],
    ["Mars/Olympus", null],
    ["", null],
    ["+05:30", null],
    ["Z", null],
    ["Europe/Berlin\u0000", null],
    ["../../UTC", null],
  ])("%j -> %j", (zone, canonical) => {
    expect(canonicalTimeZone(zone)).toBe(canonical);
  });

  it("a link name is kept as sent (ICU would turn Asia/Kolkata into the legacy Asia/Calcutta); a zone's own name gets the runtime's case", () => {
    for (const link of ["Asia/Kolkata", "Etc/UTC", "US/Eastern", "Europe/Kyiv"]) expect(canonicalTimeZone(link)).toBe(link);
    const own = new Intl.DateTimeFormat("en-US", { timeZone: "asia/calcutta" }).resolvedOptions().timeZone;
    expect(canonicalTimeZone("asia/calcutta")).toBe(own);
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

  it("all: counts occurrences, not local times, across daylight saving (Europe/Berlin)", () => {
    const all = schedule("* * * * *", "Europe/Berlin", { catchUp: "all" });
    // spring-forward: 00:01Z..00:59Z, the 02:xx matches as one firing at 01:00Z, 01:01Z..01:41Z: 101 missed, the oldest is dropped
    expect(iso(planOccurrence(all, at("2026-03-29T00:00:00Z"), 1, at("2026-03-29T01:41:05Z")).next!.at)).toBe("2026-03-29T00:02:00.000Z");
    // fall-back: 00:01Z..00:59Z, then 02:00Z..03:00Z (the repeated hour is silent): the 100 most recent start at 00:21Z
    expect(iso(planOccurrence(all, at("2026-10-25T00:00:00Z"), 1, at("2026-10-25T03:00:05Z")).next!.at)).toBe("2026-10-25T00:21:00.000Z");
  });

  it("ends at maxOccurrences and at endAt", () => {
    expect(planOccurrence(schedule("* * * * *", "UTC", { maxOccurrences: 3 }), due, 3, due).next).toBeNull();
    expect(planOccurrence(schedule("* * * * *", "UTC", { maxOccurrences: 3 }), due, 2, due).next).toEqual({ at: due + 60_000, ordinal: 3 });
    expect(planOccurrence(schedule("* * * * *", "UTC", { endAt: due + 30_000 }), due, 1, due).next).toBeNull();
  });
});
