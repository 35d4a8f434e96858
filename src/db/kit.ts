/**
 * The drizzle kit every D1 operation of src/db/ is written with: the database handle, and the
 * fragments its set-based statements share. Set-based writes take their rows as one JSON array
 * parameter read with json_each (D1 allows 100 bound parameters a statement), in chunks under
 * D1's 2 MB string limit, measured in bytes. db.batch() is atomic; BEGIN/transaction() are not
 * available on D1.
 *
 * Where drizzle has no operator, a small typed `sql` fragment stands inside a builder query:
 * json_extract over json_each, row values `(a, b) IN (...)`, `excluded.<column>`, CASE, MAX, IS NOT.
 *
 * One module per operation, by who writes (DESIGN.md "Ownership and cost"): the API writes jobs'
 * definitions and status, each change raising `version` with `synced = 0` (insert-jobs.ts,
 * change-job.ts, redrive.ts); the job's bucket writes outcomes and its projections (next_run_at,
 * fired, completion), each guarded so it never goes backwards (write-outcomes.ts), and acknowledges
 * what its sync pass read (sync-pass.ts); the scan purges history (purge.ts, purge-archived.ts,
 * purge-mark.ts); a FlowKey object lists its key (flow-keys.ts); shard 0 records the shard count
 * (shard-meta.ts). The API's reads: list-jobs.ts, list-executions.ts, list-dead-letters.ts.
 */
import { getTableColumns, type SQL, sql } from "drizzle-orm";
import type { BatchItem } from "drizzle-orm/batch";
import { type DrizzleD1Database, drizzle } from "drizzle-orm/d1";
import type { AnySQLiteColumn, SQLiteTable } from "drizzle-orm/sqlite-core";

export type Db = DrizzleD1Database<Record<string, never>> & { $client: D1Database };

export function dbOf(d1: D1Database): Db {
  return drizzle(d1);
}

const encoder = new TextEncoder();

/** D1 binds a string of at most 2 MB: set-based statements take their rows in JSON chunks below that. */
const JSON_CHUNK_BYTES = 1_000_000;

/** JSON arrays of the items, each at most JSON_CHUNK_BYTES in UTF-8 (a larger item gets a chunk of its own). */
export function jsonChunks(items: readonly unknown[]): string[] {
  const chunks: string[] = [];
  let current: string[] = [];
  let size = 2;
  for (const item of items) {
    const text = JSON.stringify(item);
    const bytes = encoder.encode(text).byteLength;
    if (current.length > 0 && size + bytes + 1 > JSON_CHUNK_BYTES) {
      chunks.push(`[${current.join(",")}]`);
      current = [];
      size = 2;
    }
    current.push(text);
    size += bytes + 1;
  }
  if (current.length > 0) chunks.push(`[${current.join(",")}]`);
  return chunks;
}

/** What D1 bills for a batch: its statements' rows written, index entries included. */
export function rowsWritten(results: D1Result[]): number {
  return results.reduce((n, r) => n + (r.meta.rows_written ?? 0), 0);
}

/** a row's bytes beyond the variable columns, for a page's budget */
export const ROW_BYTES = 300;

/** The elements of a JSON array parameter, as the FROM of a set-based statement. */
export function each(json: string): SQL {
  return sql`json_each(${json})`;
}

/**
 * A field of json_each's current element, typed by the element type T. Unqualified `value` is
 * json_each's: no D1 table has a column of that name.
 */
export function element<T>() {
  return <K extends keyof T & string>(key: K) => sql<T[K]>`json_extract(value, ${sql.raw(`'$.${key}'`)})`;
}

/** A value bound as a column of a select list (INSERT ... SELECT names every column). */
export function bound<T>(value: T): SQL<T> {
  return sql<T>`${value}`;
}

/** INSERT ... SELECT's select list: drizzle wants each expression aliased (by its column's key). */
export function insertRow<T extends Record<string, SQL>>(fields: T): { [K in keyof T]: SQL.Aliased<T[K]["_"]["type"]> } {
  return Object.fromEntries(Object.entries(fields).map(([k, v]) => [k, v.as(k)])) as { [K in keyof T]: SQL.Aliased<T[K]["_"]["type"]> };
}

/** `excluded.<column>`: the value an upsert proposed (drizzle has no helper for it). */
export function proposed(column: AnySQLiteColumn): SQL {
  return sql`excluded.${sql.identifier(column.name)}`;
}

/** An upsert's `set`: each key takes the proposed value. */
export function takeProposed<T extends SQLiteTable, K extends keyof T["_"]["columns"] & string>(
  table: T,
  keys: readonly K[],
): Record<K, SQL> {
  const columns = getTableColumns(table);
  return Object.fromEntries(keys.map((k) => [k, proposed(columns[k]!)])) as Record<K, SQL>;
}

/** `(SELECT value FROM json_each(?))`: the scalars of a JSON array parameter, for an IN (one bound parameter, whatever their number). */
export function valuesOf(json: string): SQL {
  return sql`(SELECT value FROM json_each(${json}))`;
}

/** db.batch over a list of selects built at run time: each one's rows (one statement runs alone). */
export async function batchAll<T>(db: Db, statements: (BatchItem<"sqlite"> & PromiseLike<T[]>)[]): Promise<T[][]> {
  if (statements.length === 0) return [];
  if (statements.length === 1) return [await statements[0]!];
  return (await db.batch(statements as unknown as [BatchItem<"sqlite">, ...BatchItem<"sqlite">[]])) as unknown as T[][];
}

/** db.batch over a list built at run time, of statements without RETURNING: their D1 results. */
export async function batchRun(db: Db, statements: BatchItem<"sqlite">[]): Promise<D1Result[]> {
  if (statements.length === 0) return [];
  return (await db.batch(statements as [BatchItem<"sqlite">, ...BatchItem<"sqlite">[]])) as D1Result[];
}
