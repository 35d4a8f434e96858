-- The history archive by job and outcome: executions, attempts, and the first attempt's mean lag.
-- Reads what `edge-scheduler archive pull` wrote into ./archive (docs/deploying.md "History archive"); on R2
-- itself, replace the path with 'r2://scheduler-archive/executions/tenant=<you>/**/*.ndjson.gz'.
SELECT
  jobName,
  status,
  count(*) AS executions,
  sum(attempts) AS attempts,
  round(avg(attemptLog[1].lagMs)) AS first_attempt_lag_ms
FROM read_json('archive/executions/**/*.ndjson.gz', format = 'newline_delimited')
GROUP BY jobName, status
ORDER BY jobName, status;
