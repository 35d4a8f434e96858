/**
 * Bucket Durable Object "bucket-<k>": the single writer of its near-term executions and their
 * leases. It fires by alarm, grants and fences leases, applies the retry rules and mirrors
 * outcomes to D1 in batches. Every state change is a guarded write in one transactionSync.
 */
import { DurableObject } from "cloudflare:workers";
import { configOf, type Config } from "../config";
import { nextAlarmAt } from "../core/alarm";
import { decideAfterFailure, dispatchWaitMs, type FailureKind } from "../core/backoff";
import { planOccurrence } from "../core/cron";
import { occurrenceId } from "../core/id";
import { fireQueueOf, timeBucketOf } from "../core/bucketing";
import type { JobSpec } from "../core/job";
import { fromStatesSql, TERMINAL_STATES, type ExecutionState } from "../core/lifecycle";
import { SYSTEM_TENANT, type BucketMetrics, type CounterName } from "../core/metrics";
import { jobEffectOf } from "../core/job";
import { excerpt } from "../core/response";
import {
  dbOf,
  markScheduled,
  mirrorToD1,
  pendingWindow,
  type MirroredAttempt,
  type MirroredExecution,
  type PendingOccurrence,
} from "../db/queries";
import type { Env, FireMessage } from "../env";
import type {
  BucketCounts,
  CancelResult,
  ClaimResult,
  CompletionReport,
  CompletionResult,
  BucketJob,
  HandOff,
  HeartbeatResult,
  JobRevision,
  LeaseRef,
  PoisonResult,
  RedriveRequest,
  RedriveResult,
} from "./protocol";
import { migrateBucket } from "./schema";
import { Tally } from "./tally";

const TERMINAL_SQL = TERMINAL_STATES.map((s) => `'${s}'`).join(",");
const SEND_BATCH = 100; // Queue.sendBatch takes at most 100 messages
const PULL_PAGE = 500;
const PULL_PAGES_PER_SCAN = 40;
const MIRROR_ROWS = 1000;
const PURGE_ROWS = 1000;
const DISPATCH_RETRY_MS = 1000;

interface ExecutionRecord {
  id: string;
  job_id: string;
  tenant: string;
  occurrence_at: number;
  status: ExecutionState;
  due_at: number;
  attempt: number;
  budget_base: number;
  lease_token: string | null;
  lease_seq: number;
  lease_deadline_at: number | null;
  dispatch_count: number;
  occurrence: number;
  spawned: number;
  [column: string]: SqlStorageValue;
}

export class Bucket extends DurableObject<Env> {
  private readonly sql: SqlStorage;
  private readonly config: Config;
  /** when a failed queue send may be tried again (in memory: an eviction just retries sooner) */
  private dispatchRetryAt = 0;
  private lastMirrorAt = 0;

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    this.sql = ctx.storage.sql;
    this.config = configOf(env);
    ctx.storage.transactionSync(() => migrateBucket(this.sql));
  }

  // -------------------------------------------------------------------------------------------
  // hand-off (API create, scanner, cron)

  /**
   * Takes executions into this bucket as scheduled. Idempotent: an execution the bucket already
   * holds (in any state, including a cancel tombstone) is left as it is.
   * Returns how many were new.
   */
  async schedule(bucket: number, items: HandOff[]): Promise<{ scheduled: number }> {
    const scheduled = this.ctx.storage.transactionSync(() => {
      this.rememberBucket(bucket);
      return this.insertScheduled(items).length;
    });
    await this.rearm();
    return { scheduled };
  }

  /**
   * The scanner's call: pull this bucket's pending executions due before now + lookahead
   * (overdue included) from D1, page by page, and re-arm the alarm (the safety net for a
   * dropped alarm). Running it twice, or concurrently, schedules nothing twice.
   */
  async pullWindow(bucket: number): Promise<{ pulled: number }> {
    this.ctx.storage.transactionSync(() => this.rememberBucket(bucket));
    const db = dbOf(this.env.DB);
    const now = Date.now();
    const horizonAt = now + this.config.LOOKAHEAD_MS;
    const maxTimeBucket = timeBucketOf(horizonAt, this.config.SCAN_WINDOW_MS);
    let pulled = 0;
    for (let page = 0; page < PULL_PAGES_PER_SCAN; page++) {
      const rows = await pendingWindow(db, bucket, maxTimeBucket, horizonAt, PULL_PAGE);
      if (rows.length === 0) break;
      const items: HandOff[] = rows.map((r) => ({
        executionId: r.executionId,
        jobId: r.jobId,
        tenant: r.tenant,
        dueAt: r.dueAt,
        occurrence: r.occurrence,
        job: { specJson: r.spec, recurring: r.recurring === 1, status: r.jobStatus },
      }));
      const tally = new Tally();
      this.ctx.storage.transactionSync(() => {
        for (const item of this.insertScheduled(items)) tally.add("scanner_recovered_total", item.tenant);
        tally.write(this.sql);
      });
      pulled += rows.length;
      await markScheduled(db, items.map((i) => i.executionId), Date.now());
      if (rows.length < PULL_PAGE) break;
    }
    await this.rearm();
    return { pulled };
  }

  // -------------------------------------------------------------------------------------------
  // leases

  /**
   * Grants a lease on each dispatched execution: a fresh token, a fencing seq greater than every
   * earlier one (invariant 2) and a deadline. A live lease or a terminal execution means the
   * delivery is a duplicate (invariant 7).
   */
  async claim(executionIds: string[]): Promise<ClaimResult[]> {
    const now = Date.now();
    const tally = new Tally();
    const results = this.ctx.storage.transactionSync(() => {
      const out = executionIds.map((id) => this.claimOne(id, now, tally));
      tally.write(this.sql);
      return out;
    });
    await this.rearm();
    return results;
  }

  /** Extends live leases; a token that is not the live lease is rejected and counted (invariant 3). */
  async heartbeat(leases: LeaseRef[]): Promise<HeartbeatResult[]> {
    const now = Date.now();
    const deadline = now + this.config.LEASE_MS;
    const tally = new Tally();
    const results = this.ctx.storage.transactionSync(() => {
      const out = leases.map((lease): HeartbeatResult => {
        const row = this.liveLease(lease, now);
        if (!row) {
          this.countStale(lease.executionId, tally);
          return { ok: false, executionId: lease.executionId, code: "stale_lease" };
        }
        this.sql.exec(
          "UPDATE executions SET lease_deadline_at = ? WHERE id = ? AND lease_token = ?",
          deadline, lease.executionId, lease.token,
        );
        return { ok: true, executionId: lease.executionId, leaseDeadlineAt: deadline };
      });
      tally.write(this.sql);
      return out;
    });
    await this.rearm();
    return results;
  }

  /**
   * Records outcomes, each conditional on its token being the live lease (fencing): a zombie's
   * report is rejected and counted and can never overwrite a newer attempt (invariant 3).
   */
  async complete(reports: CompletionReport[]): Promise<CompletionResult[]> {
    const now = Date.now();
    const tally = new Tally();
    const results = this.ctx.storage.transactionSync(() => {
      const out = reports.map((report): CompletionResult => {
        const row = this.liveLease(report, now);
        if (!row) {
          this.countStale(report.executionId, tally);
          return { ok: false, executionId: report.executionId, code: "stale_lease" };
        }
        const outcome = report.outcome;
        if (outcome.kind === "succeeded") {
          this.sql.exec(
            `UPDATE executions SET status = 'succeeded', finished_at = ?, last_http_status = ?, last_error = NULL,
               lease_token = NULL, lease_deadline_at = NULL, version = version + 1, dirty = 1
             WHERE id = ? AND lease_seq = ? AND status IN (${fromStatesSql("succeed")})`,
            now, outcome.httpStatus, row.id, row.lease_seq,
          );
          this.finishAttempt(row, now, "succeeded", outcome.httpStatus, null);
          tally.add("succeeded_total", row.tenant);
          return { ok: true, executionId: row.id, status: "succeeded" };
        }
        const status = this.failAttempt(row, now, tally, {
          failure: outcome.failure,
          label: outcome.failure,
          httpStatus: outcome.httpStatus,
          error: outcome.error,
          retryAfterMs: outcome.retryAfterMs,
        });
        return { ok: true, executionId: row.id, status };
      });
      tally.write(this.sql);
      return out;
    });
    await this.rearm();
    return results;
  }

  // -------------------------------------------------------------------------------------------
  // user actions and the dead-letter path

  /**
   * Applies a job's new state (cancel, pause, resume, PATCH) here. Closing cancels what has not
   * started: nothing new fires, a running attempt finishes. Executions the bucket has not seen
   * get a canceled tombstone, and a missing job row a tombstone too, so a racing hand-off stays
   * a no-op.
   */
  async reviseJob(revision: JobRevision): Promise<{ executions: CancelResult[]; fired: number }> {
    const now = Date.now();
    const tally = new Tally();
    const { jobId, tenant } = revision;
    const results = this.ctx.storage.transactionSync(() => {
      this.sql.exec(
        `INSERT INTO jobs (id, tenant, spec, status) VALUES (?, ?, ?, ?)
         ON CONFLICT (id) DO UPDATE SET status = excluded.status,
           spec = CASE WHEN ? THEN excluded.spec ELSE jobs.spec END
         WHERE jobs.status != 'canceled'`,
        jobId, tenant, JSON.stringify(revision.spec ?? {}), revision.status, revision.spec ? 1 : 0,
      );
      if (revision.closeOpen) {
        const reason = revision.closeOpen.reason;
        for (const k of revision.closeOpen.known) {
          this.sql.exec(
            `INSERT INTO executions (id, job_id, tenant, occurrence_at, status, due_at, finished_at, last_error, dirty)
             VALUES (?, ?, ?, ?, 'canceled', ?, ?, ?, 1) ON CONFLICT DO NOTHING`,
            k.executionId, jobId, tenant, k.dueAt, k.dueAt, now, reason,
          );
        }
        this.sql.exec(
          `UPDATE executions SET status = 'canceled', finished_at = ?, last_error = ?, dispatch_deadline_at = NULL,
             version = version + 1, dirty = 1
           WHERE job_id = ? AND status IN (${fromStatesSql("cancel")})`,
          now, reason, jobId,
        );
        const canceled = this.changes();
        if (canceled > 0) tally.add("canceled_total", tenant, "", canceled);
        this.sql.exec("DELETE FROM outbox_pending WHERE job_id = ?", jobId);
      }
      tally.write(this.sql);
      return {
        executions: this.sql
          .exec<{ executionId: string; status: string }>("SELECT id AS executionId, status FROM executions WHERE job_id = ?", jobId)
          .toArray(),
        fired: this.sql.exec<{ fired: number }>("SELECT fired FROM jobs WHERE id = ?", jobId).toArray()[0]?.fired ?? 0,
      };
    });
    await this.rearm();
    return results;
  }

  /** Gives a dead execution a fresh attempt budget and schedules it now. */
  async redrive(bucket: number, request: RedriveRequest): Promise<RedriveResult> {
    const now = Date.now();
    const tally = new Tally();
    const result = this.ctx.storage.transactionSync((): RedriveResult => {
      this.rememberBucket(bucket);
      this.putJob(request.jobId, request.tenant, request.job);
      const row = this.sql
        .exec<{ status: string }>("SELECT status FROM executions WHERE id = ?", request.executionId)
        .toArray()[0];
      if ((row?.status ?? request.recordStatus) !== "dead") return { ok: false, code: "not_dead" };
      if (row) {
        this.sql.exec(
          `UPDATE executions SET status = 'scheduled', due_at = ?, budget_base = attempt, dead_reason = NULL,
             finished_at = NULL, dispatch_count = 0, version = version + 1, dirty = 1
           WHERE id = ? AND status IN (${fromStatesSql("redrive")})`,
          now, request.executionId,
        );
      } else {
        // the dead row already left the bucket (retention): D1 is the record, start from it
        this.sql.exec(
          `INSERT INTO executions (id, job_id, tenant, occurrence_at, status, due_at, attempt, budget_base, spawned, version, dirty)
           VALUES (?, ?, ?, ?, 'scheduled', ?, ?, ?, 1, 1, 1) ON CONFLICT DO NOTHING`,
          request.executionId, request.jobId, request.tenant, request.occurrenceAt, now,
          request.attempts, request.attempts,
        );
      }
      tally.add("redrive_total", request.tenant);
      tally.write(this.sql);
      return { ok: true };
    });
    await this.rearm();
    return result;
  }

  /** The dead-letter consumer's call: the queue gave up on these messages (poison). */
  async markPoisoned(executionIds: string[]): Promise<PoisonResult[]> {
    const now = Date.now();
    const tally = new Tally();
    const results = this.ctx.storage.transactionSync(() => {
      const out = executionIds.map((id): PoisonResult => {
        const row = this.row(id);
        if (!row) return { executionId: id, code: "unknown" };
        if ((TERMINAL_STATES as readonly string[]).includes(row.status)) return { executionId: id, code: "already_terminal" };
        if (row.status === "running") this.finishAttempt(row, now, "poison", null, "the queue consumer failed on this message repeatedly");
        this.kill(row, now, "poison", "the queue consumer failed on this message repeatedly", tally);
        return { executionId: id, code: "marked_dead" };
      });
      tally.write(this.sql);
      return out;
    });
    await this.rearm();
    return results;
  }

  // -------------------------------------------------------------------------------------------
  // observation

  async metrics(): Promise<BucketMetrics> {
    return {
      counters: this.sql
        .exec<{ name: CounterName; tenant: string; reason: string; value: number }>(
          "SELECT name, tenant, reason, value FROM counters",
        )
        .toArray(),
      lag: this.sql.exec<{ tenant: string; le: number; count: number }>("SELECT tenant, le, count FROM lag_histogram").toArray(),
    };
  }

  /** Counts an event observed outside the bucket (e.g. a malformed queue message). */
  async bump(name: CounterName, tenant: string, by: number): Promise<void> {
    const tally = new Tally();
    tally.add(name, tenant, "", by);
    this.ctx.storage.transactionSync(() => tally.write(this.sql));
  }

  /** Executions held here by state (invariant 4 adds these up with D1). */
  async counts(): Promise<BucketCounts> {
    const byStatus: Record<string, number> = {};
    for (const r of this.sql.exec<{ status: string; n: number }>("SELECT status, count(*) AS n FROM executions GROUP BY status")) {
      byStatus[r.status] = r.n;
    }
    return { byStatus };
  }

  /** The live state of some executions, for reads that must not wait for the mirror. */
  async inspect(executionIds: string[]): Promise<Record<string, { status: string; attempt: number; dueAt: number }>> {
    const out: Record<string, { status: string; attempt: number; dueAt: number }> = {};
    for (const id of executionIds) {
      const row = this.row(id);
      if (row) out[id] = { status: row.status, attempt: row.attempt, dueAt: row.due_at };
    }
    return out;
  }

  // -------------------------------------------------------------------------------------------
  // the alarm

  /**
   * Expires leases, re-dispatches what was never claimed, fires what is due, mirrors to D1 and
   * drops old terminal rows. Each step catches its own errors and the alarm always re-arms
   * itself: a throwing alarm is retried only a few times and then dropped (DESIGN.md).
   */
  override async alarm(): Promise<void> {
    const now = Date.now();
    try {
      this.expireLeases(now);
      await this.dispatchDue(now);
      await this.flushMirror(now);
      this.purgeTerminal(now);
    } catch (error) {
      console.error("bucket alarm step failed", error);
    } finally {
      await this.rearm();
    }
  }

  private expireLeases(now: number): void {
    // read first: most alarms expire nothing, and a write transaction costs a commit
    const expired = this.sql
      .exec<ExecutionRecord>(
        "SELECT * FROM executions WHERE status = 'running' AND lease_deadline_at <= ? LIMIT ?",
        now, this.config.FIRE_BATCH_LIMIT,
      )
      .toArray();
    if (expired.length === 0) return;
    const tally = new Tally();
    this.ctx.storage.transactionSync(() => {
      for (const row of expired) {
        tally.add("lease_expired_total", row.tenant);
        this.failAttempt(row, now, tally, {
          failure: "retryable",
          label: "lease_expired",
          httpStatus: null,
          error: "the lease expired before the attempt completed (worker crashed or stalled)",
        });
      }
      tally.write(this.sql);
    });
  }

  /**
   * Marks due rows dispatched before sending (so a consumer never sees a sent message for a
   * row still "scheduled"); a failed send puts first dispatches back to scheduled. A crash
   * between mark and send is healed by the dispatch deadline.
   */
  private async dispatchDue(now: number): Promise<void> {
    if (now < this.dispatchRetryAt) return;
    const queues = this.config.fireQueues;
    if (queues.length === 0) throw new Error("no FIRE_QUEUE_0 binding");
    const limit = this.config.FIRE_BATCH_LIMIT;
    // read first: an alarm with nothing to send writes nothing
    const overdue = this.sql
      .exec<ExecutionRecord>("SELECT * FROM executions WHERE status = 'dispatched' AND dispatch_deadline_at <= ? LIMIT ?", now, limit)
      .toArray();
    const due = this.sql
      .exec<ExecutionRecord>(
        "SELECT * FROM executions WHERE status = 'scheduled' AND due_at <= ? ORDER BY due_at LIMIT ?",
        now, Math.max(0, limit - overdue.length),
      )
      .toArray();
    if (overdue.length === 0 && due.length === 0) return;
    const bucket = this.bucketIndex();
    const queue = queues[fireQueueOf(bucket, queues.length)]!;
    const tally = new Tally();
    const { fresh, again } = this.ctx.storage.transactionSync(() => {
      const again: FireMessage[] = [];
      for (const row of overdue) {
        if (row.dispatch_count >= this.config.MAX_DISPATCHES) {
          this.kill(row, now, "undeliverable", `not claimed after ${row.dispatch_count} dispatches`, tally);
          continue;
        }
        this.sql.exec(
          `UPDATE executions SET dispatch_deadline_at = ?, dispatch_count = dispatch_count + 1
           WHERE id = ? AND status IN (${fromStatesSql("redispatch")})`,
          now + dispatchWaitMs(this.config.DISPATCH_TIMEOUT_MS, row.dispatch_count + 1), row.id,
        );
        tally.add("redispatch_total", row.tenant);
        again.push(this.message(row, bucket));
      }
      const fresh: FireMessage[] = [];
      for (const row of due) {
        if (row.spawned === 0 && !this.spawnNextOccurrence(row, now, tally)) continue;
        this.sql.exec(
          `UPDATE executions SET status = 'dispatched', dispatch_deadline_at = ?, dispatch_count = 1,
             version = version + 1, dirty = 1
           WHERE id = ? AND status IN (${fromStatesSql("dispatch")})`,
          now + dispatchWaitMs(this.config.DISPATCH_TIMEOUT_MS, 1), row.id,
        );
        tally.add("fired_total", row.tenant); // taken back if the send fails
        fresh.push(this.message(row, bucket));
      }
      tally.write(this.sql);
      return { fresh, again };
    });

    const sends: Promise<void>[] = [];
    for (const [messages, isFresh] of [[fresh, true], [again, false]] as const) {
      for (let i = 0; i < messages.length; i += SEND_BATCH) {
        const chunk = messages.slice(i, i + SEND_BATCH);
        sends.push(
          queue.sendBatch(chunk.map((body) => ({ body, contentType: "json" as const }))).then(
            () => undefined,
            (error: unknown) => {
              console.error("fire queue send failed", error);
              this.dispatchRetryAt = Date.now() + DISPATCH_RETRY_MS;
              this.onSendFailed(chunk, isFresh);
            },
          ),
        );
      }
    }
    await Promise.all(sends);
  }

  /** A failed send: first dispatches go back to scheduled (and were not fired); re-dispatches wait for their deadline. */
  private onSendFailed(chunk: FireMessage[], isFresh: boolean): void {
    const tally = new Tally();
    this.ctx.storage.transactionSync(() => {
      for (const tenant of new Set(chunk.map((m) => m.tenant))) tally.add("dispatch_errors_total", tenant);
      if (isFresh) {
        for (const m of chunk) {
          this.sql.exec(
            "UPDATE executions SET status = 'scheduled', dispatch_deadline_at = NULL, dispatch_count = 0 WHERE id = ? AND status = 'dispatched'",
            m.executionId,
          );
          tally.add("fired_total", m.tenant, "", -1);
        }
      }
      tally.write(this.sql);
    });
  }

  /** Writes changed executions and attempts to D1 in one batch, at most once per MIRROR_DELAY_MS. */
  private async flushMirror(now: number): Promise<void> {
    if (now < this.lastMirrorAt + this.config.MIRROR_DELAY_MS) return;
    const rows = this.sql
      .exec<ExecutionRecord & { version: number; last: number; skipped: number; recurring: number; last_http_status: number | null; last_error: string | null; dead_reason: string | null; finished_at: number | null }>(
        `SELECT e.*, json_extract(j.spec, '$.schedule') IS NOT NULL AS recurring
         FROM executions e LEFT JOIN jobs j ON j.id = e.job_id WHERE e.dirty = 1 LIMIT ?`,
        MIRROR_ROWS,
      )
      .toArray();
    const attemptRows = this.sql
      .exec<{ execution_id: string; attempt: number; due_at: number; started_at: number; finished_at: number | null; outcome: string | null; http_status: number | null; error: string | null }>(
        "SELECT * FROM attempts WHERE dirty = 1 LIMIT ?",
        MIRROR_ROWS,
      )
      .toArray();
    const outbox = this.sql
      .exec<{ id: string; job_id: string; tenant: string; occurrence_at: number; occurrence: number }>(
        "SELECT * FROM outbox_pending LIMIT ?",
        MIRROR_ROWS,
      )
      .toArray();
    if (rows.length === 0 && attemptRows.length === 0 && outbox.length === 0) return;
    this.lastMirrorAt = now;
    const bucket = this.bucketIndex();
    const changed: MirroredExecution[] = rows.map((r) => ({
      id: r.id,
      jobId: r.job_id,
      tenant: r.tenant,
      bucket,
      timeBucket: timeBucketOf(r.occurrence_at, this.config.SCAN_WINDOW_MS),
      occurrenceAt: r.occurrence_at,
      occurrence: r.occurrence,
      jobEffect: jobEffectOf({ recurring: r.recurring === 1, last: r.last === 1, skipped: r.skipped === 1, status: r.status }),
      fired: r.recurring === 1 && r.spawned === 1 && r.skipped === 0 ? r.occurrence : 0,
      status: r.status,
      attempts: r.attempt,
      lastHttpStatus: r.last_http_status,
      lastError: r.last_error,
      deadReason: r.dead_reason,
      finishedAt: r.finished_at,
    }));
    const changedAttempts: MirroredAttempt[] = attemptRows.map((a) => ({
      executionId: a.execution_id,
      attempt: a.attempt,
      dueAt: a.due_at,
      startedAt: a.started_at,
      finishedAt: a.finished_at,
      outcome: a.outcome,
      httpStatus: a.http_status,
      error: a.error,
    }));
    const pending: PendingOccurrence[] = outbox.map((o) => ({
      id: o.id,
      jobId: o.job_id,
      tenant: o.tenant,
      bucket,
      timeBucket: timeBucketOf(o.occurrence_at, this.config.SCAN_WINDOW_MS),
      occurrenceAt: o.occurrence_at,
      occurrence: o.occurrence,
    }));
    await mirrorToD1(dbOf(this.env.DB), changed, changedAttempts, pending, now);
    // clear only what was written: a row changed meanwhile stays dirty for the next flush
    this.ctx.storage.transactionSync(() => {
      for (const o of outbox) this.sql.exec("DELETE FROM outbox_pending WHERE id = ?", o.id);
      for (const r of rows) this.sql.exec("UPDATE executions SET dirty = 0 WHERE id = ? AND version = ?", r.id, r.version);
      for (const a of attemptRows) {
        this.sql.exec(
          "UPDATE attempts SET dirty = 0 WHERE execution_id = ? AND attempt = ? AND finished_at IS ?",
          a.execution_id, a.attempt, a.finished_at,
        );
      }
    });
  }

  /** Terminal rows leave the bucket once mirrored and older than the retention (bounded storage). */
  private purgeTerminal(now: number): void {
    const cutoff = now - this.config.TERMINAL_RETENTION_MS;
    const oldest = this.sql
      .exec<{ at: number | null }>(`SELECT MIN(finished_at) AS at FROM executions WHERE status IN (${TERMINAL_SQL})`)
      .one().at;
    if (oldest === null || oldest >= cutoff) return;
    this.ctx.storage.transactionSync(() => {
      const old = `SELECT id FROM executions WHERE status IN (${TERMINAL_SQL}) AND finished_at < ? AND dirty = 0 LIMIT ${PURGE_ROWS}`;
      const jobIds = this.sql.exec<{ job_id: string }>(`SELECT DISTINCT job_id FROM executions WHERE id IN (${old})`, cutoff).toArray();
      this.sql.exec(`DELETE FROM attempts WHERE execution_id IN (${old})`, cutoff);
      this.sql.exec(`DELETE FROM executions WHERE id IN (${old})`, cutoff);
      for (const { job_id } of jobIds) {
        this.sql.exec("DELETE FROM jobs WHERE id = ? AND NOT EXISTS (SELECT 1 FROM executions WHERE job_id = ?)", job_id, job_id);
      }
    });
  }

  /** The alarm is always the earliest thing this bucket must do, or none (STYLE.md habit 4). */
  private async rearm(): Promise<void> {
    const min = (query: string, ...args: SqlStorageValue[]): number | null =>
      this.sql.exec<{ at: number | null }>(query, ...args).one().at;
    const nextDue = min("SELECT MIN(due_at) AS at FROM executions WHERE status = 'scheduled'");
    const nextLease = min("SELECT MIN(lease_deadline_at) AS at FROM executions WHERE status = 'running'");
    const nextDispatch = min("SELECT MIN(dispatch_deadline_at) AS at FROM executions WHERE status = 'dispatched'");
    const dirty =
      this.sql.exec("SELECT 1 FROM executions WHERE dirty = 1 LIMIT 1").toArray().length > 0 ||
      this.sql.exec("SELECT 1 FROM attempts WHERE dirty = 1 LIMIT 1").toArray().length > 0 ||
      this.sql.exec("SELECT 1 FROM outbox_pending LIMIT 1").toArray().length > 0;
    const oldestTerminal = min(`SELECT MIN(finished_at) AS at FROM executions WHERE status IN (${TERMINAL_SQL})`);
    const now = Date.now();
    const at = nextAlarmAt({
      candidates: [
        nextDue === null ? null : Math.max(nextDue, this.dispatchRetryAt),
        nextLease,
        nextDispatch,
        dirty ? this.lastMirrorAt + this.config.MIRROR_DELAY_MS : null,
        oldestTerminal === null ? null : oldestTerminal + this.config.TERMINAL_RETENTION_MS,
      ],
      now,
      quantumMs: this.config.ALARM_QUANTUM_MS,
    });
    const current = await this.ctx.storage.getAlarm();
    if (at === null) {
      if (current !== null) await this.ctx.storage.deleteAlarm();
    } else if (current !== at) {
      await this.ctx.storage.setAlarm(at);
    }
  }

  // -------------------------------------------------------------------------------------------
  // guarded writes shared by the operations above (call inside transactionSync)

  /**
   * Firing an occurrence of a recurring job creates the next one in the same transaction,
   * unique on (job, due time) through its derived id; near ones go straight into this bucket,
   * later ones to D1 as pending. Returns false when catchUp "none" skips this occurrence.
   */
  private spawnNextOccurrence(row: ExecutionRecord, now: number, tally: Tally): boolean {
    const job = this.sql.exec<{ spec: string; status: string }>("SELECT spec, status FROM jobs WHERE id = ?", row.job_id).toArray()[0];
    const schedule = job ? (JSON.parse(job.spec) as JobSpec).schedule : null;
    if (!job || !schedule) {
      this.sql.exec("UPDATE executions SET spawned = 1 WHERE id = ?", row.id);
      return true;
    }
    const plan = planOccurrence(schedule, row.occurrence_at, row.occurrence, now);
    if (plan.run) this.sql.exec("UPDATE jobs SET fired = MAX(fired, ?) WHERE id = ?", row.occurrence, row.job_id);
    if (plan.next && job.status === "active") {
      const id = occurrenceId(row.job_id, plan.next.at);
      if (plan.next.at <= now + this.config.LOOKAHEAD_MS) {
        this.sql.exec(
          `INSERT INTO executions (id, job_id, tenant, occurrence_at, status, due_at, occurrence, version, dirty)
           VALUES (?, ?, ?, ?, 'scheduled', ?, ?, 1, 1) ON CONFLICT DO NOTHING`,
          id, row.job_id, row.tenant, plan.next.at, plan.next.at, plan.next.ordinal,
        );
      } else {
        this.sql.exec(
          `INSERT INTO outbox_pending (id, job_id, tenant, occurrence_at, occurrence) VALUES (?, ?, ?, ?, ?)
           ON CONFLICT DO NOTHING`,
          id, row.job_id, row.tenant, plan.next.at, plan.next.ordinal,
        );
      }
    }
    this.sql.exec(
      "UPDATE executions SET spawned = 1, last = ?, version = version + 1, dirty = 1 WHERE id = ?",
      plan.next === null ? 1 : 0, row.id,
    );
    if (plan.run) return true;
    this.sql.exec(
      `UPDATE executions SET status = 'canceled', finished_at = ?, last_error = 'skipped: missed occurrence (catchUp none)',
         skipped = 1, version = version + 1, dirty = 1
       WHERE id = ? AND status IN (${fromStatesSql("cancel")})`,
      now, row.id,
    );
    tally.add("canceled_total", row.tenant);
    return false;
  }

  private claimOne(id: string, now: number, tally: Tally): ClaimResult {
    const row = this.row(id);
    if (!row) return { ok: false, executionId: id, code: "unknown" };
    if (row.status === "running" && row.lease_deadline_at !== null && row.lease_deadline_at <= now) {
      // an expired lease is a failed attempt first; the retry rules decide what comes next
      tally.add("lease_expired_total", row.tenant);
      const next = this.failAttempt(row, now, tally, {
        failure: "retryable",
        label: "lease_expired",
        httpStatus: null,
        error: "the lease expired before the attempt completed (worker crashed or stalled)",
      });
      return { ok: false, executionId: id, code: next === "dead" ? "duplicate" : "not_due" };
    }
    if (row.status !== "dispatched") {
      // a live lease, a terminal row or an older dispatch of a rescheduled row: a duplicate delivery
      tally.add("duplicates_suppressed_total", row.tenant);
      return { ok: false, executionId: id, code: row.status === "scheduled" ? "not_due" : "duplicate" };
    }
    const job = this.sql.exec<{ spec: string }>("SELECT spec FROM jobs WHERE id = ?", row.job_id).toArray()[0];
    if (!job) return { ok: false, executionId: id, code: "unknown" };
    const spec = JSON.parse(job.spec) as JobSpec;
    const token = crypto.randomUUID();
    const seq = row.lease_seq + 1;
    const attempt = row.attempt + 1;
    const leaseDeadlineAt = now + this.config.LEASE_MS;
    this.sql.exec(
      `UPDATE executions SET status = 'running', lease_token = ?, lease_seq = ?, lease_deadline_at = ?,
         dispatch_deadline_at = NULL, dispatch_count = 0, attempt = ?, version = version + 1, dirty = 1
       WHERE id = ? AND status IN (${fromStatesSql("claim")})`,
      token, seq, leaseDeadlineAt, attempt, id,
    );
    this.sql.exec(
      `INSERT INTO attempts (execution_id, attempt, due_at, started_at, dirty) VALUES (?, ?, ?, ?, 1)
       ON CONFLICT (execution_id, attempt) DO NOTHING`,
      id, attempt, row.due_at, now,
    );
    tally.lag(row.tenant, now - row.due_at);
    return {
      ok: true,
      executionId: id,
      jobId: row.job_id,
      tenant: row.tenant,
      token,
      seq,
      leaseDeadlineAt,
      attempt,
      dueAt: row.due_at,
      target: spec.target,
      timeoutMs: spec.timeoutMs,
    };
  }

  /** A failed attempt: back off or die per the job's retry policy (invariant 6). */
  private failAttempt(
    row: ExecutionRecord,
    now: number,
    tally: Tally,
    failure: { failure: FailureKind; label: string; httpStatus: number | null; error: string; retryAfterMs?: number | undefined },
  ): "scheduled" | "dead" {
    const job = this.sql.exec<{ spec: string }>("SELECT spec FROM jobs WHERE id = ?", row.job_id).toArray()[0];
    const spec = job ? (JSON.parse(job.spec) as JobSpec) : null;
    const error = excerpt(failure.error);
    tally.add("failed_attempts_total", row.tenant);
    this.finishAttempt(row, now, failure.label, failure.httpStatus, error);
    const decision = spec
      ? decideAfterFailure({
          policy: spec.retry,
          attemptsUsed: row.attempt - row.budget_base,
          failure: failure.failure,
          retryAfterMs: failure.retryAfterMs,
          now,
          rand: Math.random(),
        })
      : ({ kind: "dead", reason: "permanent" } as const);
    if (decision.kind === "dead") {
      this.kill(row, now, decision.reason, error, tally, failure.httpStatus);
      return "dead";
    }
    this.sql.exec(
      `UPDATE executions SET status = 'scheduled', due_at = ?, lease_token = NULL, lease_deadline_at = NULL,
         last_http_status = ?, last_error = ?, version = version + 1, dirty = 1
       WHERE id = ? AND lease_seq = ? AND status IN (${fromStatesSql("retry")})`,
      decision.dueAt, failure.httpStatus, error, row.id, row.lease_seq,
    );
    tally.add("retries_total", row.tenant);
    return "scheduled";
  }

  private kill(row: ExecutionRecord, now: number, reason: string, error: string, tally: Tally, httpStatus: number | null = null): void {
    this.sql.exec(
      `UPDATE executions SET status = 'dead', dead_reason = ?, last_error = ?,
         last_http_status = COALESCE(?, last_http_status), finished_at = ?, lease_token = NULL,
         lease_deadline_at = NULL, dispatch_deadline_at = NULL, version = version + 1, dirty = 1
       WHERE id = ? AND status IN (${fromStatesSql("kill")})`,
      reason, error, httpStatus, now, row.id,
    );
    tally.add("dead_total", row.tenant, reason);
  }

  private finishAttempt(row: ExecutionRecord, now: number, outcome: string, httpStatus: number | null, error: string | null): void {
    this.sql.exec(
      `UPDATE attempts SET finished_at = ?, outcome = ?, http_status = ?, error = ?, dirty = 1
       WHERE execution_id = ? AND attempt = ? AND finished_at IS NULL`,
      now, outcome, httpStatus, error, row.id, row.attempt,
    );
  }

  /** Returns the items that were new to this bucket (one or two statements an item: the hot path of a create). */
  private insertScheduled(items: HandOff[]): HandOff[] {
    const inserted: HandOff[] = [];
    for (const item of items) {
      if (this.ensureJob(item.jobId, item.tenant, item.job) !== "active") continue; // canceled or paused meanwhile
      const onConflict = item.reopen
        ? `ON CONFLICT (id) DO UPDATE SET status = 'scheduled', due_at = excluded.due_at, occurrence = excluded.occurrence,
             finished_at = NULL, last_error = NULL, spawned = 0, last = 0, attempt = 0, budget_base = 0,
             version = version + 1, dirty = 1
           WHERE executions.status IN (${fromStatesSql("reopen")})`
        : "ON CONFLICT DO NOTHING";
      // one-off jobs have no next occurrence: mark them spawned so firing skips the schedule
      const written = this.sql.exec(
        `INSERT INTO executions (id, job_id, tenant, occurrence_at, status, due_at, occurrence, spawned)
         VALUES (?, ?, ?, ?, 'scheduled', ?, ?, ?) ${onConflict} RETURNING id`,
        item.executionId, item.jobId, item.tenant, item.dueAt, item.dueAt, item.occurrence, item.job.recurring ? 0 : 1,
      ).toArray();
      if (written.length > 0) inserted.push(item);
    }
    return inserted;
  }

  /**
   * The bucket's copy of a job for a hand-off: inserted when missing, otherwise left as it is
   * (its status and spec change only through reviseJob, so a stale hand-off cannot undo a
   * pause, cancel or PATCH). Returns the copy's status.
   */
  private ensureJob(jobId: string, tenant: string, job: BucketJob): string {
    const created = this.sql
      .exec<{ status: string }>(
        "INSERT INTO jobs (id, tenant, spec, status) VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING RETURNING status",
        jobId, tenant, job.specJson, job.status,
      )
      .toArray()[0];
    return created?.status ?? this.sql.exec<{ status: string }>("SELECT status FROM jobs WHERE id = ?", jobId).one().status;
  }

  /** Writes the job's copy as D1 has it (redrive), except that a canceled job stays canceled. */
  private putJob(jobId: string, tenant: string, job: BucketJob): void {
    this.sql.exec(
      `INSERT INTO jobs (id, tenant, spec, status) VALUES (?, ?, ?, ?)
       ON CONFLICT (id) DO UPDATE SET spec = excluded.spec, status = excluded.status WHERE jobs.status != 'canceled'`,
      jobId, tenant, job.specJson, job.status,
    );
  }

  private liveLease(lease: LeaseRef, now: number): ExecutionRecord | undefined {
    return this.sql
      .exec<ExecutionRecord>(
        "SELECT * FROM executions WHERE id = ? AND status = 'running' AND lease_token = ? AND lease_deadline_at > ?",
        lease.executionId, lease.token, now,
      )
      .toArray()[0];
  }

  private countStale(executionId: string, tally: Tally): void {
    tally.add("stale_lease_rejects_total", this.row(executionId)?.tenant ?? SYSTEM_TENANT);
  }

  /** Rows changed by the last statement (rowsWritten also counts index writes). */
  private changes(): number {
    return this.sql.exec<{ n: number }>("SELECT changes() AS n").one().n;
  }

  private row(id: string): ExecutionRecord | undefined {
    return this.sql.exec<ExecutionRecord>("SELECT * FROM executions WHERE id = ?", id).toArray()[0];
  }

  private message(row: ExecutionRecord, bucket: number): FireMessage {
    return { v: 1, executionId: row.id, bucket, tenant: row.tenant, dueAt: row.due_at };
  }

  private rememberBucket(bucket: number): void {
    this.sql.exec("INSERT INTO meta (key, value) VALUES ('bucket', ?) ON CONFLICT (key) DO NOTHING", String(bucket));
  }

  private bucketIndex(): number {
    const row = this.sql.exec<{ value: string }>("SELECT value FROM meta WHERE key = 'bucket'").toArray()[0];
    return row ? Number(row.value) : 0;
  }
}
