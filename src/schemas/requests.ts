/** The bodies and queries of the routes other than a job's create and change (job-input.ts): strict, limits from core/job.ts. */
import { z } from "zod";
import { LIMITS } from "../core/job";
import { EXECUTION_STATES } from "../core/lifecycle";
import { parseInstant } from "../core/when";
import { LabelKey, LabelValue } from "./job-input";

export const CreateJobBatchInput = z.strictObject({
  jobs: z.array(z.unknown()).min(1).max(LIMITS.batchJobs),
});

export const ListJobsQuery = z.strictObject({
  status: z.enum(["active", "paused", "canceled", "completed"]).optional(),
  label: z
    .string()
    .max(LIMITS.labels.keyLength + 1 + LIMITS.labels.valueLength)
    .transform((text, ctx) => {
      const colon = text.indexOf(":");
      const key = LabelKey.safeParse(colon < 0 ? text : text.slice(0, colon));
      const value = LabelValue.safeParse(text.slice(colon + 1));
      if (colon < 0 || !key.success || !value.success) {
        ctx.addIssue({ code: "custom", message: "must be key:value, a label key before the first colon and a label value after it" });
        return z.NEVER;
      }
      return { key: key.data, value: value.data };
    })
    .optional()
    .meta({ description: "key:value: only jobs with this label (the value is everything after the first colon)" }),
  name: z.string().min(1).max(LIMITS.nameLength).optional().meta({ description: "only jobs whose name starts with this (case-sensitive)" }),
  url: z
    .string()
    .min(1)
    .max(2048)
    .optional()
    .meta({ description: "only jobs with an HTTP target whose URL starts with this (as the job shows it)" }),
  limit: z.coerce.number().int().min(1).max(200).default(50),
  cursor: z.string().max(200).optional(),
});

export const ListArchiveQuery = z.strictObject({
  /** below the tenant's own prefix: "date=2026-12-01/" or "date=2026-12-01/hour=14/" */
  prefix: z
    .string()
    .max(200)
    .regex(
      /^date=\d{4}-\d{2}-\d{2}\/(hour=\d{2}\/)?$|^date=\d{4}(-\d{2}){0,2}$/,
      'is "date=YYYY-MM-DD/" or "date=YYYY-MM-DD/hour=HH/" (or a start of a date)',
    )
    .optional(),
  limit: z.coerce.number().int().min(1).max(1000).default(100),
  cursor: z.string().max(1000).optional(),
});

export const ArchiveObjectQuery = z.strictObject({ key: z.string().min(1).max(1024) });

export const ListDeadQuery = z.strictObject({
  limit: z.coerce.number().int().min(1).max(200).default(50),
  cursor: z.string().max(200).optional(),
});

/** An RFC 3339 time of a list's query, as epoch ms. */
const QueryInstant = z
  .string()
  .max(64)
  .transform((text, ctx) => {
    const at = parseInstant(text);
    if (at === undefined) {
      ctx.addIssue({ code: "custom", message: "must be an RFC 3339 time with an offset, e.g. 2026-01-31T09:00:00Z" });
      return z.NEVER;
    }
    return at;
  });

/** GET /v1/executions: each filter narrows the list; from and to bound the due time, inclusive. */
export const ListExecutionsQuery = z
  .strictObject({
    status: z.enum(EXECUTION_STATES).optional(),
    jobId: z.string().min(1).max(64).optional().meta({ description: "only this job's executions, live ones from its bucket included" }),
    label: ListJobsQuery.shape.label.meta({ description: "key:value: only executions of jobs with this label" }),
    url: z.string().min(1).max(2048).optional().meta({ description: "only executions of jobs whose HTTP target URL starts with this" }),
    httpStatus: z.coerce.number().int().min(100).max(599).optional().meta({ description: "the last attempt's HTTP status" }),
    from: QueryInstant.optional().meta({ description: "RFC 3339: due at or after" }),
    to: QueryInstant.optional().meta({ description: "RFC 3339: due at or before" }),
    limit: z.coerce.number().int().min(1).max(200).default(50),
    cursor: z.string().max(200).optional(),
  })
  .superRefine((q, ctx) => {
    if (q.from !== undefined && q.to !== undefined && q.from > q.to)
      ctx.addIssue({ code: "custom", path: ["from"], message: "must not be after to" });
  });

/** The filter of a list or a bulk action: GET /v1/jobs' status and label. */
const JobFilterFields = {
  status: ListJobsQuery.shape.status,
  label: ListJobsQuery.shape.label,
};

/**
 * POST /v1/jobs/cancel, /pause, /resume: the jobs by id (1 to 1000), or by a filter, which must
 * name something (an empty filter would act on every job).
 */
export const BulkJobsInput = z
  .strictObject({
    ids: z.array(z.string().min(1).max(64)).min(1).max(LIMITS.batchJobs).optional(),
    filter: z
      .strictObject(JobFilterFields)
      .refine(
        (f) => f.status !== undefined || f.label !== undefined,
        "must name a status or a label (an empty filter would act on every job)",
      )
      .optional(),
  })
  .refine((b) => (b.ids === undefined) !== (b.filter === undefined), "give ids or a filter (one of them)");

/** POST /v1/dlq/redrive: dead executions by id (1 to 1000), or by a filter that names something. */
export const BulkRedriveInput = z
  .strictObject({
    ids: z.array(z.string().min(1).max(64)).min(1).max(LIMITS.batchJobs).optional(),
    filter: z
      .strictObject({
        jobId: z.string().min(1).max(64).optional(),
        deadReason: z.enum(["permanent", "attempts_exhausted", "poison"]).optional(),
      })
      .refine(
        (f) => f.jobId !== undefined || f.deadReason !== undefined,
        "must name a jobId or a deadReason (an empty filter would redrive every dead execution)",
      )
      .optional(),
  })
  .refine((b) => (b.ids === undefined) !== (b.filter === undefined), "give ids or a filter (one of them)");

// --- pull workers ---------------------------------------------------------------------------

export const PullLeaseInput = z.strictObject({
  max: z.number().int().min(1).max(LIMITS.pull.leaseMax).default(1).meta({ description: "at most this many executions (default 1)" }),
  leaseMs: z
    .number()
    .int()
    .min(LIMITS.pull.leaseMs.min)
    .max(LIMITS.pull.leaseMs.max)
    .default(LIMITS.pull.leaseMs.default)
    .meta({ description: "how long each lease lasts unless heartbeated (default 30000); a heartbeat extends it by as much" }),
  waitMs: z
    .number()
    .int()
    .min(0)
    .max(LIMITS.pull.waitMs.max)
    .default(0)
    .meta({ description: "long polling: with nothing to lease, wait up to this long for work (default 0: answer at once)" }),
});

export const PullFailInput = z.strictObject({
  retryable: z.boolean().default(true).meta({ description: "false: no retry, the execution is dead (permanent)" }),
  error: z.string().max(4096).optional().meta({ description: "what went wrong, kept (an excerpt) on the attempt" }),
  retryAfterMs: z
    .number()
    .int()
    .min(0)
    .max(7 * 86_400_000)
    .optional()
    .meta({ description: "retry no sooner than this (like Retry-After); the job's backoff otherwise" }),
});
