/**
 * The OpenAPI 3.1 document, generated from the zod schemas the routes validate with (schemas.ts)
 * and answer with (responses.ts). Routes are registered here, beside the Hono routes rather than
 * through @hono/zod-openapi, because that package's validators would replace the API's own body
 * reading (bytes first: 415 for a foreign media type, 400 for bytes that are not UTF-8, depth and
 * lone-surrogate checks before parsing) and its one error envelope. A test holds the two route
 * lists equal, and `npm run openapi` writes the committed openapi.json that another test compares.
 */
import { OpenAPIRegistry, OpenApiGeneratorV31, type ResponseConfig, type RouteConfig } from "@asteasolutions/zod-to-openapi";
import { z } from "zod";
import {
  ActionView,
  AlertTargetView,
  ArchivedExecutionView,
  ArchiveList,
  BatchResults,
  ErrorEnvelope,
  ExecutionList,
  ExecutionView,
  FlowKeyView,
  Health,
  JobExecutions,
  JobList,
  JobView,
  JobWithLatestView,
  Metrics,
  PullHeartbeatView,
  PullLeasesView,
  PullQueueStatusView,
  PullReportView,
  RedrivenView,
} from "./responses";
import {
  AlertTargetInput,
  ArchiveObjectQuery,
  BulkJobsInput,
  BulkRedriveInput,
  CreateJobInput,
  FlowLimitsInput,
  ListArchiveQuery,
  ListDeadQuery,
  ListExecutionsQuery,
  ListJobsQuery,
  PatchJobInput,
  PullFailInput,
  PullLeaseInput,
} from "./schemas";

const json = (schema: z.ZodType, description: string): ResponseConfig => ({
  description,
  content: { "application/json": { schema } },
});

const error = (description: string): ResponseConfig => json(ErrorEnvelope, description);

/** What every route with a key may answer. */
const KEYED_ERRORS = {
  401: error("missing, malformed or unknown API key"),
  429: {
    ...error("over the key's rate limit (1000 requests per 10 s)"),
    headers: { "Retry-After": { schema: { type: "integer" }, description: "seconds to wait" } },
  },
  500: error(
    "internal: a dependency failed (D1 unavailable); nothing accepted before was lost. A create may have been stored: send it again with the same idempotency key",
  ),
  503: {
    ...error(
      "a D1 shard the request needs did not answer (`shard_unavailable`, the message names it), fewer shards are bound than the deployment has had (`shards_lowered`), or a debounced create could not be completed (`unavailable`); retry with the same idempotency key",
    ),
    headers: { "Retry-After": { schema: { type: "integer" }, description: "seconds to wait" } },
  },
} satisfies Record<number, ResponseConfig>;

/** What a create may answer when no D1 shard has room for new jobs (db/shards.ts ShardsFull). */
const FULL = error(
  "shards_full: every D1 shard is above SHARD_MAX_BYTES with live jobs (the message names them): nothing was stored; add a shard",
);

const BODY_ERRORS = {
  400: error("invalid input; `field` names the field at fault"),
  413: error("the body is larger than the route allows"),
  415: error("the body is not application/json"),
} satisfies Record<number, ResponseConfig>;

const BulkJobs = BulkJobsInput.meta({ id: "BulkJobs" });
const BulkRedrive = BulkRedriveInput.meta({ id: "BulkRedrive" });

/** A route that starts a bulk action: 202 with it (or with the one its Idempotency-Key started). */
function bulkRoute(path: string, operationId: string, what: string, body: z.ZodType): ApiRoute {
  return {
    method: "post",
    path,
    operationId,
    summary: `${what}, by ids or by a filter, in the background`,
    request: {
      headers: z.object({
        "Idempotency-Key": z.string().min(1).max(200).optional().meta({ description: "the same key again answers the same action" }),
      }),
      ...jsonBody(body),
    },
    responses: {
      202: {
        ...json(ActionView, "started (or, with a key seen before, the action it started)"),
        headers: { Location: { schema: { type: "string" } } },
      },
      ...BODY_ERRORS,
      409: error("idempotency_key_reused: the Idempotency-Key started an action with another selection"),
    },
  };
}

const changed = (what: string, refused: string) => ({
  200: json(JobView, `${what}: applied (the job's bucket holds the change)`),
  202: json(JobView, `${what}: durable and converging (the next sync pass applies it; sending it again re-sends it)`),
  404: error("no such job"),
  409: error(`${refused}, or conflict: the job changed meanwhile (read it and try again)`),
});

const jobId = z.object({ id: z.string().meta({ description: "the job's id (job_…)" }) });
const executionId = z.object({ id: z.string().meta({ description: "the execution's id (exe_…)" }) });
const flowKey = z.object({
  key: z.string().meta({
    description: "a key of yours (letters, digits and . _ : @ -) or an origin's, URL-encoded: origin%3Ahttps%3A%2F%2Fapi.example.com",
  }),
});

const jsonBody = (schema: z.ZodType, required = true) => ({
  body: { required, content: { "application/json": { schema } } },
});

const pullQueue = z.object({ queue: z.string().meta({ description: "the pull queue's name (lower case letters, digits, - and _)" }) });
const pullToken = z.object({ token: z.string().meta({ description: "a lease token from POST /v1/pull/{queue}/lease" }) });
const STALE_LEASE = error(
  "stale_lease: the lease is no longer yours (it expired, and the execution may run again elsewhere, or it was already reported); the rejection is counted",
);

const CreateJob = CreateJobInput.meta({ id: "CreateJob" });
const CreateJobBatchBody = z.strictObject({ jobs: z.array(CreateJob).min(1).max(1000) }).meta({ id: "CreateJobBatch" });

/** A route as documented; `keyed: false` routes need no API key. */
export interface ApiRoute extends Omit<RouteConfig, "responses"> {
  responses: Record<number, ResponseConfig>;
  keyed?: false;
}

/** W3C Trace Context of a create request: its jobs belong to that trace (docs/trace-context.md). */
const TRACE_HEADERS = {
  traceparent: z.string().optional().meta({
    description: "W3C traceparent: the jobs belong to this trace unless one gives trace in its body; an invalid one is ignored",
  }),
  tracestate: z.string().optional().meta({ description: "W3C tracestate, kept with traceparent" }),
};

/** Every route of the API, in the order of the README's API table. */
export const ROUTES: ApiRoute[] = [
  {
    method: "post",
    path: "/v1/jobs",
    operationId: "createJob",
    summary: "Create a job",
    request: {
      headers: z.object({
        "Idempotency-Key": z.string().min(1).max(200).optional().meta({ description: "or idempotencyKey in the body" }),
        ...TRACE_HEADERS,
      }),
      ...jsonBody(CreateJob),
    },
    responses: {
      201: json(JobView, "created"),
      200: json(
        JobView,
        "the idempotency key was seen with the same request: the original job; or debounce replaced the key's pending job (debounce.replaced) or absorbed this create (debounce.absorbed): the job that runs",
      ),
      ...BODY_ERRORS,
      409: error(
        "idempotency_key_reused: the key was used with a different request; or idempotency_job_purged: the key's job left the history and the archive does not hold it (send it with a new key)",
      ),
      507: FULL,
    },
  },
  {
    method: "post",
    path: "/v1/jobs/batch",
    operationId: "createJobs",
    summary: "Create up to 1000 jobs",
    request: { headers: z.object(TRACE_HEADERS), ...jsonBody(CreateJobBatchBody) },
    responses: { 200: json(BatchResults, "one result per job, in request order"), ...BODY_ERRORS, 507: FULL },
  },
  {
    method: "get",
    path: "/v1/jobs",
    operationId: "listJobs",
    summary: "Your jobs, newest first; with status, name or url a page may be short: follow nextCursor",
    request: { query: ListJobsQuery },
    responses: { 200: json(JobList, "a page; follow nextCursor"), 400: BODY_ERRORS[400] },
  },
  {
    method: "get",
    path: "/v1/jobs/{id}",
    operationId: "getJob",
    summary: "A job with its latest execution",
    request: { params: jobId },
    responses: { 200: json(JobWithLatestView, "the job"), 404: error("no such job") },
  },
  {
    method: "patch",
    path: "/v1/jobs/{id}",
    operationId: "updateJob",
    summary: "Change a job",
    request: { params: jobId, ...jsonBody(PatchJobInput.meta({ id: "UpdateJob" })) },
    responses: { ...changed("changed", "not_changeable: the job is canceled or completed"), ...BODY_ERRORS },
  },
  {
    method: "delete",
    path: "/v1/jobs/{id}",
    operationId: "cancelJob",
    summary: "Cancel a job",
    request: { params: jobId },
    responses: changed("canceled", "the job already ended (completed)"),
  },
  {
    method: "post",
    path: "/v1/jobs/{id}/pause",
    operationId: "pauseJob",
    summary: "Pause a recurring job",
    request: { params: jobId },
    responses: changed("paused", "not_recurring (a one-off job), or the job is not active"),
  },
  {
    method: "post",
    path: "/v1/jobs/{id}/resume",
    operationId: "resumeJob",
    summary: "Resume a paused recurring job",
    request: { params: jobId },
    responses: changed("resumed", "not_recurring (a one-off job), or the job is not paused"),
  },
  ...(["cancel", "pause", "resume"] as const).map((kind) =>
    bulkRoute(`/v1/jobs/${kind}`, `${kind}Jobs`, `${kind[0]!.toUpperCase()}${kind.slice(1)} many jobs`, BulkJobs),
  ),
  bulkRoute("/v1/dlq/redrive", "redriveDeadExecutions", "Redrive many dead executions", BulkRedrive),
  {
    method: "get",
    path: "/v1/actions/{id}",
    operationId: "getAction",
    summary: "A bulk action's progress",
    request: { params: z.object({ id: z.string().meta({ description: "act_…" }) }) },
    responses: { 200: json(ActionView, "the action"), 404: error("no such action") },
  },
  {
    method: "get",
    path: "/v1/jobs/{id}/executions",
    operationId: "listJobExecutions",
    summary: "A job's executions, latest first, with their attempts",
    request: { params: jobId },
    responses: { 200: json(JobExecutions, "at most 100 executions"), 404: error("no such job") },
  },
  {
    method: "get",
    path: "/v1/executions",
    operationId: "listExecutions",
    summary:
      "Your executions, newest first, filtered: one-off jobs' and finished occurrences (with jobId, the job's live ones too); a page may be short, follow nextCursor",
    request: { query: ListExecutionsQuery },
    responses: { 200: json(ExecutionList, "a page; follow nextCursor"), 400: BODY_ERRORS[400] },
  },
  {
    method: "get",
    path: "/v1/executions/{id}",
    operationId: "getExecution",
    summary: "One execution",
    request: { params: executionId },
    responses: {
      200: json(
        z.union([ExecutionView, ArchivedExecutionView]),
        "the execution; once D1 no longer holds it, from the history archive (`archived: true`; one R2 list per 1,000 objects of its hour, and one read)",
      ),
      404: error("no such execution"),
    },
  },
  {
    method: "get",
    path: "/v1/archive",
    operationId: "listArchive",
    summary: "The tenant's history archive objects (gzip NDJSON, one line per execution), in time order",
    request: { query: ListArchiveQuery },
    responses: {
      200: json(ArchiveList, "a page; follow nextCursor"),
      400: BODY_ERRORS[400],
      404: error("archive_not_configured: no R2 bucket is bound as ARCHIVE"),
    },
  },
  {
    method: "get",
    path: "/v1/archive/object",
    operationId: "getArchiveObject",
    summary: "One archive object of the tenant, as stored (application/gzip)",
    request: { query: ArchiveObjectQuery },
    responses: {
      200: {
        description: "the object: gzip-compressed NDJSON",
        content: { "application/gzip": { schema: { type: "string", format: "binary" } } },
      },
      400: BODY_ERRORS[400],
      404: error("no such object of the tenant, or archive_not_configured"),
    },
  },
  {
    method: "post",
    path: "/v1/executions/{id}/redrive",
    operationId: "redriveExecution",
    summary: "Run a dead execution again with a fresh attempt budget",
    request: { params: executionId },
    responses: {
      202: json(RedrivenView, "redriven"),
      404: error("no such execution"),
      409: error(
        "not_dead, job_canceled, job_inactive, or conflict (the job changed meanwhile); or the bucket's refusal: duplicate, unknown, not_due",
      ),
    },
  },
  {
    method: "get",
    path: "/v1/dlq",
    operationId: "listDeadExecutions",
    summary: "Dead executions, latest first",
    request: { query: ListDeadQuery },
    responses: { 200: json(ExecutionList, "a page; follow nextCursor"), 400: BODY_ERRORS[400] },
  },
  {
    method: "put",
    path: "/v1/alerts",
    operationId: "setAlertTarget",
    summary:
      "Set the tenant's alert target: its dead executions and (with throttledForMs) its throttled flow keys, as signed digests (docs/alerts.md)",
    request: { ...jsonBody(AlertTargetInput) },
    responses: { 200: json(AlertTargetView, "the alert target"), ...BODY_ERRORS },
  },
  {
    method: "get",
    path: "/v1/alerts",
    operationId: "getAlertTarget",
    summary: "The tenant's alert target",
    responses: { 200: json(AlertTargetView, "the alert target"), 404: error("no alert target is set") },
  },
  {
    method: "delete",
    path: "/v1/alerts",
    operationId: "deleteAlertTarget",
    summary: "Remove the tenant's alert target (deaths waiting for a digest are dropped)",
    responses: { 204: { description: "removed (or there was none)" } },
  },
  {
    method: "get",
    path: "/v1/flow-control/{key}",
    operationId: "getFlowKey",
    summary: "A flow-control key",
    request: { params: flowKey },
    responses: { 200: json(FlowKeyView, "the key"), 400: BODY_ERRORS[400] },
  },
  {
    method: "patch",
    path: "/v1/flow-control/{key}",
    operationId: "updateFlowKey",
    summary: "Change a key's limits live (null lifts one)",
    request: { params: flowKey, ...jsonBody(FlowLimitsInput.meta({ id: "FlowLimits" })) },
    responses: { 200: json(FlowKeyView, "the key"), ...BODY_ERRORS },
  },
  {
    method: "post",
    path: "/v1/flow-control/{key}/pause",
    operationId: "pauseFlowKey",
    summary: "Stop starting the key's executions",
    request: { params: flowKey },
    responses: { 200: json(FlowKeyView, "the key"), 400: BODY_ERRORS[400] },
  },
  {
    method: "post",
    path: "/v1/flow-control/{key}/resume",
    operationId: "resumeFlowKey",
    summary: "Start the key's executions again",
    request: { params: flowKey },
    responses: { 200: json(FlowKeyView, "the key"), 400: BODY_ERRORS[400] },
  },
  {
    method: "post",
    path: "/v1/pull/{queue}/lease",
    operationId: "leasePull",
    summary: "A pull worker leases due executions of a pull queue (long polling with waitMs)",
    request: { params: pullQueue, ...jsonBody(PullLeaseInput.meta({ id: "PullLeaseRequest" }), false) },
    responses: {
      200: json(PullLeasesView, "the leases granted, oldest due first (none when nothing was due within waitMs)"),
      ...BODY_ERRORS,
    },
  },
  {
    method: "get",
    path: "/v1/pull/{queue}",
    operationId: "getPullQueue",
    summary: "How much waits in a pull queue",
    request: { params: pullQueue },
    responses: { 200: json(PullQueueStatusView, "the queue"), 400: BODY_ERRORS[400] },
  },
  {
    method: "post",
    path: "/v1/pull/leases/{token}/heartbeat",
    operationId: "heartbeatPullLease",
    summary: "Extend a lease by its length",
    request: { params: pullToken },
    responses: { 200: json(PullHeartbeatView, "extended"), 400: BODY_ERRORS[400], 409: STALE_LEASE },
  },
  {
    method: "post",
    path: "/v1/pull/leases/{token}/complete",
    operationId: "completePullLease",
    summary: "Report the attempt succeeded",
    request: { params: pullToken },
    responses: { 200: json(PullReportView, "recorded"), 400: BODY_ERRORS[400], 409: STALE_LEASE },
  },
  {
    method: "post",
    path: "/v1/pull/leases/{token}/fail",
    operationId: "failPullLease",
    summary: "Report the attempt failed: retried with the job's backoff, or dead when not retryable or out of attempts",
    request: { params: pullToken, ...jsonBody(PullFailInput.meta({ id: "PullFailure" }), false) },
    responses: { 200: json(PullReportView, "recorded"), ...BODY_ERRORS, 409: STALE_LEASE },
  },
  {
    method: "get",
    path: "/v1/metrics",
    operationId: "getMetrics",
    summary: "Counters, dead by reason, fire lag and flow-control keys of your tenant",
    responses: { 200: json(Metrics, "the metrics") },
  },
  {
    method: "get",
    path: "/metrics",
    operationId: "getPrometheusMetrics",
    summary: "The metrics in Prometheus text format",
    responses: { 200: { description: "Prometheus text format 0.0.4", content: { "text/plain": { schema: { type: "string" } } } } },
  },
  {
    method: "get",
    path: "/healthz",
    operationId: "health",
    summary: "Liveness",
    keyed: false,
    responses: { 200: json(Health, "alive") },
  },
  {
    method: "get",
    path: "/openapi.json",
    operationId: "openapi",
    summary: "This document",
    keyed: false,
    responses: { 200: { description: "OpenAPI 3.1", content: { "application/json": { schema: { type: "object" } } } } },
  },
];

/** The statuses a route may answer: its own and, for a keyed route, 401 and 429. */
export function documentedResponses({ keyed, responses }: ApiRoute): Record<number, ResponseConfig> {
  return keyed === false ? responses : { ...responses, ...KEYED_ERRORS };
}

let document: ReturnType<OpenApiGeneratorV31["generateDocument"]> | undefined;

/** The document (built once per isolate: it depends on nothing but the code). */
export function openApiDocument() {
  if (document) return document;
  const registry = new OpenAPIRegistry();
  const bearer = registry.registerComponent("securitySchemes", "apiKey", {
    type: "http",
    scheme: "bearer",
    description: "an API key; each key belongs to one tenant",
  });
  for (const route of ROUTES) {
    const { keyed, ...config } = route;
    registry.registerPath({ ...config, security: keyed === false ? [] : [{ [bearer.name]: [] }], responses: documentedResponses(route) });
  }
  document = new OpenApiGeneratorV31(registry.definitions).generateDocument({
    openapi: "3.1.0",
    info: {
      title: "edge-scheduler",
      version: "1",
      description: "Schedule HTTP calls at a time, after a delay, or on a cron schedule; at-least-once, signed per Standard Webhooks.",
    },
  });
  return document;
}
