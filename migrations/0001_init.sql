-- The system of record. Bucket Durable Objects own near-term executions and mirror outcomes here.
-- Status lists must match src/core/lifecycle.ts (test/integration/schema.test.ts checks it).

CREATE TABLE jobs (
  id TEXT PRIMARY KEY,
  tenant TEXT NOT NULL,
  name TEXT,
  status TEXT NOT NULL CHECK (status IN ('active','paused','canceled','completed')),
  bucket INTEGER NOT NULL,
  spec TEXT NOT NULL,            -- JSON: target, timeoutMs, retry, metadata
  cron TEXT,
  timezone TEXT,
  next_run_at INTEGER,
  idempotency_key TEXT,
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL
);
CREATE INDEX jobs_tenant_created ON jobs (tenant, created_at DESC, id DESC);
CREATE INDEX jobs_tenant_status_created ON jobs (tenant, status, created_at DESC, id DESC);

CREATE TABLE executions (
  id TEXT PRIMARY KEY,
  job_id TEXT NOT NULL,
  tenant TEXT NOT NULL,
  bucket INTEGER NOT NULL,
  time_bucket INTEGER NOT NULL,  -- due_at floored to the scan window
  due_at INTEGER NOT NULL,
  status TEXT NOT NULL CHECK (status IN ('pending','scheduled','dispatched','running','succeeded','dead','canceled')),
  attempts INTEGER NOT NULL DEFAULT 0,
  last_http_status INTEGER,
  last_error TEXT,
  dead_reason TEXT,
  finished_at INTEGER,
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL,
  UNIQUE (job_id, due_at)
);
-- the scanner's range: one bucket, pending, time buckets up to the lookahead
CREATE INDEX executions_scan ON executions (bucket, status, time_bucket, due_at);
CREATE INDEX executions_tenant_status ON executions (tenant, status, updated_at DESC, id DESC);
CREATE INDEX executions_finished ON executions (status, finished_at);

CREATE TABLE attempts (
  execution_id TEXT NOT NULL,
  attempt INTEGER NOT NULL,
  due_at INTEGER NOT NULL,
  started_at INTEGER NOT NULL,
  finished_at INTEGER,
  outcome TEXT,                  -- succeeded | retryable | permanent | lease_expired | null while running
  http_status INTEGER,
  error TEXT,
  PRIMARY KEY (execution_id, attempt)
);

CREATE TABLE idempotency_keys (
  tenant TEXT NOT NULL,
  key TEXT NOT NULL,
  job_id TEXT NOT NULL,
  request_hash TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  PRIMARY KEY (tenant, key)
);
