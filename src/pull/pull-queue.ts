/**
 * One pull queue of one tenant (issue 15): where its executions wait for workers that lease them
 * over HTTP. It owns no execution state: the bucket of each execution does (its lease, fencing,
 * retries). The queue keeps only which executions are offered, by priority and due order, so a
 * worker's lease request asks the right buckets for the next ones instead of every bucket, and it
 * holds a worker's request open (long polling) until work arrives or its wait ends. Next means
 * the highest priority first, aged by the wait since the due time (core/priority.ts: none starves).
 *
 * An offer is durable (a restart must not strand an execution its bucket considers offered): one
 * row written when offered and one when taken, WITHOUT ROWID with no other index, so 2 rows per
 * execution. An offer the bucket no longer stands by (leased, finished, canceled, moved by a
 * retry or a restart) is dropped when a worker's request meets it; the bucket offers it again
 * under its new due time if it still has to run. A queue nobody polls would keep those for ever:
 * every OFFER_SWEEP_MS while it holds offers, an alarm asks their buckets which they still stand
 * by and drops the rest (one request per bucket per SWEEP_ROWS offers, rows read, no row written
 * but the deletes). A bucket that grants a lease after the request stopped waiting for it gets the
 * lease back (bucket-leases.ts giveBack), so no worker-less lease uses an attempt.
 */
import { DurableObject } from "cloudflare:workers";
import type { LeaseGrant, OfferRef } from "../bucket/protocol";
import { PRIORITY } from "../core/priority";
import { pullQueueName } from "../core/pull";
import { bucketObject, objectOf } from "../placement";
import { applyMigrations } from "../sqlite-migrations";
import { askBucket } from "./bucket-leases";
import { anyOffers, deleteOffer, insertOffer, nextOffers, offerCounts, offerKey, PULL_QUEUE_MIGRATIONS, sweepPage } from "./offers";

/** The object of a tenant's pull queue. */
export function pullQueueOf(env: Env, tenant: string, queue: string): DurableObjectStub<PullQueue> {
  return objectOf(env, env.PULL_QUEUE, pullQueueName(tenant, queue));
}

/** A worker's request: at most `max` executions, each leased `leaseMs`, waiting up to `waitMs` for one. */
export interface PullLeaseRequest {
  tenant: string;
  queue: string;
  max: number;
  leaseMs: number;
  waitMs: number;
}

/** A lease granted by an execution's bucket, with that bucket (the worker's token names it). */
export interface PullLease {
  bucket: number;
  grant: LeaseGrant;
}

export interface PullQueueView {
  /** executions offered and not leased yet (a few may be stale until a request meets them) */
  waiting: number;
  oldestDueAt: number | null;
  /** worker requests waiting for work right now */
  pollers: number;
}

/** Offers a request asks its buckets about, at most, before it answers or waits (a backlog of stale ones is cleared across requests). */
const TAKE_ROWS = 1_000;
/** A request that skipped an unreachable bucket's offers looks again this soon, not at the next offer only. */
const RETRY_SKIPPED_MS = 1_000;
/** How often the offers held are checked with their buckets: a stale one is kept at most about this long. */
export const OFFER_SWEEP_MS = 600_000;
/** Offers checked per sweep alarm; a longer queue is swept over alarms SWEEP_NEXT_MS apart. */
const SWEEP_ROWS = 1_000;
const SWEEP_NEXT_MS = 1_000;

export class PullQueue extends DurableObject<Env> {
  private readonly sql: SqlStorage;
  /** requests waiting for an offer (long polling): each wakes on the next one */
  private readonly waiters = new Set<() => void>();
  /** offers a request is asking their bucket about right now: another request skips them */
  private readonly taking = new Set<string>();
  /**
   * offers made again while a request was asking about them (a bucket that restarted offers the
   * same execution at the same due time): a "no longer offered" answer from before must not delete them
   */
  private readonly offeredAgain = new Set<string>();
  /** rows written since this object started (what its storage bills; the tests read it) */
  rowsWritten = 0;
  /** late answers of buckets whose leases are being given back (askBucket; the tests await them) */
  readonly lateAnswers = new Set<Promise<void>>();
  /** where the sweep in progress goes on (memory: after a restart it starts again from the oldest) */
  private sweptTo: { priority: number; dueAt: number; executionId: string } | null = null;

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    this.sql = ctx.storage.sql;
    applyMigrations(this.sql, PULL_QUEUE_MIGRATIONS);
  }

  /**
   * Holds offered executions (the same offer twice is held once) and wakes the waiting requests.
   * An offer under another priority than the one held (its job's PATCH: the bucket offers it again,
   * bucket/jobs.ts offerAgain) replaces it: it is held by its new priority alone.
   */
  async offer(offers: OfferRef[]): Promise<void> {
    for (const o of offers) {
      const priority = o.priority ?? PRIORITY.default;
      const key = offerKey({ priority, due_at: o.dueAt, execution_id: o.executionId });
      if (this.taking.has(key)) this.offeredAgain.add(key);
      this.rowsWritten += insertOffer(this.sql, o, priority);
    }
    this.wakeAll();
    if (offers.length > 0 && (await this.ctx.storage.getAlarm()) === null) await this.ctx.storage.setAlarm(Date.now() + OFFER_SWEEP_MS);
  }

  /**
   * The sweep: the next SWEEP_ROWS offers (in key order: priority, then oldest first) are checked with their buckets, and those
   * a bucket no longer stands by are dropped (a request would have dropped them when it met them).
   * An unreachable bucket's offers stay. Armed again while offers remain.
   */
  override async alarm(): Promise<void> {
    const name = this.ctx.id.name ?? "";
    const at = name.indexOf("\n");
    const tenant = name.slice(0, at);
    const queue = name.slice(at + 1);
    const after = this.sweptTo;
    const page = sweepPage(this.sql, after, SWEEP_ROWS);
    // offers a request is asking about right now are its to judge
    const rows = page.filter((r) => !this.taking.has(offerKey(r)));
    if (at >= 0 && rows.length > 0) {
      for (const r of rows) this.taking.add(offerKey(r));
      try {
        await Promise.all(
          [...Map.groupBy(rows, (r) => r.bucket)].map(async ([bucket, group]) => {
            let standing: boolean[];
            try {
              standing = await bucketObject(this.env, bucket).stillOffered(
                group.map((r) => ({ executionId: r.execution_id, dueAt: r.due_at, tenant, queue })),
              );
            } catch (error) {
              console.error(`pull queue sweep: bucket ${bucket} did not answer; its offers stay`, error);
              return;
            }
            for (const [i, r] of group.entries()) {
              if (standing[i] !== false || this.offeredAgain.has(offerKey(r))) continue;
              this.rowsWritten += deleteOffer(this.sql, r);
            }
          }),
        );
      } finally {
        for (const r of rows) {
          this.taking.delete(offerKey(r));
          this.offeredAgain.delete(offerKey(r));
        }
      }
    }
    const last = page[page.length - 1];
    this.sweptTo =
      page.length === SWEEP_ROWS && last ? { priority: last.priority, dueAt: last.due_at, executionId: last.execution_id } : null;
    if (anyOffers(this.sql)) await this.ctx.storage.setAlarm(Date.now() + (this.sweptTo ? SWEEP_NEXT_MS : OFFER_SWEEP_MS));
  }

  /** A worker's lease request: the next offers (nextOffers), leased from their buckets; with none, waits up to waitMs for one. */
  async lease(request: PullLeaseRequest): Promise<PullLease[]> {
    let waitOver = request.waitMs === 0;
    let wake: (() => void) | undefined;
    const timer = waitOver
      ? undefined
      : setTimeout(() => {
          waitOver = true;
          wake?.();
        }, request.waitMs);
    try {
      // each round leases, or waits for the next offer (or a skipped bucket's retry, or the end of the wait)
      for (let round = 0; round < 10_000; round++) {
        const { leases, skipped } = await this.take(request);
        if (leases.length > 0 || waitOver) return leases;
        await new Promise<void>((resolve) => {
          wake = resolve;
          this.waiters.add(resolve);
          if (skipped) setTimeout(resolve, RETRY_SKIPPED_MS);
        });
        this.waiters.delete(wake!);
      }
      return [];
    } finally {
      clearTimeout(timer);
      if (wake) this.waiters.delete(wake);
    }
  }

  async view(): Promise<PullQueueView> {
    const row = offerCounts(this.sql);
    return { waiting: row.waiting, oldestDueAt: row.oldest, pollers: this.waiters.size };
  }

  private wakeAll(): void {
    for (const wake of [...this.waiters]) wake();
  }

  /**
   * Leases up to `max` of the next offers (nextOffers), asking their buckets; an offer its bucket no longer
   * stands by is dropped and the next one asked, until `max` are leased or none is left (or
   * TAKE_ROWS were asked about). A bucket that does not answer is skipped for the rest of the
   * request, its offers kept: one unreachable bucket never holds back the others' work.
   */
  private async take(request: PullLeaseRequest): Promise<{ leases: PullLease[]; skipped: boolean }> {
    const leases: PullLease[] = [];
    const unreachable = new Set<number>();
    for (let asked = 0; leases.length < request.max && asked < TAKE_ROWS; ) {
      const wanted = request.max - leases.length;
      const rows = nextOffers(this.sql, wanted, unreachable, this.taking, Date.now());
      if (rows.length === 0) break;
      asked += rows.length;
      for (const r of rows) this.taking.add(offerKey(r));
      try {
        const answers = await Promise.all(
          [...Map.groupBy(rows, (r) => r.bucket)].map(([bucket, group]) => askBucket(this.env, bucket, group, request, this.lateAnswers)),
        );
        for (const { row, result } of answers.flat()) {
          const key = offerKey(row);
          if (result === null) {
            unreachable.add(row.bucket); // the offer stays for a later request
            continue;
          }
          if (!result.ok && this.offeredAgain.has(key)) continue; // offered again meanwhile: the new offer stands
          this.rowsWritten += deleteOffer(this.sql, row);
          if (result.ok) leases.push({ bucket: row.bucket, grant: result });
        }
      } finally {
        for (const r of rows) {
          this.taking.delete(offerKey(r));
          this.offeredAgain.delete(offerKey(r));
        }
      }
    }
    return { leases, skipped: unreachable.size > 0 };
  }
}
