/** The HTTP API (Hono). Every /v1 route and /metrics need a bearer key; /healthz does not. */
import { Hono, type Context } from "hono";
import { bodyLimit } from "hono/body-limit";
import { configOf } from "../config";
import { bucketName } from "../core/bucketing";
import type { JobSpec } from "../core/job";
import { summarize, toPrometheus, type BucketMetrics } from "../core/metrics";
import {
  dbOf,
  getExecution,
  getJob,
  listDead,
  listExecutionsOfJob,
  listJobs,
} from "../db/queries";
import { requireApiKey } from "./auth";
import type { ApiEnv } from "./context";
import { createJobs, prepareJob, type PreparedJob } from "./create";
import { cancelJob, patchJob, pauseJob, resumeJob } from "./job-changes";
import { ApiError, errorBody, fromZodError, respondError } from "./errors";
import { decodeCursor, encodeCursor, presentExecution, presentJob } from "./present";
import { CreateJobBatchInput, ListDeadQuery, ListJobsQuery } from "./schemas";
import { RESULT_MESSAGES } from "../bucket/protocol";

const SINGLE_BODY_BYTES = 128 * 1024;
const BATCH_BODY_BYTES = 16 * 1024 * 1024;

export const app = new Hono<ApiEnv>();

app.onError((error, c) => {
  if (error instanceof ApiError) return respondError(c, error);
  console.error("unhandled API error", error);
  return c.json(errorBody("internal", "internal error; nothing you sent was lost"), 500);
});
app.notFound((c) => c.json(errorBody("not_found", `no route ${c.req.method} ${c.req.path}`), 404));

app.get("/healthz", (c) => c.json({ ok: true }));

app.use("/v1/*", requireApiKey);
app.use("/metrics", requireApiKey);

const limit = (maxSize: number) =>
  bodyLimit({
    maxSize,
    onError: () => {
      throw new ApiError(413, "payload_too_large", `the request body is larger than ${maxSize} bytes`, "body");
    },
  });

async function readJson(c: Context<ApiEnv>): Promise<unknown> {
  try {
    return await c.req.json();
  } catch {
    throw new ApiError(400, "invalid_json", "the request body is not valid JSON", "body");
  }
}

// --- jobs ----------------------------------------------------------------------------------

app.post("/v1/jobs", limit(SINGLE_BODY_BYTES), async (c) => {
  const config = configOf(c.env);
  const tenant = c.get("tenant");
  const now = Date.now();
  const headerKey = c.req.header("idempotency-key");
  if (headerKey !== undefined && (headerKey.length === 0 || headerKey.length > 200 || !headerKey.isWellFormed())) {
    throw new ApiError(400, "invalid_field", "Idempotency-Key must be 1 to 200 characters", "Idempotency-Key");
  }
  const prepared = await prepareJob(await readJson(c), { tenant, now, config, fieldPrefix: "", headerIdempotencyKey: headerKey });
  const [result] = await createJobs(c.env, dbOf(c.env.DB), config, tenant, [prepared], now);
  if (!result) throw new Error("createJobs returned no result");
  if ("error" in result) throw result.error;
  return c.json(result.job, result.status);
});

app.post("/v1/jobs/batch", limit(BATCH_BODY_BYTES), async (c) => {
  const config = configOf(c.env);
  const tenant = c.get("tenant");
  const now = Date.now();
  const parsed = CreateJobBatchInput.safeParse(await readJson(c));
  if (!parsed.success) throw fromZodError(parsed.error);
  // validate every item first; invalid items get their own 400 and the rest go ahead
  const outcomes: ({ prepared: PreparedJob } | { error: ApiError })[] = [];
  for (const [i, raw] of parsed.data.jobs.entries()) {
    try {
      outcomes.push({ prepared: await prepareJob(raw, { tenant, now, config, fieldPrefix: `jobs[${i}]` }) });
    } catch (error) {
      if (!(error instanceof ApiError)) throw error;
      outcomes.push({ error });
    }
  }
  const valid = outcomes.flatMap((o) => ("prepared" in o ? [o.prepared] : []));
  const created = await createJobs(c.env, dbOf(c.env.DB), config, tenant, valid, now);
  let next = 0;
  const results = outcomes.map((o) => {
    const r = "prepared" in o ? created[next++]! : { status: 400 as const, error: o.error };
    return "error" in r
      ? { status: r.status, ...errorBody(r.error.code, r.error.message, r.error.field) }
      : { status: r.status, job: r.job };
  });
  return c.json({ results });
});

app.get("/v1/jobs", async (c) => {
  const query = ListJobsQuery.safeParse(c.req.query());
  if (!query.success) throw fromZodError(query.error);
  const cursor = query.data.cursor === undefined ? undefined : decodeCursor(query.data.cursor);
  if (cursor === null) throw new ApiError(400, "invalid_field", "cursor is not one this API returned", "cursor");
  const rows = await listJobs(
    dbOf(c.env.DB),
    c.get("tenant"),
    query.data.status,
    cursor ? { createdAt: cursor.at, id: cursor.id } : undefined,
    query.data.limit + 1,
  );
  const page = rows.slice(0, query.data.limit);
  const last = page[page.length - 1];
  const now = Date.now();
  return c.json({
    jobs: page.map((j) => presentJob(j, now)),
    nextCursor: rows.length > query.data.limit && last ? encodeCursor(last.createdAt, last.id) : null,
  });
});

app.get("/v1/jobs/:id", async (c) => {
  const db = dbOf(c.env.DB);
  const job = await getJob(db, c.get("tenant"), c.req.param("id"));
  if (!job) throw notFound("job");
  const [latest] = await listExecutionsOfJob(db, job.tenant, job.id, 1);
  return c.json({
    ...presentJob(job, Date.now(), 5),
    latestExecution: latest ? presentExecution(latest.execution, undefined, await liveStatus(c, job.bucket, latest.execution)) : null,
  });
});

/** Loads the caller's job or 404s, and runs a change on it with the request's dependencies. */
async function changeJob(
  c: Context<ApiEnv>,
  change: (deps: Parameters<typeof cancelJob>[0], job: NonNullable<Awaited<ReturnType<typeof getJob>>>) => Promise<Parameters<typeof presentJob>[0]>,
): Promise<Response> {
  const db = dbOf(c.env.DB);
  const tenant = c.get("tenant");
  const job = await getJob(db, tenant, c.req.param("id")!);
  if (!job) throw notFound("job");
  const changed = await change({ env: c.env, db, config: configOf(c.env), tenant, now: Date.now() }, job);
  return c.json(presentJob(changed, Date.now()));
}

// cancel: nothing new fires; an attempt already running finishes
app.delete("/v1/jobs/:id", (c) => changeJob(c, cancelJob));
app.post("/v1/jobs/:id/pause", (c) => changeJob(c, pauseJob));
app.post("/v1/jobs/:id/resume", (c) => changeJob(c, resumeJob));
app.patch("/v1/jobs/:id", limit(SINGLE_BODY_BYTES), async (c) => {
  const body = await readJson(c);
  return changeJob(c, (deps, job) => patchJob(deps, job, body));
});

app.get("/v1/jobs/:id/executions", async (c) => {
  const db = dbOf(c.env.DB);
  const tenant = c.get("tenant");
  const job = await getJob(db, tenant, c.req.param("id"));
  if (!job) throw notFound("job");
  const rows = await listExecutionsOfJob(db, tenant, job.id, 100);
  const live = await liveStatuses(c, job.bucket, rows.map((r) => r.execution));
  return c.json({
    executions: rows.map((r) => presentExecution(r.execution, r.attempts, live[r.execution.id])),
  });
});

// --- executions and the dead-letter list ----------------------------------------------------

app.get("/v1/executions/:id", async (c) => {
  const execution = await getExecution(dbOf(c.env.DB), c.get("tenant"), c.req.param("id"));
  if (!execution) throw notFound("execution");
  return c.json(presentExecution(execution, undefined, await liveStatus(c, execution.bucket, execution)));
});

app.get("/v1/dlq", async (c) => {
  const query = ListDeadQuery.safeParse(c.req.query());
  if (!query.success) throw fromZodError(query.error);
  const cursor = query.data.cursor === undefined ? undefined : decodeCursor(query.data.cursor);
  if (cursor === null) throw new ApiError(400, "invalid_field", "cursor is not one this API returned", "cursor");
  const rows = await listDead(
    dbOf(c.env.DB),
    c.get("tenant"),
    cursor ? { updatedAt: cursor.at, id: cursor.id } : undefined,
    query.data.limit + 1,
  );
  const page = rows.slice(0, query.data.limit);
  const last = page[page.length - 1];
  return c.json({
    executions: page.map((e) => presentExecution(e)),
    nextCursor: rows.length > query.data.limit && last ? encodeCursor(last.updatedAt, last.id) : null,
  });
});

app.post("/v1/executions/:id/redrive", async (c) => {
  const db = dbOf(c.env.DB);
  const tenant = c.get("tenant");
  const execution = await getExecution(db, tenant, c.req.param("id"));
  if (!execution) throw notFound("execution");
  const job = await getJob(db, tenant, execution.jobId);
  if (!job) throw notFound("execution");
  if (job.status === "canceled") throw new ApiError(409, "job_canceled", "the job was canceled", "id");
  const result = await c.env.BUCKET.getByName(bucketName(execution.bucket)).redrive(execution.bucket, {
    executionId: execution.id,
    jobId: job.id,
    tenant,
    occurrenceAt: execution.dueAt,
    attempts: execution.attempts,
    recordStatus: execution.status,
    job: { specJson: job.spec, recurring: job.cron !== null, status: job.status === "paused" ? "paused" : "active" },
  });
  if (!result.ok) throw new ApiError(409, result.code, RESULT_MESSAGES[result.code]!, "id");
  return c.json({ ...presentExecution(execution, undefined, "scheduled"), redriven: true }, 202);
});

// --- metrics --------------------------------------------------------------------------------

async function gatherMetrics(c: Context<ApiEnv>) {
  const config = configOf(c.env);
  const parts: BucketMetrics[] = await Promise.all(
    Array.from({ length: config.BUCKETS }, (_, k) => c.env.BUCKET.getByName(bucketName(k)).metrics()),
  );
  return summarize(parts, c.get("tenant"));
}

app.get("/v1/metrics", async (c) => c.json(await gatherMetrics(c)));

app.get("/metrics", async (c) => {
  c.header("content-type", "text/plain; version=0.0.4; charset=utf-8");
  return c.body(toPrometheus(await gatherMetrics(c)));
});

// --- helpers --------------------------------------------------------------------------------

function notFound(what: string): ApiError {
  // another tenant's id is indistinguishable from a missing one
  return new ApiError(404, "not_found", `${what} not found`, "id");
}

const TERMINAL = new Set(["succeeded", "dead", "canceled"]);

/** D1 lags the bucket by up to the mirror delay; non-terminal rows are read live. */
async function liveStatuses(
  c: Context<ApiEnv>,
  bucket: number,
  rows: { id: string; status: string }[],
): Promise<Record<string, string>> {
  const ids = rows.filter((r) => !TERMINAL.has(r.status) && r.status !== "pending").map((r) => r.id);
  if (ids.length === 0) return {};
  try {
    const live = await c.env.BUCKET.getByName(bucketName(bucket)).inspect(ids);
    return Object.fromEntries(Object.entries(live).map(([id, v]) => [id, v.status]));
  } catch {
    return {};
  }
}

async function liveStatus(c: Context<ApiEnv>, bucket: number, row: { id: string; status: string }): Promise<string | undefined> {
  return (await liveStatuses(c, bucket, [row]))[row.id];
}
