-- The flow-control keys of each tenant (issue 13): Durable Objects cannot be listed, so each
-- FlowKey object writes its own row here once (src/flow/flow-key.ts) and the metrics read them.
-- WITHOUT ROWID: the key is the table, one b-tree entry a row.
CREATE TABLE flow_keys (
  tenant TEXT NOT NULL,
  key TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  PRIMARY KEY (tenant, key)
) WITHOUT ROWID;
