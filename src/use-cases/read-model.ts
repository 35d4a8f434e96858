/**
 * The API's reads across the system of record's shards and the live buckets (db/shards.ts): a
 * job, an execution or a job's executions read the one shard the id names (and the job's bucket
 * for what is live); a list reads every shard with the same cursor and merges their pages in the
 * list's order (core/page.ts mergeScans), so one opaque cursor goes on across all of them and a
 * page never skips or repeats an item. A shard that fails fails the list (ShardUnavailable, a 503
 * naming it), never a silently short page.
 *
 * Rows read per list page: each shard's page (limit + 1 for a full page; at most 2 × SCAN_ROWS a
 * source when a filter matches little), so S times one database's.
 */

import { configOf } from "../config";
import { bucketOfExecution } from "../core/bucketing";
import { isId, jobIdOfOneOff, oneOffExecutionId } from "../core/id";
import { isHttpTarget, parseSpec } from "../core/job";
import type { ShardGauges } from "../core/metrics";
import { mergeScans } from "../core/page";
import { toRfc3339 } from "../core/when";
import { listFlowKeys } from "../db/flow-keys";
import { getDeadLetter, listDead } from "../db/list-dead-letters";
import {
  type ExecutionFilter,
  getOccurrence,
  listOccurrenceExecutions,
  listOccurrences,
  listOneOffExecutions,
} from "../db/list-executions";
import { getJob, type JobFilter, listJobs } from "../db/list-jobs";
import type { DeadLetterRow, JobRow } from "../db/schema";
import { shardHistory } from "../db/shard-meta";
import { shardOfOrNull, shardsOf } from "../db/shards";
import { bucketObject } from "../placement";
import type { LiveExecution } from "../protocol/bucket";
import { type ExecutionView, viewOfDeadLetter, viewOfLive, viewOfOccurrence, viewOfOneOff } from "./present";

export type Page<T> = { page: T[]; next: string | null };

/** A job of the tenant, from the shard its id names. */
export async function jobOf(env: Env, tenant: string, id: string): Promise<JobRow | undefined> {
  const shard = await shardOfOrNull(shardsOf(env), id);
  return shard ? shardsOf(env).on(shard, () => getJob(shard.db, tenant, id)) : undefined;
}

/** A page of the tenant's jobs, newest first, from every shard. */
export async function listJobsPage(
  env: Env,
  tenant: string,
  filter: JobFilter,
  cursorId: string | undefined,
  limit: number,
): Promise<Page<JobRow>> {
  const scans = await shardsOf(env).everyShard((shard) => listJobs(shard.db, tenant, filter, cursorId, limit));
  return mergeScans(scans, (j) => j.id, limit);
}

/** A job's executions, latest first: what its bucket holds live, then its shard's history. */
export async function executionsOfJob(env: Env, job: JobRow, limit: number): Promise<ExecutionView[]> {
  const live = await liveExecutions(env, job.bucket, { jobId: job.id });
  if (job.cron === null) return [live[0] ?? viewOfOneOff(job)];
  const shards = shardsOf(env);
  const shard = shards.of(job.id);
  const history = await shards.on(shard, () => listOccurrences(shard.db, job.tenant, job.id, limit));
  const liveIds = new Set(live.map((l) => l.id));
  return [...live, ...history.filter((h) => !liveIds.has(h.id)).map(viewOfOccurrence)].sort((a, b) => b.dueAt - a.dueAt).slice(0, limit);
}

/** One page of the tenant's executions in D1: one-off jobs' and finished occurrences of every shard, merged by id. */
export async function listExecutionsPage(
  env: Env,
  tenant: string,
  filter: ExecutionFilter,
  cursorId: string | undefined,
  limit: number,
): Promise<Page<ExecutionView>> {
  const perShard = await shardsOf(env).everyShard(async (shard) => {
    // a one-off execution's id is its job's id under another prefix: the same order
    const [oneOffs, history] = await Promise.all([
      listOneOffExecutions(shard.db, tenant, filter, cursorId && jobIdOfOneOff(cursorId), limit),
      listOccurrenceExecutions(shard.db, tenant, filter, cursorId, limit),
    ]);
    return [
      { rows: oneOffs.rows.map(viewOfOneOff), covered: oneOffs.covered && oneOffExecutionId(oneOffs.covered) },
      { rows: history.rows.map(viewOfOccurrence), covered: history.covered },
    ];
  });
  return mergeScans(perShard.flat(), (e) => e.id, limit);
}

/** One page of a job's executions: its bucket's live ones and its shard's (another tenant's job: none). */
export async function listExecutionsOfJobPage(
  env: Env,
  tenant: string,
  jobId: string,
  filter: ExecutionFilter,
  cursorId: string | undefined,
  limit: number,
): Promise<Page<ExecutionView>> {
  const job = await jobOf(env, tenant, jobId);
  if (!job || !jobMatches(job, filter)) return { page: [], next: null };
  const wanted = (e: ExecutionView) => (cursorId === undefined || e.id < cursorId) && executionMatches(e, filter);
  const live = await liveExecutions(env, job.bucket, { jobId: job.id });
  if (job.cron === null) return { page: [live[0] ?? viewOfOneOff(job)].filter(wanted), next: null };
  const shards = shardsOf(env);
  const shard = shards.of(job.id);
  const history = await shards.on(shard, () =>
    listOccurrenceExecutions(shard.db, job.tenant, { ...filter, jobId: job.id, label: undefined, url: undefined }, cursorId, limit),
  );
  // where the bucket and D1 both hold an execution (a redriven one), the bucket's view stands, matching or not
  const liveIds = new Set(live.map((e) => e.id));
  return mergeScans(
    [
      { rows: live.filter(wanted), covered: null },
      { rows: history.rows.filter((o) => !liveIds.has(o.id)).map(viewOfOccurrence), covered: history.covered },
    ],
    (e) => e.id,
    limit,
  );
}

/** An execution by id: a one-off job's, a live one in its bucket, an occurrence in its shard's history, or a dead letter. */
export async function findExecution(env: Env, tenant: string, buckets: number, id: string): Promise<ExecutionView | undefined> {
  if (!isId("exe", id)) return undefined;
  const shard = await shardOfOrNull(shardsOf(env), id);
  if (!shard) return undefined;
  const on = <T>(read: () => Promise<T>) => shardsOf(env).on(shard, read);
  const oneOff = await on(() => getJob(shard.db, tenant, jobIdOfOneOff(id)));
  if (oneOff && oneOff.cron === null) return (await executionsOfJob(env, oneOff, 1))[0];
  const [live] = await liveExecutions(env, bucketOfExecution(id, buckets), { executionIds: [id] });
  if (live && (await on(() => getJob(shard.db, tenant, live.jobId)))) return live;
  const occurrence = await on(() => getOccurrence(shard.db, tenant, id));
  if (occurrence) return viewOfOccurrence(occurrence);
  const dead = await on(() => getDeadLetter(shard.db, tenant, id));
  return dead ? viewOfDeadLetter(dead) : undefined;
}

/**
 * A page of the tenant's dead letters, newest first (by the time they died, then id), from every
 * shard: `limit` of them, and whether there are more. Reads limit + 1 rows a shard.
 */
export async function listDeadPage(
  env: Env,
  tenant: string,
  cursor: { deadAt: number; id: string } | undefined,
  limit: number,
  filter: Parameters<typeof listDead>[4] = {},
): Promise<{ page: DeadLetterRow[]; more: boolean }> {
  const perShard = await shardsOf(env).everyShard((shard) => listDead(shard.db, tenant, cursor, limit + 1, filter));
  const merged = perShard
    .flat()
    .sort((a, b) => b.deadAt - a.deadAt || (a.executionId < b.executionId ? 1 : a.executionId > b.executionId ? -1 : 0));
  return { page: merged.slice(0, limit), more: merged.length > limit };
}

/** The tenant's flow-control keys in key order, at most `limit`, from every shard's registry (a key listed twice counts once). */
export async function listFlowKeysOfAll(env: Env, tenant: string, limit: number): Promise<string[]> {
  const perShard = await shardsOf(env).everyShard((shard) => listFlowKeys(shard.db, tenant, limit));
  return [...new Set(perShard.flat())].sort().slice(0, limit);
}

/** The job-level filters (label, url) on a job row, as the list's SQL checks them. */
function jobMatches(job: JobRow, { label, url }: ExecutionFilter): boolean {
  const labels: Record<string, string> = job.labels === null ? {} : JSON.parse(job.labels);
  const target = parseSpec(job.spec).target;
  return (
    (label === undefined || labels[label.key] === label.value) &&
    (url === undefined || (isHttpTarget(target) && target.url.startsWith(url)))
  );
}

/** The execution-level filters on a live view, as the list's SQL checks them on D1's rows. */
function executionMatches(e: ExecutionView, { status, httpStatus, from, to }: ExecutionFilter): boolean {
  return (
    (status === undefined || e.status === status) &&
    (httpStatus === undefined || e.lastHttpStatus === httpStatus) &&
    (from === undefined || e.dueAt >= from) &&
    (to === undefined || e.dueAt <= to)
  );
}

/** The bucket's live view; D1's answers stand when the bucket cannot be reached. */
async function liveExecutions(env: Env, bucket: number, query: { jobId?: string; executionIds?: string[] }): Promise<ExecutionView[]> {
  try {
    const live: LiveExecution[] = await bucketObject(env, bucket).inspect(query);
    return live.map(viewOfLive).sort((a, b) => b.dueAt - a.dueAt);
  } catch (error) {
    console.error(`reading bucket ${bucket} failed`, error);
    return [];
  }
}

/** how long one isolate reuses its last reading of the shards' gauges (every scrape of every tenant asks) */
const SHARD_GAUGES_TTL_MS = 10_000;
/** a shard that has not answered by then is shown as unreadable */
const SHARD_GAUGES_TIMEOUT_MS = 5_000;
const gaugesRead = new WeakMap<object, { at: number; gauges: Promise<ShardGauges[]> }>();

/**
 * Each shard's size, watermarks and oldest history: one statement a shard (shardHistory), read at
 * most every SHARD_GAUGES_TTL_MS per isolate. A shard that fails or does not answer within
 * SHARD_GAUGES_TIMEOUT_MS is shown with an error, never a 500.
 */
export async function shardGauges(env: Env, buckets: number, now = Date.now()): Promise<ShardGauges[]> {
  const last = gaugesRead.get(env);
  if (last && now - last.at < SHARD_GAUGES_TTL_MS) return last.gauges;
  const gauges = readShardGauges(env, buckets);
  gaugesRead.set(env, { at: now, gauges });
  return gauges;
}

async function readShardGauges(env: Env, buckets: number): Promise<ShardGauges[]> {
  const config = configOf(env);
  return Promise.all(
    shardsOf(env).all.map(async (shard) => {
      const gauges = {
        shard: shard.index,
        binding: shard.binding,
        historyMaxBytes: config.HISTORY_MAX_BYTES,
        shardMaxBytes: config.SHARD_MAX_BYTES,
      };
      let timer: ReturnType<typeof setTimeout> | undefined;
      try {
        const timeout = new Promise<never>((_, reject) => {
          timer = setTimeout(() => reject(new Error(`no answer within ${SHARD_GAUGES_TIMEOUT_MS} ms`)), SHARD_GAUGES_TIMEOUT_MS);
        });
        const { bytes, oldestHistoryAt } = await Promise.race([shardHistory(shard.db, buckets), timeout]);
        shardsOf(env).noteSize(shard.index, bytes);
        return { ...gauges, bytes, oldestHistoryAt: oldestHistoryAt === null ? null : toRfc3339(oldestHistoryAt) };
      } catch (error) {
        console.error(`reading D1 shard ${shard.index}'s size failed`, error);
        return { ...gauges, bytes: null, oldestHistoryAt: null, error: "the shard did not answer; read again" };
      } finally {
        clearTimeout(timer);
      }
    }),
  );
}
