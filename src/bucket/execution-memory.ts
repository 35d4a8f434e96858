/**
 * The memory under a bucket's execution state machine (flight.ts): every durable row (without
 * its spec and log), the scheduled ones by due time and priority, and the states that live only
 * here (dispatched, offered, running, closing: on its way to D1), plus the ids that left recently.
 * Reads, and the writes that change no state (hold, keep, schedule, notePriority); every move of
 * the lifecycle is flight.ts's, which alone writes these maps otherwise.
 */
import { PRIORITY } from "../core/priority";
import type { Closing } from "./closing";
import { type Dispatch, DispatchOrder } from "./dispatch-order";
import { TenantDueQueues } from "./due-queue";
import { HeldRows } from "./held-rows";
import { type Lease, LeaseTable } from "./lease-table";
import { type HeldRow, specOwnerOf } from "./store";
import { type Closed, Tombstones } from "./tombstones";

export class ExecutionMemory {
  /** every execution row, without its spec and log (held-rows.ts) */
  protected readonly rows = new HeldRows();
  /** held rows not in flight, by tenant, priority and due time */
  protected readonly dueQueues = new TenantDueQueues();
  /**
   * the priority of each held spec (by specOwnerOf: a job's, or a callback's own) that has one other
   * than the default (core/priority.ts), as the spec applied or stored says (memory: at start it is
   * read with the rows); its executions' due entries carry it
   */
  protected readonly priorities = new Map<string, number>();
  /** dispatched, in dispatch order (dispatch-order.ts) */
  protected readonly dispatches: DispatchOrder;
  /** running: their leases */
  protected readonly leases = new LeaseTable();
  /** offered: waiting in a pull queue for a worker (due time, queue), out of the dispatch order */
  protected readonly offers = new Map<string, { dueAt: number; queue: string }>();
  /** offers their queues must be told again (reoffer) */
  protected readonly reoffers = new Set<string>();
  /** the due time it had before flow control first made it wait (memory only, as the rest) */
  protected readonly waits = new Map<string, number>();
  /** terminal outcomes not yet in D1 */
  protected readonly outcomes = new Map<string, Closing>();
  /** ids that left recently (tombstones.ts) */
  protected readonly tombstones = new Tombstones();
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
}
