/** The OpenAPI entries of jobs.ts, in the order of the README's API table. */
import { z } from "zod";
import { CreateJobInput, PatchJobInput } from "../../schemas/job-input";
import { ListJobsQuery } from "../../schemas/requests";
import { BatchResults, JobList, JobView, JobWithLatestView } from "../../schemas/responses";
import { type ApiRoute, BODY_ERRORS, error, jobId, json, jsonBody } from "../route-doc";

/** What a create may answer when no D1 shard has room for new jobs (db/shards.ts ShardsFull). */
const FULL = error(
  "shards_full: every D1 shard is above SHARD_MAX_BYTES with live jobs (the message names them): nothing was stored; add a shard",
);

const changed = (what: string, refused: string) => ({
  200: json(JobView, `${what}: applied (the job's bucket holds the change)`),
  202: json(JobView, `${what}: durable and converging (the next sync pass applies it; sending it again re-sends it)`),
  404: error("no such job"),
  409: error(`${refused}, or conflict: the job changed meanwhile (read it and try again)`),
});

const CreateJob = CreateJobInput.meta({ id: "CreateJob" });
const CreateJobBatchBody = z.strictObject({ jobs: z.array(CreateJob).min(1).max(1000) }).meta({ id: "CreateJobBatch" });

/** W3C Trace Context of a create request: its jobs belong to that trace (docs/trace-context.md). */
const TRACE_HEADERS = {
  traceparent: z.string().optional().meta({
    description: "W3C traceparent: the jobs belong to this trace unless one gives trace in its body; an invalid one is ignored",
  }),
  tracestate: z.string().optional().meta({ description: "W3C tracestate, kept with traceparent" }),
};

export const JOB_ROUTES: ApiRoute[] = [
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
];
