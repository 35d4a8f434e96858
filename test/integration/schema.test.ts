/**
 * One lifecycle table (STYLE.md habit 2): the state CHECK constraints of D1 list exactly the
 * states of src/core/lifecycle.ts (a job's status JOB_STATES, a one-off job's execution
 * run_status EXECUTION_STATES, a recurring occurrence's history status TERMINAL_STATES), so
 * storage can hold no state the transition tables do not know. The bucket stores no state column
 * at all (a durable row means scheduled; dispatched and running live in memory): its
 * `executions` table is WITHOUT ROWID keyed (due_at, id), so the alarm's "what is due" is a key
 * range and a row is one b-tree entry (docs/data-path.md).
 * src/db/schema.ts, the one place D1 columns are spelled, declares the D1 the migrations build:
 * checked here on the Worker's own D1; `npm run db:check` compares every fact offline.
 */
import { runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { getTableConfig } from "drizzle-orm/sqlite-core";
import { describe, expect, it } from "vitest";
import { EXECUTION_STATES, JOB_STATES, TERMINAL_STATES } from "../../src/core/lifecycle";
import { deadLetters, flowKeys, idempotencyKeys, jobLabels, jobs, occurrences, schedulerMeta, withoutRowid } from "../../src/db/schema";
import { bucketStub } from "./helpers";

/** The states named by `<column> TEXT [NOT NULL] CHECK (<column> IN (...))` in a CREATE TABLE statement. */
function checkedStates(createSql: string, column: string): string[] {
  const pattern = new RegExp(
    `(?:^|[\\s,(])${column}\\s+TEXT(?:\\s+NOT\\s+NULL)?\\s+CHECK\\s*\\(\\s*${column}\\s+IN\\s*\\(([^)]*)\\)\\s*\\)`,
    "i",
  );
  const match = pattern.exec(createSql);
  if (!match) throw new Error(`no ${column} CHECK in: ${createSql}`);
  return match[1]!.split(",").map((s) => s.trim().replace(/^'|'$/g, ""));
}

const sorted = (states: readonly string[]) => [...states].sort();

async function d1TableSql(name: string): Promise<string> {
  const row = await env.DB.prepare("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?").bind(name).first<{ sql: string }>();
  if (!row) throw new Error(`D1 has no table ${name}`);
  return row.sql;
}

/** Runs `query` in bucket 0 and returns the rows, or the error's text. */
function inBucket<T>(query: string, ...args: SqlStorageValue[]): Promise<{ rows: T[] } | { error: string }> {
  return runInDurableObject(bucketStub(0), (_instance, state) => {
    try {
      return { rows: state.storage.sql.exec(query, ...args).toArray() as T[] };
    } catch (error) {
      return { error: String(error) };
    }
  });
}

describe("D1 state constraints", () => {
  it("jobs.status CHECK lists exactly JOB_STATES", async () => {
    expect(sorted(checkedStates(await d1TableSql("jobs"), "status"))).toEqual(sorted(JOB_STATES));
  });

  it("jobs.run_status CHECK lists exactly EXECUTION_STATES", async () => {
    expect(sorted(checkedStates(await d1TableSql("jobs"), "run_status"))).toEqual(sorted(EXECUTION_STATES));
  });

  it("occurrences.status CHECK lists exactly TERMINAL_STATES", async () => {
    expect(sorted(checkedStates(await d1TableSql("occurrences"), "status"))).toEqual(sorted(TERMINAL_STATES));
  });

  it("D1 refuses a state outside the lifecycle tables", async () => {
    const now = Date.now();
    const insertJob = (id: string, status: string, runStatus: string | null) =>
      env.DB.prepare(
        `INSERT INTO jobs (tenant, id, bucket, status, spec, next_run_at, created_at, updated_at, run_status)
         VALUES ('acme', ?, 0, ?, '{}', ?, ?, ?, ?)`,
      )
        .bind(id, status, now, now, now, runStatus)
        .run();
    await expect(insertJob("job_schema_bogus_status", "bogus", null)).rejects.toThrow(/CHECK constraint failed/);
    // an execution state is not a job state
    await expect(insertJob("job_schema_running_job", "running", null)).rejects.toThrow(/CHECK constraint failed/);
    await expect(insertJob("job_schema_bogus_run", "active", "bogus")).rejects.toThrow(/CHECK constraint failed/);
    // a job state is not an execution state
    await expect(insertJob("job_schema_active_run", "active", "active")).rejects.toThrow(/CHECK constraint failed/);
    const insertOccurrence = (id: string, status: string) =>
      env.DB.prepare(
        `INSERT INTO occurrences (id, tenant, job_id, due_at, occurrence, status, attempts, finished_at)
         VALUES (?, 'acme', 'job_schema_occurrence', ?, 1, ?, 0, ?)`,
      )
        .bind(id, now, status, now)
        .run();
    // history holds terminal occurrences only
    for (const status of ["bogus", ...EXECUTION_STATES.filter((s) => !(TERMINAL_STATES as readonly string[]).includes(s))]) {
      await expect(insertOccurrence(`exe_schema_${status}`, status), status).rejects.toThrow(/CHECK constraint failed/);
    }
    const { n } = (await env.DB.prepare("SELECT count(*) AS n FROM jobs WHERE id LIKE 'job_schema_%'").first<{ n: number }>())!;
    expect(n).toBe(0);
  });
});

describe("the drizzle schema (src/db/schema.ts)", () => {
  const tables = [jobs, occurrences, deadLetters, idempotencyKeys, flowKeys, jobLabels, schedulerMeta].map(getTableConfig);
  const byName = (a: { name: string }, b: { name: string }) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0);

  it("declares exactly D1's tables, WITHOUT ROWID where D1's are", async () => {
    const { results } = await env.DB.prepare(
      `SELECT name, wr FROM pragma_table_list WHERE schema = 'main' AND type = 'table'
         AND name NOT LIKE 'sqlite_%' AND name NOT LIKE '_cf_%' AND name <> 'd1_migrations'`,
    ).all<{ name: string; wr: number }>();
    const declared = new Set(withoutRowid.map((t) => getTableConfig(t).name));
    expect(results.sort(byName)).toEqual(tables.map((t) => ({ name: t.name, wr: declared.has(t.name) ? 1 : 0 })).sort(byName));
  });

  const perTable = tables.map((t) => [t.name, t] as const);

  it.each(perTable)("declares every column of %s with its type, NOT NULL, default and key (in any order)", async (name, table) => {
    const { results } = await env.DB.prepare('SELECT name, type, "notnull", dflt_value, pk FROM pragma_table_info(?)')
      .bind(name)
      .all<{ name: string; type: string; notnull: number; dflt_value: string | null; pk: number }>();
    const key = table.primaryKeys[0]?.columns.map((c) => c.name) ?? table.columns.filter((c) => c.primary).map((c) => c.name);
    const declared = table.columns.map((c) => ({
      name: c.name,
      type: c.getSQLType().toUpperCase(),
      notnull: c.notNull ? 1 : 0,
      dflt_value: c.default === undefined ? null : String(c.default),
      pk: key.indexOf(c.name) + 1,
    }));
    expect(results.sort(byName)).toEqual(declared.sort(byName));
  });

  it.each(perTable)("declares every index of %s", async (name, table) => {
    const { results } = await env.DB.prepare("SELECT name FROM pragma_index_list(?) WHERE origin = 'c'").bind(name).all<{ name: string }>();
    expect(results.sort(byName)).toEqual(table.indexes.map((i) => ({ name: i.config.name })).sort(byName));
  });
});

describe("the bucket's executions table", () => {
  it("is WITHOUT ROWID, keyed (due_at, id), with no state column", async () => {
    const created = await inBucket<{ sql: string }>("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'executions'");
    expect("rows" in created && created.rows).toHaveLength(1);
    const createSql = "rows" in created ? created.rows[0]!.sql : "";
    expect(createSql).toMatch(/\)\s*WITHOUT\s+ROWID\s*$/i);
    expect(createSql).toMatch(/PRIMARY\s+KEY\s*\(\s*due_at\s*,\s*id\s*\)/i);
    expect(createSql).not.toMatch(/\bstatus\s+TEXT/i);
    // the table itself, not only its text: it has no rowid
    const rowid = await inBucket("SELECT rowid FROM executions LIMIT 1");
    expect("error" in rowid && rowid.error).toMatch(/no such column: rowid/);
    // and no secondary index (the key is the table: one b-tree entry per row)
    const indexes = await inBucket<{ name: string }>(
      "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'executions' AND name NOT LIKE 'sqlite_autoindex_%'",
    );
    expect(indexes).toEqual({ rows: [] });
  });

  it("refuses a second row with the same (due_at, id) and takes the same id at another due time", async () => {
    const insert = (dueAt: number) =>
      inBucket(
        `INSERT INTO executions (due_at, id, job_id, tenant, version, job_status, occurrence_at, occurrence, attempt, budget_base)
         VALUES (?, 'exe_schema_key', 'job_schema_key', 'acme', 1, 'active', ?, 1, 0, 0)`,
        dueAt,
        dueAt,
      );
    // far in the future and removed at once: the bucket's memory never holds these rows
    const at = Date.now() + 300 * 86_400_000;
    try {
      expect(await insert(at)).toEqual({ rows: [] });
      expect(await insert(at)).toMatchObject({ error: expect.stringMatching(/UNIQUE constraint failed/) });
      expect(await insert(at + 1)).toEqual({ rows: [] });
      const keys = await inBucket<{ due_at: number }>("SELECT due_at FROM executions WHERE id = 'exe_schema_key' ORDER BY due_at");
      expect(keys).toEqual({ rows: [{ due_at: at }, { due_at: at + 1 }] });
    } finally {
      await inBucket("DELETE FROM executions WHERE id = 'exe_schema_key'");
    }
  });
});
