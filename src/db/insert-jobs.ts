/**
 * The API's create: a shard's new jobs and their label rows, in one atomic batch.
 */
import { and, eq, exists, sql } from "drizzle-orm";
import type { JobState } from "../core/lifecycle";
import { batchRun, bound, type Db, each, element, insertRow, jsonChunks, rowsWritten } from "./kit";
import { jobLabels, jobs } from "./schema";

/** One job as written by insertJobs. */
export interface NewJob {
  id: string;
  tenant: string;
  name: string | null;
  bucket: number;
  spec: string;
  cron: string | null;
  timezone: string | null;
  nextRunAt: number;
  idempotencyKey: string | null;
  requestHash: string | null;
  /** null: none */
  labels: Record<string, string> | null;
}

/**
 * insertJobs: jobs in one atomic batch (one shard's), one row each (2 rows written with its index
 * entry), and one job_labels row per label. A job already there (a retry that inserts the job of
 * an idempotency key's claim under the same id) is left as it is. Idempotency keys are claimed
 * before, in their own objects (idempotency/idempotency-keys.ts). Returns the rows written and the
 * database's size after (meta.size_after, bytes; db/shards.ts keeps the room each shard has left).
 */
export async function insertJobs(
  db: Db,
  tenant: string,
  items: NewJob[],
  now: number,
): Promise<{ rowsWritten: number; sizeAfter: number | null }> {
  const jobItems = items.map((j) => ({
    id: j.id,
    n: j.name,
    b: j.bucket,
    s: j.spec,
    c: j.cron,
    z: j.timezone,
    d: j.nextRunAt,
    k: j.idempotencyKey,
    l: j.labels === null ? null : JSON.stringify(j.labels),
  }));
  const job = element<(typeof jobItems)[number]>();
  const insertJobRows = (rows: string) =>
    db
      .insert(jobs)
      .select(
        db
          .select(
            insertRow({
              tenant: bound(tenant),
              id: job("id"),
              name: job("n"),
              bucket: job("b"),
              status: bound<JobState>("active"),
              version: bound(1),
              synced: bound(1),
              spec: job("s"),
              cron: job("c"),
              timezone: job("z"),
              nextRunAt: job("d"),
              idempotencyKey: job("k"),
              createdAt: bound(now),
              updatedAt: bound(now),
              fired: bound(0),
              runStatus: bound(null),
              attempts: bound(0),
              lastHttpStatus: bound(null),
              lastError: bound(null),
              deadReason: bound(null),
              finishedAt: bound(null),
              attemptLog: bound(null),
              labels: job("l"),
              callbacks: bound(null),
            }),
          )
          .from(each(rows))
          .where(sql`true`), // ends the FROM before ON CONFLICT (SQLite reads an ON after it as a join's)
      )
      .onConflictDoNothing();
  // after the jobs: a label row for each of their labels (a repeat's already exist)
  const labelItems = items.flatMap((j) => Object.entries(j.labels ?? {}).map(([k, v]) => ({ id: j.id, k, v })));
  const label = element<(typeof labelItems)[number]>();
  const insertLabelRows = (rows: string) =>
    db
      .insert(jobLabels)
      .select(
        db
          .select(insertRow({ tenant: bound(tenant), key: label("k"), value: label("v"), jobId: label("id") }))
          .from(each(rows))
          .where(
            exists(
              db
                .select({ one: sql`1` })
                .from(jobs)
                .where(and(eq(jobs.tenant, tenant), eq(jobs.id, label("id")))),
            ),
          ),
      )
      .onConflictDoNothing();
  const inserts = [...jsonChunks(jobItems).map(insertJobRows), ...jsonChunks(labelItems).map(insertLabelRows)];
  const results = await batchRun(db, inserts);
  return { rowsWritten: rowsWritten(results), sizeAfter: results.at(-1)?.meta.size_after ?? null };
}
