-- Labels on jobs (issue 16): a small map of strings, kept on the job (labels, JSON, as the API
-- shows it) and, one row per label, in job_labels, so GET /v1/jobs?label=k:v is a range scan of
-- its key (tenant, key, value, job id descending = newest first), never a scan of the jobs.
-- WITHOUT ROWID: the key is the table, one b-tree entry a row.
ALTER TABLE jobs ADD COLUMN labels TEXT;

CREATE TABLE job_labels (
  tenant TEXT NOT NULL,
  key TEXT NOT NULL,
  value TEXT NOT NULL,
  job_id TEXT NOT NULL,
  PRIMARY KEY (tenant, key, value, job_id)
) WITHOUT ROWID;
