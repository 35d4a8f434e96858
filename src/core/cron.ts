/**
 * Recurring schedules: 5-field (minute) or 6-field (second) cron in an IANA time zone. Croner
 * computes occurrences, including daylight-saving transitions (a local time skipped by spring
 * forward fires at the first valid time after it; a repeated one at fall back fires once).
 * Pure: the instant to count from is passed in.
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

const patterns = new Map<string, Cron>();

function patternOf(cron: string, timezone: string): Cron {
  const key = `${timezone}\u0000${cron}`;
  let pattern = patterns.get(key);
  if (!pattern) {
    pattern = new Cron(cron, { timezone }); // no callback: nothing is scheduled, it only computes
    if (patterns.size > 1000) patterns.clear();
    patterns.set(key, pattern);
  }
  return pattern;
}

/** Why a cron expression or time zone is refused, or null when both are usable. */
export function cronProblem(cron: string, timezone: string): { field: "cron" | "timezone"; message: string } | null {
  const fields = cron.trim().split(/\s+/).length;
  if (fields !== 5 && fields !== 6) return { field: "cron", message: "must have 5 fields (minute) or 6 fields (second)" };
  try {
    new Intl.DateTimeFormat("en-US", { timeZone: timezone });
  } catch {
    return { field: "timezone", message: `unknown IANA time zone "${timezone}"` };
  }
  try {
    patternOf(cron, timezone);
  } catch (error) {
    return { field: "cron", message: error instanceof Error ? error.message : "invalid cron expression" };
  }
  return null;
}

/** The first occurrence strictly after `after` within the schedule's window, or null. */
export function occurrenceAfter(schedule: Schedule, after: number): number | null {
  const from = schedule.startAt !== null && schedule.startAt - 1 > after ? schedule.startAt - 1 : after;
  let next: Date | null;
  try {
    next = patternOf(schedule.cron, schedule.timezone).nextRun(new Date(from));
  } catch {
    return null; // past the library's range: no occurrence
  }
  if (!next) return null;
  const at = next.getTime();
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
  if (missed && schedule.catchUp !== "all") after = now;
  if (missed && schedule.catchUp === "all") {
    // bounded: only the MAX_CATCH_UP most recent missed occurrences still fire
    const recent = patternOf(schedule.cron, schedule.timezone).previousRuns(MAX_CATCH_UP, new Date(now));
    const oldest = recent[recent.length - 1]?.getTime();
    if (recent.length === MAX_CATCH_UP && oldest !== undefined && oldest > occurrenceAt) after = oldest - 1;
  }
  const at = occurrenceAfter(schedule, after);
  return { run, next: at === null ? null : { at, ordinal: ordinal + 1 } };
}
