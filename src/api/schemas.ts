/** Request schemas: strict (an unknown field is a 400 naming it), limits from core/job.ts. */
import { z } from "zod";
import { LIMITS } from "../core/job";

const HTTP_METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE"] as const;

const JsonValue: z.ZodType<unknown> = z.lazy(() =>
  z.union([z.string(), z.number(), z.boolean(), z.null(), z.array(JsonValue), z.record(z.string(), JsonValue)]),
);

export const TargetInput = z.strictObject({
  url: z.string().max(2048),
  method: z.enum(HTTP_METHODS).default("POST"),
  headers: z
    .record(z.string().min(1).max(256).regex(/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/, "is not a valid header name"), z.string().max(LIMITS.headerValueBytes))
    .refine((h) => Object.keys(h).length <= LIMITS.headerCount, `at most ${LIMITS.headerCount} headers`)
    .default({}),
  body: JsonValue.optional(),
});

export const RetryInput = z.strictObject({
  maxAttempts: z.number().int().min(LIMITS.maxAttempts.min).max(LIMITS.maxAttempts.max).optional(),
  initialDelayMs: z.number().int().min(0).max(86_400_000).optional(),
  maxDelayMs: z.number().int().min(0).max(7 * 86_400_000).optional(),
  factor: z.number().min(1).max(10).optional(),
  jitter: z.number().min(0).max(1).optional(),
});

const Instant = z.union([z.string().max(64), z.number()]);

const ScheduleFields = {
  /** 5-field (minute) or 6-field (second) cron; excludes runAt/delay */
  cron: z.string().min(1).max(200).optional(),
  timezone: z.string().min(1).max(64).optional(),
  startAt: Instant.optional(),
  endAt: Instant.optional(),
  maxOccurrences: z.number().int().min(1).max(1_000_000_000).optional(),
  catchUp: z.enum(["none", "one", "all"]).optional(),
};

export const CreateJobInput = z.strictObject({
  name: z.string().min(1).max(LIMITS.nameLength).optional(),
  target: TargetInput,
  runAt: Instant.optional(),
  delay: Instant.optional(),
  ...ScheduleFields,
  timeoutMs: z.number().int().min(LIMITS.timeoutMs.min).max(LIMITS.timeoutMs.max).optional(),
  retry: RetryInput.optional(),
  metadata: z.record(z.string(), JsonValue).optional(),
  idempotencyKey: z.string().min(1).max(LIMITS.idempotencyKeyLength).optional(),
});
export type CreateJobInput = z.infer<typeof CreateJobInput>;

/** PATCH: any subset; target fields and retry fields merge into the job's current ones. */
export const PatchJobInput = z.strictObject({
  name: z.string().min(1).max(LIMITS.nameLength).nullable().optional(),
  target: z
    .strictObject({
      url: z.string().max(2048).optional(),
      method: z.enum(HTTP_METHODS).optional(),
      headers: TargetInput.shape.headers.optional(),
      body: JsonValue.optional(),
    })
    .optional(),
  runAt: Instant.optional(),
  delay: Instant.optional(),
  ...ScheduleFields,
  timeoutMs: z.number().int().min(LIMITS.timeoutMs.min).max(LIMITS.timeoutMs.max).optional(),
  retry: RetryInput.optional(),
  metadata: z.record(z.string(), JsonValue).nullable().optional(),
});
export type PatchJobInput = z.infer<typeof PatchJobInput>;

export const CreateJobBatchInput = z.strictObject({
  jobs: z.array(z.unknown()).min(1).max(LIMITS.batchJobs),
});

export const ListJobsQuery = z.strictObject({
  status: z.enum(["active", "paused", "canceled", "completed"]).optional(),
  limit: z.coerce.number().int().min(1).max(200).default(50),
  cursor: z.string().max(200).optional(),
});

export const ListDeadQuery = z.strictObject({
  limit: z.coerce.number().int().min(1).max(200).default(50),
  cursor: z.string().max(200).optional(),
});
