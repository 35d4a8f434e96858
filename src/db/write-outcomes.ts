/**
 * Outcomes: the bucket -> D1, once per terminal execution, in batches (bucket/flush.ts). The
 * bucket is the one writer of its jobs' outcomes and projections (next_run_at, fired, completion),
 * each guarded so it never goes backwards.
 */
import { and, eq, inArray, isNotNull, lt, lte, or, sql } from "drizzle-orm";
import type { BatchItem } from "drizzle-orm/batch";
import { JOB_TRANSITIONS, type JobState, TRANSITIONS } from "../core/lifecycle";
import { batchRun, bound, type Db, each, element, insertRow, jsonChunks, proposed, rowsWritten, takeProposed } from "./kit";
import { deleteRedriven } from "./redrive";
import { deadLetters, jobs, occurrences } from "./schema";

/** A job's states from which the bucket completes it (the job table's "complete"). */
const COMPLETE_FROM: readonly JobState[] = JOB_TRANSITIONS.complete.from;
const COMPLETED: JobState = JOB_TRANSITIONS.complete.to;

export interface FinishedExecution {
  id: string;
  jobId: string;
  tenant: string;
  bucket: number;
  recurring: boolean;
  occurrenceAt: number;
  occurrence: number;
  status: "succeeded" | "dead" | "canceled";
  attempts: number;
  lastHttpStatus: number | null;
  lastError: string | null;
  deadReason: string | null;
  finishedAt: number;
  attemptLog: string | null;
  /** JSON: its callback, scheduled (core/callback.ts StoredCallback[]); absent or null when it fires none */
  callbacks?: string | null;
}

/** A callback's outcome, written on the execution it told of (a one-off job's row, or an occurrence's). */
export interface CallbackOutcome {
  tenant: string;
  jobId: string;
  /** the execution it told of */
  executionId: string;
  oneOff: boolean;
  /** the callback's own execution id: its outcome lands only while the column tells of it */
  callbackId: string;
  /** JSON: StoredCallback[] */
  callbacks: string;
}

/** A recurring job's schedule as its bucket holds it at `version`. */
export interface ScheduleProjection {
  tenant: string;
  jobId: string;
  version: number;
  nextRunAt: number | null;
  fired: number;
  /** no occurrence is left and none is live: the job is completed */
  completed: boolean;
}

/**
 * writeOutcomes: one atomic batch of six named statements, in this order.
 * - one-off: the job row gets its execution's outcome (writeOneOffOutcomes).
 * - recurring: an occurrence history row (upsertOccurrences).
 * - dead: a dead-letter row (upsertDeadLetters).
 * - redriven: a redriven execution that finished leaves the dead-letter list, even if its redrive
 *   was never acknowledged (redrive.ts deleteRedriven).
 * - schedules: next_run_at, fired and completion, only at the version the bucket holds
 *   (projectSchedules).
 * - callbacks: a callback's outcome on the execution it told of (writeCallbackOutcome; none
 *   without callbacks).
 * Each takes its rows as JSON chunks (kit.ts jsonChunks). Returns the rows written.
 */
export async function writeOutcomes(
  db: Db,
  finished: FinishedExecution[],
  schedules: ScheduleProjection[],
  now: number,
  callbacks: CallbackOutcome[] = [],
): Promise<number> {
  const redriven = finished.filter((e) => e.status !== "dead").map((e) => ({ tenant: e.tenant, id: e.id }));
  const statements: BatchItem<"sqlite">[] = [
    ...jsonChunks(finished.filter((e) => !e.recurring)).map((chunk) => writeOneOffOutcomes(db, chunk, now)),
    ...jsonChunks(finished.filter((e) => e.recurring)).map((chunk) => upsertOccurrences(db, chunk)),
    ...jsonChunks(finished.filter((e) => e.status === "dead")).map((chunk) => upsertDeadLetters(db, chunk)),
    ...jsonChunks(redriven).map((chunk) => deleteRedriven(db, chunk, "id")),
    ...jsonChunks(schedules).map((chunk) => projectSchedules(db, chunk, now)),
    ...callbacks.map((c) => writeCallbackOutcome(db, c)),
  ];
  return rowsWritten(await batchRun(db, statements));
}

/** A field of a FinishedExecution in a JSON chunk. */
const f = element<FinishedExecution>();

/** The outcome columns a one-off job row and an occurrence row share, by their schema names. */
function outcomeColumns() {
  return {
    attempts: f("attempts"),
    lastHttpStatus: f("lastHttpStatus"),
    lastError: f("lastError"),
    deadReason: f("deadReason"),
    finishedAt: f("finishedAt"),
    attemptLog: f("attemptLog"),
    callbacks: f("callbacks"),
  };
}

/**
 * writeOneOffOutcomes: each one-off job row of `chunk` gets its execution's outcome (1 row). It
 * completes (succeeded or dead) only while active and still due at the run time this execution
 * was for (a PATCH of the run time meanwhile keeps it active); guard: attempts never go backwards.
 */
function writeOneOffOutcomes(db: Db, chunk: string, now: number) {
  // a one-off job completes when its execution ends succeeded or dead while the job is still due
  // at the run time that execution was for (the job table's "complete")
  const completesOneOff = and(
    inArray(jobs.status, COMPLETE_FROM),
    inArray(
      f("status"),
      (["succeed", "kill", "poison"] as const).map((t) => TRANSITIONS[t].to),
    ),
    eq(jobs.nextRunAt, f("occurrenceAt")),
  );
  return db
    .update(jobs)
    .set({
      runStatus: f("status"),
      ...outcomeColumns(),
      status: sql`CASE WHEN ${completesOneOff} THEN ${COMPLETED} ELSE ${jobs.status} END`,
      updatedAt: sql`CASE WHEN ${completesOneOff} THEN ${now} ELSE ${jobs.updatedAt} END`,
    })
    .from(each(chunk))
    .where(and(eq(jobs.tenant, f("tenant")), eq(jobs.id, f("jobId")), lte(jobs.attempts, f("attempts"))));
}

/**
 * upsertOccurrences: an occurrence history row for each recurring execution of `chunk` (insert, or
 * a reopened one's update); guard: attempts never go backwards.
 */
function upsertOccurrences(db: Db, chunk: string) {
  const outcome = outcomeColumns();
  return db
    .insert(occurrences)
    .select(
      db
        .select(
          insertRow({
            id: f("id"),
            tenant: f("tenant"),
            jobId: f("jobId"),
            dueAt: f("occurrenceAt"),
            occurrence: f("occurrence"),
            status: f("status"),
            ...outcome,
          }),
        )
        .from(each(chunk))
        .where(sql`true`), // ends the FROM before ON CONFLICT (see insert-jobs.ts)
    )
    .onConflictDoUpdate({
      target: [occurrences.tenant, occurrences.id],
      set: takeProposed(occurrences, ["status", ...(Object.keys(outcome) as (keyof typeof outcome)[])]),
      setWhere: lte(occurrences.attempts, proposed(occurrences.attempts)),
    });
}

/** upsertDeadLetters: a dead-letter row for each dead execution of `chunk` (a redrive's mark cleared). */
function upsertDeadLetters(db: Db, chunk: string) {
  return db
    .insert(deadLetters)
    .select(
      db
        .select(
          insertRow({
            tenant: f("tenant"),
            executionId: f("id"),
            jobId: f("jobId"),
            bucket: f("bucket"),
            dueAt: f("occurrenceAt"),
            occurrence: f("occurrence"),
            attempts: f("attempts"),
            lastHttpStatus: f("lastHttpStatus"),
            lastError: f("lastError"),
            deadReason: f("deadReason"),
            deadAt: f("finishedAt"),
            redriveAt: bound(null),
          }),
        )
        .from(each(chunk))
        .where(sql`true`), // ends the FROM before ON CONFLICT (see insert-jobs.ts)
    )
    .onConflictDoUpdate({
      target: [deadLetters.tenant, deadLetters.executionId],
      set: { ...takeProposed(deadLetters, ["attempts", "lastHttpStatus", "lastError", "deadReason", "deadAt"]), redriveAt: null },
    });
}

/**
 * projectSchedules: each recurring job of `chunk` (ScheduleProjection[]) takes its bucket's
 * next_run_at, fired and completion, only at the version the bucket holds, and only forward.
 */
function projectSchedules(db: Db, chunk: string, now: number) {
  const s = element<ScheduleProjection>();
  const completesSchedule = and(s("completed"), inArray(jobs.status, COMPLETE_FROM));
  return db
    .update(jobs)
    .set({
      nextRunAt: sql`COALESCE(${s("nextRunAt")}, ${jobs.nextRunAt})`,
      fired: sql`MAX(${jobs.fired}, ${s("fired")})`,
      status: sql`CASE WHEN ${completesSchedule} THEN ${COMPLETED} ELSE ${jobs.status} END`,
      updatedAt: sql`CASE WHEN ${completesSchedule} THEN ${now} ELSE ${jobs.updatedAt} END`,
    })
    .from(each(chunk))
    .where(
      and(
        eq(jobs.tenant, s("tenant")),
        eq(jobs.id, s("jobId")),
        eq(jobs.version, s("version")),
        or(and(isNotNull(s("nextRunAt")), sql`${jobs.nextRunAt} IS NOT ${s("nextRunAt")}`), lt(jobs.fired, s("fired")), completesSchedule),
      ),
    );
}

/**
 * writeCallbackOutcome: a callback's outcome on the execution it told of (1 row); guard: the column
 * still names that callback (a redriven execution's later outcome, with its own callback, is never
 * overwritten by the earlier callback's late outcome).
 */
function writeCallbackOutcome(db: Db, c: CallbackOutcome) {
  const names = (column: typeof jobs.callbacks | typeof occurrences.callbacks) => sql`json_extract(${column}, '$[0].id') = ${c.callbackId}`;
  return c.oneOff
    ? db
        .update(jobs)
        .set({ callbacks: c.callbacks })
        .where(and(eq(jobs.tenant, c.tenant), eq(jobs.id, c.jobId), names(jobs.callbacks)))
    : db
        .update(occurrences)
        .set({ callbacks: c.callbacks })
        .where(and(eq(occurrences.tenant, c.tenant), eq(occurrences.id, c.executionId), names(occurrences.callbacks)));
}
