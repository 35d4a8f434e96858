/** The HTTP API (Hono). Every /v1 route and /metrics need a bearer key; /healthz does not. */
import { type Context, Hono } from "hono";
import { bodyLimit } from "hono/body-limit";
import { type ActionState, BULK_JOB_KINDS, type BulkKind, bulkActionName, type Selector } from "../actions/bulk-action";
import { type AlertTarget, alertsOf } from "../alerts/alerts";
import { executionOfArchived, findArchived, listArchive, r2CursorOf, tenantPrefix } from "../archive/archive";
import { type Config, configOf } from "../config";
import { MAX_BUCKET } from "../consumer/message";
import { DIGEST_INTERVAL_MS, DIGEST_MAX_LISTED } from "../core/alert";
import { newId } from "../core/id";
import { isPullTarget, parseSpec } from "../core/job";
import { parseJsonBytes } from "../core/json-text";
import { type BucketMetrics, summarize, toPrometheus } from "../core/metrics";
import { isOriginKey, ORIGIN_KEY_PREFIX } from "../core/origin-key";
import { decodePullToken, encodePullToken } from "../core/pull";
import type { DeliveryOutcome } from "../core/response";
import { attemptTraceHeaders, type TraceContext, traceOfHeaders } from "../core/trace";
import { toRfc3339 } from "../core/when";
import type { JobRow } from "../db/schema";
import {
  checkShardCount,
  describeFailure,
  highestBucketOfAll,
  ShardsFull,
  ShardsLowered,
  ShardUnavailable,
  shardOfOrNull,
  shardsOf,
} from "../db/shards";
import { type FlowKeyControl, type FlowKeyView, flowKeyOf, originKeyControl } from "../flow/flow-key";
import { bucketObject, objectOf } from "../placement";
import { type PullLease, pullQueueOf } from "../pull/pull-queue";
import { requireApiKey } from "./auth";
import type { ApiEnv } from "./context";
import { alertTargetOf, createJobs, type PreparedJob, prepareJob } from "./create";
import { submitDebounced } from "./debounce";
import { ApiError, errorBody, fieldPath, fromZodError, respondError } from "./errors";
import { type ChangeResult, cancelJob, type Deps, patchJob, pauseJob, redriveExecution, resumeJob } from "./job-changes";
import { openApiDocument } from "./openapi";
import { decodeCursor, encodeCursor, presentExecution, presentExecutionWithAttempts, presentJob, viewOfDeadLetter } from "./present";
import {
  executionsOfJob,
  findExecution,
  jobOf,
  listDeadPage,
  listExecutionsOfJobPage,
  listExecutionsPage,
  listFlowKeysOfAll,
  listJobsPage,
  shardGauges,
} from "./read-model";
import type { ActionView, FlowKeyView as FlowKeyResponse, PullLeaseView } from "./responses";
import {
  AlertTargetInput,
  ArchiveObjectQuery,
  BulkJobsInput,
  BulkRedriveInput,
  CreateJobBatchInput,
  FlowKeyName,
  FlowLimitsInput,
  ListArchiveQuery,
  ListDeadQuery,
  ListExecutionsQuery,
  ListJobsQuery,
  MAX_JSON_DEPTH,
  PullFailInput,
  PullLeaseInput,
  PullQueueName,
} from "./schemas";

const SINGLE_BODY_BYTES = 128 * 1024;
const BATCH_BODY_BYTES = 16 * 1024 * 1024;

export const app = new Hono<ApiEnv>();

app.onError((error, c) => {
  if (error instanceof ApiError) return respondError(c, error);
  // no shard has room for new jobs: 507, naming them and what to do
  if (error instanceof ShardsFull) {
    console.error(error);
    return respondError(c, new ApiError(507, "shards_full", error.message));
  }
  // a shard that did not answer: only what needs it fails, with a 503 naming it
  if (error instanceof ShardUnavailable || error instanceof ShardsLowered) {
    // the cause (D1's text: SQL, parameters) is logged, never answered
    console.error(describeFailure(error));
    const code = error instanceof ShardsLowered ? "shards_lowered" : "shard_unavailable";
    return respondError(c, new ApiError(503, code, error.message, null, { "retry-after": "1" }));
  }
  console.error("unhandled API error", error);
  return c.json(errorBody("internal", "internal error; nothing you sent was lost"), 500);
});
app.notFound((c) => {
  const allowed = methodsAllowedOn(c.req.path);
  if (allowed.length === 0) return c.json(errorBody("not_found", `no route ${c.req.method} ${c.req.path}`), 404);
  c.header("allow", allowed.join(", "));
  return c.json(
    errorBody("method_not_allowed", `${c.req.method} is not allowed on ${c.req.path}; use ${allowed.join(", ")}`, "method"),
    405,
  );
});

app.get("/healthz", (c) => c.json({ ok: true }));
app.get("/openapi.json", (c) => c.json(openApiDocument()));

app.use("/v1/*", requireApiKey);
app.use("/metrics", requireApiKey);
// fewer shards bound than the deployment has had would strand jobs: every request is refused until they are back
app.use("/v1/*", async (c, next) => {
  await checkShardCount(shardsOf(c.env));
  await next();
});
app.use("/metrics", async (c, next) => {
  await checkShardCount(shardsOf(c.env));
  await next();
});

const limit = (maxSize: number) =>
  bodyLimit({
    maxSize,
    onError: () => {
      throw new ApiError(413, "payload_too_large", `the request body is larger than ${maxSize} bytes`, "body");
    },
  });

/**
 * A JSON request body, read as bytes so nothing is lost before validation: a media type other
 * than JSON is a 415 (an absent one is read as JSON), bytes that are not UTF-8 or not JSON are a
 * 400, and values that cannot be kept as sent come back as markers validation refuses by field.
 */
async function readJson(c: Context<ApiEnv>, options: { emptyIs?: unknown } = {}): Promise<unknown> {
  const type = c.req.header("content-type");
  if (type !== undefined && !isJsonMediaType(type)) {
    throw new ApiError(
      415,
      "unsupported_media_type",
      `send the body as application/json (UTF-8), not ${type.slice(0, 100)}`,
      "content-type",
    );
  }
  const bytes = new Uint8Array(await c.req.arrayBuffer());
  if (bytes.byteLength === 0 && "emptyIs" in options) return options.emptyIs;
  const parsed = parseJsonBytes(bytes, MAX_JSON_DEPTH);
  if (parsed.ok) return parsed.value;
  if (parsed.problem === "not_json") throw new ApiError(400, "invalid_json", "the request body is not valid JSON", "body");
  if (parsed.problem === "not_utf8") throw new ApiError(400, "invalid_body", "the request body is not valid UTF-8", "body");
  const field = fieldPath(parsed.path) || "body";
  throw new ApiError(400, "invalid_field", `${field}: must not nest deeper than ${MAX_JSON_DEPTH} levels`, field);
}

/** application/json or application/*+json, in UTF-8 (the only charset JSON has, RFC 8259). */
function isJsonMediaType(header: string): boolean {
  const [essence = "", ...parameters] = header.split(";").map((p) => p.trim().toLowerCase());
  const json = essence === "application/json" || /^application\/[a-z0-9.+-]+\+json$/.test(essence);
  const charset = parameters
    .find((p) => p.startsWith("charset="))
    ?.slice("charset=".length)
    .replace(/"/g, "");
  return json && (charset === undefined || charset === "utf-8" || charset === "utf8");
}

/** The Idempotency-Key header, if sent: 1 to 200 characters of well-formed text. */
/** The create request's W3C trace context: its jobs belong to that trace (an invalid one is ignored, as the spec says). */
function traceHeaders(c: Context<ApiEnv>): TraceContext | null {
  return traceOfHeaders(c.req.header("traceparent"), c.req.header("tracestate"));
}

function idempotencyKeyHeader(c: Context<ApiEnv>): string | undefined {
  const key = c.req.header("idempotency-key");
  if (key !== undefined && (key.length === 0 || key.length > 200 || !key.isWellFormed())) {
    throw new ApiError(400, "invalid_field", "Idempotency-Key must be 1 to 200 characters", "Idempotency-Key");
  }
  return key;
}

/** The query of a list route: each parameter at most once (a repeated one is ambiguous, so refused). */
function singleQuery(c: Context<ApiEnv>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, values] of Object.entries(c.req.queries())) {
    if (values.length > 1) throw new ApiError(400, "invalid_field", `${name} is given ${values.length} times; give it once`, name);
    out[name] = values[0]!;
  }
  return out;
}

// --- jobs ----------------------------------------------------------------------------------

app.post("/v1/jobs", limit(SINGLE_BODY_BYTES), async (c) => {
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

app.post("/v1/jobs/batch", limit(BATCH_BODY_BYTES), async (c) => {
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

app.get("/v1/jobs", async (c) => {
  const query = ListJobsQuery.safeParse(singleQuery(c));
  if (!query.success) throw fromZodError(query.error);
  const cursor = cursorOf(query.data.cursor);
  const { status, label, name, url, limit } = query.data;
  const { page, next } = await listJobsPage(c.env, c.get("tenant"), { status, label, name, url }, cursor?.id, limit);
  const now = Date.now();
  return c.json({ jobs: page.map((j) => presentJob(j, now)), nextCursor: next === null ? null : encodeCursor(0, next) });
});

app.get("/v1/jobs/:id", async (c) => {
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
app.delete("/v1/jobs/:id", (c) => changeJob(c, cancelJob));
app.post("/v1/jobs/:id/pause", (c) => changeJob(c, pauseJob));
app.post("/v1/jobs/:id/resume", (c) => changeJob(c, resumeJob));
app.patch("/v1/jobs/:id", limit(SINGLE_BODY_BYTES), async (c) => {
  const body = await readJson(c);
  return changeJob(c, (deps, job) => patchJob(deps, job, body));
});

app.get("/v1/jobs/:id/executions", async (c) => {
  const job = await jobOf(c.env, c.get("tenant"), c.req.param("id"));
  if (!job) throw notFound("job");
  const views = await executionsOfJob(c.env, job, 100);
  const traced = parseSpec(job.spec).trace !== undefined;
  return c.json({ executions: views.map((v) => presentExecutionWithAttempts(v, traced)) });
});

// --- bulk actions: many jobs by ids or by a filter, in the background -----------------------

for (const kind of BULK_JOB_KINDS) {
  app.post(`/v1/jobs/${kind}`, limit(SINGLE_BODY_BYTES), async (c) => {
    const parsed = BulkJobsInput.safeParse(await readJson(c));
    if (!parsed.success) throw fromZodError(parsed.error);
    const { ids, filter } = parsed.data;
    return startAction(c, kind, ids ? { ids: [...new Set(ids)] } : { filter: { ...filter } });
  });
}

app.post("/v1/dlq/redrive", limit(SINGLE_BODY_BYTES), async (c) => {
  const parsed = BulkRedriveInput.safeParse(await readJson(c));
  if (!parsed.success) throw fromZodError(parsed.error);
  const { ids, filter } = parsed.data;
  return startAction(c, "redrive", ids ? { ids: [...new Set(ids)] } : { dead: { ...filter } });
});

/** Starts a bulk action (or finds the one its Idempotency-Key started): 202 with its progress. */
async function startAction(c: Context<ApiEnv>, kind: BulkKind, selector: Selector): Promise<Response> {
  const tenant = c.get("tenant");
  const headerKey = idempotencyKeyHeader(c);
  // a key names the action: the same key again finds it (whatever it was asked to do then)
  const id =
    headerKey === undefined ? newId("act", Date.now(), crypto.getRandomValues(new Uint8Array(16))) : await actionIdOf(kind, headerKey);
  const { state, reused } = await objectOf(c.env, c.env.BULK_ACTION, bulkActionName(tenant, id)).start({
    id,
    tenant,
    kind,
    selector,
    now: Date.now(),
  });
  if (reused) {
    throw new ApiError(
      409,
      "idempotency_key_reused",
      `Idempotency-Key started action ${id} with another selection; use a new key`,
      "Idempotency-Key",
    );
  }
  c.header("location", `/v1/actions/${id}`);
  return c.json(presentAction(state), 202);
}

app.get("/v1/actions/:id", async (c) => {
  const id = c.req.param("id");
  if (!/^act_[0-9a-z]{26}$/.test(id)) throw notFound("action");
  const state = await objectOf(c.env, c.env.BULK_ACTION, bulkActionName(c.get("tenant"), id)).view();
  if (!state) throw notFound("action");
  return c.json(presentAction(state));
});

/** A selector's filter as the request spelled it. */
function filterOf(selector: Exclude<Selector, { ids: string[] }>): Record<string, string> {
  if ("dead" in selector) return { ...selector.dead };
  const { status, label } = selector.filter;
  return { ...(status ? { status } : {}), ...(label ? { label: `${label.key}:${label.value}` } : {}) };
}

/** An action id from an Idempotency-Key: per tenant (the object's name holds the tenant) and kind. */
async function actionIdOf(kind: string, key: string): Promise<string> {
  const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(`${kind}\n${key}`)));
  return newId("act", 0, digest.slice(0, 16));
}

function presentAction(state: ActionState): ActionView {
  const { selector } = state;
  return {
    id: state.id,
    kind: state.kind,
    status: state.status,
    ...("ids" in selector ? { ids: selector.ids.length } : { filter: filterOf(selector) }),
    matched: state.matched,
    done: state.done,
    failed: state.failed,
    failures: state.failures,
    createdAt: toRfc3339(state.createdAt),
    finishedAt: toRfc3339(state.finishedAt),
  };
}

// --- flow control: one key of the caller's tenant ------------------------------------------

/** The tenant's alert target (docs/alerts.md): its dead executions, as signed digests. */
app.put("/v1/alerts", limit(SINGLE_BODY_BYTES), async (c) => {
  const parsed = AlertTargetInput.safeParse(await readJson(c));
  if (!parsed.success) throw fromZodError(parsed.error);
  const tenant = c.get("tenant");
  const target = alertTargetOf(parsed.data, { config: configOf(c.env), tenant });
  await alertsOf(c.env, tenant).setTarget(tenant, target);
  return c.json(presentAlertTarget(target));
});
app.get("/v1/alerts", async (c) => {
  const target = await alertsOf(c.env, c.get("tenant")).target();
  if (!target) throw new ApiError(404, "not_found", "no alert target is set", null);
  return c.json(presentAlertTarget(target));
});
app.delete("/v1/alerts", async (c) => {
  await alertsOf(c.env, c.get("tenant")).setTarget(c.get("tenant"), null);
  return c.body(null, 204);
});

function presentAlertTarget(target: AlertTarget) {
  return { ...target, digestIntervalMs: DIGEST_INTERVAL_MS, digestMaxListed: DIGEST_MAX_LISTED };
}

app.get("/v1/flow-control/:key", async (c) => c.json(presentFlowKey(c.req.param("key"), await flowKeyStub(c).view())));
app.post("/v1/flow-control/:key/pause", async (c) => c.json(presentFlowKey(c.req.param("key"), await flowKeyStub(c).setPaused(true))));
app.post("/v1/flow-control/:key/resume", async (c) => c.json(presentFlowKey(c.req.param("key"), await flowKeyStub(c).setPaused(false))));
app.patch("/v1/flow-control/:key", limit(SINGLE_BODY_BYTES), async (c) => {
  const parsed = FlowLimitsInput.safeParse(await readJson(c));
  if (!parsed.success) throw fromZodError(parsed.error);
  const { rate, periodSeconds, parallelism } = parsed.data;
  const change = {
    ...(rate === undefined ? {} : { rate }),
    ...(parallelism === undefined ? {} : { parallelism }),
    ...(periodSeconds === undefined ? {} : { periodMs: periodSeconds * 1_000 }),
  };
  return c.json(presentFlowKey(c.req.param("key"), await flowKeyStub(c).changeLimits(change)));
});

/** A key of the caller's tenant: a job's own, or an origin's as encodeURIComponent("origin:https://api.example.com") spells it. */
function flowKeyStub(c: Context<ApiEnv>): FlowKeyControl {
  const name = c.req.param("key") ?? "";
  if (name.startsWith(ORIGIN_KEY_PREFIX)) {
    if (isOriginKey(name)) return originKeyControl(c.env, c.get("tenant"), name, configOf(c.env).ORIGIN_PARALLELISM);
    throw new ApiError(
      400,
      "invalid_field",
      `key: an origin key is "${ORIGIN_KEY_PREFIX}" and an origin: scheme://host[:port], lower case, no path, no default port`,
      "key",
    );
  }
  const key = FlowKeyName.safeParse(name);
  if (!key.success) throw fromZodError(key.error, "key");
  return flowKeyOf(c.env, c.get("tenant"), key.data);
}

function presentFlowKey(key: string, view: FlowKeyView): FlowKeyResponse {
  return {
    key,
    limits: {
      rate: view.limits.rate,
      periodSeconds: view.limits.periodMs / 1_000,
      parallelism: view.limits.parallelism,
      from: view.limitsFrom,
    },
    paused: view.paused,
    throttledUntil: view.throttledUntil === null ? null : new Date(view.throttledUntil).toISOString(),
    inFlight: view.inFlight,
    waiting: view.waiting,
    currentRate: view.currentRate,
    grantedTotal: view.grantedTotal,
    throttledTotal: view.throttledTotal,
  };
}

// --- executions and the dead-letter list ----------------------------------------------------

/**
 * A tenant's executions newest first (by id: an occurrence's carries its due time, a one-off's its
 * job's creation), filtered, by cursor. Without jobId: what D1 holds, every one-off job's execution
 * (pending until its outcome reaches D1) and recurring jobs' finished occurrences; with jobId, the
 * job's bucket adds its live executions, as GET /v1/jobs/:id/executions does. Each source is a
 * bounded range scan (queries.ts SCAN_ROWS), so a page may be short, with a cursor. Cost in D1 rows
 * read (meta.rows_read, measured in test/integration/executions-list.test.ts): a full page about
 * limit + 1 a source (51 for 50); a page whose filter matches nothing at most 2 × SCAN_ROWS = 1,000
 * a source, plus one a key examined for a label or url on occurrences. It writes nothing.
 */
app.get("/v1/executions", async (c) => {
  const query = ListExecutionsQuery.safeParse(singleQuery(c));
  if (!query.success) throw fromZodError(query.error);
  const { cursor, limit, jobId, ...filter } = query.data;
  const cursorId = cursorOf(cursor)?.id;
  if (cursorId !== undefined && !/^exe_[0-9a-z]{26}$/.test(cursorId)) throw badCursor();
  const tenant = c.get("tenant");
  const { page, next } =
    jobId === undefined
      ? await listExecutionsPage(c.env, tenant, filter, cursorId, limit)
      : await listExecutionsOfJobPage(c.env, tenant, jobId, filter, cursorId, limit);
  return c.json({ executions: page.map(presentExecution), nextCursor: next === null ? null : encodeCursor(0, next) });
});

app.get("/v1/executions/:id", async (c) => {
  const id = c.req.param("id");
  const view = await findExecution(c.env, c.get("tenant"), configOf(c.env).BUCKETS, id);
  if (view) return c.json(presentExecution(view));
  // D1 no longer has it: the archive may (one R2 list per 1,000 objects of its hour, one read)
  const archived = c.env.ARCHIVE && /^exe_[0-9a-z]{26}$/.test(id) ? await findArchived(c.env.ARCHIVE, c.get("tenant"), id) : undefined;
  if (!archived) throw notFound("execution");
  return c.json({ ...executionOfArchived(archived.execution), archived: true as const, archiveKey: archived.key });
});

/** The tenant's archive objects (docs/deploying.md, "History archive"), in time order: one R2 list a page. */
app.get("/v1/archive", async (c) => {
  const query = ListArchiveQuery.safeParse(singleQuery(c));
  if (!query.success) throw fromZodError(query.error);
  if (query.data.cursor !== undefined && r2CursorOf(query.data.cursor) === null) throw badCursor();
  const bucket = archiveOf(c.env);
  try {
    return c.json(await listArchive(bucket, c.get("tenant"), query.data));
  } catch (error) {
    // R2 refuses a cursor it did not hand out
    if (query.data.cursor === undefined) throw error;
    throw badCursor();
  }
});

/** One archive object of the tenant, as stored (gzip NDJSON): one R2 read. */
app.get("/v1/archive/object", async (c) => {
  const query = ArchiveObjectQuery.safeParse(singleQuery(c));
  if (!query.success) throw fromZodError(query.error);
  const { key } = query.data;
  const bucket = archiveOf(c.env);
  // another tenant's object is indistinguishable from a missing one
  const object = key.startsWith(tenantPrefix(c.get("tenant"))) ? await bucket.get(key) : null;
  if (!object) throw new ApiError(404, "not_found", "archive object not found", "key");
  return c.body(object.body, 200, { "content-type": "application/gzip", "content-length": String(object.size) });
});

app.get("/v1/dlq", async (c) => {
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

/**
 * Redrive: a dead one-off job becomes active again (a new job version); a recurring job's dead
 * occurrence is handed to its bucket with a fresh budget. Both converge through the sync pass.
 */
app.post("/v1/executions/:id/redrive", async (c) => {
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

// --- pull workers ---------------------------------------------------------------------------

/**
 * A worker leases executions of one of its tenant's pull queues: the queue's object asks their
 * buckets, oldest first, and with nothing to lease holds the request up to waitMs (long
 * polling). Each lease is the bucket's, fenced like the consumer's (invariant 3).
 */
app.post("/v1/pull/:queue/lease", limit(SINGLE_BODY_BYTES), async (c) => {
  const queue = PullQueueName.safeParse(c.req.param("queue"));
  if (!queue.success) throw fromZodError(queue.error, "queue");
  const input = PullLeaseInput.safeParse(await readJson(c, { emptyIs: {} }));
  if (!input.success) throw fromZodError(input.error);
  const tenant = c.get("tenant");
  const leases = await pullQueueOf(c.env, tenant, queue.data).lease({ tenant, queue: queue.data, ...input.data });
  return c.json({ leases: leases.map(presentPullLease) });
});

app.get("/v1/pull/:queue", async (c) => {
  const queue = PullQueueName.safeParse(c.req.param("queue"));
  if (!queue.success) throw fromZodError(queue.error, "queue");
  const view = await pullQueueOf(c.env, c.get("tenant"), queue.data).view();
  return c.json({
    queue: queue.data,
    waiting: view.waiting,
    oldestDueAt: view.oldestDueAt === null ? null : toRfc3339(view.oldestDueAt),
    pollers: view.pollers,
  });
});

app.post("/v1/pull/leases/:token/heartbeat", async (c) => {
  const { stub, ref } = pullLeaseOf(c);
  const [result] = await stub.heartbeat([ref]);
  if (!result?.ok) throw staleLease();
  return c.json({
    executionId: result.executionId,
    leaseDeadlineAt: toRfc3339(result.leaseDeadlineAt),
    canceled: result.canceled === true,
  });
});

app.post("/v1/pull/leases/:token/complete", limit(SINGLE_BODY_BYTES), (c) =>
  reportPull(c, pullLeaseOf(c), { kind: "succeeded", httpStatus: null, excerpt: "" }),
);

app.post("/v1/pull/leases/:token/fail", limit(SINGLE_BODY_BYTES), async (c) => {
  const lease = pullLeaseOf(c); // the token first: a bad one is named before the body
  const input = PullFailInput.safeParse(await readJson(c, { emptyIs: {} }));
  if (!input.success) throw fromZodError(input.error);
  const { retryable, error, retryAfterMs } = input.data;
  return reportPull(c, lease, {
    kind: "failed",
    failure: retryable ? "retryable" : "permanent",
    httpStatus: null,
    error: `the pull worker failed: ${error ?? (retryable ? "no reason given" : "permanent failure, no reason given")}`,
    ...(retryAfterMs === undefined ? {} : { retryAfterMs }),
  });
});

/** A pull worker's report on its lease, recorded by the bucket as the consumer's is (fenced). */
async function reportPull(c: Context<ApiEnv>, { stub, ref }: ReturnType<typeof pullLeaseOf>, outcome: DeliveryOutcome) {
  const [result] = await stub.complete([{ ...ref, outcome }]);
  if (!result?.ok) throw staleLease();
  return c.json({ executionId: result.executionId, status: result.status });
}

/** The bucket and lease a worker's token names, checked against the caller's tenant by the bucket. */
function pullLeaseOf(c: Context<ApiEnv>) {
  const decoded = decodePullToken(c.req.param("token") ?? "");
  // a bucket number beyond any the consumer accepts would make its object exist just to answer no
  if (!decoded || decoded.bucket >= MAX_BUCKET)
    throw new ApiError(400, "invalid_field", "token: not a lease token this API handed out", "token");
  const stub = bucketObject(c.env, decoded.bucket);
  return { stub, ref: { executionId: decoded.executionId, token: decoded.token, tenant: c.get("tenant") } };
}

function staleLease(): ApiError {
  return new ApiError(
    409,
    "stale_lease",
    "the lease is no longer yours: it expired (the execution may run again elsewhere) or was already reported",
    "token",
  );
}

function presentPullLease({ bucket, grant }: PullLease): PullLeaseView {
  const payload = isPullTarget(grant.target) && grant.target.payload !== null ? JSON.parse(grant.target.payload) : null;
  return {
    token: encodePullToken({ bucket, executionId: grant.executionId, token: grant.token }),
    executionId: grant.executionId,
    jobId: grant.jobId,
    attempt: grant.attempt,
    dueAt: toRfc3339(grant.dueAt),
    leaseDeadlineAt: toRfc3339(grant.leaseDeadlineAt),
    payload,
    ...((grant.trace && attemptTraceHeaders(grant.trace, grant.executionId, grant.attempt)) || {}),
  };
}

// --- metrics --------------------------------------------------------------------------------

/** Every bucket any job names, even beyond a lowered BUCKETS (the metrics read them all). */
async function bucketsOfMetrics(env: Env): Promise<number> {
  return Math.max(configOf(env).BUCKETS, (await highestBucketOfAll(env)) + 1);
}

async function gatherMetrics(c: Context<ApiEnv>, buckets: number) {
  const parts: BucketMetrics[] = await Promise.all(Array.from({ length: buckets }, (_, k) => bucketObject(c.env, k).metrics()));
  return summarize(parts, c.get("tenant"));
}

/** Flow-control keys a metrics read lists, of the caller's tenant: each costs one request to its object. */
const METRICS_FLOW_KEYS = { json: 100, prometheus: 1_000 } as const;

/**
 * The caller's flow-control keys (D1's registry, in key order, at most `limit`), each key's view
 * read from its object in parallel. A key whose object fails is shown as unreadable, never a 500.
 */
async function readFlowKeys(
  c: Context<ApiEnv>,
  limit: number,
): Promise<{ tenant: string; keys: { key: string; view: FlowKeyView | null }[]; truncated: boolean; listFailed: boolean }> {
  const tenant = c.get("tenant");
  let listed: string[];
  try {
    listed = await listFlowKeysOfAll(c.env, tenant, limit + 1);
  } catch (error) {
    // the buckets' metrics still answer: a D1 outage must not take them down with the key list
    console.error("listing flow keys for the metrics failed", error);
    return { tenant, keys: [], truncated: false, listFailed: true };
  }
  const keys = await Promise.all(
    listed.slice(0, limit).map((key) =>
      flowKeyOf(c.env, tenant, key)
        .view()
        .then(
          (view) => ({ key, view }),
          (error: unknown) => {
            console.error(`reading flow key ${key} for the metrics failed`, error);
            return { key, view: null };
          },
        ),
    ),
  );
  return { tenant, keys, truncated: listed.length > limit, listFailed: false };
}

app.get("/v1/metrics", async (c) => {
  const buckets = await bucketsOfMetrics(c.env);
  const [summary, flow, shards] = await Promise.all([
    gatherMetrics(c, buckets),
    readFlowKeys(c, METRICS_FLOW_KEYS.json),
    shardGauges(c.env, buckets),
  ]);
  const keys = flow.keys.map(({ key, view }) =>
    view ? presentFlowKey(key, view) : { key, ...errorBody("unavailable", "the key's object did not answer; read it again") },
  );
  const listError = flow.listFailed ? errorBody("unavailable", "the flow-control keys could not be listed; read again") : {};
  return c.json({ ...summary, d1_shards: shards, flowControl: { keys, truncated: flow.truncated, ...listError } });
});

app.get("/metrics", async (c) => {
  const buckets = await bucketsOfMetrics(c.env);
  const [summary, flow, shards] = await Promise.all([
    gatherMetrics(c, buckets),
    readFlowKeys(c, METRICS_FLOW_KEYS.prometheus),
    shardGauges(c.env, buckets),
  ]);
  c.header("content-type", "text/plain; version=0.0.4; charset=utf-8");
  return c.body(toPrometheus(summary, flow, shards));
});

// --- helpers --------------------------------------------------------------------------------

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

let routeMethods: { pattern: RegExp; method: string }[] | undefined;

/** The methods the routes serve on a path (Hono answers HEAD with GET's handler). */
function methodsAllowedOn(path: string): string[] {
  routeMethods ??= app.routes
    .filter((r) => r.method !== "ALL")
    .map((r) => ({ pattern: new RegExp(`^${r.path.replace(/:[^/]+/g, "[^/]+")}$`), method: r.method }));
  const methods = new Set(routeMethods.filter((r) => r.pattern.test(path)).map((r) => r.method));
  if (methods.has("GET")) methods.add("HEAD");
  return [...methods].sort();
}

/** A list's cursor as the request gave it (undefined: the first page); one this API did not hand out is a 400. */
function cursorOf(cursor: string | undefined): { at: number; id: string } | undefined {
  if (cursor === undefined) return undefined;
  const decoded = decodeCursor(cursor);
  if (decoded === null) throw badCursor();
  return decoded;
}

function badCursor(): ApiError {
  return new ApiError(400, "invalid_field", "cursor is not one this API returned", "cursor");
}

/** The archive bucket; a deployment without one answers 404 naming the setting. */
function archiveOf(env: Env): R2Bucket {
  if (!env.ARCHIVE)
    throw new ApiError(404, "archive_not_configured", "this deployment has no history archive (bind an R2 bucket as ARCHIVE)");
  return env.ARCHIVE;
}

function notFound(what: string): ApiError {
  // another tenant's id is indistinguishable from a missing one
  return new ApiError(404, "not_found", `${what} not found`, "id");
}
