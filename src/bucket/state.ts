/**
 * What the bucket's operation modules share (jobs.ts, leases.ts, outcomes.ts, dispatch.ts,
 * flush.ts, observe.ts): its storage, the execution state machine, the tally, its config and the
 * little memory beside them; and the steps several of them take. Nothing here calls the queue
 * or D1: that is the shell's (bucket.ts). Every step runs inside the shell's transaction.
 */
import type { Config } from "../config";
import { DispatchWindow } from "../core/dispatch-window";
import { isPullTarget, type JobSpec } from "../core/job";
import { type TerminalState, TRANSITIONS } from "../core/lifecycle";
import { type CounterName, SYSTEM_TENANT } from "../core/metrics";
import { priorityOf } from "../core/priority";
import { type CloseEvent, Executions } from "./flight";
import { type ArchiveCount, type AttemptRecord, type D1Meter, type JobDefinition, parseAttemptLog } from "./protocol";
import * as store from "./store";
import { type HeldRow, specOwnerOf } from "./store";
import { Tally } from "./tally";

export interface BucketState {
  readonly sql: SqlStorage;
  readonly config: Config;
  readonly executions: Executions;
  readonly tally: Tally;
  /** how many fire messages may wait in the queue at once (the rest wait here, fairly) */
  readonly window: DispatchWindow;
  /** raised at every start: lease seqs carry it (invariant 2) */
  readonly epoch: number;
  /** job definitions that arrived while their execution was closing: applied after the flush */
  readonly deferred: Map<string, JobDefinition>;
  /** schedules whose next occurrence, fired count or completion D1 has not seen */
  readonly dirtySchedules: Set<string>;
  /** this bucket's index, once known */
  bucket: number | null;
  nextScheduleAt: number | null;
  leaseSeq: number;
  /** a failed send holds first dispatches back until then */
  dispatchRetryAt: number;
  /**
   * specs held here (by specOwnerOf: only jobs' ever are) whose target is a pull queue, as far as
   * this instance has seen them (applied or claimed): their executions go in groups of
   * FIRE_GROUP_SIZE_PULL; a callback, whose spec is its own, never does. Memory only; after a
   * restart an execution not seen again goes in a group of FIRE_GROUP_SIZE, which is always safe
   */
  readonly pullJobs: Set<string>;
}

/** the dispatch window starts small and doubles per round trip while the queue keeps up */
const DISPATCH_WINDOW_INITIAL = 16;
const DISPATCH_WINDOW_MIN = 4;

/** The state of a bucket at start (a new epoch): its executions are restored by the shell. */
export function newState(sql: SqlStorage, config: Config, epoch: number): BucketState {
  return {
    sql,
    config,
    executions: new Executions(config.DISPATCH_TIMEOUT_MS),
    tally: new Tally(),
    window: new DispatchWindow({
      initial: DISPATCH_WINDOW_INITIAL,
      min: DISPATCH_WINDOW_MIN,
      max: config.FIRE_BATCH_LIMIT,
      targetQueueMs: config.DISPATCH_QUEUE_TARGET_MS,
    }),
    epoch,
    deferred: new Map(),
    dirtySchedules: new Set(),
    bucket: store.storedBucket(sql),
    nextScheduleAt: store.nextScheduleAt(sql),
    leaseSeq: 0,
    dispatchRetryAt: 0,
    pullJobs: new Set(),
  };
}

/** What an ending records (an attempt, if one ran; the reason of a cancel or a death). */
export interface Ending {
  attempt?: AttemptRecord;
  httpStatus?: number | null;
  error?: string | null;
  reason?: string;
}

/**
 * Remembers what a spec says of how its executions wait, by its owner (store.ts specOwnerOf: a
 * job's id, or a callback's own): whether its target is a pull queue (their group size:
 * dispatch.ts) and its priority (their turn: flight.ts notePriority).
 */
export function noteSpec(s: BucketState, owner: string, spec: JobSpec): void {
  if (isPullTarget(spec.target)) s.pullJobs.add(owner);
  else s.pullJobs.delete(owner);
  s.executions.notePriority(owner, priorityOf(spec));
}

/**
 * D1 has its outcome: the execution leaves (flight.ts leave); the only execution of its spec (not
 * a recurring job's) takes what was noted of that spec with it.
 */
export function leave(s: BucketState, row: HeldRow, at: number): void {
  s.executions.leave(row, at);
  if (!row.recurring) s.pullJobs.delete(specOwnerOf(row));
}

/** A new execution row, scheduled by `via` (its row of the lifecycle table). Returns whether it was new. */
export function insert(
  s: BucketState,
  row: HeldRow,
  spec: string | null,
  log: AttemptRecord[] | null,
  via: "handOff" | "redrive" | "reopen",
): boolean {
  if (!store.insertExecution(s.sql, row, spec, log)) return false;
  s.executions[via](row);
  return true;
}

/** An outcome on its way to D1 (its state from the lifecycle table); the row stays until D1 has it. */
export function close(s: BucketState, row: HeldRow, event: CloseEvent, now: number, detail: Ending): TerminalState {
  const status: TerminalState = TRANSITIONS[event].to;
  s.executions[event](row, {
    attempts: detail.attempt?.attempt ?? row.attempt,
    finishedAt: now,
    lastHttpStatus: detail.httpStatus ?? null,
    lastError: detail.error ?? (status === "canceled" ? (detail.reason ?? null) : null),
    deadReason: status === "dead" ? (detail.reason ?? null) : null,
    last: detail.attempt ?? null,
  });
  // the schedule's completion is decided at the flush: a finished occurrence may be its last
  if (row.recurring) s.dirtySchedules.add(row.jobId);
  // a callback's death is its own count: dead_total (and the DLQ) are the jobs' executions
  if (status === "dead") s.tally.add(row.callback ? "callbacks_dead_total" : "dead_total", row.tenant, detail.reason ?? "");
  if (status === "canceled") s.tally.add("canceled_total", row.tenant);
  return status;
}

/**
 * A change of the job (cancel, pause, a new schedule) at `version` ends this execution canceled,
 * stored first: a restart before the flush finds the row canceled and closes it again instead of
 * running it (a change answered 200 is never undone). 1 row written.
 */
export function cancel(s: BucketState, row: HeldRow, version: number, now: number, reason: string): void {
  const canceled: HeldRow = { ...row, version: Math.max(row.version, version), jobStatus: "canceled" };
  store.updateJobOfExecution(s.sql, canceled, null);
  s.executions.keep(canceled);
  close(s, canceled, "cancel", now, { reason });
}

/** D1 rows written to a shard: d1_rows_written_total, its reason the shard's index */
export function countD1Rows(tally: Tally, shard: number, rows: number): void {
  if (rows > 0) tally.add("d1_rows_written_total", SYSTEM_TENANT, String(shard), rows);
}

/** D1 rows and archive writes of others (the scan's purge, a create of far jobs), counted with this bucket's. */
export function countOutside(tally: Tally, meters: D1Meter[], archive: ArchiveCount | undefined): void {
  for (const m of meters) countD1Rows(tally, m.shard, m.d1RowsWritten);
  const archiveCounts: [CounterName, number][] = [
    ["archived_executions_total", archive?.executions ?? 0],
    ["archive_objects_total", archive?.objects ?? 0],
    ["archive_bytes_total", archive?.bytes ?? 0],
    ["archive_write_failures_total", archive?.failures ?? 0],
  ];
  for (const [name, by] of archiveCounts) if (by > 0) tally.add(name, SYSTEM_TENANT, "", by);
}

/** A definition's log for insert(): none stays none (no log column written). */
export function parseLog(json: string | null): AttemptRecord[] | null {
  return json ? parseAttemptLog(json) : null;
}
