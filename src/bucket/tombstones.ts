/**
 * Tombstones: ids that left a bucket recently (finished, or a canceled job the bucket never
 * held), with their tenant and version, oldest first: a sync pass that read D1 before the outcome
 * landed there must not bring one back, and a late message of one is a duplicate. Kept
 * CLOSED_MEMORY_MS, and never more than MAX_TOMBSTONES (the oldest go first: then a stale read
 * may run an execution again, a duplicate at-least-once allows). Written by the state machine
 * (flight.ts Executions) only.
 */
import type { TerminalState } from "../core/lifecycle";

/** tombstones are kept this long: longer than a sync pass's read of D1 can take */
export const CLOSED_MEMORY_MS = 120_000;
/** at most this many tombstones per bucket (about 300 executions/s ending for CLOSED_MEMORY_MS) */
export const MAX_TOMBSTONES = 100_000;

/** An id that left, and how it ended when known. */
export interface Closed {
  at: number;
  tenant: string;
  version: number;
  status?: TerminalState;
}

export class Tombstones {
  private readonly closed = new Map<string, Closed>();

  get all(): ReadonlyMap<string, Closed> {
    return this.closed;
  }

  /** A tombstone at the end of the order. */
  remember(id: string, closed: Closed): void {
    this.closed.delete(id);
    this.closed.set(id, closed);
    this.forget(closed.at);
  }

  /** Drops tombstones older than CLOSED_MEMORY_MS, and the oldest beyond MAX_TOMBSTONES. */
  forget(now: number): void {
    for (const [id, closed] of this.closed) {
      if (closed.at > now - CLOSED_MEMORY_MS && this.closed.size <= MAX_TOMBSTONES) break; // oldest first
      this.closed.delete(id);
    }
  }
}
