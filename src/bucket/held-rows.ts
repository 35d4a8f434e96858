/**
 * Every execution row a bucket holds, without its spec and log, and a recurring job's rows by
 * job (a one-off job's one execution is named after it), for the state machine (flight.ts
 * Executions, which alone writes them).
 */
import { oneOffExecutionId } from "../core/id";
import { type HeldRow, specOwnerOf } from "./store";

export class HeldRows {
  private readonly rows = new Map<string, HeldRow>();
  private readonly ofJob = new Map<string, Set<string>>();

  get all(): ReadonlyMap<string, HeldRow> {
    return this.rows;
  }

  hold(row: HeldRow): void {
    this.rows.set(row.id, row);
    if (!row.recurring) return;
    const ids = this.ofJob.get(row.jobId) ?? new Set<string>();
    ids.add(row.id);
    this.ofJob.set(row.jobId, ids);
  }

  /** New fields of a held row. */
  keep(row: HeldRow): void {
    this.rows.set(row.id, row);
  }

  release(row: HeldRow): void {
    this.rows.delete(row.id);
    const ids = this.ofJob.get(row.jobId);
    if (!ids) return;
    ids.delete(row.id);
    if (ids.size === 0) this.ofJob.delete(row.jobId);
  }

  /** The rows that run `owner`'s spec (specOwnerOf): a callback's own row, or its job's executions. */
  rowsOfSpec(owner: string): HeldRow[] {
    const own = this.rows.get(owner);
    return own && specOwnerOf(own) === owner ? [own] : this.rowsOfJob(owner);
  }

  /** A job's own executions (never its callbacks: those run specs of their own). */
  rowsOfJob(jobId: string): HeldRow[] {
    // (an occurrence due at its job's creation millisecond has the one-off's id: recurring, not alone)
    const oneOff = this.rows.get(oneOffExecutionId(jobId));
    if (oneOff && !oneOff.recurring) return [oneOff];
    return [...(this.ofJob.get(jobId) ?? [])].flatMap((id) => this.rows.get(id) ?? []);
  }
}
