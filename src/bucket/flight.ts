/**
 * What a bucket knows of its executions in memory: every durable row (without its spec and log),
 * the scheduled ones by due time, and the states that live only here (dispatched, running,
 * closing: on its way to D1), plus the ids that left recently. Rebuilt from storage at every
 * start (a new epoch): what was dispatched or running is then scheduled again.
 *
 * Every state is derived from these maps (stateOf; they and their reads are execution-memory.ts),
 * only the methods below change a state, and each move is one method that checks its row of the
 * lifecycle table first (assertMove): the table drives the code. The maps are read-only outside;
 * storage is the caller's (store.ts).
 */

import { type ExecutionState, type TerminalState, type Transition, transition } from "../core/lifecycle";
import type { ClosingDetail } from "./closing";
import type { Dispatch } from "./dispatch-order";
import { ExecutionMemory } from "./execution-memory";
import type { Lease } from "./lease-table";
import { type HeldRow, specOwnerOf } from "./store";
import type { Closed } from "./tombstones";

export type { CloseEvent, Closing, ClosingDetail } from "./closing";
export type { Dispatch } from "./dispatch-order";
export type { Lease } from "./lease-table";
export { CLOSED_MEMORY_MS, type Closed, MAX_TOMBSTONES } from "./tombstones";

export class Executions extends ExecutionMemory {
  // ---- the lifecycle table ------------------------------------------------------------------

  stateOf(row: { id: string }): ExecutionState {
    if (this.outcomes.has(row.id)) return this.outcomes.get(row.id)!.status;
    if (this.leases.all.has(row.id)) return "running";
    if (this.dispatches.all.has(row.id) || this.offers.has(row.id)) return "dispatched";
    return "scheduled";
  }

  /** Whether the table allows `event` from the row's state now. */
  can(row: { id: string }, event: Transition): boolean {
    return transition(this.stateOf(row), event) !== null;
  }

  /**
   * Every state change asks the lifecycle table first (core/lifecycle.ts): a move the table does
   * not allow is a bug, and throwing rolls the step's transaction back. `from`: the state when
   * memory does not hold it (D1's, or the last epoch's).
   */
  assertMove(row: { id: string }, event: Transition, from: ExecutionState = this.stateOf(row)): ExecutionState {
    const to = transition(from, event);
    if (to === null) throw new Error(`lifecycle: ${event} is not allowed from ${from} (${row.id})`);
    return to;
  }

  // ---- moves: each one row of the lifecycle table -------------------------------------------

  /** handOff: a pending job's execution (D1's) is taken, scheduled. */
  handOff(row: HeldRow): void {
    this.assertMove(row, "handOff", "pending");
    this.enter(row);
  }

  /** redrive: a dead execution (D1's) is scheduled again with a fresh budget. */
  redrive(row: HeldRow): void {
    this.assertMove(row, "redrive", "dead");
    this.enter(row);
  }

  /** reopen: an occurrence a pause canceled (its tombstone here) is scheduled again by a resume. */
  reopen(row: HeldRow): void {
    this.assertMove(row, "reopen", "canceled");
    this.enter(row);
  }

  /**
   * restart: a stored row at start (a new epoch): dispatched, running or scheduled in the last
   * epoch, scheduled now; held only if its job is not active (for its cancel). Whether scheduled.
   */
  restore(row: HeldRow): boolean {
    for (const was of IN_FLIGHT) this.assertMove(row, "restart", was);
    this.hold(row);
    if (row.jobStatus !== "active") return false;
    this.schedule(row);
    return true;
  }

  /** dispatch: up to `room` due executions, in turns per tenant, each sent at the end of the dispatch order. */
  dispatchDue(now: number, room: number): HeldRow[] {
    const rows: HeldRow[] = [];
    for (const top of this.dueQueues.takeDue(now, room, (dueAt, id, priority) => this.isScheduledAt(id, dueAt, priority))) {
      const row = this.rows.all.get(top.id)!;
      this.assertMove(row, "dispatch");
      this.dispatches.send(row.id, now);
      rows.push(row);
    }
    return rows;
  }

  /** redispatch: the lost dispatches, oldest first (the rest are younger), at most `limit`, sent again. */
  redispatchLost(now: number, limit: number): HeldRow[] {
    const rows: HeldRow[] = [];
    for (const [id, d] of this.dispatches.all) {
      if (rows.length >= limit || now < this.redispatchAt(d)) break;
      const row = this.rows.all.get(id)!;
      this.assertMove(row, "redispatch");
      this.dispatches.send(row.id, now);
      rows.push(row);
    }
    return rows;
  }

  /** unsend: the queue refused the send of this dispatch (still the one at `dueAt`): scheduled again. */
  unsend(id: string, dueAt: number): HeldRow | undefined {
    const row = this.rows.all.get(id);
    if (!row || !this.dispatches.all.has(id) || row.dueAt !== dueAt) return undefined;
    this.assertMove(row, "unsend");
    this.dispatches.drop(id);
    this.schedule(row);
    return row;
  }

  /** offer: claimed for a pull target, it waits in `queue` for a worker (shown as dispatched). Returns the dispatch it took. */
  offer(row: HeldRow, queue: string): Dispatch | undefined {
    this.assertMove(row, "offer");
    const dispatch = this.dispatches.claim(row.id);
    this.offers.set(row.id, { dueAt: row.dueAt, queue });
    return dispatch;
  }

  /**
   * An offer its queue must be told again, under its spec's priority now: its priority changed
   * while it waited (its job's PATCH: jobs.ts offerAgain), or it was released (release). No move;
   * until the shell told the queue (takeReoffers).
   */
  reoffer(row: HeldRow): void {
    if (this.offers.has(row.id)) this.reoffers.add(row.id);
  }

  /** The offers their queues must be told again (reoffer), taken: those still offered, under their priority now. */
  takeReoffers(): { executionId: string; tenant: string; queue: string; dueAt: number; priority: number }[] {
    const taken = [...this.reoffers].flatMap((executionId) => {
      const offer = this.offers.get(executionId);
      const row = this.rows.all.get(executionId);
      if (!offer || !row) return [];
      return [{ executionId, tenant: row.tenant, queue: offer.queue, dueAt: offer.dueAt, priority: this.priorityOf(specOwnerOf(row)) }];
    });
    this.reoffers.clear();
    return taken;
  }

  /** claim: a lease starts (the consumer's, or a pull worker's when it has its own leaseMs). Returns the dispatch it took. */
  lease(row: HeldRow, lease: Lease): Dispatch | undefined {
    this.assertMove(row, "claim");
    const dispatch = this.dispatches.claim(row.id);
    this.offers.delete(row.id);
    this.leases.start(row.id, lease);
    return dispatch;
  }

  /**
   * release: a pull lease its queue handed to nobody ends with no attempt used (the table's wait),
   * and the execution is offered in that queue again at its due time (offer), as before the lease;
   * the queue is told again (reoffer: it may have dropped the offer while the lease stood).
   */
  release(row: HeldRow, queue: string): void {
    this.assertMove(row, "wait");
    this.leases.end(row.id);
    this.assertMove(row, "offer", "scheduled");
    this.offers.set(row.id, { dueAt: row.dueAt, queue });
    this.reoffers.add(row.id);
  }

  /** Extends a live lease by its own length; a consumer's moves to the end of the deadline order. */
  extend(id: string, lease: Lease, now: number, defaultLeaseMs: number): void {
    this.leases.extend(id, lease, now, defaultLeaseMs);
  }

  /** retry: the attempt failed with attempts left; due again as `moved`. */
  retry(row: HeldRow, moved: HeldRow): void {
    this.assertMove(row, "retry");
    this.again(row, moved);
  }

  /** wait: flow control held the attempt back; due again as `moved`, its wait counted from its first due time. */
  wait(row: HeldRow, moved: HeldRow): void {
    this.assertMove(row, "wait");
    if (!this.waits.has(row.id)) this.waits.set(row.id, row.dueAt);
    this.again(row, moved);
  }

  /**
   * reschedule: the run time changed (PATCH), or the job changed while its offer waited: due as
   * `moved`, out of any dispatch or offer; from running, once its attempt finished.
   */
  reschedule(row: HeldRow, moved: HeldRow): void {
    this.assertMove(row, "reschedule");
    this.dispatches.drop(row.id);
    this.offers.delete(row.id);
    this.again(row, moved);
  }

  /** The wait flow control made it do, ended by its attempt: the due time it waited from, if it waited. */
  endWait(id: string): number | undefined {
    const from = this.waits.get(id);
    this.waits.delete(id);
    return from;
  }

  // ---- endings ------------------------------------------------------------------------------

  /** succeed | kill | poison | cancel | abandon: the outcome waits here for D1 (the row stays until then). */
  succeed(row: HeldRow, detail: ClosingDetail): TerminalState {
    return this.close(row, this.assertMove(row, "succeed"), detail);
  }
  kill(row: HeldRow, detail: ClosingDetail): TerminalState {
    return this.close(row, this.assertMove(row, "kill"), detail);
  }
  poison(row: HeldRow, detail: ClosingDetail): TerminalState {
    return this.close(row, this.assertMove(row, "poison"), detail);
  }
  cancel(row: HeldRow, detail: ClosingDetail): TerminalState {
    return this.close(row, this.assertMove(row, "cancel"), detail);
  }
  abandon(row: HeldRow, detail: ClosingDetail): TerminalState {
    return this.close(row, this.assertMove(row, "abandon"), detail);
  }

  /** cancel from pending: a job canceled while its execution waited in D1 (never held here): only a tombstone. */
  cancelPending(id: string, closed: Omit<Closed, "status">): void {
    this.assertMove({ id }, "cancel", "pending");
    this.rememberClosed(id, { ...closed, status: "canceled" });
  }

  /** D1 has its outcome: the execution leaves, a tombstone remembers it. */
  leave(row: HeldRow, at: number): void {
    const status = this.outcomes.get(row.id)?.status;
    this.outcomes.delete(row.id);
    this.rows.release(row);
    if (!row.recurring) this.priorities.delete(specOwnerOf(row)); // the only execution of its spec
    this.waits.delete(row.id);
    this.offers.delete(row.id);
    this.rememberClosed(row.id, { at, tenant: row.tenant, version: row.version, ...(status ? { status } : {}) });
  }

  /** A tombstone for an id that left (tombstones.ts), at the end of the order. */
  rememberClosed(id: string, closed: Closed): void {
    this.tombstones.remember(id, closed);
  }

  /** Drops tombstones past their time (tombstones.ts). */
  forgetClosed(now: number): void {
    this.tombstones.forget(now);
  }

  private enter(row: HeldRow): void {
    this.hold(row);
    this.schedule(row);
  }

  /** Out of its lease (if any) and due again as `moved`. */
  private again(row: HeldRow, moved: HeldRow): void {
    this.leases.end(row.id);
    this.keep(moved);
    this.schedule(moved);
  }

  private close(row: HeldRow, status: ExecutionState, detail: ClosingDetail): TerminalState {
    this.dispatches.drop(row.id);
    this.offers.delete(row.id);
    this.leases.end(row.id);
    this.outcomes.set(row.id, { row, status: status as TerminalState, ...detail });
    return status as TerminalState;
  }
}

/** the states of the last epoch's memory that a restart makes scheduled */
const IN_FLIGHT = ["dispatched", "running"] as const;
