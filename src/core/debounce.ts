/**
 * Debounce by key (docs/debounce.md): the pure rule of what a create with a debounce key does,
 * given the key's open window (if any). A key's window opens with the first create and closes at
 * min(last create + delay, first create + maxDelay):
 * - trailing: one job runs when the window closes, with the latest create's payload and target;
 *   every create within the window replaces it and moves the window's end.
 * - leading: the first create's job runs at once; later creates within the window are absorbed
 *   (nothing new runs) and move its end, so a steady stream runs at most once per maxDelay.
 * A create at or after the window's end (the pending job came due, so it may have fired) opens a
 * new window with a new job; for trailing, so does one within DUE_MARGIN_MS of the end (isPending).
 * A window belongs to one mode: a create of the other mode opens a new one.
 */

export const DEBOUNCE_MODES = ["trailing", "leading"] as const;
export type DebounceMode = (typeof DEBOUNCE_MODES)[number];

/** A job's debounce settings, as its spec stores them. */
export interface Debounce {
  key: string;
  mode: DebounceMode;
  delayMs: number;
  /** null: no cap (a steady stream of trailing creates postpones the job for as long as it lasts) */
  maxDelayMs: number | null;
}

/** A key's open window, as the key's object holds it. */
export interface DebounceWindow {
  jobId: string;
  mode: DebounceMode;
  firstAt: number;
  /** when the window closes: a trailing job's run time */
  endsAt: number;
}

export type DebounceDecision =
  /** a new job (its run time) opens a new window */
  | { kind: "create"; runAt: number; window: Omit<DebounceWindow, "jobId"> }
  /** trailing: the window's job takes this create's payload and runs at runAt */
  | { kind: "replace"; jobId: string; runAt: number; window: DebounceWindow }
  /** leading: the window's job already ran or runs; this create adds nothing */
  | { kind: "absorb"; jobId: string; window: DebounceWindow };

/**
 * A trailing job due within this margin of a create is treated as due: the create opens a new
 * window instead of replacing it. A replacement reaches the job's bucket a D1 write and an RPC
 * after the key's object decided it (and the bucket's clock is not the object's): had the bucket
 * dispatched the job meanwhile, the running attempt would finish and the job run again with the
 * new payload (two runs in one window). Both take tens of milliseconds, far below the margin.
 */
export const DUE_MARGIN_MS = 500;

/** Whether a job due at `runAt` is still safely pending at `now` (not due within DUE_MARGIN_MS). */
export function isPending(runAt: number, now: number): boolean {
  return runAt > now + DUE_MARGIN_MS;
}

/** The end of a window first opened at `firstAt` after a create at `now`. */
function windowEnd(rule: Debounce, firstAt: number, now: number): number {
  const end = now + rule.delayMs;
  return rule.maxDelayMs === null ? end : Math.min(end, firstAt + rule.maxDelayMs);
}

/** What a create at `now` with `rule` does to the key's window `held` (null: none). */
export function decideDebounce(held: DebounceWindow | null, rule: Debounce, now: number): DebounceDecision {
  if (held === null || held.mode !== rule.mode || now >= held.endsAt) return opening(rule, now);
  const window = { ...held, endsAt: windowEnd(rule, held.firstAt, now) };
  if (rule.mode === "leading") return { kind: "absorb", jobId: held.jobId, window };
  // the trailing job runs at the window's end: about to run, it is left alone
  if (!isPending(held.endsAt, now)) return opening(rule, now);
  return { kind: "replace", jobId: held.jobId, runAt: window.endsAt, window };
}

/** A new window: trailing runs when it closes, leading at once. */
export function opening(rule: Debounce, now: number): Extract<DebounceDecision, { kind: "create" }> {
  const endsAt = windowEnd(rule, now, now);
  return {
    kind: "create",
    runAt: rule.mode === "leading" ? now : endsAt,
    window: { mode: rule.mode, firstAt: now, endsAt },
  };
}
