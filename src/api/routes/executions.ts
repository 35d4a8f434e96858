/** Executions: a job's, the tenant's list, and one by id (from D1, else the archive). Documented in executions.openapi.ts. */
import { Hono } from "hono";
import { executionOfArchived, findArchived } from "../../archive/archive";
import { configOf } from "../../config";
import { isId } from "../../core/id";
import { parseSpec } from "../../core/job";
import { ListExecutionsQuery } from "../../schemas/requests";
import { fromZodError } from "../../use-cases/errors";
import { encodeCursor, presentExecution, presentExecutionWithAttempts } from "../../use-cases/present";
import { executionsOfJob, findExecution, jobOf, listExecutionsOfJobPage, listExecutionsPage } from "../../use-cases/read-model";
import type { ApiEnv } from "../context";
import { badCursor, cursorOf, notFound, singleQuery } from "../request";

export const executions = new Hono<ApiEnv>();

executions.get("/v1/jobs/:id/executions", async (c) => {
  const job = await jobOf(c.env, c.get("tenant"), c.req.param("id"));
  if (!job) throw notFound("job");
  const views = await executionsOfJob(c.env, job, 100);
  const traced = parseSpec(job.spec).trace !== undefined;
  return c.json({ executions: views.map((v) => presentExecutionWithAttempts(v, traced)) });
});

/**
 * A tenant's executions newest first (by id: an occurrence's carries its due time, a one-off's its
 * job's creation), filtered, by cursor. Without jobId: what D1 holds, every one-off job's execution
 * (pending until its outcome reaches D1) and recurring jobs' finished occurrences; with jobId, the
 * job's bucket adds its live executions, as GET /v1/jobs/:id/executions does. Each source is a
 * bounded range scan (db/range-scan.ts SCAN_ROWS), so a page may be short, with a cursor. Cost in D1 rows
 * read (meta.rows_read, measured in test/integration/executions-list.test.ts): a full page about
 * limit + 1 a source (51 for 50); a page whose filter matches nothing at most 2 × SCAN_ROWS = 1,000
 * a source, plus one a key examined for a label or url on occurrences. It writes nothing.
 */
executions.get("/v1/executions", async (c) => {
  const query = ListExecutionsQuery.safeParse(singleQuery(c));
  if (!query.success) throw fromZodError(query.error);
  const { cursor, limit, jobId, ...filter } = query.data;
  const cursorId = cursorOf(cursor)?.id;
  if (cursorId !== undefined && !isId("exe", cursorId)) throw badCursor();
  const tenant = c.get("tenant");
  const { page, next } =
    jobId === undefined
      ? await listExecutionsPage(c.env, tenant, filter, cursorId, limit)
      : await listExecutionsOfJobPage(c.env, tenant, jobId, filter, cursorId, limit);
  return c.json({ executions: page.map(presentExecution), nextCursor: next === null ? null : encodeCursor(0, next) });
});

executions.get("/v1/executions/:id", async (c) => {
  const id = c.req.param("id");
  const view = await findExecution(c.env, c.get("tenant"), configOf(c.env).BUCKETS, id);
  if (view) return c.json(presentExecution(view));
  // D1 no longer has it: the archive may (one R2 list per 1,000 objects of its hour, one read)
  const archived = c.env.ARCHIVE && isId("exe", id) ? await findArchived(c.env.ARCHIVE, c.get("tenant"), id) : undefined;
  if (!archived) throw notFound("execution");
  return c.json({ ...executionOfArchived(archived.execution), archived: true as const, archiveKey: archived.key });
});
