/**
 * The bounded range scans the API's newest-first lists read a page from (core/page.ts merges the
 * pages of several sources): a range of at most SCAN_ROWS keys, the filters checked inside it.
 */
import { and, desc, eq, getTableColumns, lt, type SQL, type SQLWrapper, type Subquery, sql } from "drizzle-orm";
import type { AnySQLiteColumn } from "drizzle-orm/sqlite-core";
import type { Scan } from "../core/page";
import type { Db } from "./kit";
import { jobLabels, jobs } from "./schema";

/**
 * Keys a filtered list examines per page and source, at most: filters that are not the range's
 * key are checked inside this many keys, newest first, so a page may come back short (even empty)
 * with a cursor, and no page reads a tenant's whole range. Rows read per page and source: at most
 * twice this (the filtered read, then the range's lowest key when the page came back short).
 */
export const SCAN_ROWS = 500;

/**
 * A page of a bounded range scan: `matching` reads up to limit + 1 rows passing the filters among
 * the first SCAN_ROWS keys of `range` (a subquery keyed by id); only a short answer reads the
 * range's extent (its lowest id, and whether it is SCAN_ROWS long).
 */
export async function boundedScan<T>(
  db: Db,
  matching: PromiseLike<T[]>,
  range: Subquery & { id: SQLWrapper },
  keyOf: (row: T) => string,
  limit: number,
): Promise<Scan<T>> {
  const rows = await matching;
  if (rows.length > limit) return { rows, covered: keyOf(rows[limit]!) };
  const [extent] = await db.select({ lowest: sql<string | null>`min(${range.id})`, count: sql<number>`count(*)` }).from(range);
  return { rows, covered: extent && extent.count >= SCAN_ROWS ? extent.lowest : null };
}

/** `text` starts with `prefix` (case-sensitive; LIKE and GLOB would read % _ * ? as wildcards). */
export function startsWith(text: SQL | AnySQLiteColumn, prefix: string): SQL {
  return sql`substr(${text}, 1, length(${prefix})) = ${prefix}`;
}

/** An HTTP target's URL in a job's spec JSON (null for a worker target). */
export function targetUrl(spec: SQL | AnySQLiteColumn): SQL<string | null> {
  return sql<string | null>`json_extract(${spec}, '$.target.url')`;
}

/**
 * The first SCAN_ROWS jobs of a tenant newest first below `cursorId`: a range of the jobs key
 * (tenant, id), or with a label of job_labels' key (tenant, key, value, job id), each label row
 * joined to its job by key (two rows read a job).
 */
export function jobRange(db: Db, tenant: string, label: { key: string; value: string } | undefined, cursorId: string | undefined) {
  return label
    ? db
        .select(getTableColumns(jobs))
        .from(jobLabels)
        .innerJoin(jobs, and(eq(jobs.tenant, jobLabels.tenant), eq(jobs.id, jobLabels.jobId)))
        .where(
          and(
            eq(jobLabels.tenant, tenant),
            eq(jobLabels.key, label.key),
            eq(jobLabels.value, label.value),
            cursorId ? lt(jobLabels.jobId, cursorId) : undefined,
          ),
        )
        .orderBy(desc(jobLabels.jobId))
        .limit(SCAN_ROWS)
        .as("scanned")
    : db
        .select()
        .from(jobs)
        .where(and(eq(jobs.tenant, tenant), cursorId ? lt(jobs.id, cursorId) : undefined))
        .orderBy(desc(jobs.id))
        .limit(SCAN_ROWS)
        .as("scanned");
}
