/**
 * A tenant's flow-control keys, listed by their FlowKey objects (flow/flow-key.ts) and read by the
 * API's list of them.
 */
import { eq } from "drizzle-orm";
import type { Db } from "./kit";
import { flowKeys } from "./schema";

/**
 * registerFlowKey: lists a tenant's flow-control key, called by its FlowKey object. Writes one row
 * (and no index entry: WITHOUT ROWID) the first time, nothing after (ON CONFLICT DO NOTHING).
 */
export async function registerFlowKey(db: Db, tenant: string, key: string, now: number): Promise<void> {
  await db.insert(flowKeys).values({ tenant, key, createdAt: now }).onConflictDoNothing();
}

/** A tenant's flow-control keys in key order, at most `limit` (rows read: about as many as returned). */
export async function listFlowKeys(db: Db, tenant: string, limit: number): Promise<string[]> {
  const rows = await db.select({ key: flowKeys.key }).from(flowKeys).where(eq(flowKeys.tenant, tenant)).orderBy(flowKeys.key).limit(limit);
  return rows.map((r) => r.key);
}
