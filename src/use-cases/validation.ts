/**
 * A create request validated at the door (STYLE.md: a bad retry policy, cron expression, time zone,
 * URL or size is a 400 when the job is created, never a failure when it fires): every refusal names
 * its field, and what passes becomes the rows create.ts writes. A PATCH is validated by the same
 * rules (buildSpec, job-changes.ts); targets by targets.ts.
 */
import type { Config } from "../config";
import { DEFAULT_RETRY_POLICY, type RetryPolicy } from "../core/backoff";
import { bucketOfJob } from "../core/bucketing";
import { canonicalTimeZone, cronProblem, occurrenceAfter, type Schedule } from "../core/cron";
import { type Debounce, opening } from "../core/debounce";
import { newJobId } from "../core/id";
import { isPullTarget, type JobSpec, LIMITS } from "../core/job";
import { PRIORITY } from "../core/priority";
import { formatTraceparent, parseTraceparent, type TraceContext } from "../core/trace";
import { parseDurationMs, parseInstant } from "../core/when";
import type { NewJob } from "../db/insert-jobs";
import { CreateJobInput } from "../schemas/job-input";
import { ApiError, fromZodError, refuseUnfaithful } from "./errors";
import { callbackOf, targetOf } from "./targets";

const encoder = new TextEncoder();

export interface PreparedJob {
  job: NewJob;
  spec: JobSpec;
  /** where the job sits in the request ("jobs[3]" in a batch), for errors found after validation */
  fieldPrefix: string;
  /** a debounced create: its request, which replaces the pending job of its key (debounce.ts) */
  debounced?: CreateJobInput;
}

/** Validates one job request and turns it into rows; every refusal names its field. */
export async function prepareJob(
  raw: unknown,
  ctx: {
    tenant: string;
    now: number;
    config: Config;
    fieldPrefix: string;
    shard: number;
    headerIdempotencyKey?: string | undefined;
    /** the create request's traceparent and tracestate headers, when valid */
    headerTrace?: TraceContext | null;
  },
): Promise<PreparedJob> {
  refuseUnfaithful(raw, ctx.fieldPrefix);
  const parsed = CreateJobInput.safeParse(raw);
  if (!parsed.success) throw fromZodError(parsed.error, ctx.fieldPrefix);
  const input = parsed.data;
  const trace = input.trace ?? ctx.headerTrace ?? undefined;
  const { spec, dueAt } = buildSpec(trace ? { ...input, trace } : input, ctx, ctx.fieldPrefix);
  const idempotencyKey = input.idempotencyKey ?? ctx.headerIdempotencyKey ?? null;
  const id = newJobId(ctx.now, crypto.getRandomValues(new Uint8Array(16)), ctx.shard);
  return {
    spec,
    fieldPrefix: ctx.fieldPrefix,
    ...(input.debounce ? { debounced: input } : {}),
    job: {
      id,
      tenant: ctx.tenant,
      name: input.name ?? null,
      bucket: bucketOfJob(id, ctx.config.BUCKETS),
      spec: JSON.stringify(spec),
      cron: spec.schedule?.cron ?? null,
      timezone: spec.schedule?.timezone ?? null,
      nextRunAt: dueAt,
      idempotencyKey,
      requestHash: idempotencyKey === null ? null : await requestHash(withDefaults(input)),
      labels: input.labels ?? null,
    },
  };
}

/** The fields a job is built from (a create request, or a job's current state merged with a PATCH). */
export type JobInput = Omit<CreateJobInput, "idempotencyKey" | "name">;

/**
 * Validates a job's settings and computes its first due time (the first occurrence for cron).
 * `kept`: the job's current headers on a PATCH; one the rules of its day allowed stays allowed.
 */
export function buildSpec(
  input: JobInput,
  ctx: { now: number; config: Config; tenant: string },
  prefix = "",
  kept: Record<string, string> = {},
): { spec: JobSpec; dueAt: number } {
  const { now } = ctx;
  const field = (name: string) => (prefix ? `${prefix}.${name}` : name);
  const target = targetOf(input.target, ctx, field, kept);
  if (input.metadata !== undefined && encoder.encode(JSON.stringify(input.metadata)).byteLength > LIMITS.metadataBytes) {
    throw new ApiError("invalid_field", `metadata is larger than ${LIMITS.metadataBytes} bytes`, field("metadata"));
  }
  const debounce = debounceOf(input, field);
  const schedule = scheduleOf(input, field);
  const dueAt = debounce ? opening(debounce, now).runAt : schedule ? firstOccurrence(schedule, now, field) : dueAtOf(input, now, field);
  if (isPullTarget(target) && input.flowControl) {
    // a pull queue is paced by its workers (how many they lease), not pushed at a rate
    throw new ApiError("invalid_field", "flowControl applies to pushed deliveries; pull workers set their own pace", field("flowControl"));
  }
  const callback = callbackOf(input.callback, ctx, field, "callback");
  const failureCallback = callbackOf(input.failureCallback, ctx, field, "failureCallback");
  const retry: RetryPolicy = { ...DEFAULT_RETRY_POLICY, ...input.retry };
  if (retry.maxDelayMs < retry.initialDelayMs) {
    throw new ApiError("invalid_field", "retry.maxDelayMs must be at least retry.initialDelayMs", field("retry.maxDelayMs"));
  }
  return {
    spec: {
      target,
      timeoutMs: input.timeoutMs ?? LIMITS.timeoutMs.default,
      retry,
      metadata: input.metadata ?? null,
      schedule,
      flowControl: input.flowControl
        ? {
            key: input.flowControl.key,
            rate: input.flowControl.rate ?? null,
            periodSeconds: input.flowControl.periodSeconds ?? 1,
            parallelism: input.flowControl.parallelism ?? null,
          }
        : null,
      // only when given: a job without a trace stores the same spec as before
      ...(input.trace ? { trace: traceOf(input.trace) } : {}),
      ...(debounce ? { debounce } : {}),
      // only when named: a job without callbacks keeps the spec it always had
      ...(callback ? { callback } : {}),
      ...(failureCallback ? { failureCallback } : {}),
      // only a priority other than the default is stored: a job without one keeps the spec it always had
      ...(input.priority === undefined || input.priority === PRIORITY.default ? {} : { priority: input.priority }),
    },
    dueAt,
  };
}

/** Stored in version 00 form (a later version's extra fields dropped), tracestate trimmed. */
function traceOf(input: NonNullable<JobInput["trace"]>): TraceContext {
  const parent = parseTraceparent(input.traceparent)!; // the schema parsed it
  const tracestate = input.tracestate?.trim();
  return { traceparent: formatTraceparent(parent), ...(tracestate ? { tracestate } : {}) };
}

/** A debounced create's rule: one-off jobs only, its run time decided by its key (core/debounce.ts). */
function debounceOf(input: JobInput, field: (name: string) => string): Debounce | null {
  const d = input.debounce;
  if (d === undefined) return null;
  if (input.cron !== undefined) {
    throw new ApiError("invalid_field", "debounce applies to one-off jobs: give either cron or debounce, not both", field("debounce"));
  }
  const timed = (["runAt", "delay"] as const).find((k) => input[k] !== undefined);
  if (timed) {
    throw new ApiError(
      "invalid_field",
      `give either ${timed} or debounce: a debounced job runs when its key's window closes (debounce.delay)`,
      field(timed),
    );
  }
  const duration = (name: "delay" | "maxDelay", value: string | number) => {
    const ms = parseDurationMs(value);
    if (ms === undefined) {
      throw new ApiError(
        "invalid_field",
        `debounce.${name} must be a duration like "500ms", "30s", "5m", "2h", "1d" or milliseconds`,
        field(`debounce.${name}`),
      );
    }
    if (ms > LIMITS.horizonMs) {
      throw new ApiError("invalid_field", `must be within ${LIMITS.horizonMs / 86_400_000} days`, field(`debounce.${name}`));
    }
    return ms;
  };
  const delayMs = duration("delay", d.delay);
  const maxDelayMs = d.maxDelay === undefined ? null : duration("maxDelay", d.maxDelay);
  if (maxDelayMs !== null && maxDelayMs < delayMs) {
    throw new ApiError("invalid_field", "debounce.maxDelay must be at least debounce.delay", field("debounce.maxDelay"));
  }
  return { key: d.key, mode: d.mode, delayMs, maxDelayMs };
}

function scheduleOf(input: JobInput, field: (name: string) => string): Schedule | null {
  const scheduleOnly = (["timezone", "startAt", "endAt", "maxOccurrences", "catchUp"] as const).find((k) => input[k] !== undefined);
  if (input.cron === undefined) {
    if (scheduleOnly) throw new ApiError("invalid_field", `${scheduleOnly} applies to recurring jobs: give cron too`, field(scheduleOnly));
    return null;
  }
  if (input.runAt !== undefined || input.delay !== undefined) {
    const name = input.runAt !== undefined ? "runAt" : "delay";
    throw new ApiError("invalid_field", `give either cron or ${name}, not both`, field(name));
  }
  const problem = cronProblem(input.cron, input.timezone ?? "UTC");
  if (problem) throw new ApiError("invalid_field", `${problem.field}: ${problem.message}`, field(problem.field));
  const timezone = canonicalTimeZone(input.timezone ?? "UTC")!; // "europe/berlin" is stored and shown as Europe/Berlin
  const instant = (name: "startAt" | "endAt") => {
    const value = input[name];
    if (value === undefined) return null;
    const at = parseInstant(value);
    if (at === undefined)
      throw new ApiError("invalid_field", `${name} must be an RFC 3339 time with an offset or epoch milliseconds`, field(name));
    return at;
  };
  const startAt = instant("startAt");
  const endAt = instant("endAt");
  if (startAt !== null && endAt !== null && endAt <= startAt)
    throw new ApiError("invalid_field", "endAt must be after startAt", field("endAt"));
  return {
    cron: input.cron.trim(),
    timezone,
    startAt,
    endAt,
    maxOccurrences: input.maxOccurrences ?? null,
    catchUp: input.catchUp ?? "one",
  };
}

function firstOccurrence(schedule: Schedule, now: number, field: (name: string) => string): number {
  const at = occurrenceAfter(schedule, now - 1);
  if (at === null)
    throw new ApiError("invalid_field", "the schedule has no occurrence after now", field(schedule.endAt !== null ? "endAt" : "cron"));
  if (at > now + LIMITS.horizonMs)
    throw new ApiError("invalid_field", `the first occurrence must be within ${LIMITS.horizonMs / 86_400_000} days`, field("cron"));
  return at;
}

function dueAtOf(input: JobInput, now: number, field: (name: string) => string): number {
  if (input.runAt !== undefined && input.delay !== undefined) {
    throw new ApiError("invalid_field", "give either runAt or delay, not both", field("delay"));
  }
  let dueAt = now;
  if (input.runAt !== undefined) {
    const at = parseInstant(input.runAt);
    if (at === undefined) {
      throw new ApiError(
        "invalid_field",
        "runAt must be an RFC 3339 time with an offset (2026-01-02T15:04:05Z) or epoch milliseconds",
        field("runAt"),
      );
    }
    dueAt = Math.max(at, now); // a time in the past fires at once
  } else if (input.delay !== undefined) {
    const ms = parseDurationMs(input.delay);
    if (ms === undefined) {
      throw new ApiError("invalid_field", 'delay must be a duration like "500ms", "30s", "5m", "2h", "1d" or milliseconds', field("delay"));
    }
    dueAt = now + ms;
  }
  if (dueAt > now + LIMITS.horizonMs) {
    throw new ApiError(
      "invalid_field",
      `must be within ${LIMITS.horizonMs / 86_400_000} days`,
      field(input.runAt !== undefined ? "runAt" : "delay"),
    );
  }
  return dueAt;
}

/**
 * The request with its defaults spelled out (an HTTP target's method and headers; a null payload,
 * empty labels and the default priority are none): the same request hashes the same however it is spelled.
 */
function withDefaults(input: CreateJobInput): CreateJobInput {
  const { labels, priority, ...rest } = input;
  const spelled = {
    ...rest,
    ...(labels ? { labels } : {}),
    ...(priority === undefined || priority === PRIORITY.default ? {} : { priority }),
  };
  if (input.target.worker === undefined && input.target.pull === undefined)
    return { ...spelled, target: { method: "POST", headers: {}, ...input.target } };
  const { payload, ...target } = input.target;
  return { ...spelled, target: payload === null ? target : input.target };
}

/**
 * SHA-256 of the request with sorted keys, so the same request with another key order matches.
 * Its trace is not part of it: a client's retry is a new span of its trace (OpenTelemetry gives
 * each attempt one), so a replay answers the first job, which keeps the first trace.
 */
async function requestHash(input: CreateJobInput): Promise<string> {
  const { idempotencyKey: _ignored, trace: _notTheRequest, ...rest } = input;
  const digest = await crypto.subtle.digest("SHA-256", encoder.encode(canonicalJson(rest)));
  return [...new Uint8Array(digest)].map((b) => b.toString(16).padStart(2, "0")).join("");
}

function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(",")}]`;
  if (value !== null && typeof value === "object") {
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([, v]) => v !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(",")}}`;
  }
  return JSON.stringify(value);
}
