/**
 * One lifecycle table (STYLE.md habit 2): the status CHECK constraints of D1 and of the bucket's
 * SQLite list exactly EXECUTION_STATES from src/core/lifecycle.ts, so storage can hold no state
 * the transition table does not know.
 */
import { runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { EXECUTION_STATES } from "../../src/core/lifecycle";
import { bucketStub } from "./helpers";

/** The states named by `status TEXT NOT NULL CHECK (status IN (...))` in a CREATE TABLE statement. */
function checkedStates(createSql: string): string[] {
  const match = /\bstatus\s+TEXT\s+NOT\s+NULL\s+CHECK\s*\(\s*status\s+IN\s*\(([^)]*)\)\s*\)/i.exec(createSql);
  if (!match) throw new Error(`no status CHECK in: ${createSql}`);
  return match[1]!.split(",").map((s) => s.trim().replace(/^'|'$/g, ""));
}

const sorted = (states: readonly string[]) => [...states].sort();

describe("execution status constraints", () => {
  it("D1 executions.status CHECK lists exactly EXECUTION_STATES", async () => {
    const row = await env.DB.prepare("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'executions'").first<{ sql: string }>();
    expect(sorted(checkedStates(row!.sql))).toEqual(sorted(EXECUTION_STATES));
  });

  it("the bucket's executions.status CHECK lists exactly EXECUTION_STATES", async () => {
    const createSql = await runInDurableObject(bucketStub(0), (_instance, state) =>
      state.storage.sql.exec<{ sql: string }>("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'executions'").one().sql,
    );
    expect(sorted(checkedStates(createSql))).toEqual(sorted(EXECUTION_STATES));
  });

  it("both stores refuse a status outside the lifecycle table", async () => {
    const now = Date.now();
    await expect(
      env.DB.prepare(
        `INSERT INTO executions (id, job_id, tenant, bucket, time_bucket, due_at, status, attempts, created_at, updated_at)
         VALUES ('exe_schema_bogus', 'job_schema_bogus', 'acme', 0, 0, ?, 'bogus', 0, ?, ?)`,
      )
        .bind(now, now, now)
        .run(),
    ).rejects.toThrow(/CHECK constraint failed/);
    const bucketError = await runInDurableObject(bucketStub(0), (_instance, state) => {
      try {
        state.storage.sql.exec(
          "INSERT INTO executions (id, job_id, tenant, occurrence_at, status, due_at) VALUES ('exe_schema_bogus', 'job_schema_bogus', 'acme', ?, 'bogus', ?)",
          now, now,
        );
        return null;
      } catch (error) {
        return String(error);
      }
    });
    expect(bucketError).toMatch(/CHECK constraint failed/);
  });
});
