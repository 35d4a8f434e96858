/**
 * What a bucket knows of its executions in memory: every durable row (without its spec and log),
 * the scheduled ones by due time, and the states that live only here (dispatched, running,
 * closing: on its way to D1), plus the ids that left recently. Rebuilt from storage at every
 * start (a new epoch): what was dispatched or running is then scheduled again.
 *
 * Every state is derived from these maps (stateOf) and every move is checked against the
 * lifecycle table first (assertMove): the table drives the code.
 */

import { redispatchAt } from "../core/backoff";
import { oneOffExecutionId } from "../core/id";
import { type ExecutionState, type TerminalState, type Transition, transition } from "../core/lifecycle";
import { TenantDueQueues } from "./due-queue";
import type { AttemptRecord } from "./protocol";
import type { HeldRow } from "./store";

/** tombstones are kept this long: longer than a sync pass's read of D1 can take */
export const CLOSED_MEMORY_MS = 120_000;
/** at most this many tombstones per bucket (about 300 executions/s ending for CLOSED_MEMORY_MS) */
export const MAX_TOMBSTONES = 100_000;

export interface Closing {
  row: HeldRow;
  status: TerminalState;
  attempts: number;
  finishedAt: number;
  lastHttpStatus: number | null;
  lastError: string | null;
  deadReason: string | null;
  /** the attempt that ended it, if one ran */
  last: AttemptRecord | null;
}

export interface Lease {
  token: string;
  seq: number;
  deadlineAt: number;
  attempt: number;
  startedAt: number;
  /** the row's occurrence when claimed: a reschedule meanwhile runs it again */
  occurrenceAt: number;
  /** a pull worker's lease: the length it asked for (absent: LEASE_MS, the consumer's) */
  leaseMs?: number;
}

export interface Dispatch {
  seq: number;
  at: number;
  count: number;
}

export class Executions {
  /** every execution row, without its spec and log */
  readonly held = new Map<string, HeldRow>();
  /** recurring jobs' held executions (a one-off job's one execution is named after it) */
  private readonly heldOfJob = new Map<string, Set<string>>();
  /** held rows not in flight, by tenant and due time */
  readonly due = new TenantDueQueues();
  /** dispatched, in dispatch order (the first is the oldest) */
  readonly dispatched = new Map<string, Dispatch>();
  /**
   * running: the consumer's leases (all LEASE_MS long) in deadline order (a heartbeat moves a
   * lease to the end), pull workers' leases (each its own length) among them, in no order
   */
  readonly running = new Map<string, Lease>();
  /** the running leases of pull workers (pullLeases), checked one by one for expiry */
  private readonly pullLeases = new Set<string>();
  /**
   * claimed for a pull queue and waiting there for a worker, with the due time and queue offered: out of
   * the dispatch order (nothing is re-sent while it waits, however long) and shown as dispatched
   */
  readonly offered = new Map<string, { dueAt: number; queue: string }>();
  /**
   * the due time an execution had before flow control first made it wait (memory only: after a
   * restart its wait counts from its current due time)
   */
  readonly waitingSince = new Map<string, number>();
  /** terminal outcomes not yet in D1 */
  readonly closing = new Map<string, Closing>();
  /**
   * Tombstones: ids that left recently (finished, or a canceled job the bucket never held), with
   * their tenant and version, oldest first: a sync pass that read D1 before the outcome landed
   * there must not bring one back, and a late message of one is a duplicate. Kept
   * CLOSED_MEMORY_MS, and never more than MAX_TOMBSTONES (the oldest go first: then a stale read
   * may run an execution again, a duplicate at-least-once allows).
   */
  readonly closedAt = new Map<string, { at: number; tenant: string; version: number }>();
  private dispatchSeq = 0;
  private pushes = 0;
  /** the highest dispatch seq claimed: an older unclaimed dispatch was overtaken */
  private claimedSeq = 0;

  constructor(private readonly dispatchTimeoutMs: number) {}

  /** A tombstone for an id that left (see closedAt), at the end of the order. */
  rememberClosed(id: string, closed: { at: number; tenant: string; version: number }): void {
    this.closedAt.delete(id);
    this.closedAt.set(id, closed);
    this.forgetClosed(closed.at);
  }

  /** Drops tombstones older than CLOSED_MEMORY_MS, and the oldest beyond MAX_TOMBSTONES. */
  forgetClosed(now: number): void {
    for (const [id, closed] of this.closedAt) {
      if (closed.at > now - CLOSED_MEMORY_MS && this.closedAt.size <= MAX_TOMBSTONES) break; // oldest first
      this.closedAt.delete(id);
    }
  }

  /** Records a send (a first dispatch or a re-send) at the end of the dispatch order. */
  dispatch(row: HeldRow, event: "dispatch" | "redispatch", now: number): void {
    this.assertMove(row, event);
    const count = (this.dispatched.get(row.id)?.count ?? 0) + 1;
    this.dispatched.delete(row.id);
    this.dispatched.set(row.id, { seq: ++this.dispatchSeq, at: now, count });
  }

  /** A claim took its dispatch: every older unclaimed one has now been overtaken. */
  claimed(id: string): Dispatch | undefined {
    const dispatch = this.dispatched.get(id);
    if (!dispatch) return undefined;
    this.dispatched.delete(id);
    if (dispatch.seq > this.claimedSeq) this.claimedSeq = dispatch.seq;
    return dispatch;
  }

  /** Scheduled again (or for the first time): in its tenant's due order. */
  schedule(row: HeldRow): void {
    this.due.push(row.dueAt, row.id, row.tenant);
    // entries of rows that moved stay until they surface: rebuilt once they outnumber the live ones
    // (looked at every 1,024 pushes: the size is a sum over tenants)
    if (++this.pushes % 1_024 === 0 && this.due.size > 2 * this.held.size + 1_024) {
      this.due.compact((dueAt, id) => this.isScheduledAt(id, dueAt));
    }
  }

  keep(row: HeldRow): void {
    this.held.set(row.id, row);
  }

  hold(row: HeldRow): void {
    this.held.set(row.id, row);
    if (!row.recurring) return;
    const ids = this.heldOfJob.get(row.jobId) ?? new Set<string>();
    ids.add(row.id);
    this.heldOfJob.set(row.jobId, ids);
  }

  /** Starts a lease (the consumer's, or a pull worker's when it has its own leaseMs). */
  lease(id: string, lease: Lease): void {
    this.offered.delete(id);
    this.running.set(id, lease);
    if (lease.leaseMs !== undefined) this.pullLeases.add(id);
  }

  /** Extends a live lease by its own length; a consumer's moves to the end of the deadline order. */
  extend(id: string, lease: Lease, now: number, defaultLeaseMs: number): void {
    lease.deadlineAt = now + (lease.leaseMs ?? defaultLeaseMs);
    if (lease.leaseMs !== undefined) return;
    this.running.delete(id);
    this.running.set(id, lease);
  }

  /** Ends a lease, if any (finished, failed, expired, or the execution left). */
  endLease(id: string): void {
    this.running.delete(id);
    this.pullLeases.delete(id);
  }

  /** Leases whose deadline passed: the consumer's from the front of their order, then every pull worker's. */
  *expired(now: number): Generator<[string, Lease]> {
    for (const [id, lease] of this.running) {
      if (this.pullLeases.has(id)) continue;
      if (lease.deadlineAt > now) break;
      yield [id, lease];
    }
    for (const id of [...this.pullLeases]) {
      const lease = this.running.get(id)!;
      if (lease.deadlineAt <= now) yield [id, lease];
    }
  }

  /** The earliest lease deadline, or undefined. */
  firstDeadline(): number | undefined {
    let first: number | undefined;
    for (const [id, lease] of this.running) {
      if (this.pullLeases.has(id)) continue;
      first = lease.deadlineAt;
      break;
    }
    for (const id of this.pullLeases) {
      const at = this.running.get(id)!.deadlineAt;
      if (first === undefined || at < first) first = at;
    }
    return first;
  }

  release(row: HeldRow): void {
    this.held.delete(row.id);
    this.waitingSince.delete(row.id);
    this.offered.delete(row.id);
    const ids = this.heldOfJob.get(row.jobId);
    if (!ids) return;
    ids.delete(row.id);
    if (ids.size === 0) this.heldOfJob.delete(row.jobId);
  }

  /** When a dispatch counts as lost (core/backoff.ts redispatchAt). */
  redispatchAt(d: Dispatch): number {
    return redispatchAt(d.at, this.claimedSeq > d.seq, this.dispatchTimeoutMs);
  }

  /**
   * Every state change asks the lifecycle table first (core/lifecycle.ts): a move the table does
   * not allow is a bug, and throwing rolls the step's transaction back.
   */
  assertMove(row: HeldRow, event: Transition): ExecutionState {
    const from = this.stateOf(row);
    const to = transition(from, event);
    if (to === null) throw new Error(`lifecycle: ${event} is not allowed from ${from} (${row.id})`);
    return to;
  }

  stateOf(row: HeldRow): ExecutionState {
    if (this.closing.has(row.id)) return this.closing.get(row.id)!.status;
    if (this.running.has(row.id)) return "running";
    if (this.dispatched.has(row.id) || this.offered.has(row.id)) return "dispatched";
    return "scheduled";
  }

  /** Whether `id` is held, scheduled (not in flight, not closing) and due at `dueAt`: a live DueQueue entry. */
  isScheduledAt(id: string, dueAt: number): boolean {
    const row = this.held.get(id);
    return (
      row !== undefined &&
      row.dueAt === dueAt &&
      row.jobStatus === "active" &&
      !this.dispatched.has(id) &&
      !this.offered.has(id) &&
      !this.running.has(id) &&
      !this.closing.has(id)
    );
  }

  rowsOfJob(jobId: string): HeldRow[] {
    const oneOff = this.held.get(oneOffExecutionId(jobId));
    if (oneOff) return [oneOff];
    return [...(this.heldOfJob.get(jobId) ?? [])].flatMap((id) => this.held.get(id) ?? []);
  }
}
