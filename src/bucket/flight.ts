/**
 * What a bucket knows of its executions in memory: every durable row (without its spec and log),
 * the scheduled ones by due time, and the states that live only here (dispatched, running,
 * closing: on its way to D1), plus the ids that left recently. Rebuilt from storage at every
 * start (a new epoch): what was dispatched or running is then scheduled again.
 *
 * Every state is derived from these maps (stateOf), only the methods below write them, and each
 * move is one method that checks its row of the lifecycle table first (assertMove): the table
 * drives the code. The maps are read-only outside; storage is the caller's (store.ts).
 */

import { type ExecutionState, type TerminalState, type Transition, transition } from "../core/lifecycle";
import { PRIORITY } from "../core/priority";
import type { Closing, ClosingDetail } from "./closing";
import { type Dispatch, DispatchOrder } from "./dispatch-order";
import { TenantDueQueues } from "./due-queue";
import { HeldRows } from "./held-rows";
import { type Lease, LeaseTable } from "./lease-table";
import { type HeldRow, specOwnerOf } from "./store";
import { type Closed, Tombstones } from "./tombstones";

export type { CloseEvent, Closing, ClosingDetail } from "./closing";
export type { Dispatch } from "./dispatch-order";
export type { Lease } from "./lease-table";
export { CLOSED_MEMORY_MS, type Closed, MAX_TOMBSTONES } from "./tombstones";

export class Executions {
  /** every execution row, without its spec and log (held-rows.ts) */
  private readonly rows = new HeldRows();
  /** held rows not in flight, by tenant, priority and due time */
  private readonly dueQueues = new TenantDueQueues();
  /**
   * the priority of each held spec (by specOwnerOf: a job's, or a callback's own) that has one other
   * than the default (core/priority.ts), as the spec applied or stored says (memory: at start it is
   * read with the rows); its executions' due entries carry it
   */
  private readonly priorities = new Map<string, number>();
  /** dispatched, in dispatch order (dispatch-order.ts) */
  private readonly dispatches: DispatchOrder;
  /** running: their leases */
  private readonly leases = new LeaseTable();
  /** offered: waiting in a pull queue for a worker (due time, queue), out of the dispatch order */
  private readonly offers = new Map<string, { dueAt: number; queue: string }>();
  /** offers their queues must be told again (reoffer) */
  private readonly reoffers = new Set<string>();
  /** the due time it had before flow control first made it wait (memory only, as the rest) */
  private readonly waits = new Map<string, number>();
  /** terminal outcomes not yet in D1 */
  private readonly outcomes = new Map<string, Closing>();
  /** ids that left recently (tombstones.ts) */
  private readonly tombstones = new Tombstones();
  private pushes = 0;

  constructor(dispatchTimeoutMs: number) {
    this.dispatches = new DispatchOrder(dispatchTimeoutMs);
  }

  // ---- reads --------------------------------------------------------------------------------

  get held(): ReadonlyMap<string, HeldRow> {
    return this.rows.all;
  }
  /** the due order (read its size; taking from it is dispatchDue's) */
  get due(): TenantDueQueues {
    return this.dueQueues;
  }
  get dispatched(): ReadonlyMap<string, Dispatch> {
    return this.dispatches.all;
  }
  get running(): ReadonlyMap<string, Lease> {
    return this.leases.all;
  }
  get offered(): ReadonlyMap<string, { readonly dueAt: number; readonly queue: string }> {
    return this.offers;
  }
  get closing(): ReadonlyMap<string, Closing> {
    return this.outcomes;
  }
  get closedAt(): ReadonlyMap<string, Closed> {
    return this.tombstones.all;
  }
  /** the due time it had before flow control first made it wait, if it waits */
  waitingSince(id: string): number | undefined {
    return this.waits.get(id);
  }

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

  /** A spec's priority, by its owner (specOwnerOf; a job's id): the default unless noted otherwise (notePriority). */
  priorityOf(owner: string): number {
    return this.priorities.get(owner) ?? PRIORITY.default;
  }

  /**
   * Whether `id` is held, scheduled (not in flight, not closing) and due at `dueAt`: a live DueQueue
   * entry; given a `priority`, only the entry of its spec's priority now (an entry of the one before
   * a change is stale).
   */
  isScheduledAt(id: string, dueAt: number, priority?: number): boolean {
    const row = this.rows.all.get(id);
    return (
      row !== undefined &&
      row.dueAt === dueAt &&
      (priority === undefined || this.priorityOf(specOwnerOf(row)) === priority) &&
      row.jobStatus === "active" &&
      !this.dispatches.all.has(id) &&
      !this.offers.has(id) &&
      !this.leases.all.has(id) &&
      !this.outcomes.has(id)
    );
  }

  /** The earliest due time of a scheduled execution, or undefined. */
  nextDueAt(): number | undefined {
    return this.dueQueues.peek((dueAt, id) => this.isScheduledAt(id, dueAt))?.dueAt;
  }

  rowsOfJob(jobId: string): HeldRow[] {
    return this.rows.rowsOfJob(jobId);
  }

  /** When a dispatch counts as lost (core/backoff.ts redispatchAt). */
  redispatchAt(d: Dispatch): number {
    return this.dispatches.redispatchAt(d);
  }

  /** The earliest lease deadline, or undefined. */
  firstDeadline(): number | undefined {
    return this.leases.firstDeadline();
  }

  /** Leases whose deadline passed (lease-table.ts). */
  expired(now: number): Generator<[string, Lease]> {
    return this.leases.expired(now);
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

  // ---- the memory under the moves (no state change of its own) ------------------------------

  /** Holds a row (not yet in the due order: schedule does that). */
  hold(row: HeldRow): void {
    this.rows.hold(row);
  }

  /** The row's fields changed (its job's version or state, or its due time under a running lease), not its state. */
  keep(row: HeldRow): void {
    this.rows.keep(row);
  }

  /**
   * A spec's priority (by its owner: specOwnerOf), as it says: its scheduled rows go into the due
   * order again under it (their entries under the one before are stale). Note it before a new row
   * is scheduled.
   */
  notePriority(owner: string, priority: number): void {
    if (this.priorityOf(owner) === priority) return;
    if (priority === PRIORITY.default) this.priorities.delete(owner);
    else this.priorities.set(owner, priority);
    for (const row of this.rows.rowsOfSpec(owner)) if (this.isScheduledAt(row.id, row.dueAt)) this.schedule(row);
  }

  /** In its tenant's due order, under its spec's priority. */
  schedule(row: HeldRow): void {
    this.dueQueues.push(row.dueAt, row.id, row.tenant, this.priorityOf(specOwnerOf(row)));
    // entries of rows that moved stay until they surface: rebuilt once they outnumber the live ones
    // (looked at every 1,024 pushes: the size is a sum over tenants)
    if (++this.pushes % 1_024 === 0 && this.dueQueues.size > 2 * this.rows.all.size + 1_024) {
      this.dueQueues.compact((dueAt, id, priority) => this.isScheduledAt(id, dueAt, priority));
    }
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
