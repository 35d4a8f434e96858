/**
 * The bucket's SQLite schema, as append-only migrations with monotonic ids
 * (STYLE.md habit 10). Migrations 1-4 are revision 1's; 5 replaces its tables (D1's migration
 * 0005 marks every live job unsynced, so the sync pass rebuilds what the bucket held).
 */
import { statusCheckSql } from "../core/lifecycle";
import { applyMigrations, type SqliteMigration } from "../sqlite-migrations";

export const BUCKET_MIGRATIONS: ReadonlyArray<SqliteMigration> = [
  {
    id: 1,
    sql: `
      CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
      CREATE TABLE jobs (
        id TEXT PRIMARY KEY,
        tenant TEXT NOT NULL,
        spec TEXT NOT NULL,
        status TEXT NOT NULL
      );
      CREATE TABLE executions (
        id TEXT PRIMARY KEY,
        job_id TEXT NOT NULL,
        tenant TEXT NOT NULL,
        occurrence_at INTEGER NOT NULL,       -- the occurrence's due time (its identity in D1)
        status TEXT NOT NULL ${statusCheckSql()},
        due_at INTEGER NOT NULL,              -- when the current attempt is due
        attempt INTEGER NOT NULL DEFAULT 0,   -- attempts started, ever (sent to the target)
        budget_base INTEGER NOT NULL DEFAULT 0, -- attempt count at the last redrive
        lease_token TEXT,
        lease_seq INTEGER NOT NULL DEFAULT 0, -- fencing: grows with every lease (invariant 2)
        lease_deadline_at INTEGER,
        dispatch_deadline_at INTEGER,
        dispatch_count INTEGER NOT NULL DEFAULT 0,
        last_http_status INTEGER,
        last_error TEXT,
        dead_reason TEXT,
        finished_at INTEGER,
        version INTEGER NOT NULL DEFAULT 0,   -- bumps on every change; the mirror clears dirty only for the version it wrote
        dirty INTEGER NOT NULL DEFAULT 0
      );
      CREATE INDEX executions_due ON executions (status, due_at);
      CREATE INDEX executions_lease ON executions (status, lease_deadline_at);
      CREATE INDEX executions_dispatch ON executions (status, dispatch_deadline_at);
      CREATE INDEX executions_finished ON executions (status, finished_at);
      CREATE INDEX executions_dirty ON executions (dirty) WHERE dirty = 1;
      CREATE INDEX executions_job ON executions (job_id);
      CREATE TABLE attempts (
        execution_id TEXT NOT NULL,
        attempt INTEGER NOT NULL,
        due_at INTEGER NOT NULL,
        started_at INTEGER NOT NULL,
        finished_at INTEGER,
        outcome TEXT,
        http_status INTEGER,
        error TEXT,
        dirty INTEGER NOT NULL DEFAULT 1,
        PRIMARY KEY (execution_id, attempt)
      );
      CREATE INDEX attempts_dirty ON attempts (dirty) WHERE dirty = 1;
      CREATE TABLE counters (
        name TEXT NOT NULL,
        tenant TEXT NOT NULL,
        reason TEXT NOT NULL DEFAULT '',
        value INTEGER NOT NULL,
        PRIMARY KEY (name, tenant, reason)
      );
      CREATE TABLE lag_histogram (
        tenant TEXT NOT NULL,
        le INTEGER NOT NULL,
        count INTEGER NOT NULL,
        PRIMARY KEY (tenant, le)
      );
    `,
  },
  {
    id: 2,
    sql: `
      ALTER TABLE executions ADD COLUMN occurrence INTEGER NOT NULL DEFAULT 1;
      -- set once the next occurrence of a recurring job was created from this one
      ALTER TABLE executions ADD COLUMN spawned INTEGER NOT NULL DEFAULT 0;
      -- set on the last occurrence of a schedule: the job completes when it is terminal
      ALTER TABLE executions ADD COLUMN last INTEGER NOT NULL DEFAULT 0;
      CREATE UNIQUE INDEX executions_occurrence ON executions (job_id, occurrence_at);
      -- next occurrences due beyond the lookahead, on their way to D1 as pending
      CREATE TABLE outbox_pending (
        id TEXT PRIMARY KEY,
        job_id TEXT NOT NULL,
        tenant TEXT NOT NULL,
        occurrence_at INTEGER NOT NULL,
        occurrence INTEGER NOT NULL
      );
    `,
  },
  {
    id: 3,
    // partial indexes: a row is in an index only while it is in that state, so a state change
    // writes at most two index entries instead of four; executions_job duplicated the unique index
    sql: `
      DROP INDEX executions_due;
      DROP INDEX executions_lease;
      DROP INDEX executions_dispatch;
      DROP INDEX executions_finished;
      DROP INDEX executions_job;
      CREATE INDEX executions_due ON executions (due_at) WHERE status = 'scheduled';
      CREATE INDEX executions_lease ON executions (lease_deadline_at) WHERE status = 'running';
      CREATE INDEX executions_dispatch ON executions (dispatch_deadline_at) WHERE status = 'dispatched';
      CREATE INDEX executions_finished ON executions (finished_at) WHERE status IN ('succeeded', 'dead', 'canceled');
    `,
  },
  {
    id: 4,
    sql: `
      -- the highest occurrence number of the job that has fired (its maxOccurrences budget)
      ALTER TABLE jobs ADD COLUMN fired INTEGER NOT NULL DEFAULT 0;
      -- an occurrence skipped by catchUp "none" (canceled, yet it counts as the schedule's end)
      ALTER TABLE executions ADD COLUMN skipped INTEGER NOT NULL DEFAULT 0;
    `,
  },
  {
    id: 5,
    // Revision 2: a durable row only for what is scheduled (dispatched and running live in memory,
    // fenced by the epoch); WITHOUT ROWID keyed by (due_at, id), so a row is one b-tree entry and
    // the alarm's "what is due" is a key range. A recurring job's schedule is one row.
    sql: `
      DROP TABLE executions;
      DROP TABLE attempts;
      DROP TABLE jobs;
      DROP TABLE outbox_pending;
      CREATE TABLE executions (
        due_at INTEGER NOT NULL,          -- when the current attempt is due
        id TEXT NOT NULL,
        job_id TEXT NOT NULL,
        tenant TEXT NOT NULL,
        version INTEGER NOT NULL,         -- the job version this row follows
        job_status TEXT NOT NULL,         -- the job's state at that version (active, paused, canceled)
        occurrence_at INTEGER NOT NULL,   -- the run time it was created for (one-off: next_run_at)
        occurrence INTEGER NOT NULL,
        attempt INTEGER NOT NULL,         -- attempts started, ever
        budget_base INTEGER NOT NULL,     -- attempts at the last redrive (the budget counts from here)
        spec TEXT,                        -- one-off: the job's spec; recurring: NULL (schedules.spec)
        log TEXT,                         -- JSON: finished attempts
        PRIMARY KEY (due_at, id)
      ) WITHOUT ROWID;
      CREATE TABLE schedules (
        id TEXT NOT NULL PRIMARY KEY,     -- the job id
        tenant TEXT NOT NULL,
        version INTEGER NOT NULL,
        status TEXT NOT NULL,
        spec TEXT NOT NULL,
        next_at INTEGER,                  -- the next occurrence to create, null when none is left
        fired INTEGER NOT NULL            -- occurrences created (the maxOccurrences budget)
      ) WITHOUT ROWID;
      CREATE INDEX schedules_next ON schedules (next_at) WHERE next_at IS NOT NULL;
    `,
  },
  {
    id: 6,
    // a callback execution (core/callback.ts): the execution it tells of and which callback; NULL on every other row
    sql: `
      ALTER TABLE executions ADD COLUMN callback_of TEXT;
      ALTER TABLE executions ADD COLUMN callback_kind TEXT;
    `,
  },
];

export function migrateBucket(sql: SqlStorage): void {
  applyMigrations(sql, BUCKET_MIGRATIONS);
}
