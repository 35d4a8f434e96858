-- Fewer rows written per change, and indexes for the retention purge.
-- executions_job_due duplicated the UNIQUE (job_id, due_at) index.
DROP INDEX executions_job_due;
-- listDead reads dead executions only: a partial index is written only when a row is dead.
DROP INDEX executions_tenant_status;
CREATE INDEX executions_dead ON executions (tenant, updated_at DESC, id DESC) WHERE status = 'dead';
-- the purge of old idempotency keys and of finished jobs
CREATE INDEX idempotency_keys_created ON idempotency_keys (created_at);
CREATE INDEX jobs_finished ON jobs (status, updated_at) WHERE status IN ('completed', 'canceled');
-- the scanner reads pending rows only; the purge reads terminal rows only
DROP INDEX executions_scan;
CREATE INDEX executions_scan ON executions (bucket, time_bucket, due_at) WHERE status = 'pending';
DROP INDEX executions_finished;
CREATE INDEX executions_finished ON executions (finished_at) WHERE status IN ('succeeded', 'dead', 'canceled');
