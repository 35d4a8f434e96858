-- GET /v1/executions (issue 16) lists a tenant's finished occurrences newest first. An occurrence's
-- id carries its due time (src/core/id.ts occurrenceId), so keying the table on (tenant, id)
-- instead of (id) makes that list a range scan of the table itself: the same one b-tree entry a
-- row as before, so no row written more per occurrence (an index would cost one at insert and one
-- at purge). Rebuilt, since SQLite cannot change a primary key in place.

CREATE TABLE occurrences_0008 (
  id TEXT NOT NULL,                     -- the execution id (webhook-id)
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
  attempt_log TEXT,
  PRIMARY KEY (tenant, id)
) WITHOUT ROWID;

INSERT INTO occurrences_0008 (id, tenant, job_id, due_at, occurrence, status, attempts, last_http_status, last_error,
  dead_reason, finished_at, attempt_log)
SELECT id, tenant, job_id, due_at, occurrence, status, attempts, last_http_status, last_error, dead_reason,
  finished_at, attempt_log
FROM occurrences;

DROP INDEX occurrences_job;
DROP INDEX occurrences_finished;
DROP TABLE occurrences;
ALTER TABLE occurrences_0008 RENAME TO occurrences;
CREATE INDEX occurrences_job ON occurrences (tenant, job_id, due_at);
CREATE INDEX occurrences_finished ON occurrences (finished_at);
