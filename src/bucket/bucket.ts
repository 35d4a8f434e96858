/**
 * Bucket Durable Object "bucket-<k>": the single writer of its jobs' executions and leases
 * (DESIGN.md "Ownership and cost"). It applies job versions from D1 idempotently, fires by alarm,
 * grants and fences leases, applies the retry rules, and writes each outcome to D1 once, when
 * terminal, in batches.
 *
 * What is durable here: a row per scheduled execution and per recurring schedule (store.ts).
 * What lives in memory: dispatched and running executions, fenced by the epoch raised at every
 * start, so a restart makes them scheduled again (a duplicate delivery, never a loss), and
 * outcomes on their way to D1 (the row stays until D1 has them).
 *
 * Every RPC and the alarm go through `change`, which runs the step, commits and re-arms the
 * alarm: "every change re-arms the alarm" holds by construction.
 */
import { DurableObject } from "cloudflare:workers";
import { type Config, configOf } from "../config";
import { nextAlarmAt } from "../core/alarm";
import { decideAfterFailure, type FailureKind } from "../core/backoff";
import { fireQueueOf } from "../core/bucketing";
import { planOccurrence } from "../core/cron";
import { DispatchWindow } from "../core/dispatch-window";
import { occurrenceId, oneOffExecutionId, shardOfId } from "../core/id";
import { isNear, isPullTarget, type JobSpec, parseSpec } from "../core/job";
import { type TerminalState, transition } from "../core/lifecycle";
import { type BucketMetrics, type CounterName, SYSTEM_TENANT } from "../core/metrics";
import { excerpt, RESPONSE_EXCERPT_LENGTH } from "../core/response";
import {
  clearRedrives,
  type FinishedExecution,
  markSynced,
  pendingJobs,
  pendingRedrives,
  type ScheduleProjection,
  unsyncedJobs,
  writeOutcomes,
} from "../db/queries";
import { type Shard, shardsOf } from "../db/shards";
import { Executions, type Lease } from "./flight";
import type {
  Applied,
  ArchiveCount,
  AttemptRecord,
  BucketCounts,
  ClaimResult,
  CompletionReport,
  CompletionResult,
  D1Meter,
  ExecutionRef,
  FireGroup,
  FireRef,
  HeartbeatResult,
  JobDefinition,
  LeaseGrant,
  LeaseRef,
  LiveExecution,
  OfferedLeaseRef,
  OfferedRef,
  PoisonResult,
  RedriveOrder,
  RedriveResult,
} from "./protocol";
import { parseAttemptLog } from "./protocol";
import { migrateBucket } from "./schema";
import type { HeldRow, ScheduleRow } from "./store";
import * as store from "./store";
import { Tally } from "./tally";

const SEND_BATCH = 100; // Queue.sendBatch takes at most 100 messages
const PULL_PAGE = 500;
const PULL_PAGES = 40;
/** outcomes written to D1 at once when this many wait, whatever the flush delay */
const FLUSH_NOW_AT = 1000;
const FLUSH_RETRY_MS = 1000;
const DISPATCH_RETRY_MS = 1000;
/** the dispatch window starts small and doubles per round trip while the queue keeps up */
const DISPATCH_WINDOW_INITIAL = 16;
const DISPATCH_WINDOW_MIN = 4;
/**
 * Counters and the lag histogram are written at most this often: a row per counter per write, so
 * at low rates writing them with every outcome flush would cost more than the outcomes. Reads
 * add what is not written yet; a crash loses at most this much of the counts.
 */
const COUNTER_WRITE_MS = 10_000;
const METER_COUNTERS: CounterName[] = ["do_rows_written_total", "d1_rows_written_total", "alarms_set_total", "do_requests_total"];

type Failure = {
  failure: FailureKind;
  label: string;
  httpStatus: number | null;
  error: string;
  retryAfterMs?: number | undefined;
  /** a wait the consumer spent for its flow-control key before the attempt started */
  flowWaitMs?: number;
};

export class Bucket extends DurableObject<Env> {
  private readonly sql: SqlStorage;
  private readonly config: Config;
  private readonly epoch: number;
  private bucket: number | null;
  private readonly executions: Executions;

  // ---- memory (rebuilt at start; see the header) ----------------------------------------------
  /** job definitions that arrived while their execution was closing: applied after the flush */
  private readonly deferred = new Map<string, JobDefinition>();
  /** schedules whose next occurrence, fired count or completion D1 has not seen */
  private readonly dirtySchedules = new Set<string>();
  private readonly tally = new Tally();
  /** how many fire messages may wait in the queue at once (the rest wait here, fairly) */
  private readonly window: DispatchWindow;
  private leaseSeq = 0;
  private dispatchRetryAt = 0;
  private flushAt = 0;
  private counterWriteAt = 0;
  private flushing = false;
  private nextScheduleAt: number | null = null;
  private armedAt: number | null = null;

  /** this object's SQL cursors not yet counted (rowsWritten is final once a statement ran) */
  private readonly cursors: SqlStorageCursor<Record<string, SqlStorageValue>>[] = [];

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    // every statement goes through one exec that remembers its cursor: rows written are counted
    // from the platform's own counter (what Cloudflare bills), not estimated
    const sql = ctx.storage.sql;
    this.sql = Object.create(sql, {
      exec: {
        value: (query: string, ...bindings: SqlStorageValue[]) => {
          const cursor = sql.exec(query, ...bindings);
          this.cursors.push(cursor);
          return cursor;
        },
      },
    }) as SqlStorage;
    this.config = configOf(env);
    this.executions = new Executions(this.config.DISPATCH_TIMEOUT_MS);
    this.window = new DispatchWindow({
      initial: DISPATCH_WINDOW_INITIAL,
      min: DISPATCH_WINDOW_MIN,
      max: this.config.FIRE_BATCH_LIMIT,
      targetQueueMs: this.config.DISPATCH_QUEUE_TARGET_MS,
    });
    const { epoch, rows } = ctx.storage.transactionSync(() => {
      migrateBucket(this.sql);
      return { epoch: store.nextEpoch(this.sql), rows: store.loadHeld(this.sql) };
    });
    this.epoch = epoch;
    this.bucket = store.storedBucket(this.sql);
    this.nextScheduleAt = store.nextScheduleAt(this.sql);
    const now = Date.now();
    for (const row of rows) {
      this.executions.hold(row);
      // what was dispatched or running before the restart is scheduled again (transition restart);
      // an attempt of a job canceled or paused meanwhile ends canceled instead
      if (row.jobStatus === "active") this.executions.schedule(row);
      else this.close(row, "cancel", now, { reason: row.jobStatus });
    }
    void ctx.blockConcurrencyWhile(() => this.rearm());
  }

  // ===========================================================================================
  // jobs: definitions from D1 (create, every change, the sync pass)

  /**
   * Applies job versions. A version older than or equal to the one held is a no-op; what is
   * returned is held now (a definition for an execution on its way to D1 waits for the flush).
   */
  async applyJobs(bucket: number, definitions: JobDefinition[], meters: D1Meter[] = []): Promise<Applied[]> {
    this.countRequest();
    return this.change(bucket, () => {
      // the caller's D1 rows for these jobs, counted here with the rest of the bill
      for (const m of meters) this.countD1Rows(m.shard, m.d1RowsWritten);
      return this.applyAll(definitions, Date.now(), false);
    });
  }

  /**
   * The scanner's call: pull this bucket's jobs due before now + lookahead (overdue included),
   * the changes not yet acknowledged and the redrives on their way, from D1; then acknowledge.
   * Running it twice, or concurrently, applies nothing twice.
   */
  async pullWindow(bucket: number): Promise<{ pulled: number; synced: number; redriven: number; failedShards: number[] }> {
    this.countRequest();
    // the safety net for a dropped alarm: trust storage, not memory, about what is armed
    if ((await this.ctx.storage.getAlarm()) === null) this.armedAt = null;
    await this.change(bucket, () => undefined);
    // every shard holds some of this bucket's jobs; one that fails delays only its own
    const total = { pulled: 0, synced: 0, redriven: 0, failedShards: [] as number[] };
    for (const shard of shardsOf(this.env).all) {
      try {
        const pulled = await this.pullShard(bucket, shard);
        total.pulled += pulled.pulled;
        total.synced += pulled.synced;
        total.redriven += pulled.redriven;
      } catch (error) {
        console.error(`sync pass of bucket ${bucket} on D1 shard ${shard.index} failed`, error);
        total.failedShards.push(shard.index);
      }
    }
    return total;
  }

  /** One shard's part of the sync pass. */
  private async pullShard(bucket: number, { db, index }: Shard): Promise<{ pulled: number; synced: number; redriven: number }> {
    let pulled = 0;
    let after: { at: number; tenant: string; id: string } | null = null;
    for (let page = 0; page < PULL_PAGES; page++) {
      const rows = await pendingJobs(db, bucket, Date.now() + this.config.LOOKAHEAD_MS, after, PULL_PAGE);
      if (rows.length === 0) break;
      const applied = await this.change(bucket, () => this.applyAll(rows, Date.now(), true));
      pulled += applied.length;
      const last = rows[rows.length - 1]!;
      after = { at: last.nextRunAt ?? 0, tenant: last.tenant, id: last.jobId };
      if (rows.length < PULL_PAGE) break;
    }
    const unsynced = await unsyncedJobs(db, bucket, PULL_PAGE);
    const applied = await this.change(bucket, () => this.applyAll(unsynced, Date.now(), true));
    const synced = unsynced.filter((d) => applied.some((a) => a.jobId === d.jobId && a.version >= d.version));
    const syncRows = await markSynced(
      db,
      synced.map((d) => ({ tenant: d.tenant, jobId: d.jobId, version: d.version })),
    );
    const orders = await pendingRedrives(db, bucket, PULL_PAGE);
    const results = await this.change(bucket, () => this.redriveAll(orders, Date.now()));
    const redriveRows = await clearRedrives(
      db,
      orders.filter((_o, i) => results[i]!.ok).map((o) => ({ tenant: o.tenant, executionId: o.executionId })),
    );
    this.countD1Rows(index, syncRows + redriveRows);
    return { pulled, synced: synced.length, redriven: orders.length };
  }

  /** `fromPull`: the definitions come from the sync pass (a hold it brings counts as recovered). */
  private applyAll(definitions: JobDefinition[], now: number, fromPull: boolean): Applied[] {
    const applied: Applied[] = [];
    for (const def of definitions) {
      const version = def.recurring ? this.applyRecurring(def, now) : this.applyOneOff(def, now, fromPull);
      if (version !== null) applied.push({ jobId: def.jobId, version });
    }
    if (definitions.some((d) => d.recurring)) this.nextScheduleAt = store.nextScheduleAt(this.sql); // once per batch
    return applied;
  }

  /** Returns the version held afterwards, or null when it must wait for a flush. */
  private applyOneOff(def: JobDefinition, now: number, fromPull: boolean): number | null {
    const id = oneOffExecutionId(def.jobId);
    const finishing = this.executions.closing.get(id);
    if (finishing) {
      // the version it finished at (or older) is done; a newer one waits for the outcome to land
      if (def.version <= finishing.row.version) return finishing.row.version;
      const waiting = this.deferred.get(id);
      if (!waiting || waiting.version < def.version) this.deferred.set(id, def);
      return null;
    }
    const row = this.executions.held.get(id);
    if (row && row.version >= def.version) return row.version;
    // it left at this version or a newer one: a definition read from D1 before its outcome landed
    // there is stale (only a newer version, e.g. a redrive or PATCH, brings it back)
    const closed = this.executions.closedAt.get(id);
    if (!row && closed && closed.version >= def.version) return def.version;
    const dueAt = def.nextRunAt ?? now;
    if (!row) {
      // due beyond the lookahead (a far job created or changed): it waits in D1 for the sync pass,
      // which hands it over at this version or a newer one (no tombstone: that would refuse it)
      if (def.status === "active" && !isNear(dueAt, now, this.config.LOOKAHEAD_MS)) return def.version;
      if (def.status !== "active") {
        // a job canceled while its execution still waited in D1 (never held, or gone with an
        // outcome: no tombstone) ends canceled here; the tombstone keeps a repeat from counting twice
        if (def.status === "canceled" && !closed) this.tally.add("canceled_total", def.tenant);
        this.executions.rememberClosed(id, { at: now, tenant: def.tenant, version: def.version }); // a racing pull must not bring it back
        return def.version;
      }
      const inserted = this.insert(
        {
          dueAt,
          id,
          jobId: def.jobId,
          tenant: def.tenant,
          version: def.version,
          jobStatus: "active",
          occurrenceAt: dueAt,
          occurrence: 1,
          attempt: def.attempts,
          budgetBase: def.attempts,
          recurring: false,
        },
        def.specJson,
        parseLog(def.attemptLog),
      );
      if (inserted && fromPull) this.tally.add("scanner_recovered_total", def.tenant);
      // an execution that already ran and is active again was redriven: a fresh budget from here
      if (inserted && def.attempts > 0) this.tally.add("redrive_total", def.tenant);
      return def.version;
    }
    const updated: HeldRow = { ...row, version: def.version, jobStatus: def.status === "active" ? "active" : "canceled" };
    const lease = this.executions.running.get(id);
    if (def.status !== "active") {
      if (lease) {
        store.updateJobOfExecution(this.sql, updated, def.specJson);
        this.executions.keep(updated);
      } else {
        this.cancel(row, def.version, now, "canceled");
      }
      return def.version;
    }
    if (dueAt !== row.occurrenceAt) {
      // PATCH of the run time: a fresh budget at the new time; a running attempt finishes first
      // and its outcome then runs the job again (reschedule)
      const moved: HeldRow = { ...updated, dueAt, occurrenceAt: dueAt, budgetBase: row.attempt };
      if (!lease) this.executions.assertMove(row, "reschedule");
      this.executions.dispatched.delete(id);
      this.executions.offered.delete(id);
      store.moveExecution(this.sql, row.dueAt, moved, { spec: def.specJson });
      this.executions.keep(moved);
      if (!lease) this.executions.schedule(moved);
      return def.version;
    }
    store.updateJobOfExecution(this.sql, updated, def.specJson);
    this.executions.keep(updated);
    this.offerAgain(updated);
    return def.version;
  }

  private applyRecurring(def: JobDefinition, now: number): number {
    const current = store.scheduleOf(this.sql, def.jobId);
    if (current && current.version >= def.version) return current.version;
    const spec = parseSpec(def.specJson);
    const active = def.status === "active";
    const rescheduled = current?.status !== "active" || JSON.stringify(parseSpec(current.spec).schedule) !== JSON.stringify(spec.schedule);
    const fired = Math.max(current?.fired ?? 0, def.fired);
    const exhausted = spec.schedule?.maxOccurrences != null && fired >= spec.schedule.maxOccurrences;
    const nextAt = !active || exhausted ? null : rescheduled ? (def.nextRunAt ?? null) : (current?.nextAt ?? null);
    store.putSchedule(this.sql, {
      id: def.jobId,
      tenant: def.tenant,
      version: def.version,
      status: def.status,
      spec: def.specJson,
      nextAt,
      fired,
    });
    this.dirtySchedules.add(def.jobId);
    if (active && !rescheduled) {
      for (const row of this.executions.rowsOfJob(def.jobId)) this.offerAgain(row);
      return def.version;
    }
    // pause, cancel or a new schedule: what has not started is canceled, a running attempt finishes
    for (const row of this.executions.rowsOfJob(def.jobId)) {
      if (this.executions.closing.has(row.id)) continue; // already finished, on its way to D1
      if (this.executions.running.has(row.id)) {
        const updated = { ...row, version: def.version, jobStatus: active ? "active" : def.status };
        store.updateJobOfExecution(this.sql, updated, null);
        this.executions.keep(updated);
      } else {
        this.cancel(row, def.version, now, active ? "rescheduled" : def.status);
      }
    }
    return def.version;
  }

  // ===========================================================================================
  // redrive (a recurring job's dead occurrence; a one-off job's redrive is a new job version)

  async redrive(bucket: number, orders: RedriveOrder[]): Promise<RedriveResult[]> {
    this.countRequest();
    return this.change(bucket, () => this.redriveAll(orders, Date.now()));
  }

  private redriveAll(orders: RedriveOrder[], now: number): RedriveResult[] {
    return orders.map((order): RedriveResult => {
      const schedule = store.scheduleOf(this.sql, order.jobId);
      if (schedule?.status !== "active") return { executionId: order.executionId, ok: false, code: "job_inactive" };
      if (this.executions.held.has(order.executionId) || this.executions.closing.has(order.executionId))
        return { executionId: order.executionId, ok: true };
      this.insert(
        {
          dueAt: now,
          id: order.executionId,
          jobId: order.jobId,
          tenant: order.tenant,
          version: schedule.version,
          jobStatus: "active",
          occurrenceAt: order.occurrenceAt,
          occurrence: order.occurrence,
          attempt: order.attempts,
          budgetBase: order.attempts,
          recurring: true,
        },
        null,
        parseLog(order.attemptLog),
      );
      this.tally.add("redrive_total", order.tenant);
      return { executionId: order.executionId, ok: true };
    });
  }

  // ===========================================================================================
  // leases

  /**
   * Grants a lease on each due execution a fire message names: a fresh token, a fencing seq
   * greater than every earlier one (invariant 2), a deadline. A live lease, a finished execution
   * or a message of an earlier due time is a duplicate (invariant 7). Writes nothing.
   */
  async claim(refs: ExecutionRef[]): Promise<ClaimResult[]> {
    this.countRequest();
    return this.change(null, () => {
      const now = Date.now();
      return refs.map((ref): ClaimResult => {
        try {
          return this.claimOne(ref, now);
        } catch (error) {
          // one execution's failure (an unreadable spec) is its own: the others of its group are claimed
          console.error(`claim of ${ref.executionId} failed`, error);
          return { ok: false, executionId: ref.executionId, code: "failed" };
        }
      });
    });
  }

  private claimOne(ref: ExecutionRef, now: number): ClaimResult {
    const id = ref.executionId;
    const row = this.executions.held.get(id);
    if (!row) {
      const closed = this.executions.closedAt.get(id);
      if (!closed) return { ok: false, executionId: id, code: "unknown" };
      this.tally.add("duplicates_suppressed_total", closed.tenant);
      return { ok: false, executionId: id, code: "duplicate" };
    }
    // the same dispatch claimed again (its message redelivered after the offer failed): the same offer
    const repeatOffer = this.executions.offered.get(id)?.dueAt === ref.dueAt && row.dueAt === ref.dueAt && row.jobStatus === "active";
    const state = this.executions.stateOf(row);
    if (!repeatOffer && (row.dueAt !== ref.dueAt || transition(state, "claim") === null || row.jobStatus !== "active")) {
      // a live lease, or a dispatch of an earlier due time (the execution was retried or moved)
      this.tally.add("duplicates_suppressed_total", row.tenant);
      return { ok: false, executionId: id, code: "duplicate" };
    }
    if (row.dueAt > now) return { ok: false, executionId: id, code: "not_due" };
    const spec = store.specOf(this.sql, row);
    if (spec === null) return { ok: false, executionId: id, code: "unknown" };
    const parsed = parseSpec(spec);
    const dispatch = this.executions.claimed(id);
    if (dispatch) this.window.onClaimed(now - dispatch.at, now);
    if (isPullTarget(parsed.target)) {
      // the scheduler's part ends here: from now on it waits for a worker, not for us; a repeated
      // claim (a redelivered message) is a duplicate whose offer its queue holds once
      if (repeatOffer) this.tally.add("duplicates_suppressed_total", row.tenant);
      else this.tally.lag(row.tenant, now - row.dueAt);
      this.executions.offered.set(id, { dueAt: row.dueAt, queue: parsed.target.pull });
      return { ok: false, code: "offered", executionId: id, tenant: row.tenant, queue: parsed.target.pull, dueAt: row.dueAt };
    }
    this.tally.lag(row.tenant, now - row.dueAt);
    return this.grant(row, parsed, now);
  }

  /**
   * A pull worker leases offered executions (its pull queue asks on its behalf), each for the
   * length it chose. Only an execution still offered at that due time, of that tenant, is
   * leased; anything else is not_offered (leased meanwhile, finished, canceled, moved, or offered
   * again after a restart under the same due time, which its pull queue holds once). Writes nothing.
   */
  async leaseOffered(refs: OfferedLeaseRef[]): Promise<ClaimResult[]> {
    this.countRequest();
    return this.change(null, () => {
      const now = Date.now();
      return refs.map((ref): ClaimResult => {
        const id = ref.executionId;
        const row = this.executions.held.get(id);
        if (!row || row.tenant !== ref.tenant) return { ok: false, executionId: id, code: "unknown" };
        if (!this.standsBy(ref)) return { ok: false, executionId: id, code: "not_offered" };
        const spec = store.specOf(this.sql, row);
        if (spec === null) return { ok: false, executionId: id, code: "unknown" };
        return this.grant(row, parseSpec(spec), now, ref.leaseMs);
      });
    });
  }

  /**
   * Which of these offers this bucket still stands by (the pull queue's sweep of offers no worker
   * asked about: one it does not is dropped there). Writes nothing.
   */
  async stillOffered(refs: OfferedRef[]): Promise<boolean[]> {
    this.countRequest();
    return refs.map((ref) => this.standsBy(ref));
  }

  /** Offered at this due time in this queue, for this tenant, its job active (a PATCH or a retry may have moved it since). */
  private standsBy(ref: OfferedRef): boolean {
    const row = this.executions.held.get(ref.executionId);
    const offer = this.executions.offered.get(ref.executionId);
    return (
      row !== undefined &&
      row.tenant === ref.tenant &&
      row.dueAt === ref.dueAt &&
      row.jobStatus === "active" &&
      offer?.dueAt === ref.dueAt &&
      offer.queue === ref.queue
    );
  }

  /** A lease on a due execution: a fresh token, a fencing seq above every earlier one (invariant 2), a deadline. */
  private grant(row: HeldRow, spec: JobSpec, now: number, leaseMs?: number): LeaseGrant {
    const lease: Lease = {
      token: crypto.randomUUID(),
      seq: this.epoch * 2 ** 32 + ++this.leaseSeq,
      deadlineAt: now + (leaseMs ?? this.config.LEASE_MS),
      attempt: row.attempt + 1,
      startedAt: now,
      occurrenceAt: row.occurrenceAt,
      ...(leaseMs === undefined ? {} : { leaseMs }),
    };
    this.executions.lease(row.id, lease);
    return {
      ok: true,
      executionId: row.id,
      jobId: row.jobId,
      tenant: row.tenant,
      token: lease.token,
      seq: lease.seq,
      leaseDeadlineAt: lease.deadlineAt,
      attempt: lease.attempt,
      dueAt: row.dueAt,
      target: spec.target,
      timeoutMs: spec.timeoutMs,
      flowControl: spec.flowControl ?? null,
      firstDueAt: this.executions.waitingSince.get(row.id) ?? row.dueAt,
    };
  }

  /**
   * Extends live leases; a token that is not the live lease is rejected and counted (invariant 3).
   * Says whether the job was canceled or paused meanwhile (its running attempt still finishes).
   * Writes nothing.
   */
  async heartbeat(leases: LeaseRef[]): Promise<HeartbeatResult[]> {
    this.countRequest();
    return this.change(null, () => {
      const now = Date.now();
      return leases.map((ref): HeartbeatResult => {
        const lease = this.liveLease(ref, now);
        if (!lease) return { ok: false, executionId: ref.executionId, code: "stale_lease" };
        this.executions.extend(ref.executionId, lease, now, this.config.LEASE_MS);
        const canceled = this.executions.held.get(ref.executionId)?.jobStatus !== "active";
        return { ok: true, executionId: ref.executionId, leaseDeadlineAt: lease.deadlineAt, ...(canceled ? { canceled } : {}) };
      });
    });
  }

  /**
   * Records outcomes, each only if its token is the live lease (fencing): a zombie's report is
   * rejected and counted and never overwrites a newer attempt (invariant 3).
   */
  async complete(reports: CompletionReport[]): Promise<CompletionResult[]> {
    this.countRequest();
    return this.change(null, () => {
      const now = Date.now();
      return reports.map((report): CompletionResult => {
        const lease = this.liveLease(report, now);
        if (!lease) return { ok: false, executionId: report.executionId, code: "stale_lease" };
        const row = this.executions.held.get(report.executionId)!;
        const outcome = report.outcome;
        if (outcome.kind === "wait") return { ok: true, executionId: row.id, status: this.hold(row, lease, now, outcome.retryAt) };
        // a wait the consumer spent for its flow-control key before the delivery started
        const flowWaitMs = report.flowWaitMs ?? 0;
        if (flowWaitMs > 0) this.tally.add("flow_waits_total", row.tenant);
        if (outcome.kind === "succeeded") {
          const attempt = this.attemptRecord(row, lease, now, "succeeded", outcome.httpStatus, null, flowWaitMs, outcome.excerpt);
          this.tally.add("succeeded_total", row.tenant);
          if (row.occurrenceAt !== lease.occurrenceAt) {
            this.reschedule(row, attempt);
            return { ok: true, executionId: row.id, status: "scheduled" };
          }
          this.close(row, "succeed", now, { attempt, httpStatus: outcome.httpStatus });
          return { ok: true, executionId: row.id, status: "succeeded" };
        }
        const status = this.fail(row, lease, now, {
          failure: outcome.failure,
          label: outcome.failure,
          httpStatus: outcome.httpStatus,
          error: outcome.error,
          retryAfterMs: outcome.retryAfterMs,
          flowWaitMs,
        });
        return { ok: true, executionId: row.id, status };
      });
    });
  }

  /**
   * The dead-letter consumer's call: the queue gave up on these messages. Only the dispatch a
   * message names, and only if no lease holds the execution, becomes dead ("poison"): an old
   * message never kills a healthy retry.
   */
  async markPoisoned(refs: ExecutionRef[]): Promise<PoisonResult[]> {
    this.countRequest();
    return this.change(null, () => {
      const now = Date.now();
      return refs.map((ref): PoisonResult => {
        const row = this.executions.held.get(ref.executionId);
        if (!row || this.executions.closing.has(ref.executionId)) return { executionId: ref.executionId, code: "unknown" };
        if (row.dueAt !== ref.dueAt || transition(this.executions.stateOf(row), "poison") === null) {
          return { executionId: ref.executionId, code: "not_poisoned" };
        }
        this.close(row, "poison", now, { reason: "poison", error: "the queue consumer failed on this message repeatedly" });
        return { executionId: ref.executionId, code: "marked_dead" };
      });
    });
  }

  // ===========================================================================================
  // observation

  async metrics(): Promise<BucketMetrics> {
    this.countRequest();
    const counters = this.sql
      .exec<{ name: CounterName; tenant: string; reason: string; value: number }>("SELECT name, tenant, reason, value FROM counters")
      .toArray();
    const lag = this.sql.exec<{ tenant: string; le: number; count: number }>("SELECT tenant, le, count FROM lag_histogram").toArray();
    return this.tally.addTo({ counters, lag });
  }

  /** Counts an event observed outside the bucket (e.g. a malformed queue message). */
  async bump(name: CounterName, tenant: string, by: number): Promise<void> {
    this.countRequest();
    await this.change(null, () => this.tally.add(name, tenant, "", by));
  }

  /** Counts D1 rows written outside the bucket (the scan's purge, a create of far jobs), per shard. */
  async countD1RowsOf(meters: D1Meter[], archive?: ArchiveCount): Promise<void> {
    this.countRequest();
    await this.change(null, () => {
      for (const m of meters) this.countD1Rows(m.shard, m.d1RowsWritten);
      const archiveCounts: [CounterName, number][] = [
        ["archived_executions_total", archive?.executions ?? 0],
        ["archive_objects_total", archive?.objects ?? 0],
        ["archive_bytes_total", archive?.bytes ?? 0],
        ["archive_write_failures_total", archive?.failures ?? 0],
      ];
      for (const [name, by] of archiveCounts) if (by > 0) this.tally.add(name, SYSTEM_TENANT, "", by);
    });
  }

  /** Executions held here by state (invariant 4 adds these up with D1). */
  async counts(): Promise<BucketCounts> {
    this.countRequest();
    const byStatus: Record<string, number> = {};
    for (const row of this.executions.held.values()) {
      const state = this.executions.closing.get(row.id)?.status ?? this.executions.stateOf(row);
      byStatus[state] = (byStatus[state] ?? 0) + 1;
    }
    return { byStatus };
  }

  /** The live executions of a job (or some ids), for reads that must not wait for D1. */
  async inspect(query: { jobId?: string; executionIds?: string[] }): Promise<LiveExecution[]> {
    this.countRequest();
    const rows =
      query.jobId !== undefined
        ? this.executions.rowsOfJob(query.jobId)
        : (query.executionIds ?? []).flatMap((id) => this.executions.held.get(id) ?? []);
    return rows.map((row) => {
      const closing = this.executions.closing.get(row.id);
      const log = store.logOf(this.sql, row);
      if (closing?.last) log.push(closing.last);
      return {
        executionId: row.id,
        jobId: row.jobId,
        status: closing?.status ?? (this.executions.stateOf(row) as LiveExecution["status"]),
        dueAt: row.dueAt,
        occurrenceAt: row.occurrenceAt,
        occurrence: row.occurrence,
        attempts: closing?.attempts ?? row.attempt,
        lastHttpStatus: closing?.lastHttpStatus ?? log[log.length - 1]?.httpStatus ?? null,
        lastError: closing?.lastError ?? log[log.length - 1]?.error ?? null,
        deadReason: closing?.deadReason ?? null,
        finishedAt: closing?.finishedAt ?? null,
        attemptLog: log,
      };
    });
  }

  // ===========================================================================================
  // the alarm

  /**
   * Expires leases, re-sends lost dispatches, creates due occurrences, fires what is due and
   * writes finished outcomes to D1. Each step catches its own errors and the alarm always re-arms
   * (a throwing alarm is retried only a few times, then dropped: DESIGN.md).
   */
  override async alarm(): Promise<void> {
    this.countRequest();
    this.armedAt = null;
    const now = Date.now();
    const steps: [string, () => Promise<unknown>][] = [
      ["expire leases", () => this.change(null, () => this.expireLeases(now))],
      ["create occurrences", () => this.change(null, () => this.createOccurrences(now))],
      ["dispatch", async () => this.send(await this.change(null, () => this.takeDispatches(now)))],
      ["flush", () => this.flush(now)],
    ];
    for (const [name, step] of steps) {
      try {
        await step();
      } catch (error) {
        console.error(`bucket alarm step "${name}" failed`, error);
      }
    }
    await this.change(null, () => this.executions.forgetClosed(now)); // re-arms, whatever failed above
  }

  private expireLeases(now: number): void {
    for (const [id, lease] of [...this.executions.expired(now)]) {
      const row = this.executions.held.get(id)!;
      this.tally.add("lease_expired_total", row.tenant);
      this.fail(row, lease, now, {
        failure: "retryable",
        label: "lease_expired",
        httpStatus: null,
        error: "the lease expired before the attempt completed (worker crashed or stalled)",
      });
    }
  }

  /** A recurring job's due occurrence becomes an execution and the next one is planned (one owner: the bucket). */
  private createOccurrences(now: number): void {
    if (this.nextScheduleAt === null || this.nextScheduleAt > now) return;
    for (const schedule of store.dueSchedules(this.sql, now, this.config.FIRE_BATCH_LIMIT)) {
      const spec = parseSpec(schedule.spec);
      const occurrenceAt = schedule.nextAt!;
      const ordinal = schedule.fired + 1;
      const plan = spec.schedule ? planOccurrence(spec.schedule, occurrenceAt, ordinal, now) : { run: false, next: null };
      const row: HeldRow = {
        dueAt: occurrenceAt,
        id: occurrenceId(schedule.id, occurrenceAt),
        jobId: schedule.id,
        tenant: schedule.tenant,
        version: schedule.version,
        jobStatus: "active",
        occurrenceAt,
        occurrence: ordinal,
        attempt: 0,
        budgetBase: 0,
        recurring: true,
      };
      const next: ScheduleRow = { ...schedule, nextAt: plan.next?.at ?? null, fired: ordinal };
      store.putSchedule(this.sql, next);
      this.dirtySchedules.add(schedule.id);
      if (this.executions.held.has(row.id) || this.executions.closing.has(row.id)) continue;
      if (plan.run) this.insert(row, null, null);
      else {
        // nothing durable: the skip is only history (a crash before the flush loses that line)
        this.executions.hold(row);
        this.close(row, "cancel", now, { reason: "skipped: missed occurrence (catchUp none)" });
      }
    }
    this.nextScheduleAt = store.nextScheduleAt(this.sql);
  }

  /**
   * Takes what was lost in flight and what is due, as far as the dispatch window has room (a
   * message unclaimed DISPATCH_TIMEOUT_MS after its send no longer counts: windowRoom): due
   * executions in turns per tenant, each tenant's in due order. A dispatch is lost when a later
   * one of this bucket was claimed at least DISPATCH_TIMEOUT_MS after it was sent, or when
   * MAX_DISPATCH_WAIT_MS passed: a queue that is merely slow never gets a copy.
   */
  private takeDispatches(now: number): { fresh: FireRef[]; again: FireRef[] } {
    const fresh: FireRef[] = [];
    const again: FireRef[] = [];
    if (now < this.dispatchRetryAt || this.bucket === null) return { fresh, again };
    const limit = this.config.FIRE_BATCH_LIMIT;
    for (const [id, d] of this.executions.dispatched) {
      // dispatch order: the rest are younger and, if this one was not overtaken, neither were they
      if (again.length >= limit || now < this.executions.redispatchAt(d)) break;
      const row = this.executions.held.get(id)!;
      this.executions.dispatch(row, "redispatch", now);
      this.tally.add("redispatch_total", row.tenant);
      again.push(fireRefOf(row));
    }
    const room = Math.min(limit - again.length, this.windowRoom(now).room);
    for (const top of this.executions.due.takeDue(now, room, (dueAt, id) => this.executions.isScheduledAt(id, dueAt))) {
      const row = this.executions.held.get(top.id)!;
      this.executions.dispatch(row, "dispatch", now);
      this.tally.add("fired_total", row.tenant);
      fresh.push(fireRefOf(row));
    }
    return { fresh, again };
  }

  /**
   * Room in the dispatch window. A message unclaimed DISPATCH_TIMEOUT_MS after its send no longer
   * counts (it may be lost, and its re-send waits for its own turn): lost sends never close the
   * window, and due work goes on overtaking them. `reopensAt`: when the oldest message still
   * counted stops counting (null when nothing counts).
   */
  private windowRoom(now: number): { room: number; reopensAt: number | null } {
    const timeout = this.config.DISPATCH_TIMEOUT_MS;
    let stale = 0;
    let reopensAt: number | null = null;
    // dispatch order is send order: the stale ones come first
    for (const d of this.executions.dispatched.values()) {
      if (d.at + timeout > now) {
        reopensAt = d.at + timeout;
        break;
      }
      stale += 1;
    }
    return { room: this.window.room(this.executions.dispatched.size - stale), reopensAt };
  }

  /**
   * Sends what one pass took in groups of FIRE_GROUP_SIZE (one message each, sendBatch's 100 at a
   * time). A failed send: its first dispatches are scheduled again (and were not fired); re-sends
   * wait their turn.
   */
  private async send({ fresh, again }: { fresh: FireRef[]; again: FireRef[] }): Promise<void> {
    const queues = this.config.fireQueues;
    if (fresh.length + again.length === 0) return;
    if (queues.length === 0) throw new Error("no FIRE_QUEUE_0 binding");
    const queue = queues[fireQueueOf(this.bucket ?? 0, queues.length)]!;
    const bucket = this.bucket ?? 0;
    const failed: FireRef[] = [];
    const sends: Promise<void>[] = [];
    for (const [refs, isFresh] of [
      [fresh, true],
      [again, false],
    ] as const) {
      const groups = chunks(refs, this.config.FIRE_GROUP_SIZE).map((executions): FireGroup => ({ v: 2, bucket, executions }));
      for (const batch of chunks(groups, SEND_BATCH)) {
        sends.push(
          queue.sendBatch(batch.map((body) => ({ body, contentType: "json" as const }))).then(
            () => undefined,
            (error: unknown) => {
              console.error("fire queue send failed", error);
              const refsOf = batch.flatMap((g) => g.executions);
              if (isFresh) failed.push(...refsOf);
              for (const tenant of new Set(refsOf.map((r) => r.tenant))) this.tally.add("dispatch_errors_total", tenant);
            },
          ),
        );
      }
    }
    await Promise.all(sends);
    if (failed.length === 0) return;
    this.dispatchRetryAt = Date.now() + DISPATCH_RETRY_MS;
    await this.change(null, () => {
      for (const m of failed) {
        const row = this.executions.held.get(m.executionId);
        if (!row || !this.executions.dispatched.has(m.executionId) || row.dueAt !== m.dueAt) continue;
        this.executions.dispatched.delete(m.executionId);
        this.executions.schedule(row);
        this.tally.add("fired_total", row.tenant, "", -1);
      }
    });
  }

  /**
   * Writes finished outcomes and schedule projections to D1 in one batch, then lets those rows go
   * (their outcome is in D1; a crash before this point re-runs them: at-least-once).
   */
  private async flush(now: number): Promise<void> {
    if (this.flushing) return;
    const waiting = this.executions.closing.size;
    const outcomesDue = (waiting > 0 || this.dirtySchedules.size > 0) && (now >= this.flushAt || waiting >= FLUSH_NOW_AT);
    if (!outcomesDue) {
      if (this.tally.hasPending(METER_COUNTERS) && now >= this.counterWriteAt) await this.change(null, () => this.writeCounters(now));
      return;
    }
    this.flushing = true;
    let schedules: string[] = [];
    try {
      const closing = [...this.executions.closing.values()];
      const finished: FinishedExecution[] = closing.map((c) => {
        const log = store.logOf(this.sql, c.row);
        if (c.last) log.push(c.last);
        return {
          id: c.row.id,
          jobId: c.row.jobId,
          tenant: c.row.tenant,
          bucket: this.bucket ?? 0,
          recurring: c.row.recurring,
          occurrenceAt: c.row.occurrenceAt,
          occurrence: c.row.occurrence,
          status: c.status,
          attempts: c.attempts,
          lastHttpStatus: c.lastHttpStatus,
          lastError: c.lastError,
          deadReason: c.deadReason,
          finishedAt: c.finishedAt,
          attemptLog: log.length > 0 ? JSON.stringify(log.slice(-store.LOG_LIMIT)) : null,
        };
      });
      // taken, not copied: a schedule marked while the write is on its way (a change, or its last
      // occurrence closing) stays marked for the next flush
      schedules = [...this.dirtySchedules];
      this.dirtySchedules.clear();
      const projections: ScheduleProjection[] = schedules.flatMap((jobId) => {
        const s = store.scheduleOf(this.sql, jobId);
        if (!s) return [];
        const live = this.executions.rowsOfJob(jobId).some((r) => !this.executions.closing.has(r.id));
        return [
          {
            tenant: s.tenant,
            jobId,
            version: s.version,
            nextRunAt: s.nextAt,
            fired: s.fired,
            completed: s.status === "active" && s.nextAt === null && !live,
          },
        ];
      });
      // one batch per shard, each job's outcome to its own shard: a failing shard delays only its own
      // (a job of a shard not bound here, the count lowered, waits like one whose shard failed)
      const shards = shardsOf(this.env);
      const shardOf = (jobId: string) => shardOfId(jobId) ?? 0;
      const finishedBy = Map.groupBy(finished, (f) => shardOf(f.jobId));
      const projectedBy = Map.groupBy(projections, (p) => shardOf(p.jobId));
      const failedShards = new Set<number>();
      await Promise.all(
        [...new Set([...finishedBy.keys(), ...projectedBy.keys()])].map(async (index) => {
          const shard = shards.all[index];
          try {
            if (!shard) throw new Error(`D1 shard ${index} is not bound`);
            this.countD1Rows(index, await writeOutcomes(shard.db, finishedBy.get(index) ?? [], projectedBy.get(index) ?? [], now));
          } catch (error) {
            console.error(`writing outcomes to D1 shard ${index} failed; retrying`, error);
            failedShards.add(index);
          }
        }),
      );
      const written = closing.filter((c) => !failedShards.has(shardOf(c.row.jobId)));
      for (const jobId of schedules) if (failedShards.has(shardOf(jobId))) this.dirtySchedules.add(jobId);
      await this.change(null, () => {
        const at = Date.now();
        store.deleteExecutions(
          this.sql,
          written.map((c) => c.row),
        );
        for (const c of written) {
          this.executions.closing.delete(c.row.id);
          this.executions.release(c.row);
          this.executions.rememberClosed(c.row.id, { at, tenant: c.row.tenant, version: c.row.version });
        }
        if (at >= this.counterWriteAt) this.writeCounters(at);
        const deferred = [...this.deferred.values()].filter((d) => !this.executions.closing.has(oneOffExecutionId(d.jobId)));
        for (const d of deferred) this.deferred.delete(oneOffExecutionId(d.jobId));
        this.applyAll(deferred, at, false);
      });
      this.flushAt = Date.now() + (failedShards.size > 0 ? FLUSH_RETRY_MS : this.config.FLUSH_DELAY_MS);
    } catch (error) {
      console.error("writing outcomes to D1 failed; retrying", error);
      for (const jobId of schedules) this.dirtySchedules.add(jobId);
      this.flushAt = Date.now() + FLUSH_RETRY_MS;
    } finally {
      this.flushing = false;
    }
  }

  /** Every RPC and alarm is a billed Durable Object request. */
  private countRequest(): void {
    this.tally.add("do_requests_total", SYSTEM_TENANT);
  }

  /** D1 rows written to a shard: d1_rows_written_total, its reason the shard's index */
  private countD1Rows(shard: number, rows: number): void {
    if (rows > 0) this.tally.add("d1_rows_written_total", SYSTEM_TENANT, String(shard), rows);
  }

  private writeCounters(now: number): void {
    this.meterRows(); // the rows written so far count in this write
    this.tally.write(this.sql);
    this.counterWriteAt = now + COUNTER_WRITE_MS;
  }

  // ===========================================================================================
  // the one wrapper: run a step, commit, re-arm

  /**
   * Runs a step inside one storage transaction, counts the rows it wrote (the meter), and re-arms
   * the alarm. Every RPC and alarm step goes through here.
   */
  private async change<T>(bucket: number | null, step: () => T): Promise<T> {
    const result = this.ctx.storage.transactionSync(() => {
      if (bucket !== null && this.bucket === null) {
        store.rememberBucket(this.sql, bucket);
        this.bucket = bucket;
      }
      const out = step();
      this.meterRows();
      return out;
    });
    await this.rearm();
    return result;
  }

  private meterRows(): void {
    let rows = 0;
    for (const cursor of this.cursors.splice(0)) rows += cursor.rowsWritten;
    if (rows > 0) this.tally.add("do_rows_written_total", SYSTEM_TENANT, "", rows);
  }

  /** The alarm is always the earliest thing this bucket must do (STYLE.md habit 4). */
  private async rearm(): Promise<void> {
    const now = Date.now();
    // due work wakes the alarm only while the window has room; a claim that frees room re-arms,
    // and so does the time an unclaimed message stops counting
    const window = this.windowRoom(now);
    const nextDue = this.executions.due.peek((dueAt, id) => this.executions.isScheduledAt(id, dueAt))?.dueAt;
    const firstLease = this.executions.firstDeadline();
    const firstDispatch = this.executions.dispatched.values().next().value;
    const pendingFlush = this.executions.closing.size > 0 || this.dirtySchedules.size > 0;
    const at = nextAlarmAt({
      candidates: [
        nextDue === undefined ? null : window.room > 0 ? Math.max(nextDue, this.dispatchRetryAt) : window.reopensAt,
        firstLease,
        firstDispatch ? this.executions.redispatchAt(firstDispatch) : null,
        this.nextScheduleAt,
        pendingFlush ? Math.max(this.flushAt, now) : null,
        // the meter's own counters ride along with the next write: waking for them alone would
        // set an alarm, which is metered, which would wake the bucket again
        this.tally.hasPending(METER_COUNTERS) ? Math.max(this.counterWriteAt, now) : null,
      ],
      now,
      quantumMs: this.config.ALARM_QUANTUM_MS,
    });
    if (at === null || (this.armedAt !== null && this.armedAt <= at && this.armedAt >= now)) return;
    this.armedAt = at;
    this.tally.add("alarms_set_total", SYSTEM_TENANT);
    await this.ctx.storage.setAlarm(at);
  }

  // ===========================================================================================
  // steps shared by the operations above (inside `change`)

  private insert(row: HeldRow, spec: string | null, log: AttemptRecord[] | null): boolean {
    if (!store.insertExecution(this.sql, row, spec, log)) return false;
    this.executions.hold(row);
    this.executions.schedule(row);
    return true;
  }

  /**
   * A job changed while its execution waited in a pull queue (its target may now be another queue
   * or no queue at all): it is dispatched again under the new target, and its old queue drops the
   * offer when a worker's request meets it.
   */
  private offerAgain(row: HeldRow): void {
    if (!this.executions.offered.has(row.id)) return;
    this.executions.assertMove(row, "reschedule");
    this.executions.offered.delete(row.id);
    this.executions.schedule(row);
  }

  /** A failed attempt: back off, die, or (the job was canceled or paused) end canceled (invariant 6). */
  private fail(row: HeldRow, lease: Lease, now: number, f: Failure): "scheduled" | "dead" | "canceled" {
    const error = excerpt(f.error);
    const attempt = this.attemptRecord(row, lease, now, f.label, f.httpStatus, error, f.flowWaitMs ?? 0);
    this.tally.add("failed_attempts_total", row.tenant);
    if (row.occurrenceAt !== lease.occurrenceAt) {
      this.reschedule(row, attempt);
      return "scheduled";
    }
    if (row.jobStatus !== "active") {
      this.close(row, "abandon", now, { attempt, httpStatus: f.httpStatus, error, reason: row.jobStatus });
      return "canceled";
    }
    const spec = store.specOf(this.sql, row);
    const decision = spec
      ? decideAfterFailure({
          policy: parseSpec(spec).retry,
          attemptsUsed: attempt.attempt - row.budgetBase,
          failure: f.failure,
          retryAfterMs: f.retryAfterMs,
          now,
          rand: Math.random(),
        })
      : ({ kind: "dead", reason: "permanent" } as const);
    if (decision.kind === "dead") {
      this.close(row, "kill", now, { attempt, httpStatus: f.httpStatus, error, reason: decision.reason });
      return "dead";
    }
    this.runAgain(row, attempt, "retry", { ...row, dueAt: decision.dueAt, attempt: attempt.attempt });
    this.tally.add("retries_total", row.tenant);
    return "scheduled";
  }

  /** The run time changed while an attempt ran: run again at the new time with a fresh budget. */
  private reschedule(row: HeldRow, attempt: AttemptRecord): void {
    this.runAgain(row, attempt, "reschedule", { ...row, attempt: attempt.attempt, budgetBase: attempt.attempt });
  }

  /** A finished attempt goes into the log and the execution waits again as `moved` (its due time and budget). */
  private runAgain(row: HeldRow, attempt: AttemptRecord | null, move: "retry" | "reschedule" | "wait", moved: HeldRow): void {
    this.executions.assertMove(row, move);
    this.executions.endLease(row.id);
    store.moveExecution(this.sql, row.dueAt, moved, attempt ? { attempt } : {});
    this.executions.keep(moved);
    this.executions.schedule(moved);
  }

  /**
   * Flow control held the attempt back (its key was over its limits, paused, or slowed down by
   * its target): the lease ends and the execution is due again at `retryAt` without using an
   * attempt. The wait is not lateness: the lag is measured from the new due time, and the
   * attempt that runs records it as waitMs.
   */
  private hold(row: HeldRow, lease: Lease, now: number, retryAt: number): "scheduled" | "canceled" {
    if (row.jobStatus !== "active") {
      this.close(row, "abandon", now, { reason: row.jobStatus });
      return "canceled";
    }
    // a reschedule meanwhile (PATCH) moved the row: it waits for whichever is later
    const from = row.occurrenceAt !== lease.occurrenceAt ? row.dueAt : now;
    if (!this.executions.waitingSince.has(row.id)) this.executions.waitingSince.set(row.id, row.dueAt);
    this.runAgain(row, null, "wait", { ...row, dueAt: Math.max(retryAt, from) });
    this.tally.add("flow_waits_total", row.tenant);
    return "scheduled";
  }

  /**
   * A change of the job (cancel, pause, a new schedule) at `version` ends this execution canceled,
   * stored first: a restart before the flush finds the row canceled and closes it again instead of
   * running it (a change answered 200 is never undone). 1 row written.
   */
  private cancel(row: HeldRow, version: number, now: number, reason: string): void {
    const canceled: HeldRow = { ...row, version: Math.max(row.version, version), jobStatus: "canceled" };
    store.updateJobOfExecution(this.sql, canceled, null);
    this.executions.keep(canceled);
    this.close(canceled, "cancel", now, { reason });
  }

  /** An outcome on its way to D1 (its state from the lifecycle table); the row stays until D1 has it. */
  private close(
    row: HeldRow,
    event: "succeed" | "kill" | "poison" | "cancel" | "abandon",
    now: number,
    detail: { attempt?: AttemptRecord; httpStatus?: number | null; error?: string | null; reason?: string },
  ): void {
    const status = this.executions.assertMove(row, event) as TerminalState;
    this.executions.dispatched.delete(row.id);
    this.executions.offered.delete(row.id);
    this.executions.endLease(row.id);
    const attempts = detail.attempt?.attempt ?? row.attempt;
    this.executions.closing.set(row.id, {
      row,
      status,
      attempts,
      finishedAt: now,
      lastHttpStatus: detail.httpStatus ?? null,
      lastError: detail.error ?? (status === "canceled" ? (detail.reason ?? null) : null),
      deadReason: status === "dead" ? (detail.reason ?? null) : null,
      last: detail.attempt ?? null,
    });
    // the schedule's completion is decided at the flush: a finished occurrence may be its last
    if (row.recurring) this.dirtySchedules.add(row.jobId);
    if (status === "dead") this.tally.add("dead_total", row.tenant, detail.reason ?? "");
    if (status === "canceled") this.tally.add("canceled_total", row.tenant);
  }

  private attemptRecord(
    row: HeldRow,
    lease: Lease,
    now: number,
    outcome: string,
    httpStatus: number | null,
    error: string | null,
    flowWaitMs: number,
    response = "",
  ): AttemptRecord {
    const waitedFrom = this.executions.waitingSince.get(row.id);
    this.executions.waitingSince.delete(row.id);
    // the wait in the bucket ends at the due time it waited for (from there to the claim is lag);
    // the consumer's wait for its key follows the claim
    const waitMs = (waitedFrom === undefined ? 0 : row.dueAt - waitedFrom) + flowWaitMs;
    return {
      attempt: lease.attempt,
      dueAt: row.dueAt,
      startedAt: lease.startedAt,
      finishedAt: now,
      outcome,
      httpStatus,
      error,
      ...(waitMs > 0 || waitedFrom !== undefined ? { waitMs } : {}),
      ...(response ? { response: excerpt(response, RESPONSE_EXCERPT_LENGTH) } : {}),
    };
  }

  private liveLease(ref: LeaseRef, now: number): Lease | undefined {
    const lease = this.executions.running.get(ref.executionId);
    const tenantOk = ref.tenant === undefined || this.executions.held.get(ref.executionId)?.tenant === ref.tenant;
    if (lease && lease.token === ref.token && lease.deadlineAt > now && tenantOk) return lease;
    // counted for the caller: a pull worker's tenant (another tenant's token is its own mistake), else the execution's
    this.tally.add("stale_lease_rejects_total", ref.tenant ?? this.executions.held.get(ref.executionId)?.tenant ?? SYSTEM_TENANT);
    return undefined;
  }
}

/** A held execution as its fire message names it. */
function fireRefOf(row: HeldRow): FireRef {
  return { executionId: row.id, tenant: row.tenant, dueAt: row.dueAt };
}

/** `items` in consecutive slices of at most `size`. */
function chunks<T>(items: T[], size: number): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < items.length; i += size) out.push(items.slice(i, i + size));
  return out;
}

/** A definition's log for insert(): none stays none (no log column written). */
function parseLog(json: string | null): AttemptRecord[] | null {
  return json ? parseAttemptLog(json) : null;
}
