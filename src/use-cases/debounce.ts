/**
 * A debounced create (docs/debounce.md, core/debounce.ts), run by its key's DebounceKeys object
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
 *
 * A create cut short leaves nothing that misleads its retry or the next create:
 * - the idempotency key it claimed for the window's job is given up when the create fails (a retry
 *   would otherwise be answered as a replay, and its payload never run);
 * - the window is written before the job: a new job's window names it before it is inserted, a
 *   moved window ends at its replacement's run time before the PATCH (a reset between the two
 *   would otherwise leave a job no window names or one running after its window ends, and the next
 *   create would make a second job; a window naming a missing or no longer pending job makes anew).
 * A failure that is not a refusal (D1, an object that did not answer) is a 503 `unavailable`.
 */

import { configOf } from "../config";
import { DEFAULT_RETRY_POLICY } from "../core/backoff";
import { bucketOf } from "../core/bucketing";
import { type DebounceDecision, type DebounceWindow, decideDebounce, isPending, opening } from "../core/debounce";
import { LIMITS, parseSpec } from "../core/job";
import type { TraceContext } from "../core/trace";
import { getJob } from "../db/list-jobs";
import type { JobRow } from "../db/schema";
import { describeFailure, isFullError, ShardsFull, ShardsLowered, ShardUnavailable, shardsOf } from "../db/shards";
import { claimKeys, releaseKeys } from "../idempotency/key-claims";
import { objectOf } from "../placement";
import type { CreateJobInput } from "../schemas/job-input";
import type { JobView } from "../schemas/responses";
import { type CreateResult, createJobs } from "./create";
import { ApiError, errorCodeOf } from "./errors";
import { patchJob } from "./job-changes";
import { presentJob } from "./present";
import type { PreparedJob } from "./validation";

/** A tenant's debounce keys are spread over this many objects. Never change it: a key's home would move. */
export const DEBOUNCE_SLOTS = 64;

/** A debounced create, run by its key's object (DebounceKeys.submit); its result as createJobs gives one. */
export async function submitDebounced(env: Env, tenant: string, prepared: PreparedJob, now: number): Promise<CreateResult> {
  const key = prepared.spec.debounce!.key;
  const stub = objectOf(env, env.DEBOUNCE_KEYS, `${tenant}\n${bucketOf(key, DEBOUNCE_SLOTS)}`);
  let answer: DebounceAnswer;
  try {
    // the RPC stub wraps the union in its own types, which lose the narrowing on `ok`
    answer = (await stub.submit(tenant, prepared, now)) as DebounceAnswer;
  } catch (error) {
    // the key's object did not answer (restarting, overloaded): this item alone fails, a batch's others stand
    answer = refusal(error);
  }
  if (answer.ok) return { status: answer.status, job: answer.job };
  const headers: Record<string, string> = answer.status === 503 ? { "retry-after": "1" } : {};
  return { status: answer.status, error: new ApiError(errorCodeOf(answer.code), answer.message, answer.field, headers) };
}

/** A create's answer across the object's RPC (errors lose their class there: STYLE.md habit 7). */
export type DebounceAnswer =
  | { ok: true; status: 200 | 201; job: JobView }
  | { ok: false; status: 400 | 409 | 503 | 507; code: string; message: string; field: string | null };

/** Writes the key's window (null: removes it), at once: the key's object passes it in. */
export type KeepWindow = (window: DebounceWindow | null) => void;

/** a replacement that meets a concurrent change of the job (a user's PATCH or cancel) reads it again, at most this often */
const REPLACE_TRIES = 3;

/**
 * Runs one debounced create against its key's window `held`, writing the window with `keep` as it
 * goes; the caller serializes per key.
 */
export async function settleDebounced(
  env: Env,
  tenant: string,
  prepared: PreparedJob,
  held: DebounceWindow | null,
  now: number,
  keep: KeepWindow,
): Promise<DebounceAnswer> {
  try {
    const rule = prepared.spec.debounce!;
    const decision = decideDebounce(held, rule, now);
    if (decision.kind !== "create") {
      const answer = await onWindowJob(env, tenant, prepared, decision, now, keep);
      if (answer) return answer;
    }
    return await create(env, tenant, prepared, held, now, keep);
  } catch (error) {
    return refusal(error);
  }
}

/** A new job opening a new window. */
async function create(
  env: Env,
  tenant: string,
  prepared: PreparedJob,
  held: DebounceWindow | null,
  now: number,
  keep: KeepWindow,
): Promise<DebounceAnswer> {
  const opened = opening(prepared.spec.debounce!, now);
  const p: PreparedJob = { ...prepared, job: { ...prepared.job, nextRunAt: opened.runAt } };
  // the window names the job before it is written: a reset after the write cannot leave it outside
  // (a failed write leaves the window naming a missing job, which the next create makes anew)
  keep({ jobId: p.job.id, ...opened.window });
  const [result] = await createJobs(env, configOf(env), tenant, [p], now);
  if (!result) throw new Error("createJobs returned no result");
  // nothing new (refused; or 200: the idempotency key named an earlier request's job): the key's window as it was
  if ("error" in result || result.status !== 201) keep(held);
  if ("error" in result) throw result.error;
  return { ok: true, status: result.status, job: withOutcome(result.job, false, false) };
}

/**
 * Replaces (trailing) or absorbs into (leading) the window's job, moving the window with `keep`;
 * undefined when that job is no longer pending, so the create makes a new one.
 */
async function onWindowJob(
  env: Env,
  tenant: string,
  prepared: PreparedJob,
  decision: Exclude<DebounceDecision, { kind: "create" }>,
  now: number,
  keep: KeepWindow,
): Promise<DebounceAnswer | undefined> {
  const { jobId, kind } = decision;
  const shards = shardsOf(env);
  const shard = shards.of(jobId);
  const key = prepared.spec.debounce!.key;
  // the create's idempotency key, once claimed for the window's job: kept only if the create succeeds
  const claim = { claimed: false };
  try {
    for (let tries = 1; tries <= REPLACE_TRIES; tries++) {
      const job = await shards.on(shard, () => getJob(shard.db, tenant, jobId));
      if (!job || parseSpec(job.spec).debounce?.key !== key) return undefined;
      if (kind === "absorb" ? job.status === "canceled" : !pending(job, now)) return await release(env, tenant, prepared, jobId, claim);
      if (!claim.claimed && prepared.job.idempotencyKey !== null) {
        const replay = await claimFor(env, tenant, prepared, jobId, now);
        if (replay) return replay; // the window stays as it is
        claim.claimed = true;
      }
      if (decision.kind === "absorb") {
        keep(decision.window);
        return { ok: true, status: 200, job: withOutcome(presentJob(job, now), false, true) };
      }
      // the window moves before the job does: a reset after the PATCH cannot leave the window ending
      // before the job runs (a create then would make a second job); a PATCH that failed leaves a
      // window ending after its job, whose own run time pending() reads
      keep(decision.window);
      try {
        const changed = await patchJob(
          { env, db: shard.db, config: configOf(env), tenant, now },
          job,
          replacementOf(prepared.debounced!, decision.runAt, prepared.spec.trace),
        );
        return { ok: true, status: 200, job: withOutcome(presentJob(changed.job, now), true, false) };
      } catch (error) {
        if (!(error instanceof ApiError)) throw error;
        if (error.code === "not_changeable") return await release(env, tenant, prepared, jobId, claim); // it finished meanwhile
        if (error.code !== "conflict") throw error;
      }
    }
    throw new ApiError("conflict", "the key's pending job kept changing meanwhile; try again", "debounce.key");
  } catch (error) {
    // nothing changed: a retry must run its payload, not be answered as a replay of the window's job
    await release(env, tenant, prepared, jobId, claim).catch((e: unknown) => console.error("releasing an idempotency key failed", e));
    throw error;
  }
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
      new ApiError("idempotency_key_reused", "this Idempotency-Key was used for a different request within the dedupe window", field),
    );
  }
  const shards = shardsOf(env);
  const shard = shards.of(owner.jobId);
  const original = await shards.on(shard, () => getJob(shard.db, tenant, owner.jobId));
  if (!original)
    return refusal(
      new ApiError("idempotency_job_purged", "this Idempotency-Key names a job that left the history (send it with a new key)", field),
    );
  return { ok: true, status: 200, job: presentJob(original, now) };
}

/**
 * A key this request claimed for the window's job is given up: the job is not pending (the key is
 * for the new job), or the create failed (a retry claims it afresh).
 */
async function release(env: Env, tenant: string, prepared: PreparedJob, jobId: string, claim: { claimed: boolean }): Promise<undefined> {
  if (claim.claimed) await releaseKeys(env, tenant, [{ key: prepared.job.idempotencyKey!, jobId }]);
  claim.claimed = false;
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

/**
 * An error as an answer: what the API would have answered for it; anything else (a D1 error, an
 * object that did not answer) is a 503: nothing of this create was kept, send it again.
 */
function refusal(error: unknown): Extract<DebounceAnswer, { ok: false }> {
  if (error instanceof ApiError && (error.status === 400 || error.status === 409)) {
    return { ok: false, status: error.status, code: error.code, message: error.message, field: error.field };
  }
  // only the messages this code writes are answered: D1's own text carries SQL and parameters
  if (error instanceof ShardsFull) return { ok: false, status: 507, code: "shards_full", message: error.message, field: null };
  if (isFullError(error)) {
    console.error("a debounced create found its D1 shard full", describeFailure(error));
    return {
      ok: false,
      status: 507,
      code: "shards_full",
      message: "the D1 shard of this create is full; send the create again",
      field: null,
    };
  }
  if (error instanceof ShardUnavailable || error instanceof ShardsLowered) {
    console.error(describeFailure(error));
    const code = error instanceof ShardsLowered ? "shards_lowered" : "shard_unavailable";
    return { ok: false, status: 503, code, message: error.message, field: null };
  }
  console.error("a debounced create failed", error);
  return { ok: false, status: 503, code: "unavailable", message: "a dependency did not answer; send the create again", field: null };
}
