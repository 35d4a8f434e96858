/**
 * One lifecycle table (STYLE.md habit 2): the state CHECK constraints of D1 list exactly the
 * states of src/core/lifecycle.ts (a job's status JOB_STATES, a one-off job's execution
 * run_status EXECUTION_STATES, a recurring occurrence's history status TERMINAL_STATES), so
 * storage can hold no state the transition tables do not know. The bucket stores no state column
 * at all (a durable row means scheduled; dispatched and running live in memory): its
 * `executions` table is WITHOUT ROWID keyed (due_at, id), so the alarm's "what is due" is a key
 * range and a row is one b-tree entry (docs/data-path.md).
 */
import { runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { EXECUTION_STATES, JOB_STATES, TERMINAL_STATES } from "../../src/core/lifecycle";
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
