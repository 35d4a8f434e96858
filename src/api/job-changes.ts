/**
 * Changes to an existing job: cancel, pause, resume, PATCH. D1 changes first (the record), then
 * the job's bucket applies them to what it holds; a new occurrence goes through the same
 * hand-off as a create.
 */
import type { Config } from "../config";
import { bucketName, timeBucketOf } from "../core/bucketing";
import { occurrenceAfter } from "../core/cron";
import { occurrenceId } from "../core/id";
import type { JobSpec, JobStatus } from "../core/job";
import {
  closeJobExecutions,
  type Db,
  getJob,
  insertExecution,
  updateJob,
} from "../db/queries";
import type { JobRow } from "../db/schema";
import type { Env } from "../env";
import { buildSpec, handOffExecutions, type JobInput } from "./create";
import { ApiError, fromZodError } from "./errors";
import { PatchJobInput } from "./schemas";

interface Deps {
  env: Env;
  db: Db;
  config: Config;
  tenant: string;
  now: number;
}

export async function cancelJob(deps: Deps, job: JobRow): Promise<JobRow> {
  if (job.status === "completed") throw new ApiError(409, "not_cancelable", "the job has already completed", "id");
  if (job.status !== "canceled") await closeJob(deps, job, "canceled", "canceled");
  return (await getJob(deps.db, deps.tenant, job.id))!;
}

/** Pause stops new executions (scheduled ones are canceled, a running one finishes). */
export async function pauseJob(deps: Deps, job: JobRow): Promise<JobRow> {
  if (job.cron === null) throw new ApiError(409, "not_recurring", "only recurring jobs can be paused; cancel a one-off job instead", "id");
  if (job.status === "paused") return job;
  if (job.status !== "active") throw new ApiError(409, "not_active", `the job is ${job.status}`, "id");
  await closeJob(deps, job, "paused", "paused");
  return (await getJob(deps.db, deps.tenant, job.id))!;
}

/** Resume continues from the next future occurrence; missed ones while paused do not fire. */
export async function resumeJob(deps: Deps, job: JobRow): Promise<JobRow> {
  if (job.status === "active") return job;
  if (job.status !== "paused") throw new ApiError(409, "not_paused", `the job is ${job.status}`, "id");
  const spec = JSON.parse(job.spec) as JobSpec;
  const { fired } = await deps.env.BUCKET.getByName(bucketName(job.bucket)).reviseJob({ jobId: job.id, tenant: deps.tenant, status: "paused", closeOpen: null });
  await scheduleNext(deps, job, spec, "active", null, fired);
  return (await getJob(deps.db, deps.tenant, job.id))!;
}

/**
 * PATCH: merges the change into the job's settings and validates the result like a create.
 * What already ran keeps its history; when the schedule changes, what was scheduled is
 * canceled and the next occurrence of the new schedule is scheduled.
 */
export async function patchJob(deps: Deps, job: JobRow, raw: unknown): Promise<JobRow> {
  if (job.status === "canceled" || job.status === "completed") {
    throw new ApiError(409, "not_changeable", `the job is ${job.status}`, "id");
  }
  const parsed = PatchJobInput.safeParse(raw);
  if (!parsed.success) throw fromZodError(parsed.error);
  const patch = parsed.data;
  const current = JSON.parse(job.spec) as JobSpec;
  const recurring = current.schedule !== null;
  const wrongKind = recurring
    ? (["runAt", "delay"] as const).find((k) => patch[k] !== undefined)
    : (["cron", "timezone", "startAt", "endAt", "maxOccurrences", "catchUp"] as const).find((k) => patch[k] !== undefined);
  if (wrongKind) {
    throw new ApiError(400, "invalid_field", `${wrongKind} does not apply to a ${recurring ? "recurring" : "one-off"} job`, wrongKind);
  }
  const schedule = current.schedule;
  const input: JobInput = {
    target: {
      url: patch.target?.url ?? current.target.url,
      method: patch.target?.method ?? current.target.method,
      headers: patch.target?.headers ?? current.target.headers,
      body: patch.target && "body" in patch.target ? patch.target.body : (current.target.body ?? undefined),
    },
    timeoutMs: patch.timeoutMs ?? current.timeoutMs,
    retry: { ...current.retry, ...patch.retry },
    metadata: patch.metadata === null ? undefined : (patch.metadata ?? current.metadata ?? undefined),
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
  const { spec, dueAt } = buildSpec(input, deps.now, deps.config);
  const name = patch.name === undefined ? job.name : patch.name;
  const reschedule = recurring
    ? JSON.stringify(spec.schedule) !== JSON.stringify(current.schedule)
    : dueAt !== job.nextRunAt && (patch.runAt !== undefined || patch.delay !== undefined);
  if (!reschedule || job.status === "paused") {
    await updateJob(deps.db, deps.tenant, job.id, { name, spec: JSON.stringify(spec), cron: job.cron, timezone: job.timezone, nextRunAt: job.nextRunAt, status: job.status }, deps.now);
    await deps.env.BUCKET.getByName(bucketName(job.bucket)).reviseJob({ jobId: job.id, tenant: deps.tenant, status: job.status, spec, closeOpen: null });
    return (await getJob(deps.db, deps.tenant, job.id))!;
  }
  const fired = await closeJob(deps, job, null, "rescheduled");
  await scheduleNext(deps, { ...job, name }, spec, "active", recurring ? null : dueAt, fired);
  return (await getJob(deps.db, deps.tenant, job.id))!;
}

/** Closes what has not started; returns the bucket's count of fired occurrences. */
async function closeJob(deps: Deps, job: JobRow, status: "canceled" | "paused" | null, reason: string): Promise<number> {
  const live = await closeJobExecutions(deps.db, deps.tenant, job.id, status, reason, deps.now);
  const revised = await deps.env.BUCKET.getByName(bucketName(job.bucket)).reviseJob({
    jobId: job.id,
    tenant: deps.tenant,
    status: status ?? "active",
    closeOpen: { reason, known: live.filter((l) => l.status !== "running") },
  });
  return revised.fired;
}

/**
 * Writes the job's settings and schedules its next execution: a one-off job's new run time, or
 * the next occurrence, numbered after the occurrences already fired (the bucket counts them;
 * D1's copy covers a bucket that no longer holds the job).
 */
async function scheduleNext(
  deps: Deps,
  job: JobRow,
  spec: JobSpec,
  status: JobStatus,
  oneOffDueAt: number | null,
  bucketFired: number,
): Promise<void> {
  const fired = Math.max(job.fired, bucketFired);
  const schedule = spec.schedule;
  let dueAt: number | null;
  if (schedule) {
    const exhausted = schedule.maxOccurrences !== null && fired >= schedule.maxOccurrences;
    dueAt = exhausted ? null : occurrenceAfter(schedule, deps.now - 1);
  } else {
    dueAt = oneOffDueAt ?? Math.max(job.nextRunAt ?? deps.now, deps.now);
  }
  const finalStatus: JobStatus = dueAt === null ? "completed" : status;
  await updateJob(
    deps.db,
    deps.tenant,
    job.id,
    { name: job.name, spec: JSON.stringify(spec), cron: schedule?.cron ?? null, timezone: schedule?.timezone ?? null, nextRunAt: dueAt, status: finalStatus },
    deps.now,
  );
  await deps.env.BUCKET.getByName(bucketName(job.bucket)).reviseJob({ jobId: job.id, tenant: deps.tenant, status: finalStatus, spec, closeOpen: null });
  if (dueAt === null) return;
  const execution = {
    id: occurrenceId(job.id, dueAt),
    jobId: job.id,
    tenant: deps.tenant,
    bucket: job.bucket,
    timeBucket: timeBucketOf(dueAt, deps.config.SCAN_WINDOW_MS),
    dueAt,
    occurrence: fired + 1,
  };
  await insertExecution(deps.db, execution, deps.now);
  await handOffExecutions(
    deps.env,
    deps.db,
    deps.config,
    [{ bucket: job.bucket, item: { executionId: execution.id, jobId: job.id, tenant: deps.tenant, dueAt, occurrence: execution.occurrence, reopen: true, job: { specJson: JSON.stringify(spec), recurring: spec.schedule !== null, status: "active" } } }],
    deps.now,
  );
}
