/**
 * Changes to an existing job: cancel, pause, resume, PATCH, and redrive of a dead one-off job.
 * Each is one guarded D1 write that raises the job's version and leaves it unsynced (durable,
 * and found by the sync pass if nothing else happens), then the job's bucket applies that
 * version. Answered 200 once the bucket holds it, 202 when it is durable and converging
 * (a retried request re-sends an unsynced change instead of answering "done" without it).
 */

import type { Config } from "../config";
import { canonicalTimeZone, occurrenceAfter } from "../core/cron";
import { type CallbackTarget, type FlowControl, isHttpTarget, isPullTarget, isWorkerTarget, parseSpec, type Target } from "../core/job";
import { JOB_TRANSITIONS, type JobTransition, jobTransition } from "../core/lifecycle";
import { changeJob, type JobChange } from "../db/change-job";
import { definitionOf } from "../db/job-definition";
import type { Db } from "../db/kit";
import { getDeadLetter } from "../db/list-dead-letters";
import { getOccurrence } from "../db/list-executions";
import { getJob } from "../db/list-jobs";
import { clearRedrives, markRedrive, redriveOneOff } from "../db/redrive";
import type { DeadLetterRow, JobRow } from "../db/schema";
import { markSynced } from "../db/sync-pass";
import { bucketObject } from "../placement";
import { RESULT_MESSAGES } from "../protocol/bucket";
import { PatchJobInput } from "../schemas/job-input";
import { ApiError, type ErrorCode, errorCodeOf, fromZodError, refuseUnfaithful } from "./errors";
import { buildSpec, type JobInput } from "./validation";

export interface Deps {
  env: Env;
  db: Db;
  config: Config;
  tenant: string;
  now: number;
}

/** The job after a change, and whether its bucket already holds that version. */
export interface ChangeResult {
  job: JobRow;
  applied: boolean;
}

export function cancelJob(deps: Deps, job: JobRow): Promise<ChangeResult> {
  return onLatest(deps, job, (latest) => {
    if (latest.status === "canceled") return sync(deps, latest);
    return commit(deps, latest, "cancel", { status: "canceled" }, "not_cancelable");
  });
}

/** Pause stops new executions (what has not started is canceled, a running attempt finishes). */
export function pauseJob(deps: Deps, job: JobRow): Promise<ChangeResult> {
  return onLatest(deps, job, (latest) => {
    if (latest.cron === null) throw new ApiError("not_recurring", "only recurring jobs can be paused; cancel a one-off job instead", "id");
    if (latest.status === "paused") return sync(deps, latest);
    return commit(deps, latest, "pause", { status: "paused" }, "not_active");
  });
}

/** Resume continues from the next future occurrence; occurrences missed while paused do not fire. */
export function resumeJob(deps: Deps, job: JobRow): Promise<ChangeResult> {
  return onLatest(deps, job, (latest) => {
    if (latest.cron === null) throw new ApiError("not_recurring", "only recurring jobs can be paused and resumed", "id");
    if (latest.status === "active") return sync(deps, latest);
    const spec = parseSpec(latest.spec);
    const next = spec.schedule ? occurrenceAfter(spec.schedule, deps.now - 1) : null;
    return commit(deps, latest, "resume", { status: "active", nextRunAt: next ?? latest.nextRunAt }, "not_paused");
  });
}

/** a cancel, pause or resume that met a concurrent change reads the job again, at most this often */
const CHANGE_TRIES = 5;

/**
 * Cancel, pause and resume mean the same whatever else changed (a rename, a new run time, the
 * job's completion): one that meets a concurrent change (its guarded write found a newer version)
 * reads the job again and applies to that, instead of answering 409 conflict. So a bulk action
 * racing ordinary changes still changes every job exactly as the single request would.
 */
async function onLatest(deps: Deps, job: JobRow, change: (latest: JobRow) => Promise<ChangeResult>): Promise<ChangeResult> {
  let latest = job;
  for (let tries = 1; ; tries++) {
    try {
      return await change(latest);
    } catch (error) {
      if (!(error instanceof ApiError) || error.code !== "conflict" || tries >= CHANGE_TRIES) throw error;
      const again = await getJob(deps.db, deps.tenant, job.id);
      if (!again) throw new ApiError("not_found", "job not found", "id");
      latest = again;
    }
  }
}

/** A stored callback as the input it was built from (a PATCH keeps it unless it names another). */
function callbackInputOf(target: CallbackTarget | null | undefined): JobInput["callback"] {
  if (!target) return undefined;
  return isWorkerTarget(target) ? { worker: target.worker } : { url: target.url, headers: target.headers };
}

/**
 * A PATCH's target fields over the current target. Giving url, worker or pull chooses the kind (a
 * switch drops the other kinds' fields); other fields merge into the current kind, where
 * buildSpec refuses one that does not belong to it.
 */
function mergedTarget(current: Target, patch: NonNullable<PatchJobInput["target"]>): JobInput["target"] {
  const kind =
    patch.url !== undefined ? "http" : patch.worker !== undefined ? "worker" : patch.pull !== undefined ? "pull" : kindOf(current);
  if (kind === "http") {
    const http = isHttpTarget(current) ? current : undefined;
    return {
      ...patch,
      url: patch.url ?? http?.url,
      method: patch.method ?? http?.method,
      headers: patch.headers ?? http?.headers,
      body: "body" in patch ? patch.body : (http?.body ?? undefined),
    };
  }
  // a handler Worker or a pull queue: a name and a payload, kept across a switch between the two
  const named = isHttpTarget(current) ? undefined : current;
  const payload = "payload" in patch ? patch.payload : named?.payload == null ? undefined : JSON.parse(named.payload);
  if (kind === "worker") return { ...patch, worker: patch.worker ?? (isWorkerTarget(current) ? current.worker : undefined), payload };
  return { ...patch, pull: patch.pull ?? (isPullTarget(current) ? current.pull : undefined), payload };
}

function kindOf(target: Target): "http" | "worker" | "pull" {
  return isWorkerTarget(target) ? "worker" : isPullTarget(target) ? "pull" : "http";
}

/**
 * PATCH: merges the change into the job's settings and validates the result like a create.
 * A new schedule starts from its next occurrence (what was scheduled under the old one is
 * canceled); a one-off job's new run time applies to its execution (a running attempt finishes
 * first, then it runs again at the new time).
 */
export async function patchJob(deps: Deps, job: JobRow, raw: unknown): Promise<ChangeResult> {
  if (jobTransition(job.status, "patch") === null) throw new ApiError("not_changeable", `the job is ${job.status}`, "id");
  refuseUnfaithful(raw);
  const parsed = PatchJobInput.safeParse(raw);
  if (!parsed.success) throw fromZodError(parsed.error);
  const patch = parsed.data;
  const current = parseSpec(job.spec);
  const recurring = current.schedule !== null;
  const wrongKind = recurring
    ? (["runAt", "delay"] as const).find((k) => patch[k] !== undefined)
    : (["cron", "timezone", "startAt", "endAt", "maxOccurrences", "catchUp"] as const).find((k) => patch[k] !== undefined);
  if (wrongKind) {
    throw new ApiError("invalid_field", `${wrongKind} does not apply to a ${recurring ? "recurring" : "one-off"} job`, wrongKind);
  }
  const schedule = current.schedule;
  const input: JobInput = {
    target: mergedTarget(current.target, patch.target ?? {}),
    timeoutMs: patch.timeoutMs ?? current.timeoutMs,
    retry: { ...current.retry, ...patch.retry },
    metadata: patch.metadata === null ? undefined : (patch.metadata ?? current.metadata ?? undefined),
    flowControl: patch.flowControl === null ? undefined : (patch.flowControl ?? flowControlInputOf(current.flowControl)),
    // the trace it was created in stays its trace unless the PATCH moves it (null: out of any)
    ...(patch.trace === null ? {} : patch.trace || current.trace ? { trace: patch.trace ?? current.trace } : {}),
    callback: patch.callback === null ? undefined : (patch.callback ?? callbackInputOf(current.callback)),
    failureCallback: patch.failureCallback === null ? undefined : (patch.failureCallback ?? callbackInputOf(current.failureCallback)),
    priority: patch.priority ?? current.priority,
    ...(schedule
      ? {
          cron: patch.cron ?? schedule.cron,
          timezone: patch.timezone ?? schedule.timezone,
          startAt: patch.startAt ?? schedule.startAt ?? undefined,
          endAt: patch.endAt ?? schedule.endAt ?? undefined,
          maxOccurrences: patch.maxOccurrences ?? schedule.maxOccurrences ?? undefined,
          catchUp: patch.catchUp ?? schedule.catchUp,
        }
      : { runAt: patch.runAt ?? (patch.delay === undefined ? (job.nextRunAt ?? undefined) : undefined), delay: patch.delay }),
  };
  const { spec, dueAt } = buildSpec(input, deps, "", isHttpTarget(current.target) ? current.target.headers : {});
  if (current.debounce) spec.debounce = current.debounce; // a debounced job keeps its key (a replacement is a PATCH)
  // a schedule stored before time zones were normalized ("europe/berlin") is the same schedule
  const currentZone = current.schedule ? canonicalTimeZone(current.schedule.timezone) : null;
  if (
    current.schedule &&
    spec.schedule &&
    JSON.stringify({ ...current.schedule, timezone: currentZone }) === JSON.stringify(spec.schedule)
  ) {
    spec.schedule = current.schedule;
  }
  const rescheduled = recurring
    ? JSON.stringify(spec.schedule) !== JSON.stringify(current.schedule)
    : (patch.runAt !== undefined || patch.delay !== undefined) && dueAt !== job.nextRunAt;
  return commit(
    deps,
    job,
    "patch",
    {
      name: patch.name === undefined ? job.name : patch.name,
      spec: JSON.stringify(spec),
      cron: spec.schedule?.cron ?? null,
      timezone: spec.schedule?.timezone ?? null,
      nextRunAt: rescheduled ? dueAt : job.nextRunAt,
      ...(patch.labels === undefined ? {} : { labels: patch.labels }),
    },
    "not_changeable",
  );
}

/**
 * Redrive of a dead execution, given a fresh attempt budget: a one-off job's becomes active again
 * (a new job version); a recurring job's dead occurrence is handed to its bucket. Both converge
 * through the sync pass. `exists`: whether the id names an execution of the tenant at all (a 409
 * not_dead then, else a 404). Returns the dead letter it redrove.
 */
export async function redriveExecution(deps: Deps, id: string, exists: () => Promise<boolean>): Promise<DeadLetterRow> {
  const { db, tenant } = deps;
  const dead = await getDeadLetter(db, tenant, id);
  if (!dead || dead.redriveAt !== null) {
    if (await exists()) throw new ApiError("not_dead", "only dead executions can be redriven", "id");
    throw new ApiError("not_found", "execution not found", "id");
  }
  const job = await getJob(db, tenant, dead.jobId);
  if (!job) throw new ApiError("not_found", "execution not found", "id");
  if (job.status === "canceled") throw new ApiError("job_canceled", "the job was canceled", "id");
  if (job.cron === null) {
    await redriveOneOffJob(deps, job, id);
    return dead;
  }
  if (job.status !== "active") throw new ApiError("job_inactive", RESULT_MESSAGES.job_inactive!, "id");
  await markRedrive(db, tenant, id, deps.now);
  try {
    const [result] = await bucketObject(deps.env, job.bucket).redrive(job.bucket, [
      {
        executionId: id,
        jobId: job.id,
        tenant,
        occurrenceAt: dead.dueAt,
        occurrence: dead.occurrence,
        attempts: dead.attempts,
        attemptLog: (await getOccurrence(db, tenant, id))?.attemptLog ?? null,
      },
    ]);
    if (result && !result.ok) throw new ApiError(errorCodeOf(result.code), RESULT_MESSAGES[result.code]!, "id");
    await clearRedrives(db, [{ tenant, executionId: id }]);
  } catch (error) {
    if (error instanceof ApiError) throw error;
    console.error(`redrive of ${id} in its bucket failed; the sync pass converges it`, error);
  }
  return dead;
}

/** Redrive of a dead one-off job: active again, due now, with a fresh attempt budget. */
async function redriveOneOffJob(deps: Deps, job: JobRow, executionId: string): Promise<ChangeResult> {
  if (jobTransition(job.status, "redrive") === null) throw new ApiError("job_canceled", `the job is ${job.status}`, "id");
  const updated = await redriveOneOff(deps.db, deps.tenant, job, executionId, deps.now);
  if (!updated) throw conflict();
  return sync(deps, updated);
}

/** Writes a change at the job's version (a concurrent change makes this one a 409), then syncs it. */
async function commit(deps: Deps, job: JobRow, event: JobTransition, change: JobChange, refusal: ErrorCode): Promise<ChangeResult> {
  const to = jobTransition(job.status, event);
  if (to === null) throw new ApiError(refusal, `the job is ${job.status}`, "id");
  const from = JOB_TRANSITIONS[event].from;
  const updated = await changeJob(deps.db, deps.tenant, job.id, job.version, from, { ...change, status: to }, deps.now);
  if (!updated) throw conflict();
  return sync(deps, updated);
}

/** The bucket applies the job's version; acknowledged, the job is synced. A failure is left to the sync pass. */
async function sync(deps: Deps, job: JobRow): Promise<ChangeResult> {
  if (job.synced === 1) return { job, applied: true };
  try {
    const applied = await bucketObject(deps.env, job.bucket).applyJobs(job.bucket, [definitionOf(job)]);
    if (!applied.some((a) => a.jobId === job.id && a.version >= job.version)) return { job, applied: false };
    await markSynced(deps.db, [{ tenant: job.tenant, jobId: job.id, version: job.version }]);
    return { job: { ...job, synced: 1 }, applied: true };
  } catch (error) {
    console.error(`applying job ${job.id} v${job.version} in its bucket failed; the sync pass converges it`, error);
    return { job, applied: false };
  }
}

function conflict(): ApiError {
  return new ApiError("conflict", "the job changed meanwhile; read it and try again", "id");
}

/** A stored flow control as the input it came from: a PATCH without flowControl keeps it (one with it replaces it whole). */
function flowControlInputOf(f: FlowControl | null | undefined): JobInput["flowControl"] {
  if (!f) return undefined;
  return {
    key: f.key,
    periodSeconds: f.periodSeconds,
    ...(f.rate === null ? {} : { rate: f.rate }),
    ...(f.parallelism === null ? {} : { parallelism: f.parallelism }),
  };
}
