/**
 * The API's reads of jobs: one by id, a tenant's among many ids, and a tenant's list, newest first.
 */
import { and, desc, eq, inArray } from "drizzle-orm";
import type { JobState } from "../core/lifecycle";
import type { Scan } from "../core/page";
import { batchAll, type Db, jsonChunks, valuesOf } from "./kit";
import { boundedScan, jobRange, startsWith, targetUrl } from "./range-scan";
import { type JobRow, jobs } from "./schema";

export async function getJob(db: Db, tenant: string, id: string): Promise<JobRow | undefined> {
  const rows = await db
    .select()
    .from(jobs)
    .where(and(eq(jobs.tenant, tenant), eq(jobs.id, id)))
    .limit(1);
  return rows[0];
}

/**
 * getJobsByIds: a tenant's jobs among these ids (whole rows, spec included), the ids bound as one
 * JSON array per statement (a chunk under D1's 2 MB string limit), whatever their number.
 */
export async function getJobsByIds(db: Db, tenant: string, ids: string[]): Promise<JobRow[]> {
  if (ids.length === 0) return [];
  const statements = jsonChunks(ids).map((chunk) =>
    db
      .select()
      .from(jobs)
      .where(and(eq(jobs.tenant, tenant), inArray(jobs.id, valuesOf(chunk)))),
  );
  return (await batchAll(db, statements)).flat();
}
export interface JobFilter {
  status?: JobState | undefined;
  label?: { key: string; value: string } | undefined;
  /** a prefix of the job's name */
  name?: string | undefined;
  /** a prefix of an HTTP target's URL */
  url?: string | undefined;
}

/**
 * listJobs: a tenant's jobs newest first (ids are time-sortable, so the key order is the creation
 * order), below `cursorId`. The range is the jobs key (tenant, id), or with a label job_labels' key
 * (tenant, key, value, job id), each label row joined to its job by key; status, name and url are
 * checked inside a bounded scan of it (SCAN_ROWS). Rows read per page: the rows examined (two per
 * label row), at most 2 × SCAN_ROWS (4 × with a label).
 */
export async function listJobs(
  db: Db,
  tenant: string,
  filter: JobFilter,
  cursorId: string | undefined,
  limit: number,
): Promise<Scan<JobRow>> {
  const { status, label, name, url } = filter;
  const range = jobRange(db, tenant, label, cursorId);
  const matching = db
    .select()
    .from(range)
    .where(
      and(
        status ? eq(range.status, status) : undefined,
        name !== undefined ? startsWith(range.name, name) : undefined,
        url !== undefined ? startsWith(targetUrl(range.spec), url) : undefined,
      ),
    )
    .orderBy(desc(range.id))
    .limit(limit + 1);
  return boundedScan(db, matching, range, (j) => j.id, limit);
}
