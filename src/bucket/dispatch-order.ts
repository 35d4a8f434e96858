/**
 * The dispatched executions in send order (the first is the oldest), for the state machine
 * (flight.ts Executions, which alone writes them), and what makes a dispatch count as lost: a
 * later one was claimed (it was overtaken), or too long passed (core/backoff.ts redispatchAt).
 */
import { redispatchAt } from "../core/backoff";

export interface Dispatch {
  seq: number;
  at: number;
  count: number;
}

export class DispatchOrder {
  private readonly dispatches = new Map<string, Dispatch>();
  private dispatchSeq = 0;
  /** the highest dispatch seq claimed: an older unclaimed dispatch was overtaken */
  private claimedSeq = 0;

  constructor(private readonly dispatchTimeoutMs: number) {}

  get all(): ReadonlyMap<string, Dispatch> {
    return this.dispatches;
  }

  /** Records a send (a first dispatch or a re-send) at the end of the order. */
  send(id: string, now: number): void {
    const count = (this.dispatches.get(id)?.count ?? 0) + 1;
    this.dispatches.delete(id);
    this.dispatches.set(id, { seq: ++this.dispatchSeq, at: now, count });
  }

  /** A claim took its dispatch: every older unclaimed one has now been overtaken. */
  claim(id: string): Dispatch | undefined {
    const dispatch = this.dispatches.get(id);
    if (!dispatch) return undefined;
    this.dispatches.delete(id);
    if (dispatch.seq > this.claimedSeq) this.claimedSeq = dispatch.seq;
    return dispatch;
  }

  /** Out of the order, unclaimed (a failed send, a cancel, a reschedule). */
  drop(id: string): void {
    this.dispatches.delete(id);
  }

  /** When a dispatch counts as lost. */
  redispatchAt(d: Dispatch): number {
    return redispatchAt(d.at, this.claimedSeq > d.seq, this.dispatchTimeoutMs);
  }
}
