/**
 * The dispatched executions in send order (the first is the oldest), for the state machine
 * (flight.ts Executions, which alone writes them), and what makes a dispatch count as lost: one sent
 * at least DISPATCH_TIMEOUT_MS after it was claimed (it was overtaken by that much), or too long
 * passed (core/backoff.ts redispatchAt). Production's queues do not keep order: messages sent
 * close together are often claimed out of order, which never counts.
 */
import { redispatchAt } from "../core/backoff";

export interface Dispatch {
  at: number;
  count: number;
}

export class DispatchOrder {
  private readonly dispatches = new Map<string, Dispatch>();
  /** when the latest-sent dispatch claimed so far was sent: one unclaimed and sent a timeout before it was overtaken */
  private claimedSentAt = Number.NEGATIVE_INFINITY;

  constructor(private readonly dispatchTimeoutMs: number) {}

  get all(): ReadonlyMap<string, Dispatch> {
    return this.dispatches;
  }

  /** Records a send (a first dispatch or a re-send) at the end of the order. */
  send(id: string, now: number): void {
    const count = (this.dispatches.get(id)?.count ?? 0) + 1;
    this.dispatches.delete(id);
    this.dispatches.set(id, { at: now, count });
  }

  /** A claim took its dispatch: every unclaimed one sent a timeout or more before it has been overtaken. */
  claim(id: string): Dispatch | undefined {
    const dispatch = this.dispatches.get(id);
    if (!dispatch) return undefined;
    this.dispatches.delete(id);
    if (dispatch.at > this.claimedSentAt) this.claimedSentAt = dispatch.at;
    return dispatch;
  }

  /** Out of the order, unclaimed (a failed send, a cancel, a reschedule). */
  drop(id: string): void {
    this.dispatches.delete(id);
  }

  /** When a dispatch counts as lost. */
  redispatchAt(d: Dispatch): number {
    return redispatchAt(d.at, this.claimedSentAt - d.at >= this.dispatchTimeoutMs, this.dispatchTimeoutMs);
  }
}
