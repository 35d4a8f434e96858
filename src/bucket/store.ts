/**
 * The bucket's named storage operations: every SQL statement the Durable Object runs. Each is
 * headed with its inputs, guard, the rows it writes (rowsWritten, index entries included) and
 * its result. Call them inside the shell's transaction (Bucket.change).
 *
 * Only what must survive a restart is stored: a row per scheduled execution (dispatched and
 * running live in memory, fenced by the epoch), a row per recurring schedule, the epoch, and
 * the counters. Terminal executions leave once D1 has them.
 */
import type { CallbackKind } from "../core/callback";
import { type AttemptRecord, parseAttemptLog } from "./protocol";

/** the attempts an execution keeps in its log (the oldest are dropped) */
export const LOG_LIMIT = 20;

/** An execution row without its spec and log (what the bucket keeps in memory too). */
export interface HeldRow {
  dueAt: number;
  id: string;
  jobId: string;
  tenant: string;
  version: number;
  jobStatus: string;
  occurrenceAt: number;
  occurrence: number;
  attempt: number;
  budgetBase: number;
  recurring: boolean;
  /** a callback execution (core/callback.ts): the execution it tells of, and which callback; absent for every other */
  callback?: { of: string; kind: CallbackKind };
}

/**
 * Whose spec an execution runs, and so whose priority it waits under and whose target kind groups
 * it: its job's (a recurring job's schedule, a one-off job's own row), except a callback's, which
 * runs a spec of its own (core/callback.ts callbackSpec) and is keyed by its own id. A callback
 * is an execution of its job only for what it reports and where its outcome is written (jobId);
 * its job's priority, PATCHes, target kind and leaving never touch it, nor it them (issue 36 item 1).
 * The one definition: every memory kept per spec (flight.ts priorities, state.ts pullJobs,
 * loadPriorities below) is keyed by this.
 */
export function specOwnerOf(row: { id: string; jobId: string; callback?: unknown }): string {
  return row.callback ? row.id : row.jobId;
}

export interface ScheduleRow {
  id: string;
  tenant: string;
  version: number;
  status: string;
  spec: string;
  nextAt: number | null;
  fired: number;
}

const HELD_COLUMNS = `due_at AS dueAt, id, job_id AS jobId, tenant, version, job_status AS jobStatus,
  occurrence_at AS occurrenceAt, occurrence, attempt, budget_base AS budgetBase, spec IS NULL AS recurring,
  callback_of AS callbackOf, callback_kind AS callbackKind`;

/**
 * nextEpoch: raises the bucket's epoch (once per start). Lease tokens and fencing seqs carry it,
 * so nothing granted before a restart is honoured after it.
 * Writes 1 row. Returns the new epoch.
 */
export function nextEpoch(sql: SqlStorage): number {
  const row = sql
    .exec<{ value: string }>(
      `INSERT INTO meta (key, value) VALUES ('epoch', '1')
       ON CONFLICT (key) DO UPDATE SET value = CAST(value AS INTEGER) + 1 RETURNING value`,
    )
    .one();
  return Number(row.value);
}

/** rememberBucket: the bucket's own index, stored once. Writes 1 row the first time, then 0. */
export function rememberBucket(sql: SqlStorage, bucket: number): void {
  sql.exec("INSERT INTO meta (key, value) VALUES ('bucket', ?) ON CONFLICT (key) DO NOTHING", String(bucket));
}

export function storedBucket(sql: SqlStorage): number | null {
  const row = sql.exec<{ value: string }>("SELECT value FROM meta WHERE key = 'bucket'").toArray()[0];
  return row ? Number(row.value) : null;
}

/** loadHeld: every execution row, for the in-memory state at start. Reads only. */
export function loadHeld(sql: SqlStorage): HeldRow[] {
  return sql
    .exec(`SELECT ${HELD_COLUMNS} FROM executions`)
    .toArray()
    .map((r) => {
      const { callbackOf, callbackKind, ...row } = r as unknown as HeldRow & {
        callbackOf: string | null;
        callbackKind: CallbackKind | null;
      };
      return {
        ...row,
        recurring: r.recurring === 1,
        ...(callbackOf && callbackKind ? { callback: { of: callbackOf, kind: callbackKind } } : {}),
      };
    });
}

/**
 * loadPriorities: the specs held here that have a priority (only those other than the default
 * are stored: core/priority.ts), by their owner (store.ts specOwnerOf): a one-off job's and a
 * callback's from its execution row, a recurring job's from its schedule. A spec that is not JSON
 * (a claim answers it as failed) has none: it must not keep the bucket from starting. Reads only
 * (once per start).
 */
export function loadPriorities(sql: SqlStorage): [owner: string, priority: number][] {
  const priority = `CASE WHEN json_valid(spec) THEN json_extract(spec, '$.priority') END`;
  return sql
    .exec<{ id: string; jobId: string; callbackOf: string | null; priority: SqlStorageValue }>(
      `SELECT id, jobId, callbackOf, priority FROM (
         SELECT id, job_id AS jobId, callback_of AS callbackOf, ${priority} AS priority FROM executions WHERE spec IS NOT NULL
         UNION ALL
         SELECT id, id, NULL, ${priority} FROM schedules
       ) WHERE priority IS NOT NULL`,
    )
    .toArray()
    .flatMap((r): [string, number][] =>
      typeof r.priority === "number" ? [[specOwnerOf({ id: r.id, jobId: r.jobId, callback: r.callbackOf ?? undefined }), r.priority]] : [],
    );
}

/**
 * insertExecution: a scheduled execution. Guard: (due_at, id) unique, so a repeat is a no-op.
 * Writes 1 row (the key is the table). Returns whether it was new.
 */
export function insertExecution(sql: SqlStorage, row: HeldRow, spec: string | null, log: AttemptRecord[] | null): boolean {
  return insertRow(sql, row, spec, log && log.length > 0 ? JSON.stringify(log) : null);
}

function insertRow(sql: SqlStorage, row: HeldRow, spec: string | null, logJson: string | null): boolean {
  const cursor = sql.exec(
    `INSERT INTO executions (due_at, id, job_id, tenant, version, job_status, occurrence_at, occurrence, attempt,
       budget_base, spec, log, callback_of, callback_kind)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`,
    row.dueAt,
    row.id,
    row.jobId,
    row.tenant,
    row.version,
    row.jobStatus,
    row.occurrenceAt,
    row.occurrence,
    row.attempt,
    row.budgetBase,
    spec,
    logJson,
    row.callback?.of ?? null,
    row.callback?.kind ?? null,
  );
  cursor.toArray();
  return cursor.rowsWritten > 0;
}

/**
 * moveExecution: a new due time (retry backoff, reschedule, a flow-control wait) with the row's
 * new fields; the key changes, so it is a delete and an insert. The spec is kept unless given,
 * the attempt log is kept, with `attempt` appended if given (the last LOG_LIMIT). Guard: the row
 * at `fromDueAt`. Writes 2 rows.
 */
export function moveExecution(
  sql: SqlStorage,
  fromDueAt: number,
  row: HeldRow,
  change: { attempt?: AttemptRecord; spec?: string | null } = {},
): void {
  const current = sql
    .exec<{ spec: string | null; log: string | null }>(
      "DELETE FROM executions WHERE due_at = ? AND id = ? RETURNING spec, log",
      fromDueAt,
      row.id,
    )
    .toArray()[0];
  const spec = change.spec === undefined ? (current?.spec ?? null) : change.spec;
  const log = current?.log ?? null;
  if (change.attempt === undefined) insertRow(sql, row, spec, log);
  else insertExecution(sql, row, spec, [...parseAttemptLog(log), change.attempt].slice(-LOG_LIMIT));
}

/** updateJobOfExecution: the job's version, state and (one-off) spec on a row. Writes 1 row. */
export function updateJobOfExecution(sql: SqlStorage, row: HeldRow, spec: string | null): void {
  sql.exec(
    "UPDATE executions SET version = ?, job_status = ?, spec = COALESCE(?, spec) WHERE due_at = ? AND id = ?",
    row.version,
    row.jobStatus,
    spec,
    row.dueAt,
    row.id,
  );
}

/** deleteExecutions: rows whose outcome D1 now holds. Writes 1 row each. */
export function deleteExecutions(sql: SqlStorage, keys: { dueAt: number; id: string }[]): void {
  for (const k of keys) sql.exec("DELETE FROM executions WHERE due_at = ? AND id = ?", k.dueAt, k.id);
}

/** specOf: the spec an execution runs (its own, or its schedule's). Reads only. */
export function specOf(sql: SqlStorage, row: { dueAt: number; id: string; jobId: string; recurring: boolean }): string | null {
  if (row.recurring) return sql.exec<{ spec: string }>("SELECT spec FROM schedules WHERE id = ?", row.jobId).toArray()[0]?.spec ?? null;
  return (
    sql.exec<{ spec: string }>("SELECT spec FROM executions WHERE due_at = ? AND id = ?", row.dueAt, row.id).toArray()[0]?.spec ?? null
  );
}

/**
 * namesCallback: whether the spec an execution runs (its own, or its schedule's) names this
 * callback now. SQLite reads the one field, not the whole spec (its body may be 64 KB); a spec
 * that is not JSON names none (its outcome must still reach D1). Reads only.
 */
export function namesCallback(
  sql: SqlStorage,
  row: { dueAt: number; id: string; jobId: string; recurring: boolean },
  field: "callback" | "failureCallback",
): boolean {
  const named = `CASE WHEN json_valid(spec) THEN json_type(spec, '$.${field}') = 'object' ELSE 0 END AS named`;
  const found = row.recurring
    ? sql.exec<{ named: number }>(`SELECT ${named} FROM schedules WHERE id = ?`, row.jobId)
    : sql.exec<{ named: number }>(`SELECT ${named} FROM executions WHERE due_at = ? AND id = ?`, row.dueAt, row.id);
  return found.toArray()[0]?.named === 1;
}

/** logOf: an execution's finished attempts. Reads only. */
export function logOf(sql: SqlStorage, key: { dueAt: number; id: string }): AttemptRecord[] {
  const text = sql
    .exec<{ log: string | null }>("SELECT log FROM executions WHERE due_at = ? AND id = ?", key.dueAt, key.id)
    .toArray()[0]?.log;
  return parseAttemptLog(text ?? null);
}

export function scheduleOf(sql: SqlStorage, jobId: string): ScheduleRow | undefined {
  return sql.exec("SELECT id, tenant, version, status, spec, next_at AS nextAt, fired FROM schedules WHERE id = ?", jobId).toArray()[0] as
    | ScheduleRow
    | undefined;
}

/**
 * putSchedule: a recurring job's schedule at a version. Guard: an older stored version only.
 * Writes 1 row, plus 1-2 index entries when next_at changes.
 */
export function putSchedule(sql: SqlStorage, s: ScheduleRow): void {
  sql.exec(
    `INSERT INTO schedules (id, tenant, version, status, spec, next_at, fired) VALUES (?, ?, ?, ?, ?, ?, ?)
     ON CONFLICT (id) DO UPDATE SET version = excluded.version, status = excluded.status, spec = excluded.spec,
       next_at = excluded.next_at, fired = excluded.fired
     WHERE schedules.version <= excluded.version`,
    s.id,
    s.tenant,
    s.version,
    s.status,
    s.spec,
    s.nextAt,
    s.fired,
  );
}

/** dueSchedules: active schedules whose next occurrence is due by `at`. Reads the index range. */
export function dueSchedules(sql: SqlStorage, at: number, limit: number): ScheduleRow[] {
  return sql
    .exec(
      `SELECT id, tenant, version, status, spec, next_at AS nextAt, fired FROM schedules
       WHERE next_at IS NOT NULL AND next_at <= ? AND status = 'active' ORDER BY next_at LIMIT ?`,
      at,
      limit,
    )
    .toArray() as unknown as ScheduleRow[];
}

/** nextScheduleAt: the earliest next occurrence of an active schedule. Reads the index. */
export function nextScheduleAt(sql: SqlStorage): number | null {
  return sql.exec<{ at: number | null }>("SELECT MIN(next_at) AS at FROM schedules WHERE next_at IS NOT NULL AND status = 'active'").one()
    .at;
}
