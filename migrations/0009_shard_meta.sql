-- D1 shards (issue 25, docs/data-path.md): every shard gets every migration, so each has this
-- table; shard 0's row "shards" remembers the most shards this deployment has ever had, so a
-- deploy with fewer (which would strand the jobs of the shards removed) is refused at start.
-- WITHOUT ROWID: the key is the table.
CREATE TABLE scheduler_meta (
  key TEXT PRIMARY KEY,
  value TEXT NOT NULL
) WITHOUT ROWID;
