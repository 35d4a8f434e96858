/**
 * The dead-letter list's redrives. A one-off job's is the API's alone (redriveOneOff: the job is
 * active again and its dead letter leaves); a recurring occurrence's is marked by the API
 * (markRedrive), read by its bucket's sync pass (sync-pass.ts pendingRedrives) and cleared once the
 * bucket took it (clearRedrives), or when the redriven execution finished (write-outcomes.ts).
 */
import { and, eq, exists, inArray, isNotNull, sql } from "drizzle-orm";
import { batchRun, type Db, each, element, jsonChunks, rowsWritten } from "./kit";
import { deadLetters, type JobRow, jobs } from "./schema";

/**
 * redriveOneOff: a dead one-off job is active again at `now` (a new version, so the sync pass
 * converges it) and leaves the dead-letter list, in one batch. Returns the new row or undefined.
 */
export async function redriveOneOff(db: Db, tenant: string, job: JobRow, executionId: string, now: number): Promise<JobRow | undefined> {
  const activateAgain = db
    .update(jobs)
    .set({ status: "active", runStatus: "scheduled", nextRunAt: now, version: job.version + 1, synced: 0, updatedAt: now })
    .where(and(eq(jobs.tenant, tenant), eq(jobs.id, job.id), eq(jobs.version, job.version)))
    .returning();
  // only when the job is active again at the new version (a concurrent change keeps its dead letter)
  const leaveDeadLetters = db.delete(deadLetters).where(
    and(
      eq(deadLetters.tenant, tenant),
      eq(deadLetters.executionId, executionId),
      exists(
        db
          .select({ one: sql`1` })
          .from(jobs)
          .where(and(eq(jobs.tenant, tenant), eq(jobs.id, job.id), eq(jobs.version, job.version + 1))),
      ),
    ),
  );
  const [updated] = await db.batch([activateAgain, leaveDeadLetters]);
  return updated[0];
}

/** markRedrive: a recurring occurrence's redrive is on its way to the bucket. Returns whether it was dead here. */
export async function markRedrive(db: Db, tenant: string, executionId: string, now: number): Promise<boolean> {
  const rows = await db
    .update(deadLetters)
    .set({ redriveAt: now })
    .where(and(eq(deadLetters.tenant, tenant), eq(deadLetters.executionId, executionId)))
    .returning({ id: deadLetters.executionId });
  return rows.length > 0;
}

/** clearRedrives: the bucket took these redrives; they leave the dead-letter list. */
export async function clearRedrives(db: Db, items: { tenant: string; executionId: string }[]): Promise<number> {
  if (items.length === 0) return 0;
  const statements = jsonChunks(items).map((chunk) => deleteRedriven(db, chunk, "executionId"));
  return rowsWritten(await batchRun(db, statements));
}

/** deleteRedriven: the dead letters the JSON array `chunk` names (by `tenant` and `idKey`) whose redrive is on its way. */
export function deleteRedriven(db: Db, chunk: string, idKey: "executionId" | "id") {
  const m = element<Record<"tenant" | typeof idKey, string>>();
  const named = db.select({ tenant: m("tenant"), id: m(idKey) }).from(each(chunk));
  return db
    .delete(deadLetters)
    .where(and(isNotNull(deadLetters.redriveAt), inArray(sql`(${deadLetters.tenant}, ${deadLetters.executionId})`, named)));
}
