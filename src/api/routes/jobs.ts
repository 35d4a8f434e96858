/** Jobs: create one or a batch, list, read, change, cancel, pause and resume. Documented in jobs.openapi.ts. */
import { type Context, Hono } from "hono";
import { type Config, configOf } from "../../config";
import type { JobRow } from "../../db/schema";
import { ShardsFull, shardsOf } from "../../db/shards";
import { CreateJobBatchInput, ListJobsQuery } from "../../schemas/requests";
import { createJobs } from "../../use-cases/create";
import { submitDebounced } from "../../use-cases/debounce";
import { ApiError, errorBody, fromZodError } from "../../use-cases/errors";
import { type ChangeResult, cancelJob, type Deps, patchJob, pauseJob, resumeJob } from "../../use-cases/job-changes";
import { encodeCursor, presentExecution, presentJob } from "../../use-cases/present";
import { executionsOfJob, jobOf, listJobsPage } from "../../use-cases/read-model";
import { type PreparedJob, prepareJob } from "../../use-cases/validation";
import type { ApiEnv } from "../context";
import {
  BATCH_BODY_BYTES,
  cursorOf,
  idempotencyKeyHeader,
  limit,
  notFound,
  readJson,
  SINGLE_BODY_BYTES,
  singleQuery,
  traceHeaders,
} from "../request";

export const jobs = new Hono<ApiEnv>();

jobs.post("/v1/jobs", limit(SINGLE_BODY_BYTES), async (c) => {
  const config = configOf(c.env);
  const tenant = c.get("tenant");
  const now = Date.now();
  const headerKey = idempotencyKeyHeader(c);
  const shard = await shardForNewJobs(c.env, config);
  const prepared = await prepareJob(await readJson(c), {
    tenant,
    now,
    config,
    fieldPrefix: "",
    shard: shard.index,
    headerIdempotencyKey: headerKey,
    headerTrace: traceHeaders(c),
  });
  if (shard.full) throw shard.full;
  const [result] = prepared.spec.debounce
    ? [await submitDebounced(c.env, tenant, prepared, now)]
    : await createJobs(c.env, config, tenant, [prepared], now);
  if (!result) throw new Error("createJobs returned no result");
  if ("error" in result) throw result.error;
  return c.json(result.job, result.status);
});

jobs.post("/v1/jobs/batch", limit(BATCH_BODY_BYTES), async (c) => {
  const config = configOf(c.env);
  const tenant = c.get("tenant");
  const now = Date.now();
  const parsed = CreateJobBatchInput.safeParse(await readJson(c));
  if (!parsed.success) throw fromZodError(parsed.error);
  // validate every item first; invalid items get their own 400 and the rest go ahead
  const outcomes: ({ prepared: PreparedJob } | { error: ApiError })[] = [];
  // one shard for the request's jobs: one atomic write, accepted whole or not at all
  const shard = await shardForNewJobs(c.env, config);
  const headerTrace = traceHeaders(c);
  for (const [i, raw] of parsed.data.jobs.entries()) {
    try {
      outcomes.push({
        prepared: await prepareJob(raw, { tenant, now, config, fieldPrefix: `jobs[${i}]`, shard: shard.index, headerTrace }),
      });
    } catch (error) {
      if (!(error instanceof ApiError)) throw error;
      outcomes.push({ error });
    }
  }
  const valid = outcomes.flatMap((o) => ("prepared" in o ? [o.prepared] : []));
  if (valid.length > 0 && shard.full) throw shard.full;
  // the request's jobs without debounce in one atomic write; each debounced one in its key's order after
  const plain = valid.filter((p) => !p.spec.debounce);
  const created = await createJobs(c.env, config, tenant, plain, now);
  const byJob = new Map(plain.map((p, i) => [p, created[i]!]));
  for (const p of valid) if (p.spec.debounce) byJob.set(p, await submitDebounced(c.env, tenant, p, now));
  const results = outcomes.map((o) => {
    const r = "prepared" in o ? byJob.get(o.prepared)! : { status: 400 as const, error: o.error };
    return "error" in r
      ? { status: r.status, ...errorBody(r.error.code, r.error.message, r.error.field) }
      : { status: r.status, job: r.job };
  });
  return c.json({ results });
});

jobs.get("/v1/jobs", async (c) => {
  const query = ListJobsQuery.safeParse(singleQuery(c));
  if (!query.success) throw fromZodError(query.error);
  const cursor = cursorOf(query.data.cursor);
  const { status, label, name, url, limit } = query.data;
  const { page, next } = await listJobsPage(c.env, c.get("tenant"), { status, label, name, url }, cursor?.id, limit);
  const now = Date.now();
  return c.json({ jobs: page.map((j) => presentJob(j, now)), nextCursor: next === null ? null : encodeCursor(0, next) });
});

jobs.get("/v1/jobs/:id", async (c) => {
  const job = await jobOf(c.env, c.get("tenant"), c.req.param("id"));
  if (!job) throw notFound("job");
  const [latest] = await executionsOfJob(c.env, job, 1);
  return c.json({ ...presentJob(job, Date.now(), 5), latestExecution: latest ? presentExecution(latest) : null });
});

/** Loads the caller's job or 404s, runs a change on it: 200 once its bucket holds it, 202 while it converges. */
async function changeJob(c: Context<ApiEnv>, change: (deps: Deps, job: JobRow) => Promise<ChangeResult>): Promise<Response> {
  const tenant = c.get("tenant");
  const job = await jobOf(c.env, tenant, c.req.param("id")!);
  if (!job) throw notFound("job");
  const db = shardsOf(c.env).of(job.id).db;
  const result = await change({ env: c.env, db, config: configOf(c.env), tenant, now: Date.now() }, job);
  return c.json(presentJob(result.job, Date.now()), result.applied ? 200 : 202);
}

// cancel: nothing new fires; an attempt already running finishes
jobs.delete("/v1/jobs/:id", (c) => changeJob(c, cancelJob));
jobs.post("/v1/jobs/:id/pause", (c) => changeJob(c, pauseJob));
jobs.post("/v1/jobs/:id/resume", (c) => changeJob(c, resumeJob));
jobs.patch("/v1/jobs/:id", limit(SINGLE_BODY_BYTES), async (c) => {
  const body = await readJson(c);
  return changeJob(c, (deps, job) => patchJob(deps, job, body));
});

/**
 * The shard of a create's new jobs (db/shards.ts pickWithRoom). With none having room the request
 * is still validated (a bad field is a 400 first), then refused with `full`.
 */
async function shardForNewJobs(env: Env, config: Config): Promise<{ index: number; full: ShardsFull | null }> {
  try {
    return { index: await shardsOf(env).pickWithRoom(config.SHARD_MAX_BYTES), full: null };
  } catch (error) {
    if (!(error instanceof ShardsFull)) throw error;
    return { index: 0, full: error };
  }
}
