/**
 * job_labels follows each job row's own labels JSON, so the two can never disagree: its rows are
 * selected out of that JSON (json_each over the row), deleted and inserted by their full key. The
 * API's changes (change-job.ts) and the purges (purge.ts, purge-archived.ts) use these statements.
 */
import { inArray, type SQL, sql } from "drizzle-orm";
import type { JobState } from "../core/lifecycle";
import type { Db } from "./kit";
import { jobLabels, jobs } from "./schema";

/** Columns of jobs spelled with the table's name: json_each beside it has an id, key and value of its own. */
export const JOB = {
  tenant: sql.raw(`"jobs"."tenant"`),
  id: sql.raw(`"jobs"."id"`),
  version: sql.raw(`"jobs"."version"`),
  status: sql.raw(`"jobs"."status"`),
  labels: sql.raw(`"jobs"."labels"`),
};

/** The job_labels rows of the labels JSON of the jobs `where` picks (in JOB's spelling): each row's full key. */
export function labelRowsWhere(db: Db, where: SQL) {
  return db
    .select({
      tenant: sql<string>`${JOB.tenant}`.as("tenant"),
      key: sql<string>`labels_entry.key`.as("key"),
      value: sql<string>`labels_entry.value`.as("value"),
      jobId: sql<string>`${JOB.id}`.as("job_id"),
    })
    .from(sql`${jobs}, json_each(${JOB.labels}) AS labels_entry`)
    .where(where);
}

/** The job_labels rows of a job's labels JSON, as the row holds them at `version` (none when it is elsewhere). */
export function labelRowsOf(db: Db, tenant: string, id: string, version: number, from?: readonly JobState[]) {
  const states = from
    ? sql` AND ${JOB.status} IN (${sql.join(
        from.map((s) => sql`${s}`),
        sql`, `,
      )})`
    : sql``;
  return labelRowsWhere(db, sql`${JOB.tenant} = ${tenant} AND ${JOB.id} = ${id} AND ${JOB.version} = ${version}${states}`);
}

type LabelRows = ReturnType<typeof labelRowsWhere>;

const LABEL_KEY = sql`(${jobLabels.tenant}, ${jobLabels.key}, ${jobLabels.value}, ${jobLabels.jobId})`;

/** deleteLabelRows: the job_labels rows `rows` selects, each by its full key (the table's key has no (tenant, job) prefix). */
export function deleteLabelRows(db: Db, rows: LabelRows) {
  return db.delete(jobLabels).where(inArray(LABEL_KEY, rows));
}

/** insertLabelRows: the job_labels rows `rows` selects; those already there stay. */
export function insertLabelRows(db: Db, rows: LabelRows) {
  return db.insert(jobLabels).select(rows).onConflictDoNothing();
}
