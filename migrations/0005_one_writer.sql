-- Revision 2, "one writer per fact" (DESIGN.md "Ownership and cost").
-- D1 holds each job once: its definition and status, raised in `version` by every change the API
-- accepts, and, for a one-off job, its only execution (written once, when terminal, by the job's
-- bucket). Recurring occurrences get a history row when terminal; dead executions a dead-letter
-- row. The bucket owns executions and leases; it is told each job version (synced = 0 until it
-- acknowledges one), so every change converges through the scanner's sync pass.
-- Rows per one-off job: the row and one index entry when created, one row when terminal, the
-- row and its index entry when purged (WITHOUT ROWID: the key is the table, no hidden index).

ALTER TABLE jobs RENAME TO jobs_r1;
ALTER TABLE executions RENAME TO executions_r1;
DROP INDEX IF EXISTS jobs_tenant_created;
DROP INDEX IF EXISTS jobs_tenant_status_created;
DROP INDEX IF EXISTS jobs_finished;
DROP INDEX IF EXISTS executions_scan;
DROP INDEX IF EXISTS executions_dead;
DROP INDEX IF EXISTS executions_finished;

CREATE TABLE jobs (
  tenant TEXT NOT NULL,
  id TEXT NOT NULL,
  name TEXT,
  bucket INTEGER NOT NULL,
  status TEXT NOT NULL CHECK (status IN ('active','paused','canceled','completed')),
  version INTEGER NOT NULL DEFAULT 1,   -- raised by every accepted change
  synced INTEGER NOT NULL DEFAULT 1,    -- 0 until the bucket acknowledged `version`
  spec TEXT NOT NULL,                   -- JSON: target, timeoutMs, retry, metadata, schedule
  cron TEXT,
  timezone TEXT,
  next_run_at INTEGER,                  -- one-off: its run time; recurring: its next occurrence
  idempotency_key TEXT,
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL,
  -- written by the job's bucket
  fired INTEGER NOT NULL DEFAULT 0,     -- recurring: occurrences fired (the maxOccurrences budget)
  run_status TEXT CHECK (run_status IN ('pending','scheduled','dispatched','running','succeeded','dead','canceled')),
  attempts INTEGER NOT NULL DEFAULT 0,
  last_http_status INTEGER,
  last_error TEXT,
  dead_reason TEXT,
  finished_at INTEGER,
  attempt_log TEXT,                     -- JSON: the execution's attempts
  PRIMARY KEY (tenant, id)
) WITHOUT ROWID;
-- the scanner's range (a bucket's jobs due before its horizon) and the purge's (old ones)
CREATE INDEX jobs_due ON jobs (bucket, next_run_at);
-- changes the bucket has not acknowledged: an entry only while one is outstanding
CREATE INDEX jobs_unsynced ON jobs (bucket) WHERE synced = 0;

-- Live jobs start unsynced: their buckets' storage is rebuilt from D1 by the sync pass.
INSERT INTO jobs (tenant, id, name, bucket, status, version, synced, spec, cron, timezone, next_run_at,
  idempotency_key, created_at, updated_at, fired, run_status, attempts, last_http_status, last_error,
  dead_reason, finished_at)
SELECT j.tenant, j.id, j.name, j.bucket, j.status, 1, CASE WHEN j.status IN ('active','paused') THEN 0 ELSE 1 END,
  j.spec, j.cron, j.timezone,
  COALESCE((SELECT MIN(e.due_at) FROM executions_r1 e WHERE e.job_id = j.id
            AND e.status IN ('pending','scheduled','dispatched','running')), j.next_run_at),
  j.idempotency_key, j.created_at, j.updated_at, j.fired,
  CASE WHEN j.cron IS NULL THEN e.status END, COALESCE(e.attempts, 0), e.last_http_status, e.last_error,
  e.dead_reason, e.finished_at
FROM jobs_r1 j
LEFT JOIN executions_r1 e ON j.cron IS NULL AND e.job_id = j.id
  AND e.due_at = (SELECT MAX(due_at) FROM executions_r1 x WHERE x.job_id = j.id);

CREATE TABLE occurrences (
  id TEXT NOT NULL PRIMARY KEY,         -- the execution id (webhook-id)
  tenant TEXT NOT NULL,
  job_id TEXT NOT NULL,
  due_at INTEGER NOT NULL,              -- the occurrence's time
  occurrence INTEGER NOT NULL,
  status TEXT NOT NULL CHECK (status IN ('succeeded','dead','canceled')),
  attempts INTEGER NOT NULL,
  last_http_status INTEGER,
  last_error TEXT,
  dead_reason TEXT,
  finished_at INTEGER NOT NULL,
  attempt_log TEXT
) WITHOUT ROWID;
CREATE INDEX occurrences_job ON occurrences (tenant, job_id, due_at);
CREATE INDEX occurrences_finished ON occurrences (finished_at);

INSERT INTO occurrences (id, tenant, job_id, due_at, occurrence, status, attempts, last_http_status, last_error,
  dead_reason, finished_at)
SELECT e.id, e.tenant, e.job_id, e.due_at, e.occurrence, e.status, e.attempts, e.last_http_status, e.last_error,
  e.dead_reason, COALESCE(e.finished_at, e.updated_at)
FROM executions_r1 e JOIN jobs_r1 j ON j.id = e.job_id
WHERE j.cron IS NOT NULL AND e.status IN ('succeeded','dead','canceled');

-- Dead executions of either kind, for the DLQ list and redrive. redrive_at is set while a
-- redrive is on its way to the bucket (the sync pass re-sends it).
CREATE TABLE dead_letters (
  tenant TEXT NOT NULL,
  execution_id TEXT NOT NULL,
  job_id TEXT NOT NULL,
  bucket INTEGER NOT NULL,
  due_at INTEGER NOT NULL,              -- the occurrence's time
  occurrence INTEGER NOT NULL,
  attempts INTEGER NOT NULL,
  last_http_status INTEGER,
  last_error TEXT,
  dead_reason TEXT NOT NULL,
  dead_at INTEGER NOT NULL,
  redrive_at INTEGER,
  PRIMARY KEY (tenant, execution_id)
) WITHOUT ROWID;
CREATE INDEX dead_letters_listed ON dead_letters (tenant, dead_at DESC, execution_id DESC);
CREATE INDEX dead_letters_redriving ON dead_letters (bucket) WHERE redrive_at IS NOT NULL;

INSERT INTO dead_letters (tenant, execution_id, job_id, bucket, due_at, occurrence, attempts, last_http_status,
  last_error, dead_reason, dead_at)
SELECT e.tenant, e.id, e.job_id, e.bucket, e.due_at, e.occurrence, e.attempts, e.last_http_status, e.last_error,
  COALESCE(e.dead_reason, 'unknown'), e.updated_at
FROM executions_r1 e WHERE e.status = 'dead';

DROP TABLE attempts;
DROP TABLE executions_r1;
DROP TABLE jobs_r1;
