/**
 * A job as it crosses between parties: its spec (JSON text in D1, in its bucket's rows and in every
 * JobDefinition; an object in a lease and in a debounced create), its target and flow control as a
 * lease carries them. The types stay in core/ (pure code reads them); these schemas are held equal to
 * them at compile time (`Same`), so neither can change without the other.
 */
import { z } from "zod";
import type { FailureKind, RetryPolicy } from "../core/backoff";
import type { CatchUp, Schedule } from "../core/cron";
import { DEBOUNCE_MODES, type Debounce } from "../core/debounce";
import type { CallbackTarget, FlowControl, HttpTarget, JobSpec, PullTarget, Target, WorkerTarget } from "../core/job";
import { JOB_STATES, type JobState } from "../core/lifecycle";
import type { DeliveryOutcome } from "../core/response";
import type { TraceContext } from "../core/trace";
import { type Same, same } from "./same";

export const JobStateSchema = z.enum(JOB_STATES);
same<Same<z.infer<typeof JobStateSchema>, JobState>>(true);

export const HttpTargetSchema = z.object({
  url: z.string(),
  method: z.enum(["GET", "POST", "PUT", "PATCH", "DELETE"]),
  headers: z.record(z.string(), z.string()),
  body: z.string().nullable(),
});
export const WorkerTargetSchema = z.object({ worker: z.string(), payload: z.string().nullable() });
export const PullTargetSchema = z.object({ pull: z.string(), payload: z.string().nullable() });
export const TargetSchema = z.union([HttpTargetSchema, WorkerTargetSchema, PullTargetSchema]);
export const CallbackTargetSchema = z.union([HttpTargetSchema, WorkerTargetSchema]);
same<Same<z.infer<typeof HttpTargetSchema>, HttpTarget>>(true);
same<Same<z.infer<typeof WorkerTargetSchema>, WorkerTarget>>(true);
same<Same<z.infer<typeof PullTargetSchema>, PullTarget>>(true);
same<Same<z.infer<typeof TargetSchema>, Target>>(true);
same<Same<z.infer<typeof CallbackTargetSchema>, CallbackTarget>>(true);

export const FlowControlSchema = z.object({
  key: z.string(),
  rate: z.number().nullable(),
  periodSeconds: z.number(),
  parallelism: z.number().nullable(),
});
same<Same<z.infer<typeof FlowControlSchema>, FlowControl>>(true);

export const TraceContextSchema = z.object({ traceparent: z.string(), tracestate: z.string().optional() });
same<Same<z.infer<typeof TraceContextSchema>, TraceContext>>(true);

export const RetryPolicySchema = z.object({
  maxAttempts: z.number(),
  initialDelayMs: z.number(),
  maxDelayMs: z.number(),
  factor: z.number(),
  jitter: z.number(),
});
same<Same<z.infer<typeof RetryPolicySchema>, RetryPolicy>>(true);

const CatchUpSchema = z.enum(["none", "one", "all"]);
same<Same<z.infer<typeof CatchUpSchema>, CatchUp>>(true);
export const ScheduleSchema = z.object({
  cron: z.string(),
  timezone: z.string(),
  startAt: z.number().nullable(),
  endAt: z.number().nullable(),
  maxOccurrences: z.number().nullable(),
  catchUp: CatchUpSchema,
});
same<Same<z.infer<typeof ScheduleSchema>, Schedule>>(true);

export const DebounceSchema = z.object({
  key: z.string(),
  mode: z.enum(DEBOUNCE_MODES),
  delayMs: z.number(),
  maxDelayMs: z.number().nullable(),
});
same<Same<z.infer<typeof DebounceSchema>, Debounce>>(true);

export const JobSpecSchema = z.object({
  target: TargetSchema,
  timeoutMs: z.number(),
  retry: RetryPolicySchema,
  metadata: z.record(z.string(), z.unknown()).nullable(),
  schedule: ScheduleSchema.nullable(),
  flowControl: FlowControlSchema.nullable().optional(),
  trace: TraceContextSchema.optional(),
  debounce: DebounceSchema.optional(),
  callback: CallbackTargetSchema.nullable().optional(),
  failureCallback: CallbackTargetSchema.nullable().optional(),
  priority: z.number().optional(),
});
same<Same<z.infer<typeof JobSpecSchema>, JobSpec>>(true);

const FailureKindSchema = z.enum(["retryable", "permanent"]);
same<Same<z.infer<typeof FailureKindSchema>, FailureKind>>(true);
export const DeliveryOutcomeSchema = z.union([
  z.object({ kind: z.literal("succeeded"), httpStatus: z.number().nullable(), excerpt: z.string() }),
  z.object({
    kind: z.literal("failed"),
    failure: FailureKindSchema,
    httpStatus: z.number().nullable(),
    error: z.string(),
    retryAfterMs: z.number().optional(),
  }),
]);
same<Same<z.infer<typeof DeliveryOutcomeSchema>, DeliveryOutcome>>(true);

/**
 * JSON text whose parsed value `schema` describes (a spec, an attempt log): a string on the wire,
 * whose content its reader parses. Its JSON Schema says so (contentMediaType, contentSchema), so the
 * contract checks what the text holds, not only that it is a string.
 */
export function jsonText(schema: z.ZodType): z.ZodString {
  const { $schema: _draft, ...contentSchema } = z.toJSONSchema(schema, { io: "input", unrepresentable: "any", target: "draft-2020-12" });
  return z.string().meta({ contentMediaType: "application/json", contentSchema });
}
