/**
 * Recurring schedules: 5-field (minute) or 6-field (second) cron in an IANA time zone.
 * Pure: the instant to count from is passed in.
 *
 * A schedule matches local wall-clock times; each matching wall time M fires at one instant,
 * the earliest instant whose local wall time is at or after M:
 * - a normal time fires at its one instant;
 * - a time skipped by spring-forward fires at the transition instant (02:30 in Europe/Berlin on
 *   29 Mar 2026 fires at 03:00 CEST); all skipped matches of one gap, and a match at the
 *   transition itself, are one firing there (`0,30 2 * * *` and `* 2 * * *` fire once at 03:00);
 * - a time repeated at fall-back fires once, at its first (daylight-time) occurrence, as AWS
 *   EventBridge Scheduler does: `0 * * * *` fires 24 times on the fall-back day, with two hours
 *   between 02:00 CEST and 03:00 CET, and `* * * * *` is silent during the repeated hour.
 * That instant never decreases as M grows, so the occurrence after an instant is the instant of
 * the first match after the latest wall time shown so far (which, just after a fall-back, is
 * later than the wall time shown now).
 *
 * How: croner evaluates the pattern on wall times written as UTC epoch ms ("wall" numbers below,
 * never instants); Intl maps them to instants. Assumes at most one offset change within 36 h.
 */
import { Cron } from "croner";

export type CatchUp = "none" | "one" | "all";

export interface Schedule {
  cron: string;
  timezone: string;
  startAt: number | null;
  endAt: number | null;
  maxOccurrences: number | null;
  catchUp: CatchUp;
}

/** At most this many missed occurrences fire under catchUp "all". */
export const MAX_CATCH_UP = 100;
/** An occurrence firing later than this after its due time counts as missed (catchUp "none"). */
export const MISSED_AFTER_MS = 60_000;

/** Offsets stay within ±18 h, so the instants showing a wall time lie within 18 h of it. */
const HALF_WINDOW_MS = 18 * 3_600_000;

const patterns = new Map<string, Cron>();

/** The pattern over wall times: evaluated at UTC offset 0 (a number, so croner skips Intl). */
function patternOf(cron: string): Cron {
  let pattern = patterns.get(cron);
  if (!pattern) {
    pattern = new Cron(cron, { utcOffset: 0 }); // no callback: nothing is scheduled, it only computes
    if (patterns.size > 1000) patterns.clear();
    patterns.set(cron, pattern);
  }
  return pattern;
}

const formats = new Map<string, Intl.DateTimeFormat>();

function formatOf(zone: string): Intl.DateTimeFormat {
  let format = formats.get(zone);
  if (!format) {
    format = new Intl.DateTimeFormat("en-US", {
      timeZone: zone,
      hourCycle: "h23",
      year: "numeric",
      month: "numeric",
      day: "numeric",
      hour: "numeric",
      minute: "numeric",
      second: "numeric",
    });
    if (formats.size > 1000) formats.clear();
    formats.set(zone, format);
  }
  return format;
}

/** The zone's offset from UTC at instant `at`, in ms (whole seconds, as tz data has). */
function offsetMsAt(zone: string, at: number): number {
  const whole = Math.floor(at / 1000) * 1000;
  const f = { year: 0, month: 0, day: 0, hour: 0, minute: 0, second: 0 };
  for (const part of formatOf(zone).formatToParts(whole)) if (part.type in f) f[part.type as keyof typeof f] = Number(part.value);
  return Date.UTC(f.year, f.month - 1, f.day, f.hour, f.minute, f.second) - whole;
}

/** The last transition found per zone: repeated look-ups around one transition skip the search. */
const transitions = new Map<string, number>();

/** The transition instant in (from, to], when the offsets at from and to differ (one change between). */
function transitionIn(zone: string, from: number, to: number): number {
  const known = transitions.get(zone);
  if (known !== undefined && known > from && known <= to) return known;
  const before = offsetMsAt(zone, from);
  let lo = Math.floor(from / 1000); // whole seconds: lo shows the old offset, hi the new one
  let hi = Math.floor(to / 1000);
  while (hi - lo > 1) {
    const mid = Math.floor((lo + hi) / 2);
    if (offsetMsAt(zone, mid * 1000) === before) lo = mid;
    else hi = mid;
  }
  if (transitions.size > 1000) transitions.clear();
  transitions.set(zone, hi * 1000);
  return hi * 1000;
}

/** The earliest instant whose local wall time is at or after `wall` (the rule in the header). */
function instantOf(zone: string, wall: number): number {
  const early = offsetMsAt(zone, wall - HALF_WINDOW_MS);
  const late = offsetMsAt(zone, wall + HALF_WINDOW_MS);
  const byEarly = wall - early;
  // shown before the window's transition (if any): its first showing, the daylight one at fall-back
  if (early === late || offsetMsAt(zone, byEarly) === early) return byEarly;
  const byLate = wall - late;
  if (offsetMsAt(zone, byLate) === late) return byLate;
  return transitionIn(zone, wall - HALF_WINDOW_MS, wall + HALF_WINDOW_MS); // skipped by spring-forward
}

/** The largest local wall time shown up to instant `at`: just after a fall-back, later than the one shown at `at`. */
function wallReachedBy(zone: string, at: number): number {
  const now = offsetMsAt(zone, at);
  const past = offsetMsAt(zone, at - HALF_WINDOW_MS);
  // no fall-back lately, or its repeated stretch (as long as the offset dropped) is over
  if (past <= now || offsetMsAt(zone, at - (past - now)) === now) return at + now;
  return transitionIn(zone, at - HALF_WINDOW_MS, at) - 1 + past; // the last wall time before the clock went back
}

/** The IANA name the runtime resolves `timeZone` to (case-insensitive, e.g. "utc" -> "UTC"), or null when unknown. */
export function canonicalTimeZone(timeZone: string): string | null {
  let name: string;
  try {
    name = new Intl.DateTimeFormat("en-US", { timeZone }).resolvedOptions().timeZone;
  } catch {
    return null;
  }
  if (/^[+-]/.test(name)) return null; // an offset such as "+05:30" is not a zone: it has no daylight saving rules
  // the runtime's spelling fixes the case of a zone's own name ("europe/berlin"); a link name is
  // kept as sent, since ICU resolves links to legacy names (Asia/Kolkata -> Asia/Calcutta)
  return name.toLowerCase() === timeZone.toLowerCase() ? name : timeZone;
}

/** Why a cron expression or time zone is refused, or null when both are usable. */
export function cronProblem(cron: string, timezone: string): { field: "cron" | "timezone"; message: string } | null {
  const fields = cron.trim().split(/\s+/).length;
  if (fields !== 5 && fields !== 6) return { field: "cron", message: "must have 5 fields (minute) or 6 fields (second)" };
  if (canonicalTimeZone(timezone) === null) return { field: "timezone", message: `unknown IANA time zone "${timezone}"` };
  try {
    patternOf(cron);
  } catch (error) {
    return { field: "cron", message: error instanceof Error ? error.message : "invalid cron expression" };
  }
  return null;
}

/** The first occurrence strictly after `after` within the schedule's window, or null. */
export function occurrenceAfter(schedule: Schedule, after: number): number | null {
  const from = schedule.startAt !== null && schedule.startAt - 1 > after ? schedule.startAt - 1 : after;
  let at: number;
  try {
    const match = patternOf(schedule.cron).nextRun(new Date(wallReachedBy(schedule.timezone, from)));
    if (!match) return null;
    at = instantOf(schedule.timezone, match.getTime());
  } catch {
    return null; // past the library's or the calendar's range: no occurrence
  }
  return schedule.endAt !== null && at > schedule.endAt ? null : at;
}

/** The next `count` occurrences after `after` (for display). */
export function occurrencesAfter(schedule: Schedule, after: number, count: number, firedSoFar = 0): number[] {
  const out: number[] = [];
  let at = after;
  for (let i = 0; i < count; i++) {
    if (schedule.maxOccurrences !== null && firedSoFar + i >= schedule.maxOccurrences) break;
    const next = occurrenceAfter(schedule, at);
    if (next === null) break;
    out.push(next);
    at = next;
  }
  return out;
}

/**
 * What firing occurrence number `ordinal` (1-based), due at `occurrenceAt`, means at `now`:
 * whether it runs (catchUp "none" skips a missed one) and when the next occurrence is.
 * After downtime only one occurrence is overdue (each firing creates the next), so:
 * "one" runs it and continues from now; "all" runs every missed one, at most MAX_CATCH_UP;
 * "none" skips it and continues from now.
 */
export function planOccurrence(
  schedule: Schedule,
  occurrenceAt: number,
  ordinal: number,
  now: number,
): { run: boolean; next: { at: number; ordinal: number } | null } {
  const missed = now - occurrenceAt > MISSED_AFTER_MS;
  const run = !(missed && schedule.catchUp === "none");
  if (schedule.maxOccurrences !== null && ordinal >= schedule.maxOccurrences) return { run, next: null };
  let after = occurrenceAt;
  if (missed) after = schedule.catchUp === "all" ? catchUpAfter(schedule, occurrenceAt, now) : now;
  const at = occurrenceAfter(schedule, after);
  return { run, next: at === null ? null : { at, ordinal: ordinal + 1 } };
}

/**
 * Where catchUp "all" continues from: `occurrenceAt`, or just before the oldest of the
 * MAX_CATCH_UP most recent occurrences due by `now` when more were missed (bounded catch-up).
 */
function catchUpAfter(schedule: Schedule, occurrenceAt: number, now: number): number {
  const pattern = patternOf(schedule.cron);
  let reached = wallReachedBy(schedule.timezone, now); // matches up to this wall time are due by now
  let found = 0;
  let oldest = Infinity;
  while (found < MAX_CATCH_UP) {
    const matches = pattern.previousRuns(MAX_CATCH_UP - found, new Date(reached + 1)); // newest first, strictly before the reference
    if (matches.length === 0) return occurrenceAt;
    for (const match of matches) {
      const at = instantOf(schedule.timezone, match.getTime());
      if (at <= occurrenceAt) return occurrenceAt; // fewer were missed: all of them fire
      if (at < oldest) {
        found++; // the matches of one spring-forward gap are one occurrence
        oldest = at;
      }
    }
    reached = wallReachedBy(schedule.timezone, oldest - 1); // below a gap whose matches just collapsed
  }
  return oldest - 1;
}
