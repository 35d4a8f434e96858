/**
 * D1's idempotency_keys table, from before keys had objects of their own
 * (idempotency/idempotency-keys.ts): the API's create still reads it until the purge has emptied it.
 */
import { and, eq, gte, inArray, sql } from "drizzle-orm";
import { batchAll, type Db, jsonChunks, valuesOf } from "./kit";
import { idempotencyKeys } from "./schema";

/**
 * legacyKeyOwners: the owners of these keys as D1's idempotency_keys table has them, from before
 * keys had objects of their own (idempotency/idempotency-keys.ts): read until the table is empty
 * (the purge empties it within the dedupe window; nothing writes it any more). Reads only.
 */
export async function legacyKeyOwners(
  db: Db,
  tenant: string,
  keys: string[],
  now: number,
  windowMs: number,
): Promise<{ key: string; jobId: string; requestHash: string; claimedAt: number }[]> {
  if (keys.length === 0) return [];
  const statements = jsonChunks(keys).map((chunk) =>
    db
      .select({
        key: idempotencyKeys.key,
        jobId: idempotencyKeys.jobId,
        requestHash: idempotencyKeys.requestHash,
        claimedAt: idempotencyKeys.createdAt,
      })
      .from(idempotencyKeys)
      .where(
        and(
          eq(idempotencyKeys.tenant, tenant),
          inArray(idempotencyKeys.key, valuesOf(chunk)),
          gte(idempotencyKeys.createdAt, now - windowMs + 1),
        ),
      ),
  );
  return (await batchAll(db, statements)).flat();
}

/** Whether D1's legacy idempotency_keys table still holds any key. */
export async function hasLegacyKeys(db: Db): Promise<boolean> {
  return (await db.select({ one: sql`1` }).from(idempotencyKeys).limit(1)).length > 0;
}
