/**
 * The API's reads of the dead-letter list (its writes: write-outcomes.ts, redrive.ts, purge.ts).
 */
import { and, desc, eq, isNull, lt, or } from "drizzle-orm";
import type { Db } from "./kit";
import { type DeadLetterRow, deadLetters } from "./schema";

export async function getDeadLetter(db: Db, tenant: string, executionId: string): Promise<DeadLetterRow | undefined> {
  const rows = await db
    .select()
    .from(deadLetters)
    .where(and(eq(deadLetters.tenant, tenant), eq(deadLetters.executionId, executionId)))
    .limit(1);
  return rows[0];
}

/** Dead executions of a tenant, most recently dead first; cursor is the last row's (deadAt, id). */
export async function listDead(
  db: Db,
  tenant: string,
  cursor: { deadAt: number; id: string } | undefined,
  limit: number,
  /** checked on the tenant's range, newest first: the rows it skips are read too */
  filter: { jobId?: string; deadReason?: string; redriving?: false } = {},
): Promise<DeadLetterRow[]> {
  const conditions = [eq(deadLetters.tenant, tenant)];
  if (filter.redriving === false) conditions.push(isNull(deadLetters.redriveAt));
  if (filter.jobId !== undefined) conditions.push(eq(deadLetters.jobId, filter.jobId));
  if (filter.deadReason !== undefined) conditions.push(eq(deadLetters.deadReason, filter.deadReason));
  if (cursor) {
    conditions.push(
      or(lt(deadLetters.deadAt, cursor.deadAt), and(eq(deadLetters.deadAt, cursor.deadAt), lt(deadLetters.executionId, cursor.id)))!,
    );
  }
  return db
    .select()
    .from(deadLetters)
    .where(and(...conditions))
    .orderBy(desc(deadLetters.deadAt), desc(deadLetters.executionId))
    .limit(limit);
}
