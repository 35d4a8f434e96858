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
 * This class is the shell: each RPC and alarm step is a short call into an operation module
 * (jobs.ts, leases.ts, outcomes.ts, dispatch.ts, flush.ts, observe.ts) over the shared state
 * (state.ts: storage, the execution state machine of flight.ts, the tally); only the shell calls
 * the queue and D1. Every RPC and the alarm go through `change`, which runs the step, commits
 * and re-arms the alarm: "every change re-arms the alarm" holds by construction.
 */
import { DurableObject } from "cloudflare:workers";
import { alertsOf } from "../alerts/alerts";
import { type Config, configOf } from "../config";
import { nextAlarmAt } from "../core/alarm";
import { fireQueueOf } from "../core/bucketing";
import { type BucketMetrics, type CounterName, SYSTEM_TENANT } from "../core/metrics";
import { clearRedrives } from "../db/redrive";
import { type Shard, shardsOf } from "../db/shards";
import { markSynced, pendingJobs, pendingRedrives, unsyncedJobs } from "../db/sync-pass";
import { writeOutcomes } from "../db/write-outcomes";
import { pullQueueOf } from "../pull/pull-queue";
import { type Dispatches, fireBatches, takeDispatches, unsend, windowRoom } from "./dispatch";
import { applyDeferred, flushDue, remark, settle, takeOutcomes } from "./flush";
import { applyAll, createOccurrences, offerAgainUntold, redriveAll } from "./jobs";
import { claimOne, heartbeatOne, leaseOfferedOne, standsBy } from "./leases";
import { countByState, inspect, readMetrics } from "./observe";
import { completeOne, expireLeases, poisonOne } from "./outcomes";
import type {
  Applied,
  ArchiveCount,
  BucketCounts,
  ClaimResult,
  CompletionReport,
  CompletionResult,
  D1Meter,
  ExecutionRef,
  FireRef,
  HeartbeatResult,
  JobDefinition,
  LeaseRef,
  LiveExecution,
  OfferedLeaseRef,
  OfferedRef,
  PoisonResult,
  RedriveOrder,
  RedriveResult,
} from "./protocol";
import { migrateBucket } from "./schema";
import { type BucketState, close, countD1Rows, countOutside, newState } from "./state";
import * as store from "./store";

const PULL_PAGE = 500;
const PULL_PAGES = 40;
const FLUSH_RETRY_MS = 1000;
const DISPATCH_RETRY_MS = 1000;
/**
 * Counters and the lag histogram are written at most this often: a row per counter per write, so
 * at low rates writing them with every outcome flush would cost more than the outcomes. Reads
 * add what is not written yet; a crash loses at most this much of the counts.
 */
const COUNTER_WRITE_MS = 10_000;
const METER_COUNTERS: CounterName[] = ["do_rows_written_total", "d1_rows_written_total", "alarms_set_total", "do_requests_total"];

export class Bucket extends DurableObject<Env> {
  /** what the operation modules share (state.ts) */
  private readonly s: BucketState;
  private readonly config: Config;
  private flushAt = 0;
  private counterWriteAt = 0;
  private flushing = false;
  private armedAt: number | null = null;
  /** this object's SQL cursors not yet counted (rowsWritten is final once a statement ran) */
  private readonly cursors: SqlStorageCursor<Record<string, SqlStorageValue>>[] = [];

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    // every statement goes through one exec that remembers its cursor: rows written are counted
    // from the platform's own counter (what Cloudflare bills), not estimated
    const raw = ctx.storage.sql;
    const sql = Object.create(raw, {
      exec: {
        value: (query: string, ...bindings: SqlStorageValue[]) => {
          const cursor = raw.exec(query, ...bindings);
          this.cursors.push(cursor);
          return cursor;
        },
      },
    }) as SqlStorage;
    const config = configOf(env);
    this.config = config;
    const { epoch, rows, priorities } = ctx.storage.transactionSync(() => {
      migrateBucket(sql);
      return { epoch: store.nextEpoch(sql), rows: store.loadHeld(sql), priorities: store.loadPriorities(sql) };
    });
    this.s = newState(sql, config, epoch);
    // before the rows: each goes into the due order under its spec's priority (a job's, or a callback's own)
    for (const [owner, priority] of priorities) this.s.executions.notePriority(owner, priority);
    const now = Date.now();
    // what was dispatched or running before the restart is scheduled again (transition restart);
    // an attempt of a job canceled or paused meanwhile ends canceled instead
    for (const row of rows) if (!this.s.executions.restore(row)) close(this.s, row, "cancel", now, { reason: row.jobStatus });
    void ctx.blockConcurrencyWhile(() => this.rearm());
  }

  // ===========================================================================================
  // jobs: definitions from D1 (create, every change, the sync pass), redrives (jobs.ts)

  /**
   * Applies job versions. A version older than or equal to the one held is a no-op; what is
   * returned is held now (a definition for an execution on its way to D1 waits for the flush).
   */
  async applyJobs(bucket: number, definitions: JobDefinition[], meters: D1Meter[] = []): Promise<Applied[]> {
    this.countRequest();
    return this.change(bucket, () => {
      // the caller's D1 rows for these jobs, counted here with the rest of the bill
      for (const m of meters) countD1Rows(this.s.tally, m.shard, m.d1RowsWritten);
      return applyAll(this.s, definitions, Date.now(), "request");
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

  /** One shard's part of the sync pass: D1 reads and acknowledgements here, each apply a change. */
  private async pullShard(bucket: number, { db, index }: Shard): Promise<{ pulled: number; synced: number; redriven: number }> {
    let pulled = 0;
    let after: { at: number; tenant: string; id: string } | null = null;
    // pages are cut by count or by bytes (db/sync-pass.ts SYNC_PAGE_BYTES): a short page is not the end, `more` says
    for (let page = 0; page < PULL_PAGES; page++) {
      const { rows, more } = await pendingJobs(db, bucket, Date.now() + this.config.LOOKAHEAD_MS, after, PULL_PAGE);
      if (rows.length === 0) break;
      const applied = await this.change(bucket, () => applyAll(this.s, rows, Date.now(), "pull"));
      pulled += applied.length;
      const last = rows[rows.length - 1]!;
      after = { at: last.nextRunAt ?? 0, tenant: last.tenant, id: last.jobId };
      if (!more) break;
    }
    // acknowledged changes leave the partial index, so each page starts from its beginning; a page
    // that acknowledged nothing (newer versions meanwhile) waits for the next pass
    let synced = 0;
    let syncRows = 0;
    for (let page = 0; page < PULL_PAGES; page++) {
      const { rows: unsynced, more } = await unsyncedJobs(db, bucket, PULL_PAGE);
      const applied = await this.change(bucket, () => applyAll(this.s, unsynced, Date.now(), "pull"));
      const held = unsynced.filter((d) => applied.some((a) => a.jobId === d.jobId && a.version >= d.version));
      const written = await markSynced(
        db,
        held.map((d) => ({ tenant: d.tenant, jobId: d.jobId, version: d.version })),
      );
      synced += held.length;
      syncRows += written;
      if (!more || written === 0) break;
    }
    const orders = await pendingRedrives(db, bucket, PULL_PAGE);
    const results = await this.change(bucket, () => redriveAll(this.s, orders, Date.now()));
    const redriveRows = await clearRedrives(
      db,
      orders.filter((_o, i) => results[i]!.ok).map((o) => ({ tenant: o.tenant, executionId: o.executionId })),
    );
    countD1Rows(this.s.tally, index, syncRows + redriveRows);
    return { pulled, synced, redriven: orders.length };
  }

  /** A recurring job's dead occurrences run again (a one-off job's redrive is a new job version). */
  async redrive(bucket: number, orders: RedriveOrder[]): Promise<RedriveResult[]> {
    this.countRequest();
    return this.change(bucket, () => redriveAll(this.s, orders, Date.now()));
  }

  // ===========================================================================================
  // leases (leases.ts) and outcomes (outcomes.ts): memory only, nothing written but counters

  /** Grants a lease on (or offers) each due execution a fire message names (invariants 2, 7). */
  async claim(refs: ExecutionRef[]): Promise<ClaimResult[]> {
    this.countRequest();
    return this.change(null, () => {
      const now = Date.now();
      return refs.map((ref): ClaimResult => {
        try {
          return claimOne(this.s, ref, now);
        } catch (error) {
          // one execution's failure (an unreadable spec) is its own: the others of its group are claimed
          console.error(`claim of ${ref.executionId} failed`, error);
          return { ok: false, executionId: ref.executionId, code: "failed" };
        }
      });
    });
  }

  /** A pull worker leases offered executions (its pull queue asks on its behalf), each for the length it chose. */
  async leaseOffered(refs: OfferedLeaseRef[]): Promise<ClaimResult[]> {
    this.countRequest();
    return this.change(null, () => {
      const now = Date.now();
      return refs.map((ref) => leaseOfferedOne(this.s, ref, now));
    });
  }

  /** Which of these offers this bucket still stands by (the pull queue's sweep of offers no worker asked about). */
  async stillOffered(refs: OfferedRef[]): Promise<boolean[]> {
    this.countRequest();
    return refs.map((ref) => standsBy(this.s, ref));
  }

  /** Extends live leases; a stale token is rejected and counted (invariant 3). */
  async heartbeat(leases: LeaseRef[]): Promise<HeartbeatResult[]> {
    this.countRequest();
    return this.change(null, () => {
      const now = Date.now();
      return leases.map((ref) => heartbeatOne(this.s, ref, now));
    });
  }

  /** Records outcomes, each only if its token is the live lease (fencing, invariant 3). */
  async complete(reports: CompletionReport[]): Promise<CompletionResult[]> {
    this.countRequest();
    return this.change(null, () => {
      const now = Date.now();
      return reports.map((report) => completeOne(this.s, report, now));
    });
  }

  /** The dead-letter consumer's call: the queue gave up on these messages ("poison"). */
  async markPoisoned(refs: ExecutionRef[]): Promise<PoisonResult[]> {
    this.countRequest();
    return this.change(null, () => {
      const now = Date.now();
      return refs.map((ref) => poisonOne(this.s, ref, now));
    });
  }

  // ===========================================================================================
  // observation (observe.ts)

  async metrics(): Promise<BucketMetrics> {
    this.countRequest();
    return readMetrics(this.s);
  }

  /** Counts an event observed outside the bucket (e.g. a malformed queue message). */
  async bump(name: CounterName, tenant: string, by: number): Promise<void> {
    this.countRequest();
    await this.change(null, () => this.s.tally.add(name, tenant, "", by));
  }

  /** Counts D1 rows written outside the bucket (the scan's purge, a create of far jobs), per shard. */
  async countD1RowsOf(meters: D1Meter[], archive?: ArchiveCount): Promise<void> {
    this.countRequest();
    await this.change(null, () => countOutside(this.s.tally, meters, archive));
  }

  /** Executions held here by state (invariant 4 adds these up with D1). */
  async counts(): Promise<BucketCounts> {
    this.countRequest();
    return countByState(this.s);
  }

  /** The live executions of a job (or some ids), for reads that must not wait for D1. */
  async inspect(query: { jobId?: string; executionIds?: string[] }): Promise<LiveExecution[]> {
    this.countRequest();
    return inspect(this.s, query);
  }

  // ===========================================================================================
  // the alarm

  /**
   * Expires leases, creates due occurrences, fires what is due (and re-sends lost dispatches) and
   * writes finished outcomes to D1. Each step catches its own errors and the alarm always re-arms
   * (a throwing alarm is retried only a few times, then dropped: DESIGN.md).
   */
  override async alarm(): Promise<void> {
    this.countRequest();
    this.armedAt = null;
    const now = Date.now();
    const steps: [string, () => Promise<unknown>][] = [
      ["expire leases", () => this.change(null, () => expireLeases(this.s, now))],
      ["create occurrences", () => this.change(null, () => createOccurrences(this.s, now))],
      ["dispatch", async () => this.send(await this.change(null, () => takeDispatches(this.s, now)))],
      ["flush", () => this.flush(now)],
    ];
    for (const [name, step] of steps) {
      try {
        await step();
      } catch (error) {
        console.error(`bucket alarm step "${name}" failed`, error);
      }
    }
    await this.change(null, () => this.s.executions.forgetClosed(now)); // re-arms, whatever failed above
  }

  /**
   * Sends what one pass took (dispatch.ts fireBatches). A failed send: its first dispatches are
   * scheduled again (and were not fired); re-sends wait their turn.
   */
  private async send(dispatches: Dispatches): Promise<void> {
    const queues = this.config.fireQueues;
    if (dispatches.fresh.length + dispatches.again.length === 0) return;
    if (queues.length === 0) throw new Error("no FIRE_QUEUE_0 binding");
    const queue = queues[fireQueueOf(this.s.bucket ?? 0, queues.length)]!;
    const failed: FireRef[] = [];
    await Promise.all(
      fireBatches(this.s, dispatches).map(({ groups, fresh }) =>
        queue.sendBatch(groups.map((body) => ({ body, contentType: "json" as const }))).then(
          () => this.s.tally.add("fire_messages_total", SYSTEM_TENANT, "", groups.length),
          (error: unknown) => {
            console.error("fire queue send failed", error);
            const refs = groups.flatMap((g) => g.executions);
            if (fresh) failed.push(...refs);
            for (const tenant of new Set(refs.map((r) => r.tenant))) this.s.tally.add("dispatch_errors_total", tenant);
          },
        ),
      ),
    );
    if (failed.length === 0) return;
    this.s.dispatchRetryAt = Date.now() + DISPATCH_RETRY_MS;
    await this.change(null, () => unsend(this.s, failed));
  }

  /**
   * Writes finished outcomes and schedule projections to D1 (flush.ts builds them), one batch per
   * shard, then lets those rows go (their outcome is in D1; a crash before this point re-runs them:
   * at-least-once).
   */
  private async flush(now: number): Promise<void> {
    if (this.flushing) return;
    if (!flushDue(this.s, now, this.flushAt)) {
      if (this.s.tally.hasPending(METER_COUNTERS) && now >= this.counterWriteAt) await this.change(null, () => this.writeCounters(now));
      return;
    }
    this.flushing = true;
    let schedules: string[] = [];
    try {
      const outcomes = takeOutcomes(this.s);
      schedules = outcomes.schedules;
      const shards = shardsOf(this.env);
      const failedShards = new Set<number>();
      await Promise.all(
        [...outcomes.byShard].map(async ([index, { finished, projections, callbacks }]) => {
          const shard = shards.all[index];
          try {
            if (!shard) throw new Error(`D1 shard ${index} is not bound`);
            countD1Rows(this.s.tally, index, await writeOutcomes(shard.db, finished, projections, now, callbacks));
          } catch (error) {
            console.error(`writing outcomes to D1 shard ${index} failed; retrying`, error);
            failedShards.add(index);
          }
        }),
      );
      remark(this.s, schedules, failedShards);
      await this.reportDeaths(outcomes, failedShards);
      await this.change(null, () => {
        const at = Date.now();
        settle(this.s, outcomes, failedShards, at);
        if (at >= this.counterWriteAt) this.writeCounters(at);
        applyDeferred(this.s, at);
      });
      this.flushAt = Date.now() + (failedShards.size > 0 ? FLUSH_RETRY_MS : this.config.FLUSH_DELAY_MS);
    } catch (error) {
      console.error("writing outcomes to D1 failed; retrying", error);
      remark(this.s, schedules);
      this.flushAt = Date.now() + FLUSH_RETRY_MS;
    } finally {
      this.flushing = false;
    }
  }

  /**
   * Dead executions whose outcome is in D1 go to their tenant's alerts (alerts/alerts.ts: one
   * RPC per tenant with deaths in this flush; a tenant without an alert target drops them). A
   * failed report loses only those alerts, never an outcome.
   */
  private async reportDeaths(outcomes: ReturnType<typeof takeOutcomes>, failedShards: Set<number>): Promise<void> {
    const deaths = [...outcomes.byShard]
      .filter(([index]) => !failedShards.has(index))
      .flatMap(([, { finished }]) => finished.filter((f) => f.status === "dead"));
    if (deaths.length === 0) return;
    await Promise.all(
      [...Map.groupBy(deaths, (d) => d.tenant)].map(([tenant, ofTenant]) =>
        alertsOf(this.env, tenant)
          .record(
            ofTenant.map((d) => ({
              executionId: d.id,
              jobId: d.jobId,
              deadAt: d.finishedAt,
              deadReason: d.deadReason,
              attempts: d.attempts,
              lastHttpStatus: d.lastHttpStatus,
              lastError: d.lastError,
            })),
          )
          .catch((error: unknown) => console.error(`reporting deaths to the alerts of ${tenant} failed`, error)),
      ),
    );
  }

  // ===========================================================================================
  // the one wrapper: run a step, commit, re-arm

  /**
   * Runs a step inside one storage transaction, counts the rows it wrote (the meter), and re-arms
   * the alarm; then tells the pull queues of the offers the step made again (a new priority, a
   * released lease), before the step is answered. Every RPC and alarm step goes through here.
   */
  private async change<T>(bucket: number | null, step: () => T): Promise<T> {
    const result = this.ctx.storage.transactionSync(() => {
      if (bucket !== null && this.s.bucket === null) {
        store.rememberBucket(this.s.sql, bucket);
        this.s.bucket = bucket;
      }
      const out = step();
      this.meterRows();
      return out;
    });
    await this.rearm();
    await this.tellQueues();
    return result;
  }

  /**
   * Offers made again are told to their queues, under their priority now, which then hold them by
   * it alone: one whose priority changed while it waited (a PATCH: jobs.ts offerAgain), so a PATCH
   * answered 200 is the order of the next lease (issue 36 item 8); one whose lease its queue gave
   * back (outcomes.ts release, item 6). A queue that cannot be told: its offers are dispatched
   * again (jobs.ts offerAgainUntold), so the next claim offers them anew.
   */
  private async tellQueues(): Promise<void> {
    const offers = this.s.executions.takeReoffers();
    if (offers.length === 0) return;
    const bucket = this.s.bucket ?? 0;
    const untold: typeof offers = [];
    await Promise.all(
      [...Map.groupBy(offers, (o) => `${o.tenant}\n${o.queue}`).values()].map(async (group) => {
        const { tenant, queue } = group[0]!;
        try {
          await pullQueueOf(this.env, tenant, queue).offer(
            group.map((o) => ({ executionId: o.executionId, bucket, dueAt: o.dueAt, priority: o.priority })),
          );
        } catch (error) {
          console.error(`telling pull queue ${queue} of its offers again failed; they are dispatched again`, error);
          untold.push(...group);
        }
      }),
    );
    if (untold.length > 0) await this.change(null, () => offerAgainUntold(this.s, untold));
  }

  /** Every RPC and alarm is a billed Durable Object request. */
  private countRequest(): void {
    this.s.tally.add("do_requests_total", SYSTEM_TENANT);
  }

  private meterRows(): void {
    let rows = 0;
    for (const cursor of this.cursors.splice(0)) rows += cursor.rowsWritten;
    if (rows > 0) this.s.tally.add("do_rows_written_total", SYSTEM_TENANT, "", rows);
  }

  private writeCounters(now: number): void {
    this.meterRows(); // the rows written so far count in this write
    this.s.tally.write(this.s.sql);
    this.counterWriteAt = now + COUNTER_WRITE_MS;
  }

  /** The alarm is always the earliest thing this bucket must do (STYLE.md habit 4). */
  private async rearm(): Promise<void> {
    const now = Date.now();
    const { executions, tally } = this.s;
    // due work wakes the alarm only while the window has room; a claim that frees room re-arms,
    // and so does the time an unclaimed message stops counting
    const window = windowRoom(this.s, now);
    const nextDue = executions.nextDueAt();
    const firstDispatch = executions.dispatched.values().next().value;
    const pendingFlush = executions.closing.size > 0 || this.s.dirtySchedules.size > 0;
    const at = nextAlarmAt({
      candidates: [
        nextDue === undefined ? null : window.room > 0 ? Math.max(nextDue, this.s.dispatchRetryAt) : window.reopensAt,
        executions.firstDeadline(),
        firstDispatch ? executions.redispatchAt(firstDispatch) : null,
        this.s.nextScheduleAt,
        pendingFlush ? Math.max(this.flushAt, now) : null,
        // the meter's own counters ride along with the next write: waking for them alone would
        // set an alarm, which is metered, which would wake the bucket again
        tally.hasPending(METER_COUNTERS) ? Math.max(this.counterWriteAt, now) : null,
      ],
      now,
      quantumMs: this.config.ALARM_QUANTUM_MS,
    });
    if (at === null || (this.armedAt !== null && this.armedAt <= at && this.armedAt >= now)) return;
    this.armedAt = at;
    tally.add("alarms_set_total", SYSTEM_TENANT);
    await this.ctx.storage.setAlarm(at);
  }
}
