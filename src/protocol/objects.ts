/**
 * The RPC contracts of the Durable Objects other than the bucket: what the Worker (API, consumers,
 * scanner) and the other objects send them, and what they answer. Their types stay beside their
 * objects and in core/; these schemas are held equal to them at compile time (`Same`), so neither
 * changes without the other. During a deploy either side of each call may run the previous
 * release (test/contract/README.md).
 */
import { z } from "zod";
import type { ActionState, Selector } from "../actions/bulk-action";
import type { AlertTarget } from "../alerts/alerts";
import type { Death, Throttle } from "../core/alert";
import type { FlowAnswer, FlowAsk, FlowKeyView, FlowLimits, FlowRelease } from "../core/flow";
import { JOB_STATES } from "../core/lifecycle";
import type { NewJob } from "../db/insert-jobs";
import type { KeyClaim, KeyOwner } from "../idempotency/key-claims";
import type { PullLease, PullLeaseRequest, PullQueueView } from "../pull/pull-queue";
import { CreateJobInput } from "../schemas/job-input";
import { JobView } from "../schemas/responses";
import type { DebounceAnswer } from "../use-cases/debounce";
import type { PreparedJob } from "../use-cases/validation";
import { LeaseGrantSchema } from "./bucket";
import { JobSpecSchema, jsonText } from "./job";
import { type Same, same } from "./same";

// --- PullQueue (pull/pull-queue.ts): the consumer offers, the API leases for its workers ----------

export const PullLeaseRequestSchema = z.object({
  tenant: z.string(),
  queue: z.string(),
  max: z.number(),
  leaseMs: z.number(),
  waitMs: z.number(),
});
same<Same<z.infer<typeof PullLeaseRequestSchema>, PullLeaseRequest>>(true);

export const PullLeaseSchema = z.object({ bucket: z.number(), grant: LeaseGrantSchema });
same<Same<z.infer<typeof PullLeaseSchema>, PullLease>>(true);

export const PullQueueViewSchema = z.object({ waiting: z.number(), oldestDueAt: z.number().nullable(), pollers: z.number() });
same<Same<z.infer<typeof PullQueueViewSchema>, PullQueueView>>(true);

// --- FlowKey (flow/flow-key.ts): the consumer asks and releases, the API reads and changes ------------

export const FlowLimitsSchema = z.object({ rate: z.number().nullable(), periodMs: z.number(), parallelism: z.number().nullable() });
same<Same<z.infer<typeof FlowLimitsSchema>, FlowLimits>>(true);

export const FlowAskSchema = z.object({
  executionId: z.string(),
  firstDueAt: z.number(),
  holdMs: z.number(),
  priority: z.number().optional(),
});
same<Same<z.infer<typeof FlowAskSchema>, FlowAsk>>(true);

export const FlowAnswerSchema = z.union([
  z.object({ executionId: z.string(), granted: z.literal(true) }),
  z.object({ executionId: z.string(), granted: z.literal(false), retryAt: z.number() }),
]);
same<Same<z.infer<typeof FlowAnswerSchema>, FlowAnswer>>(true);

export const FlowReleaseSchema = z.object({ executionId: z.string(), retryAfterMs: z.number().optional() });
same<Same<z.infer<typeof FlowReleaseSchema>, FlowRelease>>(true);

export const FlowKeyViewSchema = z.object({
  limits: FlowLimitsSchema,
  paused: z.boolean(),
  throttledUntil: z.number().nullable(),
  inFlight: z.number(),
  waiting: z.number(),
  currentRate: z.number(),
  grantedTotal: z.number(),
  throttledTotal: z.number(),
  limitsFrom: z.enum(["api", "job"]).nullable(),
});
same<Same<z.infer<typeof FlowKeyViewSchema>, FlowKeyView>>(true);

// --- IdempotencyKeys (idempotency/idempotency-keys.ts): the API claims and releases -----------------

export const KeyClaimSchema = z.object({ key: z.string(), jobId: z.string(), requestHash: z.string() });
same<Same<z.infer<typeof KeyClaimSchema>, KeyClaim>>(true);

export const KeyOwnerSchema = z.object({ key: z.string(), jobId: z.string(), requestHash: z.string(), claimedAt: z.number() });
same<Same<z.infer<typeof KeyOwnerSchema>, KeyOwner>>(true);

export const KeyReleaseSchema = z.object({ key: z.string(), jobId: z.string() });

// --- DebounceKeys (debounce/debounce-keys.ts): the API submits a debounced create -------------------

export const NewJobSchema = z.object({
  id: z.string(),
  tenant: z.string(),
  name: z.string().nullable(),
  bucket: z.number(),
  spec: jsonText(JobSpecSchema),
  cron: z.string().nullable(),
  timezone: z.string().nullable(),
  nextRunAt: z.number(),
  idempotencyKey: z.string().nullable(),
  requestHash: z.string().nullable(),
  labels: z.record(z.string(), z.string()).nullable(),
});
same<Same<z.infer<typeof NewJobSchema>, NewJob>>(true);

export const PreparedJobSchema = z.object({
  job: NewJobSchema,
  spec: JobSpecSchema,
  fieldPrefix: z.string(),
  /** the create request as the API parsed it (schemas/job-input.ts CreateJobInput) */
  debounced: CreateJobInput.optional(),
});
same<Same<z.infer<typeof PreparedJobSchema>, PreparedJob>>(true);

export const DebounceAnswerSchema = z.union([
  z.object({ ok: z.literal(true), status: z.union([z.literal(200), z.literal(201)]), job: JobView }),
  z.object({
    ok: z.literal(false),
    status: z.union([z.literal(400), z.literal(409), z.literal(503), z.literal(507)]),
    code: z.string(),
    message: z.string(),
    field: z.string().nullable(),
  }),
]);
same<Same<z.infer<typeof DebounceAnswerSchema>, DebounceAnswer>>(true);

// --- Alerts (alerts/alerts.ts): the API sets the target, buckets report deaths, flow keys throttles ---

export const AlertTargetSchema = z.object({
  url: z.string(),
  headers: z.record(z.string(), z.string()),
  throttledForMs: z.number().nullable(),
});
same<Same<z.infer<typeof AlertTargetSchema>, AlertTarget>>(true);

export const DeathSchema = z.object({
  executionId: z.string(),
  jobId: z.string(),
  deadAt: z.number(),
  deadReason: z.string().nullable(),
  attempts: z.number(),
  lastHttpStatus: z.number().nullable(),
  lastError: z.string().nullable(),
});
same<Same<z.infer<typeof DeathSchema>, Death>>(true);

export const ThrottleSchema = z.object({ key: z.string(), since: z.number(), throttledUntil: z.number(), thresholdMs: z.number() });
same<Same<z.infer<typeof ThrottleSchema>, Throttle>>(true);

// --- BulkAction (actions/bulk-action.ts): the API starts and reads an action -----------------------

export const SelectorSchema = z.union([
  z.object({ ids: z.array(z.string()) }),
  z.object({
    filter: z.object({
      status: z.enum(JOB_STATES).optional(),
      label: z.object({ key: z.string(), value: z.string() }).optional(),
    }),
  }),
  z.object({ dead: z.object({ jobId: z.string().optional(), deadReason: z.string().optional() }) }),
]);
same<Same<z.infer<typeof SelectorSchema>, Selector>>(true);

const BulkKindSchema = z.enum(["cancel", "pause", "resume", "redrive"]);

export const BulkStartSchema = z.object({
  id: z.string(),
  tenant: z.string(),
  kind: BulkKindSchema,
  selector: SelectorSchema,
  now: z.number(),
});

export const ActionStateSchema = z.object({
  id: z.string(),
  tenant: z.string(),
  kind: BulkKindSchema,
  selector: SelectorSchema,
  status: z.enum(["running", "done"]),
  matched: z.number(),
  done: z.number(),
  failed: z.number(),
  failures: z.array(z.object({ id: z.string(), code: z.string() })),
  createdAt: z.number(),
  finishedAt: z.number().nullable(),
  next: z.union([z.number(), z.string()]).nullable(),
});
same<Same<z.infer<typeof ActionStateSchema>, ActionState>>(true);
