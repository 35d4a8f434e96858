/**
 * The API's reads of executions: a one-off job's is its job row, a recurring job's finished
 * occurrences are occurrence rows (the live ones are its bucket's: use-cases/read-model.ts).
 */
import { and, desc, eq, exists, gte, inArray, isNull, lt, lte, type SQL, sql } from "drizzle-orm";
import type { AnySQLiteColumn } from "drizzle-orm/sqlite-core";
import { executionIdFloor, timeOfId } from "../core/id";
import { type ExecutionState, TERMINAL_STATES, type TerminalState } from "../core/lifecycle";
import type { Scan } from "../core/page";
import type { Db } from "./kit";
import { boundedScan, jobRange, SCAN_ROWS, startsWith, targetUrl } from "./range-scan";
import { type JobRow, jobLabels, jobs, type OccurrenceRow, occurrences } from "./schema";

export interface ExecutionFilter {
  status?: ExecutionState | undefined;
  label?: { key: string; value: string } | undefined;
  /** a prefix of the job's HTTP target URL */
  url?: string | undefined;
  httpStatus?: number | undefined;
  /** due time bounds, inclusive (epoch ms) */
  from?: number | undefined;
  to?: number | undefined;
}

/** A one-off job's execution state as D1 knows it, as viewOfOneOff (src/use-cases/present.ts) shows it. */
function oneOffState(runStatus: AnySQLiteColumn, status: AnySQLiteColumn): SQL<ExecutionState> {
  return sql<ExecutionState>`CASE WHEN ${inArray(runStatus, TERMINAL_STATES)} THEN ${runStatus} WHEN ${status} = 'canceled' THEN 'canceled' ELSE 'pending' END`;
}

/**
 * listOneOffExecutions: one-off jobs (their single execution each) newest first, below
 * `cursorJobId`: the range of listJobs (the jobs key, or job_labels' with a label), every filter
 * checked inside its bounded scan (recurring jobs are examined and skipped). Rows read per page:
 * at most 2 × SCAN_ROWS (4 × with a label).
 */
export async function listOneOffExecutions(
  db: Db,
  tenant: string,
  filter: ExecutionFilter,
  cursorJobId: string | undefined,
  limit: number,
): Promise<Scan<JobRow>> {
  const { status, label, url, httpStatus, from, to } = filter;
  const range = jobRange(db, tenant, label, cursorJobId);
  // as viewOfOneOff shows it: its run time, or its creation when it has none
  const dueAt = sql<number>`COALESCE(${range.nextRunAt}, ${range.createdAt})`;
  const matching = db
    .select()
    .from(range)
    .where(
      and(
        isNull(range.cron),
        status ? eq(oneOffState(range.runStatus, range.status), status) : undefined,
        httpStatus !== undefined ? eq(range.lastHttpStatus, httpStatus) : undefined,
        url !== undefined ? startsWith(targetUrl(range.spec), url) : undefined,
        from !== undefined ? gte(dueAt, from) : undefined,
        to !== undefined ? lte(dueAt, to) : undefined,
      ),
    )
    .orderBy(desc(range.id))
    .limit(limit + 1);
  return boundedScan(db, matching, range, (j) => j.id, limit);
}

/**
 * listOccurrenceExecutions: finished occurrences of recurring jobs newest first, below `cursorId`.
 * An occurrence's id carries its due time, so the range is the table's key (tenant, id) with
 * from/to as key bounds, or with a jobId occurrences_job (tenant, job_id, due_at); status and
 * httpStatus are checked inside its bounded scan, label and url by one key lookup per row examined
 * (job_labels', jobs'). Rows read per page: at most 2 × SCAN_ROWS, plus one per row examined with
 * a label or url.
 */
export async function listOccurrenceExecutions(
  db: Db,
  tenant: string,
  filter: ExecutionFilter & { jobId?: string | undefined },
  cursorId: string | undefined,
  limit: number,
): Promise<Scan<OccurrenceRow>> {
  const { status, label, url, httpStatus, from, to, jobId } = filter;
  const below = cursorId === undefined ? undefined : lt(occurrences.id, cursorId);
  const range = (
    jobId !== undefined
      ? db
          .select()
          .from(occurrences)
          .where(
            and(
              eq(occurrences.tenant, tenant),
              eq(occurrences.jobId, jobId),
              from !== undefined ? gte(occurrences.dueAt, from) : undefined,
              to !== undefined ? lte(occurrences.dueAt, to) : undefined,
              // the index's bound: one job's ids are in due-time order
              cursorId === undefined ? undefined : lte(occurrences.dueAt, timeOfId(cursorId) ?? 0),
              below,
            ),
          )
          .orderBy(desc(occurrences.dueAt))
      : db
          .select()
          .from(occurrences)
          .where(
            and(
              eq(occurrences.tenant, tenant),
              from !== undefined ? gte(occurrences.id, executionIdFloor(from)) : undefined,
              to !== undefined ? lt(occurrences.id, executionIdFloor(to + 1)) : undefined,
              below,
            ),
          )
          .orderBy(desc(occurrences.id))
  )
    .limit(SCAN_ROWS)
    .as("scanned");
  const matching = db
    .select()
    .from(range)
    .where(
      and(
        status ? eq(range.status, status as TerminalState) : undefined,
        httpStatus !== undefined ? eq(range.lastHttpStatus, httpStatus) : undefined,
        label
          ? exists(
              db
                .select({ one: sql`1` })
                .from(jobLabels)
                .where(
                  and(
                    eq(jobLabels.tenant, tenant),
                    eq(jobLabels.key, label.key),
                    eq(jobLabels.value, label.value),
                    eq(jobLabels.jobId, range.jobId),
                  ),
                ),
            )
          : undefined,
        url !== undefined
          ? exists(
              db
                .select({ one: sql`1` })
                .from(jobs)
                .where(and(eq(jobs.tenant, tenant), eq(jobs.id, range.jobId), startsWith(targetUrl(jobs.spec), url))),
            )
          : undefined,
      ),
    )
    .orderBy(desc(range.id))
    .limit(limit + 1);
  return boundedScan(db, matching, range, (o) => o.id, limit);
}

export async function getOccurrence(db: Db, tenant: string, id: string): Promise<OccurrenceRow | undefined> {
  const rows = await db
    .select()
    .from(occurrences)
    .where(and(eq(occurrences.tenant, tenant), eq(occurrences.id, id)))
    .limit(1);
  return rows[0];
}

/** A recurring job's finished occurrences, latest first. */
export async function listOccurrences(db: Db, tenant: string, jobId: string, limit: number): Promise<OccurrenceRow[]> {
  return db
    .select()
    .from(occurrences)
    .where(and(eq(occurrences.tenant, tenant), eq(occurrences.jobId, jobId)))
    .orderBy(desc(occurrences.dueAt))
    .limit(limit);
}
