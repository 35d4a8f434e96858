/**
 * The running executions' leases, for the state machine (flight.ts Executions, which alone
 * writes them): the consumer's leases (all LEASE_MS long) in deadline order (a heartbeat moves a
 * lease to the end), pull workers' leases (each its own length) among them, in no order, and
 * checked one by one for expiry. Memory only: a restart's new epoch fences every one of them.
 */

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
  /** a pull worker's lease: the pull queue that asked for it on the worker's behalf */
  queue?: string;
}

export class LeaseTable {
  private readonly leases = new Map<string, Lease>();
  /** the running leases of pull workers */
  private readonly pullLeases = new Set<string>();

  get all(): ReadonlyMap<string, Lease> {
    return this.leases;
  }

  start(id: string, lease: Lease): void {
    this.leases.set(id, lease);
    if (lease.leaseMs !== undefined) this.pullLeases.add(id);
  }

  /** Extends a live lease by its own length; a consumer's moves to the end of the deadline order. */
  extend(id: string, lease: Lease, now: number, defaultLeaseMs: number): void {
    lease.deadlineAt = now + (lease.leaseMs ?? defaultLeaseMs);
    if (lease.leaseMs !== undefined) return;
    this.leases.delete(id);
    this.leases.set(id, lease);
  }

  end(id: string): void {
    this.leases.delete(id);
    this.pullLeases.delete(id);
  }

  /** Leases whose deadline passed: the consumer's from the front of their order, then every pull worker's. */
  *expired(now: number): Generator<[string, Lease]> {
    for (const [id, lease] of this.leases) {
      if (this.pullLeases.has(id)) continue;
      if (lease.deadlineAt > now) break;
      yield [id, lease];
    }
    for (const id of [...this.pullLeases]) {
      const lease = this.leases.get(id)!;
      if (lease.deadlineAt <= now) yield [id, lease];
    }
  }

  /** The earliest lease deadline, or undefined. */
  firstDeadline(): number | undefined {
    let first: number | undefined;
    for (const [id, lease] of this.leases) {
      if (this.pullLeases.has(id)) continue;
      first = lease.deadlineAt;
      break;
    }
    for (const id of this.pullLeases) {
      const at = this.leases.get(id)!.deadlineAt;
      if (first === undefined || at < first) first = at;
    }
    return first;
  }
}
