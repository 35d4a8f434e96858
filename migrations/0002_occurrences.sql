-- Recurring jobs: each execution is the n-th occurrence of its job (for maxOccurrences).
ALTER TABLE executions ADD COLUMN occurrence INTEGER NOT NULL DEFAULT 1;
CREATE INDEX executions_job_due ON executions (job_id, due_at DESC);
