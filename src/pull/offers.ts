/**
 * A pull queue's offers table (pull-queue.ts): one row per offered execution, keyed by priority,
 * due time and id, WITHOUT ROWID with no other index, so an offer costs a row written when offered
 * and one when taken. Its migrations and its named statements; the queue decides when each runs.
 */
import type { OfferRef } from "../bucket/protocol";
import { comparePriority, PRIORITY } from "../core/priority";
import type { SqliteMigration } from "../sqlite-migrations";

export const PULL_QUEUE_MIGRATIONS: ReadonlyArray<SqliteMigration> = [
  {
    id: 1,
    sql: `CREATE TABLE offers (
      due_at INTEGER NOT NULL,
      execution_id TEXT NOT NULL,
      bucket INTEGER NOT NULL,
      PRIMARY KEY (due_at, execution_id)
    ) WITHOUT ROWID`,
  },
  {
    // priority (issue 29) leads the key, so each priority's oldest offers are one range read and
    // an offer is still one row with no other index; offers held before it get the default. One
    // way: code from before it cannot offer into the new table (its INSERT names no columns)
    id: 2,
    sql: `
      CREATE TABLE offers_by_priority (
        priority INTEGER NOT NULL,
        due_at INTEGER NOT NULL,
        execution_id TEXT NOT NULL,
        bucket INTEGER NOT NULL,
        PRIMARY KEY (priority, due_at, execution_id)
      ) WITHOUT ROWID;
      INSERT INTO offers_by_priority SELECT ${PRIORITY.default}, due_at, execution_id, bucket FROM offers;
      DROP TABLE offers;
      ALTER TABLE offers_by_priority RENAME TO offers;
    `,
  },
];

export interface OfferRow extends Record<string, SqlStorageValue> {
  priority: number;
  due_at: number;
  execution_id: string;
  bucket: number;
}

/** every priority, as a list for the key's IN (one probe each) */
const ALL_PRIORITIES = Array.from({ length: PRIORITY.max - PRIORITY.min + 1 }, (_, i) => PRIORITY.min + i).join(", ");

/** The identity of an offer in memory (the requests asking about it, those offered again meanwhile). */
export function offerKey(row: { priority: number; due_at: number; execution_id: string }): string {
  return `${row.priority}:${row.due_at}:${row.execution_id}`;
}

/**
 * insertOffer: holds an offer (the same offer twice is held once); one under another priority than
 * the one held replaces it. Writes 1 row for a new offer, 2 more when it replaced one (0 for a
 * repeat). Returns the rows written and whether the offer was new.
 */
export function insertOffer(sql: SqlStorage, o: OfferRef, priority: number): number {
  let written = sql.exec(
    `INSERT OR IGNORE INTO offers (priority, due_at, execution_id, bucket) VALUES (?, ?, ?, ?)`,
    priority,
    o.dueAt,
    o.executionId,
    o.bucket,
  ).rowsWritten;
  // each priority's row is one probe of the key (a first offer finds none: nothing written)
  if (written > 0) {
    written += sql.exec(
      `DELETE FROM offers WHERE priority IN (${ALL_PRIORITIES}) AND priority != ? AND due_at = ? AND execution_id = ?`,
      priority,
      o.dueAt,
      o.executionId,
    ).rowsWritten;
  }
  return written;
}

/** sweepPage: up to `limit` offers after `after` in key order (priority, then oldest first). Reads only. */
export function sweepPage(
  sql: SqlStorage,
  after: { priority: number; dueAt: number; executionId: string } | null,
  limit: number,
): OfferRow[] {
  return sql
    .exec<OfferRow>(
      `SELECT priority, due_at, execution_id, bucket FROM offers WHERE (priority, due_at, execution_id) > (?, ?, ?)
       ORDER BY priority, due_at, execution_id LIMIT ?`,
      after?.priority ?? Number.MIN_SAFE_INTEGER,
      after?.dueAt ?? Number.MIN_SAFE_INTEGER,
      after?.executionId ?? "",
      limit,
    )
    .toArray();
}

/** Whether any offer is held. Reads one row at most. */
export function anyOffers(sql: SqlStorage): boolean {
  return sql.exec(`SELECT 1 FROM offers LIMIT 1`).toArray().length > 0;
}

/** How many offers are held, and the oldest due time. */
export function offerCounts(sql: SqlStorage): { waiting: number; oldest: number | null } {
  return sql.exec<{ waiting: number; oldest: number | null }>(`SELECT count(*) AS waiting, min(due_at) AS oldest FROM offers`).one();
}

/**
 * The next `count` offers no other request is asking about, of buckets not known unreachable:
 * the highest priority first, aged by the wait since the due time (core/priority.ts), so a
 * low one that waited long enough goes before newer high ones. Each priority's oldest are one
 * range read of the key; the merge is here.
 */
export function nextOffers(
  sql: SqlStorage,
  count: number,
  unreachable: ReadonlySet<number>,
  taking: ReadonlySet<string>,
  now: number,
): OfferRow[] {
  // the skipped buckets as one JSON parameter: a statement binds at most 100 (docs/platform-limits.md)
  const skip = JSON.stringify([...unreachable]);
  const rows: OfferRow[] = [];
  for (let priority = PRIORITY.max; priority >= PRIORITY.min; priority--) {
    rows.push(
      ...sql
        .exec<OfferRow>(
          `SELECT priority, due_at, execution_id, bucket FROM offers
           WHERE priority = ? AND bucket NOT IN (SELECT value FROM json_each(?))
           ORDER BY due_at, execution_id LIMIT ?`,
          priority,
          skip,
          count + taking.size,
        )
        .toArray()
        .filter((r) => !taking.has(offerKey(r))),
    );
  }
  const byTurn = (a: OfferRow, b: OfferRow) =>
    comparePriority({ priority: a.priority, dueAt: a.due_at }, { priority: b.priority, dueAt: b.due_at }, now) ||
    (a.execution_id < b.execution_id ? -1 : a.execution_id > b.execution_id ? 1 : 0);
  return rows.sort(byTurn).slice(0, count);
}

/** deleteOffer: one offer row, by its whole key. Writes 1 row (0 if it is gone). Returns the rows written. */
export function deleteOffer(sql: SqlStorage, row: OfferRow): number {
  return sql.exec(`DELETE FROM offers WHERE priority = ? AND due_at = ? AND execution_id = ?`, row.priority, row.due_at, row.execution_id)
    .rowsWritten;
}
