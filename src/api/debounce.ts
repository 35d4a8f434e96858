/**
 * A debounced create (README "Debounce", core/debounce.ts), run by its key's DebounceKeys object
 * one at a time per key, so the order the object accepts creates in is the order their changes
 * land in: of 20 concurrent creates with one key, one job runs, with the last one's payload. The
 * key's object is per tenant and key, not per D1 shard, so this holds across shards (the job's
 * shard is in its id).
 *
 * - create: a new job, written like any other (createJobs);
 * - replace (trailing): the pending job takes this create's settings and run time through the one
 *   path that changes a job (PATCH, job-changes.ts), which also updates its bucket's copy;
 * - absorb (leading): nothing changes; the answer is the job that ran.
 * A window's job that is no longer pending (canceled, completed, due or due within DUE_MARGIN_MS:
 * it may be firing) is left alone and the create makes a new job.
 */

import { configOf } from "../config";
import { DEFAULT_RETRY_POLICY } from "../core/backoff";
import { bucketOf } from "../core/bucketing";
import { type DebounceWindow, decideDebounce, isPending, opening } from "../core/debounce";
import { LIMITS, parseSpec } from "../core/job";
import type { TraceContext } from "../core/trace";
import { getJob } from "../db/queries";
import type { JobRow } from "../db/schema";
import { isFullError, ShardsFull, ShardsLowered, ShardUnavailable, shardsOf } from "../db/shards";
import { claimKeys, releaseKeys } from "../idempotency/key-claims";
import { type CreateResult, createJobs, type PreparedJob } from "./create";
import { ApiError } from "./errors";
import { patchJob } from "./job-changes";
import { presentJob } from "./present";
import type { JobView } from "./responses";
import type { CreateJobInput } from "./schemas";

/** A tenant's debounce keys are spread over this many objects. Never change it: a key's home would move. */
export const DEBOUNCE_SLOTS = 64;

/** A debounced create, run by its key's object (DebounceKeys.submit); its result as createJobs gives one. */
export async function submitDebounced(env: Env, tenant: string, prepared: PreparedJob, now: number): Promise<CreateResult> {
  const key = prepared.spec.debounce!.key;
  const stub = env.DEBOUNCE_KEYS.getByName(`${tenant}\n${bucketOf(key, DEBOUNCE_SLOTS)}`);
  // the RPC stub wraps the union in its own types, which lose the narrowing on `ok`
  const answer = (await stub.submit(tenant, prepared, now)) as DebounceAnswer;
  if (answer.ok) return { status: answer.status, job: answer.job };
  const headers: Record<string, string> = answer.status === 503 ? { "retry-after": "1" } : {};
  return { status: answer.status, error: new ApiError(answer.status, answer.code, answer.message, answer.field, headers) };
}

/** A create's answer across the object's RPC (errors lose their class there: STYLE.md habit 7). */
export type DebounceAnswer =
  | { ok: true; status: 200 | 201; job: JobView }
  | { ok: false; status: 400 | 409 | 503 | 507; code: string; message: string; field: string | null };

/** What a create did to its key: the answer, and the key's window afterwards (null: unchanged). */
export interface Settled {
  answer: DebounceAnswer;
  window: DebounceWindow | null;
}

/** a replacement that meets a concurrent change of the job (a user's PATCH or cancel) reads it again, at most this often */
const REPLACE_TRIES = 3;

/** Runs one debounced create against its key's window `held`; the caller serializes per key. */
export async function settleDebounced(
  env: Env,
  tenant: string,
  prepared: PreparedJob,
  held: DebounceWindow | null,
  now: number,
): Promise<Settled> {
  try {
    const rule = prepared.spec.debounce!;
    const decision = decideDebounce(held, rule, now);
    if (decision.kind !== "create") {
      const settled = await onWindowJob(
        env,
        tenant,
        prepared,
        decision.jobId,
        decision.kind,
        decision.kind === "replace" ? decision.runAt : null,
        now,
      );
      if (settled) return { ...settled, window: settled.window && decision.window };
    }
    return await create(env, tenant, prepared, now);
  } catch (error) {
    return { answer: refusal(error), window: null };
  }
}

/** A new job opening a new window. */
async function create(env: Env, tenant: string, prepared: PreparedJob, now: number): Promise<Settled> {
  const opened = opening(prepared.spec.debounce!, now);
  const p: PreparedJob = { ...prepared, job: { ...prepared.job, nextRunAt: opened.runAt } };
  const [result] = await createJobs(env, configOf(env), tenant, [p], now);
  if (!result) throw new Error("createJobs returned no result");
  if ("error" in result) throw result.error;
  // 200: the idempotency key named an earlier request's job; the key's window stays as it is
  const window = result.status === 201 ? { jobId: p.job.id, ...opened.window } : null;
  return { answer: { ok: true, status: result.status, job: withOutcome(result.job, false, false) }, window };
}

/**
 * Replaces (runAt given) or absorbs into the window's job; undefined when that job is no longer
 * pending, so the create makes a new one. `window` of the result: whether the key's window moves.
 */
async function onWindowJob(
  env: Env,
  tenant: string,
  prepared: PreparedJob,
  jobId: string,
  kind: "replace" | "absorb",
  runAt: number | null,
  now: number,
): Promise<{ answer: DebounceAnswer; window: true | null } | undefined> {
  const shards = shardsOf(env);
  const shard = shards.of(jobId);
  const key = prepared.spec.debounce!.key;
  let claimed = false;
  for (let tries = 1; tries <= REPLACE_TRIES; tries++) {
    const job = await shards.on(shard, () => getJob(shard.db, tenant, jobId));
    if (!job || parseSpec(job.spec).debounce?.key !== key) return undefined;
    if (kind === "absorb" ? job.status === "canceled" : !pending(job, now)) return release(env, tenant, prepared, jobId, claimed);
    if (!claimed && prepared.job.idempotencyKey !== null) {
      const replay = await claimFor(env, tenant, prepared, jobId, now);
      if (replay) return { answer: replay, window: null };
      claimed = true;
    }
    if (kind === "absorb") return { answer: { ok: true, status: 200, job: withOutcome(presentJob(job, now), false, true) }, window: true };
    try {
      const changed = await patchJob(
        { env, db: shard.db, config: configOf(env), tenant, now },
        job,
        replacementOf(prepared.debounced!, runAt!, prepared.spec.trace),
      );
      return { answer: { ok: true, status: 200, job: withOutcome(presentJob(changed.job, now), true, false) }, window: true };
    } catch (error) {
      if (!(error instanceof ApiError)) throw error;
      if (error.code === "not_changeable") return release(env, tenant, prepared, jobId, claimed); // it finished meanwhile
      if (error.code !== "conflict") throw error;
    }
  }
  throw new ApiError(409, "conflict", "the key's pending job kept changing meanwhile; try again", "debounce.key");
}

/** Whether a one-off job has yet to start: active, not finished, not due within DUE_MARGIN_MS (core/debounce.ts). */
function pending(job: JobRow, now: number): boolean {
  return (
    job.status === "active" &&
    job.cron === null &&
    (job.runStatus === null || job.runStatus === "scheduled") &&
    isPending(job.nextRunAt ?? 0, now)
  );
}

/**
 * The create's idempotency key, claimed naming the window's job: a retry of this request, even
 * after the window closed, then answers that job instead of running the payload again. Returns the
 * answer of a replay (the key was claimed before: nothing changes) or of a key reused with another request.
 */
async function claimFor(env: Env, tenant: string, prepared: PreparedJob, jobId: string, now: number): Promise<DebounceAnswer | undefined> {
  const { idempotencyKey, requestHash } = prepared.job;
  const [owner] = await claimKeys(env, tenant, [{ key: idempotencyKey!, jobId, requestHash: requestHash! }], now);
  if (!owner) throw new Error("claimKeys returned no owner");
  // claimed just now by this request (creates with one debounce key run one at a time)
  if (owner.jobId === jobId && owner.claimedAt === now && owner.requestHash === requestHash) return undefined;
  const field = prepared.fieldPrefix ? `${prepared.fieldPrefix}.idempotencyKey` : "idempotencyKey";
  if (owner.requestHash !== requestHash) {
    return refusal(
      new ApiError(409, "idempotency_key_reused", "this Idempotency-Key was used for a different request within the dedupe window", field),
    );
  }
  const shards = shardsOf(env);
  const shard = shards.of(owner.jobId);
  const original = await shards.on(shard, () => getJob(shard.db, tenant, owner.jobId));
  if (!original) return refusal(new ApiError(409, "idempotency_key_reused", "this Idempotency-Key names a job that is gone", field));
  return { ok: true, status: 200, job: presentJob(original, now) };
}

/** The window's job is not pending: a key this request claimed for it is given up, for the new job. */
async function release(env: Env, tenant: string, prepared: PreparedJob, jobId: string, claimed: boolean): Promise<undefined> {
  if (claimed) await releaseKeys(env, tenant, [{ key: prepared.job.idempotencyKey!, jobId }]);
  return undefined;
}

/**
 * A create's settings as a PATCH that replaces every one of them (not merged into the job's): the
 * target whole, defaults spelled out, absent optional settings removed.
 */
export function replacementOf(input: CreateJobInput, runAt: number, trace: TraceContext | undefined): Record<string, unknown> {
  const t = input.target;
  const target =
    t.worker !== undefined
      ? { worker: t.worker, payload: t.payload ?? null }
      : t.pull !== undefined
        ? { pull: t.pull, payload: t.payload ?? null }
        : { url: t.url, method: t.method ?? "POST", headers: t.headers ?? {}, body: t.body ?? null };
  return {
    name: input.name ?? null,
    target,
    runAt,
    timeoutMs: input.timeoutMs ?? LIMITS.timeoutMs.default,
    retry: { ...DEFAULT_RETRY_POLICY, ...input.retry },
    metadata: input.metadata ?? null,
    flowControl: input.flowControl ?? null,
    labels: input.labels ?? null,
    callback: input.callback ?? null,
    failureCallback: input.failureCallback ?? null,
    // the latest create's trace (its body's or its request's): the run is its work
    trace: trace ?? null,
  };
}

function withOutcome(view: JobView, replaced: boolean, absorbed: boolean): JobView {
  return view.debounce ? { ...view, debounce: { ...view.debounce, replaced, absorbed } } : view;
}

/** An error as an answer: what the API would have answered for it. */
function refusal(error: unknown): Extract<DebounceAnswer, { ok: false }> {
  if (error instanceof ApiError && (error.status === 400 || error.status === 409)) {
    return { ok: false, status: error.status, code: error.code, message: error.message, field: error.field };
  }
  if (error instanceof ShardsFull || isFullError(error)) {
    return { ok: false, status: 507, code: "shards_full", message: (error as Error).message, field: null };
  }
  if (error instanceof ShardUnavailable || error instanceof ShardsLowered) {
    const code = error instanceof ShardsLowered ? "shards_lowered" : "shard_unavailable";
    return { ok: false, status: 503, code, message: error.message, field: null };
  }
  throw error;
}
