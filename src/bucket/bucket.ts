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
 * (state.ts: storage, the execution state machine of flight.ts, the tally); the calls out are
 * modules of their own (sync-pass.ts: D1 reads; fire-send.ts: the queue; flush-write.ts: D1
 * writes and alerts; reoffer.ts: pull queues), each run by the shell between changes. Every RPC
 * and the alarm go through `change`, which runs the step, commits and re-arms the alarm (wake.ts):
 * "every change re-arms the alarm" holds by construction.
 */
import { DurableObject } from "cloudflare:workers";
import { type Config, configOf } from "../config";
import { type BucketMetrics, type CounterName, SYSTEM_TENANT } from "../core/metrics";
import { shardsOf } from "../db/shards";
import { type Dispatches, takeDispatches, unsend } from "./dispatch";
import { sendFires } from "./fire-send";
import { applyDeferred, flushDue, remark, settle, takeOutcomes } from "./flush";
import { writeFlush } from "./flush-write";
import { applyAll, createOccurrences, offerAgainUntold, redriveAll } from "./jobs";
import { claimOne, heartbeatOne, leaseOfferedOne, standsBy } from "./leases";
import { COUNTER_WRITE_MS, METER_COUNTERS, RowMeter } from "./meter";
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
import { tellPullQueues } from "./reoffer";
import { migrateBucket } from "./schema";
import { type BucketState, close, countD1Rows, countOutside, newState } from "./state";
import * as store from "./store";
import { type SyncResult, syncPass } from "./sync-pass";
import { nextWakeAt } from "./wake";

const FLUSH_RETRY_MS = 1000;
const DISPATCH_RETRY_MS = 1000;

export class Bucket extends DurableObject<Env> {
  /** what the operation modules share (state.ts) */
  private readonly s: BucketState;
  private readonly config: Config;
  private flushAt = 0;
  private counterWriteAt = 0;
  private flushing = false;
  private armedAt: number | null = null;
  /** the rows this object's SQL writes (meter.ts) */
  private readonly meter: RowMeter;

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    // every statement goes through the meter: rows written are counted from the platform's own
    // counter (what Cloudflare bills), not estimated
    this.meter = new RowMeter(ctx.storage.sql);
    const sql = this.meter.sql;
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
   * The scanner's call: the sync pass (sync-pass.ts) of this bucket's jobs due before now +
   * lookahead, the changes not yet acknowledged and the redrives on their way, from every D1 shard.
   */
  async pullWindow(bucket: number): Promise<SyncResult> {
    this.countRequest();
    // the safety net for a dropped alarm: trust storage, not memory, about what is armed
    if ((await this.ctx.storage.getAlarm()) === null) this.armedAt = null;
    await this.change(bucket, () => undefined);
    const host = {
      lookaheadMs: this.config.LOOKAHEAD_MS,
      apply: (b: number, rows: JobDefinition[]) => this.change(b, () => applyAll(this.s, rows, Date.now(), "pull")),
      redrive: (b: number, orders: RedriveOrder[]) => this.change(b, () => redriveAll(this.s, orders, Date.now())),
      countD1Rows: (shard: number, rows: number) => countD1Rows(this.s.tally, shard, rows),
    };
    return syncPass(host, shardsOf(this.env).all, bucket);
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

  /** Sends what one pass took (fire-send.ts); the first dispatches of a failed send are scheduled again. */
  private async send(dispatches: Dispatches): Promise<void> {
    const failed = await sendFires(this.s, this.config.fireQueues, dispatches);
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
      const failedShards = await writeFlush(this.s, this.env, outcomes, now);
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

  /** Offers made again are told to their pull queues (reoffer.ts); those no queue heard are dispatched again. */
  private async tellQueues(): Promise<void> {
    const untold = await tellPullQueues(this.env, this.s);
    if (untold.length > 0) await this.change(null, () => offerAgainUntold(this.s, untold));
  }

  /** Every RPC and alarm is a billed Durable Object request. */
  private countRequest(): void {
    this.s.tally.add("do_requests_total", SYSTEM_TENANT);
  }

  private meterRows(): void {
    const rows = this.meter.take();
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
    const at = nextWakeAt(this.s, { flushAt: this.flushAt, counterWriteAt: this.counterWriteAt }, now, this.config.ALARM_QUANTUM_MS);
    if (at === null || (this.armedAt !== null && this.armedAt <= at && this.armedAt >= now)) return;
    this.armedAt = at;
    this.s.tally.add("alarms_set_total", SYSTEM_TENANT);
    await this.ctx.storage.setAlarm(at);
  }
}
