/**
 * The API's job changes (PATCH, pause, resume, cancel): each raises the version and leaves the job
 * unsynced until its bucket acknowledges it (sync-pass.ts markSynced).
 */
import { and, eq, inArray } from "drizzle-orm";
import type { JobState } from "../core/lifecycle";
import { deleteLabelRows, insertLabelRows, labelRowsOf } from "./job-labels";
import type { Db } from "./kit";
import { type JobRow, jobs } from "./schema";

export type JobChange = Partial<Pick<JobRow, "name" | "status" | "spec" | "cron" | "timezone" | "nextRunAt" | "runStatus">> & {
  /** replaces the job's labels (null: none); absent: unchanged */
  labels?: Record<string, string> | null;
};

/**
 * changeJob: writes a change if the job is still at `version` and in one of the states `from`
 * (the job table's from-states of the change: its bucket completes a job without raising its
 * version, so the version alone cannot tell an active job from the completed one it became).
 * Optimistic: a concurrent change makes this one retry on the newer row. Writes 1 row, plus index entries when next_run_at
 * changes and 1 for the unsynced index; a change of labels also deletes the old label rows and
 * writes the new ones (1 row each). Returns the new row, or undefined on a version conflict.
 */
export async function changeJob(
  db: Db,
  tenant: string,
  id: string,
  version: number,
  from: readonly JobState[],
  change: JobChange,
  now: number,
): Promise<JobRow | undefined> {
  const { labels, ...columns } = change;
  const writeChange = db
    .update(jobs)
    .set({
      ...columns,
      ...(labels === undefined ? {} : { labels: labels === null ? null : JSON.stringify(labels) }),
      version: version + 1,
      synced: 0,
      updatedAt: now,
    })
    .where(and(eq(jobs.tenant, tenant), eq(jobs.id, id), eq(jobs.version, version), inArray(jobs.status, [...from])))
    .returning();
  if (labels === undefined) return (await writeChange)[0];
  // job_labels follows the row's own labels JSON, so the two can never disagree: before the
  // update, the rows of the labels it holds at `version` go (only if it is still there, so only
  // when this update applies); after it, the rows of the labels it holds now are inserted (a
  // concurrent change that won the version leaves its labels, whose rows already exist)
  const [, rows] = await db.batch([
    deleteLabelRows(db, labelRowsOf(db, tenant, id, version, from)),
    writeChange,
    insertLabelRows(db, labelRowsOf(db, tenant, id, version + 1)),
  ]);
  return rows[0];
}
