/** Dead executions: the list, and one redriven. Documented in dead-letters.openapi.ts; many at once: actions.ts. */
import { Hono } from "hono";
import { configOf } from "../../config";
import { shardOfOrNull, shardsOf } from "../../db/shards";
import { ListDeadQuery } from "../../schemas/requests";
import { fromZodError } from "../../use-cases/errors";
import { type Deps, redriveExecution } from "../../use-cases/job-changes";
import { encodeCursor, presentExecution, viewOfDeadLetter } from "../../use-cases/present";
import { findExecution, listDeadPage } from "../../use-cases/read-model";
import type { ApiEnv } from "../context";
import { cursorOf, notFound, singleQuery } from "../request";

export const deadLetters = new Hono<ApiEnv>();

/**
 * Redrive: a dead one-off job becomes active again (a new job version); a recurring job's dead
 * occurrence is handed to its bucket with a fresh budget. Both converge through the sync pass.
 */
deadLetters.post("/v1/executions/:id/redrive", async (c) => {
  const id = c.req.param("id");
  const tenant = c.get("tenant");
  const config = configOf(c.env);
  const shard = await shardOfOrNull(shardsOf(c.env), id);
  if (!shard) throw notFound("execution");
  const deps: Deps = { env: c.env, db: shard.db, config, tenant, now: Date.now() };
  const dead = await redriveExecution(deps, id, async () => (await findExecution(c.env, tenant, config.BUCKETS, id)) !== undefined);
  return c.json(
    { ...presentExecution({ ...viewOfDeadLetter(dead), status: "scheduled", deadReason: null, finishedAt: null }), redriven: true },
    202,
  );
});

deadLetters.get("/v1/dlq", async (c) => {
  const query = ListDeadQuery.safeParse(singleQuery(c));
  if (!query.success) throw fromZodError(query.error);
  const cursor = cursorOf(query.data.cursor);
  const { page, more } = await listDeadPage(
    c.env,
    c.get("tenant"),
    cursor ? { deadAt: cursor.at, id: cursor.id } : undefined,
    query.data.limit,
  );
  const last = page[page.length - 1];
  return c.json({
    executions: page.map((d) => presentExecution(viewOfDeadLetter(d))),
    nextCursor: more && last ? encodeCursor(last.deadAt, last.executionId) : null,
  });
});
