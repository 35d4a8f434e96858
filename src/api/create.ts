/**
 * Job creation, shared by POST /v1/jobs and /v1/jobs/batch: validate at the door, write the jobs
 * to one D1 shard in one atomic batch (durable before the 2xx, invariant 1), then hand each bucket its
 * near-term one-off jobs and its recurring jobs, one RPC per bucket. A failed hand-off leaves the
 * job pending in D1, where the scanner's sync pass finds it by its due time.
 */

import { type ArchivedExecution, findArchived } from "../archive/archive";
import type { D1Meter, JobDefinition } from "../bucket/protocol";
import type { Config } from "../config";
import { DEFAULT_RETRY_POLICY, type RetryPolicy } from "../core/backoff";
import { bucketOfJob } from "../core/bucketing";
import { canonicalTimeZone, cronProblem, occurrenceAfter, type Schedule } from "../core/cron";
import { type Debounce, opening } from "../core/debounce";
import { grantedBinding } from "../core/handler-workers";
import { newJobId, oneOffExecutionId } from "../core/id";
import { type CallbackTarget, isHttpTarget, isNear, isPullTarget, isReservedHeader, type JobSpec, LIMITS, type Target } from "../core/job";
import { JOB_TRANSITIONS } from "../core/lifecycle";
import { PRIORITY } from "../core/priority";
import { checkTargetUrl } from "../core/target-policy";
import { formatTraceparent, parseTraceparent, type TraceContext } from "../core/trace";
import { parseDurationMs, parseInstant } from "../core/when";
import { insertJobs, type NewJob } from "../db/insert-jobs";
import { definitionOf } from "../db/job-definition";
import { hasLegacyKeys, legacyKeyOwners } from "../db/legacy-keys";
import { getJobsByIds } from "../db/list-jobs";
import { historyPurgedBefore } from "../db/purge-mark";
import type { JobRow } from "../db/schema";
import { isFullError, type Shards, ShardsFull, shardsOf } from "../db/shards";
import { claimKeys, type KeyClaim, type KeyOwner, releaseKeys } from "../idempotency/key-claims";
import { bucketObject } from "../placement";
import { ApiError, fromZodError, refuseUnfaithful } from "./errors";
import { presentJob } from "./present";
import { CreateJobInput } from "./schemas";

const encoder = new TextEncoder();

export interface PreparedJob {
  job: NewJob;
  spec: JobSpec;
  /** where the job sits in the request ("jobs[3]" in a batch), for errors found after validation */
  fieldPrefix: string;
  /** a debounced create: its request, which replaces the pending job of its key (api/debounce.ts) */
  debounced?: CreateJobInput;
}

export type CreateResult = { status: 201 | 200; job: ReturnType<typeof presentJob> } | { status: 400 | 409 | 503 | 507; error: ApiError };

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

const HTTP_FIELDS = ["method", "headers", "body"] as const;

const TARGET_KINDS = ["url", "worker", "pull"] as const;

/** An HTTP target (url), a handler Worker (worker) or a pull queue (pull), never a mix; every refusal names its field. */
function targetOf(
  input: JobInput["target"],
  ctx: { config: Config; tenant: string },
  field: (name: string) => string,
  kept: Record<string, string>,
  name: "target" | "callback" | "failureCallback" | "alert" = "target",
): Target {
  const kinds = TARGET_KINDS.filter((kind) => input[kind] !== undefined);
  if (kinds.length > 1) {
    throw new ApiError(
      400,
      "invalid_field",
      "give one of url (an HTTP target), worker (a handler Worker) and pull (a pull queue), not several",
      field(`${name}.${kinds[1]}`),
    );
  }
  if (input.worker !== undefined || input.pull !== undefined) {
    const http = HTTP_FIELDS.find((f) => input[f] !== undefined);
    if (http) throw new ApiError(400, "invalid_field", `${name}.${http} applies to HTTP targets (url) only`, field(`${name}.${http}`));
  }
  if (input.pull !== undefined) return { pull: input.pull, payload: jsonTextOf(input.payload, field(`${name}.payload`)) };
  if (input.worker !== undefined) {
    if (grantedBinding(ctx.config.HANDLER_WORKERS, ctx.tenant, input.worker) === null) {
      // the same answer for a Worker that exists but is not granted: grants are not disclosed
      throw new ApiError(
        400,
        "invalid_field",
        `${name}.worker: no handler Worker "${input.worker}" is granted to your tenant`,
        field(`${name}.worker`),
      );
    }
    return { worker: input.worker, payload: jsonTextOf(input.payload, field(`${name}.payload`)) };
  }
  if (input.url === undefined) {
    throw new ApiError(
      400,
      "invalid_field",
      `${name}.url: give url (an HTTP target), worker (a handler Worker) or pull (a pull queue)`,
      field(`${name}.url`),
    );
  }
  if (input.payload !== undefined) {
    throw new ApiError(
      400,
      "invalid_field",
      `${name}.payload applies to handler Worker and pull targets only; an HTTP target sends body`,
      field(`${name}.payload`),
    );
  }
  const verdict = checkTargetUrl(input.url, ctx.config.ALLOW_LOOPBACK_TARGETS);
  if (!verdict.ok) throw new ApiError(400, "invalid_field", `${name}.url ${verdict.reason}`, field(`${name}.url`));
  const method = input.method ?? "POST";
  const headers: Record<string, string> = {};
  for (const [header, value] of Object.entries(input.headers ?? {})) {
    if (isReservedHeader(header) && kept[header] !== value) {
      throw new ApiError(
        400,
        "invalid_field",
        `header "${header}" is reserved: the scheduler or the connection sets it`,
        field(`${name}.headers.${header}`),
      );
    }
    headers[header] = value;
  }
  let body: string | null = null;
  if (input.body !== undefined && input.body !== null) {
    if (method === "GET") throw new ApiError(400, "invalid_field", "a GET request carries no body", field(`${name}.body`));
    body = typeof input.body === "string" ? input.body : JSON.stringify(input.body);
    if (typeof input.body !== "string" && !Object.keys(headers).some((h) => h.toLowerCase() === "content-type")) {
      headers["content-type"] = "application/json";
    }
    if (encoder.encode(body).byteLength > LIMITS.bodyBytes) {
      throw new ApiError(400, "invalid_field", `${name}.body is larger than ${LIMITS.bodyBytes} bytes`, field(`${name}.body`));
    }
  }
  return { url: verdict.url.toString(), method, headers, body };
}

/** A payload as JSON text (null for none), at most LIMITS.bodyBytes. */
function jsonTextOf(value: unknown, name: string): string | null {
  if (value === undefined || value === null) return null;
  const text = JSON.stringify(value);
  if (encoder.encode(text).byteLength > LIMITS.bodyBytes) {
    throw new ApiError(400, "invalid_field", `${name} is larger than ${LIMITS.bodyBytes} bytes`, name);
  }
  return text;
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
    throw new ApiError(400, "invalid_field", `metadata is larger than ${LIMITS.metadataBytes} bytes`, field("metadata"));
  }
  const debounce = debounceOf(input, field);
  const schedule = scheduleOf(input, field);
  const dueAt = debounce ? opening(debounce, now).runAt : schedule ? firstOccurrence(schedule, now, field) : dueAtOf(input, now, field);
  if (isPullTarget(target) && input.flowControl) {
    // a pull queue is paced by its workers (how many they lease), not pushed at a rate
    throw new ApiError(
      400,
      "invalid_field",
      "flowControl applies to pushed deliveries; pull workers set their own pace",
      field("flowControl"),
    );
  }
  const callback = callbackOf(input.callback, ctx, field, "callback");
  const failureCallback = callbackOf(input.failureCallback, ctx, field, "failureCallback");
  const retry: RetryPolicy = { ...DEFAULT_RETRY_POLICY, ...input.retry };
  if (retry.maxDelayMs < retry.initialDelayMs) {
    throw new ApiError(400, "invalid_field", "retry.maxDelayMs must be at least retry.initialDelayMs", field("retry.maxDelayMs"));
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
    throw new ApiError(400, "invalid_field", "debounce applies to one-off jobs: give either cron or debounce, not both", field("debounce"));
  }
  const timed = (["runAt", "delay"] as const).find((k) => input[k] !== undefined);
  if (timed) {
    throw new ApiError(
      400,
      "invalid_field",
      `give either ${timed} or debounce: a debounced job runs when its key's window closes (debounce.delay)`,
      field(timed),
    );
  }
  const duration = (name: "delay" | "maxDelay", value: string | number) => {
    const ms = parseDurationMs(value);
    if (ms === undefined) {
      throw new ApiError(
        400,
        "invalid_field",
        `debounce.${name} must be a duration like "500ms", "30s", "5m", "2h", "1d" or milliseconds`,
        field(`debounce.${name}`),
      );
    }
    if (ms > LIMITS.horizonMs) {
      throw new ApiError(400, "invalid_field", `must be within ${LIMITS.horizonMs / 86_400_000} days`, field(`debounce.${name}`));
    }
    return ms;
  };
  const delayMs = duration("delay", d.delay);
  const maxDelayMs = d.maxDelay === undefined ? null : duration("maxDelay", d.maxDelay);
  if (maxDelayMs !== null && maxDelayMs < delayMs) {
    throw new ApiError(400, "invalid_field", "debounce.maxDelay must be at least debounce.delay", field("debounce.maxDelay"));
  }
  return { key: d.key, mode: d.mode, delayMs, maxDelayMs };
}

/** A tenant's alert target (PUT /v1/alerts): a URL by a job target's rules; errors name the body's fields. */
export function alertTargetOf(
  input: { url: string; headers?: Record<string, string> | undefined; throttledForMs?: number | null | undefined },
  ctx: { config: Config; tenant: string },
) {
  const target = targetOf(input, ctx, (name) => name.replace(/^alert\./, ""), {}, "alert");
  if (!isHttpTarget(target)) throw new ApiError(400, "invalid_field", "url: give a URL", "url");
  return { url: target.url, headers: target.headers, throttledForMs: input.throttledForMs ?? null };
}

/** A callback target (core/callback.ts): a URL or a handler Worker, by the target's rules; none when not given. */
function callbackOf(
  input: JobInput["callback"],
  ctx: { config: Config; tenant: string },
  field: (name: string) => string,
  name: "callback" | "failureCallback",
): CallbackTarget | null {
  if (input === undefined || input === null) return null;
  const target = targetOf(input, ctx, field, {}, name);
  if (isPullTarget(target)) throw new ApiError(400, "invalid_field", `${name}: give url or worker`, field(`${name}.url`));
  return target;
}

function scheduleOf(input: JobInput, field: (name: string) => string): Schedule | null {
  const scheduleOnly = (["timezone", "startAt", "endAt", "maxOccurrences", "catchUp"] as const).find((k) => input[k] !== undefined);
  if (input.cron === undefined) {
    if (scheduleOnly)
      throw new ApiError(400, "invalid_field", `${scheduleOnly} applies to recurring jobs: give cron too`, field(scheduleOnly));
    return null;
  }
  if (input.runAt !== undefined || input.delay !== undefined) {
    const name = input.runAt !== undefined ? "runAt" : "delay";
    throw new ApiError(400, "invalid_field", `give either cron or ${name}, not both`, field(name));
  }
  const problem = cronProblem(input.cron, input.timezone ?? "UTC");
  if (problem) throw new ApiError(400, "invalid_field", `${problem.field}: ${problem.message}`, field(problem.field));
  const timezone = canonicalTimeZone(input.timezone ?? "UTC")!; // "europe/berlin" is stored and shown as Europe/Berlin
  const instant = (name: "startAt" | "endAt") => {
    const value = input[name];
    if (value === undefined) return null;
    const at = parseInstant(value);
    if (at === undefined)
      throw new ApiError(400, "invalid_field", `${name} must be an RFC 3339 time with an offset or epoch milliseconds`, field(name));
    return at;
  };
  const startAt = instant("startAt");
  const endAt = instant("endAt");
  if (startAt !== null && endAt !== null && endAt <= startAt)
    throw new ApiError(400, "invalid_field", "endAt must be after startAt", field("endAt"));
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
    throw new ApiError(400, "invalid_field", "the schedule has no occurrence after now", field(schedule.endAt !== null ? "endAt" : "cron"));
  if (at > now + LIMITS.horizonMs)
    throw new ApiError(400, "invalid_field", `the first occurrence must be within ${LIMITS.horizonMs / 86_400_000} days`, field("cron"));
  return at;
}

function dueAtOf(input: JobInput, now: number, field: (name: string) => string): number {
  if (input.runAt !== undefined && input.delay !== undefined) {
    throw new ApiError(400, "invalid_field", "give either runAt or delay, not both", field("delay"));
  }
  let dueAt = now;
  if (input.runAt !== undefined) {
    const at = parseInstant(input.runAt);
    if (at === undefined) {
      throw new ApiError(
        400,
        "invalid_field",
        "runAt must be an RFC 3339 time with an offset (2026-01-02T15:04:05Z) or epoch milliseconds",
        field("runAt"),
      );
    }
    dueAt = Math.max(at, now); // a time in the past fires at once
  } else if (input.delay !== undefined) {
    const ms = parseDurationMs(input.delay);
    if (ms === undefined) {
      throw new ApiError(
        400,
        "invalid_field",
        'delay must be a duration like "500ms", "30s", "5m", "2h", "1d" or milliseconds',
        field("delay"),
      );
    }
    dueAt = now + ms;
  }
  if (dueAt > now + LIMITS.horizonMs) {
    throw new ApiError(
      400,
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

/**
 * Writes prepared jobs and hands the near-term ones to their buckets. Returns one result per
 * prepared job, in order: 201 created, 200 idempotent replay, 409 key reused with another body.
 *
 * A request's jobs go to one shard (prepareJob named it in their ids), in one atomic batch, so a
 * request is accepted whole or not at all, as with one database; requests take the shards in turn.
 * Idempotency keys are claimed first, in their own objects: a key whose winner's job is missing
 * (its insert failed after the claim) gets the job of this request, the same request, under the
 * winner's id, in the winner's shard; unless the purge of finished history may have taken that job
 * (purgedOriginals): then it is answered from the archive, or refused, and never runs again.
 */
export async function createJobs(env: Env, config: Config, tenant: string, prepared: PreparedJob[], now: number): Promise<CreateResult[]> {
  if (prepared.length === 0) return [];
  const shards = shardsOf(env);
  const owners = await keyOwners(env, config, tenant, prepared, now);
  const keyOf = (p: PreparedJob) => p.job.idempotencyKey;
  const ownerOf = (p: PreparedJob) => (keyOf(p) === null ? undefined : owners.get(keyOf(p)!));
  // a replay's original job (its winner's), read from the winner's shard; only a replay of the same
  // request reads it (another request's is a 409 either way): what is read is then about the size
  // of this request, never a thousand other jobs' specs of up to 0.8 MB each
  const replays = prepared.filter(
    (p) => ownerOf(p) !== undefined && ownerOf(p)!.jobId !== p.job.id && ownerOf(p)!.requestHash === p.job.requestHash,
  );
  const originalIds = [...new Set(replays.map((p) => ownerOf(p)!.jobId))];
  const originals = new Map<string, JobRow>();
  for (const [shard, ids] of shards.groupByShard(originalIds, (id) => id)) {
    for (const row of await shards.on(shard, () => getJobsByIds(shard.db, tenant, ids))) originals.set(row.id, row);
  }
  // a replay whose original D1 does not hold: its insert failed after the claim (this request, the
  // same one, stores it), or the purge took it as finished history (it never runs again)
  const missing = replays.filter((p) => !originals.has(ownerOf(p)!.jobId));
  const purged = await purgedOriginals(env, config, tenant, missing, ownerOf, now);
  // what this request writes: its own jobs, and a missing original of the same request under its id
  const toInsert = new Map<PreparedJob, NewJob>();
  for (const p of prepared) {
    const owner = ownerOf(p);
    if (owner === undefined || owner.jobId === p.job.id) toInsert.set(p, p.job);
    else if (
      !originals.has(owner.jobId) &&
      owner.requestHash === p.job.requestHash &&
      !purged.ids.has(owner.jobId) &&
      ![...toInsert.values()].some((j) => j.id === owner.jobId)
    ) {
      toInsert.set(p, { ...p.job, id: owner.jobId, bucket: bucketOfJob(owner.jobId, config.BUCKETS) });
    }
  }
  // one batch per shard, the request's own last: it alone holds jobs without a key, so when a shard
  // fails nothing keyless is stored (a retry would store it again); keyed jobs stored before the
  // failure are what their keys already name, and the retry returns them
  const ownShard = shards.of(prepared[0]!.job.id).index;
  const groups = shards
    .groupByShard([...toInsert.values()], (j) => j.id)
    .sort(([a], [b]) => Number(a.index === ownShard) - Number(b.index === ownShard));
  const meters: D1Meter[] = [];
  for (const [shard, jobs] of groups) {
    const inserted = await shards.on(shard, () =>
      insertJobs(shard.db, tenant, jobs, now).catch(async (error: unknown) => {
        if (!isFullError(error)) throw error;
        shards.noteSize(shard.index, null); // the next requests go to shards with room
        // nothing was stored: the keys naming these jobs are given up, so a retry is not sent back here
        const keyed = jobs.flatMap((j) => (j.idempotencyKey === null ? [] : [{ key: j.idempotencyKey, jobId: j.id }]));
        await releaseKeys(env, tenant, keyed).catch((e: unknown) => console.error("releasing idempotency keys failed", e));
        throw new ShardsFull([{ index: shard.index, bytes: null }], shards.count, config.SHARD_MAX_BYTES);
      }),
    );
    shards.noteSize(shard.index, inserted.sizeAfter);
    meters.push({ shard: shard.index, d1RowsWritten: inserted.rowsWritten });
  }
  const created = new Map([...toInsert].map(([p, job]): [PreparedJob, JobRow] => [p, rowOf(tenant, job, now)]));
  await handOff(env, config, [...created.values()], now, meters);
  return prepared.map((p): CreateResult => {
    const row = created.get(p);
    if (row) return { status: row.id === p.job.id ? 201 : 200, job: presentJob(row, now) };
    const owner = ownerOf(p)!;
    const field = p.fieldPrefix ? `${p.fieldPrefix}.idempotencyKey` : "idempotencyKey";
    if (owner.requestHash !== p.job.requestHash) {
      return {
        status: 409,
        error: new ApiError(
          409,
          "idempotency_key_reused",
          "this Idempotency-Key was used for a different request within the dedupe window",
          field,
        ),
      };
    }
    const original =
      originals.get(owner.jobId) ?? [...created.values()].find((r) => r.id === owner.jobId) ?? purged.answers.get(owner.jobId);
    if (original) return { status: 200, job: presentJob(original, now) };
    return {
      status: 409,
      error: new ApiError(
        409,
        "idempotency_job_purged",
        `the job this Idempotency-Key names (${owner.jobId}) is no longer in D1: it finished and the purge of history took it ` +
          "(or its create failed and was not sent again before that purge); it is not created or run again. Its outcome is in " +
          "the history archive if one is bound (GET /v1/executions/:id); a new key creates a new job",
        field,
      ),
    };
  });
}

/**
 * Of replays whose original job D1 does not hold, those the purge may have taken (`ids`): claimed
 * before the shard's purge mark (db/queries.ts purgeMark: the purge takes only jobs last changed
 * before its cutoff), or longer ago than HISTORY_RETENTION_MS (a purge from before the mark). Such
 * a job is never stored again, whatever the window says: it ran. `answers`: those the archive holds,
 * as the replay answers them (purgedOriginalOf). Reads one D1 row per shard among them (only
 * replays whose original is missing), and one R2 list and read per archived original.
 */
async function purgedOriginals(
  env: Env,
  config: Config,
  tenant: string,
  missing: PreparedJob[],
  ownerOf: (p: PreparedJob) => KeyOwner | undefined,
  now: number,
): Promise<{ ids: Set<string>; answers: Map<string, JobRow> }> {
  const ids = new Set<string>();
  const answers = new Map<string, JobRow>();
  if (missing.length === 0) return { ids, answers };
  const shards = shardsOf(env);
  for (const [shard, group] of shards.groupByShard(missing, (p) => ownerOf(p)!.jobId)) {
    const mark = await shards.on(shard, () => historyPurgedBefore(shard.db));
    for (const p of group) {
      const owner = ownerOf(p)!;
      if (owner.claimedAt < mark || owner.claimedAt <= now - config.HISTORY_RETENTION_MS) ids.add(owner.jobId);
    }
  }
  // a one-off job's only execution is archived (a recurring job's row is not): a few R2 reads at a time
  const archive = env.ARCHIVE;
  if (!archive) return { ids, answers };
  const lookups = [...new Map(missing.filter((p) => ids.has(ownerOf(p)!.jobId) && p.job.cron === null).map((p) => [ownerOf(p)!.jobId, p]))];
  for (let i = 0; i < lookups.length; i += ARCHIVE_READS_AT_ONCE) {
    await Promise.all(
      lookups.slice(i, i + ARCHIVE_READS_AT_ONCE).map(async ([jobId, p]) => {
        const found = await findArchived(archive, tenant, oneOffExecutionId(jobId));
        if (found && found.execution.jobId === jobId) answers.set(jobId, purgedOriginalOf(tenant, p, ownerOf(p)!, found.execution, config));
      }),
    );
  }
  return { ids, answers };
}

/** R2 reads in flight at once while purged originals are looked up (an invocation has 6 connections). */
const ARCHIVE_READS_AT_ONCE = 6;

/**
 * A purged original as a replay answers it: this request's settings (the same request as the one
 * that created it: their hashes match) under the original's id and creation time, finished as its
 * archived execution ended (canceled, else completed) at its finish; its trace is not kept by the
 * archive, so none is shown.
 */
function purgedOriginalOf(tenant: string, p: PreparedJob, owner: KeyOwner, archived: ArchivedExecution, config: Config): JobRow {
  const { trace: _notArchived, ...spec } = p.spec;
  const job = { ...p.job, id: owner.jobId, bucket: bucketOfJob(owner.jobId, config.BUCKETS), spec: JSON.stringify(spec) };
  const finishedAt = archived.finishedAt === null ? owner.claimedAt : Date.parse(archived.finishedAt);
  return {
    ...rowOf(tenant, job, owner.claimedAt),
    status: archived.status === "canceled" ? JOB_TRANSITIONS.cancel.to : JOB_TRANSITIONS.complete.to,
    updatedAt: finishedAt,
    runStatus: archived.status,
    attempts: archived.attempts,
    finishedAt,
  };
}

/**
 * The owner of every key the request names: claimed in the keys' objects, after a look at D1's
 * legacy table for keys from before those objects (shard 0, while it holds any).
 */
async function keyOwners(env: Env, config: Config, tenant: string, prepared: PreparedJob[], now: number): Promise<Map<string, KeyOwner>> {
  const keyed = prepared.filter((p) => p.job.idempotencyKey !== null);
  const owners = new Map<string, KeyOwner>();
  if (keyed.length === 0) return owners;
  const shards = shardsOf(env);
  const shard0 = shards.all[0]!;
  // while shard 0 does not answer, a keyed create answers 503 naming it (until its legacy keys are known gone)
  if (await shards.on(shard0, () => legacyKeysHeld(shards))) {
    const keys = [...new Set(keyed.map((p) => p.job.idempotencyKey!))];
    for (const o of await legacyKeyOwners(shard0.db, tenant, keys, now, config.IDEMPOTENCY_WINDOW_MS)) owners.set(o.key, o);
  }
  // the first of a request's items with a key claims it; a later one with the same key replays it
  const claims = new Map<string, KeyClaim>();
  for (const p of keyed) {
    const key = p.job.idempotencyKey!;
    if (!owners.has(key) && !claims.has(key)) claims.set(key, { key, jobId: p.job.id, requestHash: p.job.requestHash! });
  }
  for (const o of await claimKeys(env, tenant, [...claims.values()], now)) owners.set(o.key, o);
  return owners;
}

/**
 * Whether D1's legacy key table (shard 0) may still hold keys: asked until it answers no, then
 * never again by this isolate and configuration (nothing writes it).
 */
const legacyEmpty = new WeakSet<Shards>();
async function legacyKeysHeld(shards: Shards): Promise<boolean> {
  if (legacyEmpty.has(shards)) return false;
  if (await hasLegacyKeys(shards.all[0]!.db)) return true;
  legacyEmpty.add(shards);
  return false;
}

/** A job as insertJobs writes it (the one shape the hand-off and the answer read). */
function rowOf(tenant: string, job: NewJob, now: number): JobRow {
  return {
    id: job.id,
    tenant,
    name: job.name,
    status: "active",
    bucket: job.bucket,
    spec: job.spec,
    cron: job.cron,
    timezone: job.timezone,
    nextRunAt: job.nextRunAt,
    fired: 0,
    idempotencyKey: job.idempotencyKey,
    createdAt: now,
    updatedAt: now,
    version: 1,
    synced: 1,
    runStatus: null,
    attempts: 0,
    lastHttpStatus: null,
    lastError: null,
    deadReason: null,
    finishedAt: null,
    attemptLog: null,
    labels: job.labels === null ? null : JSON.stringify(job.labels),
    callbacks: null,
  };
}

/**
 * Hands new jobs to their buckets, one RPC per bucket: recurring jobs (the bucket keeps the
 * schedule) and one-off jobs due within the lookahead. A failed RPC is logged; the job waits
 * unsynced in D1 and the sync pass converges it.
 */
async function handOff(env: Env, config: Config, rows: JobRow[], now: number, meters: D1Meter[]): Promise<void> {
  const byBucket = new Map<number, JobDefinition[]>();
  for (const row of rows) {
    if (row.cron === null && !isNear(row.nextRunAt ?? now, now, config.LOOKAHEAD_MS)) continue;
    const list = byBucket.get(row.bucket) ?? [];
    list.push(definitionOf(row));
    byBucket.set(row.bucket, list);
  }
  // the D1 rows of this request travel with the first RPC, to be counted with the bucket's (metrics)
  let carry: D1Meter[] | undefined = meters;
  await Promise.all(
    [...byBucket].map(async ([bucket, definitions]) => {
      const carried = carry;
      carry = undefined;
      try {
        await bucketObject(env, bucket).applyJobs(bucket, definitions, carried);
      } catch (error) {
        console.error(`hand-off to bucket ${bucket} failed; the sync pass will converge it`, error);
      }
    }),
  );
  // only jobs due beyond the lookahead: no hand-off carried them, so one RPC counts them
  if (carry !== undefined && rows.length > 0) {
    await bucketObject(env, rows[0]!.bucket)
      .countD1RowsOf(carry)
      .catch((error) => console.error("counting a create's D1 rows failed", error));
  }
}
