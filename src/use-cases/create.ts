/**
 * Job creation, shared by POST /v1/jobs and /v1/jobs/batch: validate at the door, write the jobs
 * to one D1 shard in one atomic batch (durable before the 2xx, invariant 1), then hand each bucket its
 * near-term one-off jobs and its recurring jobs, one RPC per bucket. A failed hand-off leaves the
 * job pending in D1, where the scanner's sync pass finds it by its due time.
 */
import { type ArchivedExecution, findArchived } from "../archive/archive";
import type { Config } from "../config";
import { bucketOfJob } from "../core/bucketing";
import { oneOffExecutionId } from "../core/id";
import { isNear } from "../core/job";
import { JOB_TRANSITIONS } from "../core/lifecycle";
import { insertJobs, type NewJob } from "../db/insert-jobs";
import { definitionOf } from "../db/job-definition";
import { hasLegacyKeys, legacyKeyOwners } from "../db/legacy-keys";
import { getJobsByIds } from "../db/list-jobs";
import { historyPurgedBefore } from "../db/purge-mark";
import type { JobRow } from "../db/schema";
import { isFullError, type Shards, ShardsFull, shardsOf } from "../db/shards";
import { claimKeys, type KeyClaim, type KeyOwner, releaseKeys } from "../idempotency/key-claims";
import { bucketObject } from "../placement";
import type { D1Meter, JobDefinition } from "../protocol/bucket";
import { ApiError } from "./errors";
import { presentJob } from "./present";
import type { PreparedJob } from "./validation";

export type CreateResult = { status: 201 | 200; job: ReturnType<typeof presentJob> } | { status: 400 | 409 | 503 | 507; error: ApiError };

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
 * before the shard's purge mark (db/purge-mark.ts purgeMark: the purge takes only jobs last changed
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
