/**
 * The upgrade rule (README "Deploying", Upgrades): `npm run deploy` applies a release's migrations
 * to every shard before its code is uploaded, so while the deploy rolls out the previous release's
 * code runs on the new schema. That holds when the newest migration only expands: it adds tables,
 * indexes, or columns an older INSERT can leave out (nullable, or with a default), and it removes,
 * renames or narrows nothing. The code names every column it reads and writes (drizzle, src/db),
 * so an added table or column is invisible to older code; what would break it is what this test
 * refuses. A contraction (dropping what no code reads any more) goes in a later release than the
 * code that stopped reading it, and this test is then told so by name (CONTRACTIONS).
 */
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";

const DIR = join(import.meta.dirname, "../../migrations");
const files = readdirSync(DIR)
  .filter((f) => f.endsWith(".sql"))
  .sort();
/** migrations allowed to contract, each naming the release whose code stopped using what it drops */
const CONTRACTIONS: Record<string, string> = {};

/** The statements of a migration, comments removed. */
function statements(sql: string): string[] {
  return sql
    .replace(/--[^\n]*/g, "")
    .split(";")
    .map((s) => s.replace(/\s+/g, " ").trim())
    .filter(Boolean);
}

/** Why a statement would break the previous release's code on the new schema (null: it does not). */
function contraction(statement: string, newTables: ReadonlySet<string>): string | null {
  const s = statement.toUpperCase();
  if (/^DROP /.test(s)) return "drops what older code may still use";
  if (/ RENAME /.test(s)) return "renames what older code names";
  if (/^ALTER TABLE \S+ DROP /.test(s)) return "drops a column older code may still use";
  const added = /^ALTER TABLE \S+ ADD (COLUMN )?(.*)$/.exec(s);
  if (added && /\bNOT NULL\b/.test(added[2]!) && !/\bDEFAULT\b/.test(added[2]!))
    return "adds a NOT NULL column without a default: older code's inserts leave it out";
  const unique = /^CREATE UNIQUE INDEX (IF NOT EXISTS )?\S+ ON "?(\w+)"?/.exec(s);
  if (unique && !newTables.has(unique[2]!.toLowerCase()))
    return "adds a UNIQUE index to an existing table: older code's writes may break it";
  if (/^(UPDATE|DELETE) /.test(s)) return "rewrites rows older code still writes";
  return null;
}

describe("migrations", () => {
  it("are numbered in order, one file each", () => {
    expect(files.map((f) => Number(f.slice(0, 4)))).toEqual(files.map((_, i) => i + 1));
  });

  it("the newest only expands: the previous release's code runs on its schema while a deploy rolls out", () => {
    const newest = files.at(-1)!;
    const list = statements(readFileSync(join(DIR, newest), "utf8"));
    expect(list.length).toBeGreaterThan(0);
    const newTables = new Set(list.flatMap((s) => /^CREATE TABLE (IF NOT EXISTS )?"?(\w+)"?/i.exec(s)?.[2]?.toLowerCase() ?? []));
    const refused = list.map((s) => [s, contraction(s, newTables)]).filter(([, why]) => why !== null);
    if (CONTRACTIONS[newest] === undefined) expect(refused, newest).toEqual([]);
  });

  it("knows a contraction when it sees one", () => {
    const none = new Set<string>();
    expect(contraction("DROP TABLE idempotency_keys", none)).toMatch(/drops/);
    expect(contraction("ALTER TABLE jobs DROP COLUMN spec", none)).toMatch(/drops a column/);
    expect(contraction("ALTER TABLE jobs RENAME COLUMN spec TO body", none)).toMatch(/renames/);
    expect(contraction("ALTER TABLE jobs ADD COLUMN priority INTEGER NOT NULL", none)).toMatch(/NOT NULL/);
    expect(contraction("CREATE UNIQUE INDEX jobs_key ON jobs (tenant, idempotency_key)", none)).toMatch(/UNIQUE/);
    expect(contraction("UPDATE jobs SET synced = 1", none)).toMatch(/rewrites/);
    // what expands
    expect(contraction("ALTER TABLE jobs ADD COLUMN priority INTEGER NOT NULL DEFAULT 5", none)).toBeNull();
    expect(contraction("ALTER TABLE jobs ADD COLUMN trace TEXT", none)).toBeNull();
    expect(contraction("CREATE TABLE scheduler_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID", none)).toBeNull();
    expect(contraction("CREATE INDEX jobs_name ON jobs (tenant, name)", none)).toBeNull();
    expect(contraction("CREATE UNIQUE INDEX meta_key ON scheduler_meta (key)", new Set(["scheduler_meta"]))).toBeNull();
  });
});
