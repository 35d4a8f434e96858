/**
 * When the bucket's alarm must ring: the earliest thing it must do (STYLE.md habit 4), computed
 * from its state after every change (bucket.ts rearm). Reads only.
 */
import { nextAlarmAt } from "../core/alarm";
import { windowRoom } from "./dispatch";
import { METER_COUNTERS } from "./meter";
import type { BucketState } from "./state";

/** The shell's own timers: the next outcome flush and the next counter write. */
export interface ShellTimers {
  flushAt: number;
  counterWriteAt: number;
}

/** The time to arm the alarm for, or null when nothing waits. */
export function nextWakeAt(s: BucketState, timers: ShellTimers, now: number, quantumMs: number): number | null {
  const { executions, tally } = s;
  // due work wakes the alarm only while the window has room; a claim that frees room re-arms,
  // and so does the time an unclaimed message stops counting
  const window = windowRoom(s, now);
  const nextDue = executions.nextDueAt();
  const firstDispatch = executions.dispatched.values().next().value;
  const pendingFlush = executions.closing.size > 0 || s.dirtySchedules.size > 0;
  return nextAlarmAt({
    candidates: [
      nextDue === undefined ? null : window.room > 0 ? Math.max(nextDue, s.dispatchRetryAt) : window.reopensAt,
      executions.firstDeadline(),
      firstDispatch ? executions.redispatchAt(firstDispatch) : null,
      s.nextScheduleAt,
      pendingFlush ? Math.max(timers.flushAt, now) : null,
      // the meter's own counters ride along with the next write: waking for them alone would
      // set an alarm, which is metered, which would wake the bucket again
      tally.hasPending(METER_COUNTERS) ? Math.max(timers.counterWriteAt, now) : null,
    ],
    now,
    quantumMs,
  });
}
