/**
 * The fire queue consumer: a message is a group of one bucket's executions (message.ts); claim
 * (one RPC per bucket per batch), ack, then deliver -> complete
 * (one RPC per bucket), heartbeating while targets run. Each message is acked or retried; the
 * consumer never throws for one message. Failures after a claim belong to the lease: an
 * unfinished attempt comes back when its lease expires, so a claimed message is acked at once.
 * Its deliveries then run, and report, before the handler returns: production keeps a handler's
 * waitUntil work only ~30 s after it returns, and an attempt may take its timeoutMs (up to 14
 * minutes, inside a consumer invocation's 15: docs/platform-limits.md). A slow target holds its
 * own invocation; the queue runs others beside it (max_concurrency, wrangler.toml).
 */

import type { Bucket } from "../bucket/bucket";
import type { CompletionReport, FireGroup, FireRef, LeaseGrant, LeaseRef, PullOffer } from "../bucket/protocol";
import { type Config, configOf } from "../config";
import { fireQueueOf } from "../core/bucketing";
import { isHttpTarget, isWorkerTarget, LIMITS } from "../core/job";
import { SYSTEM_TENANT } from "../core/metrics";
import { pullQueueName } from "../core/pull";
import type { DeliveryOutcome } from "../core/response";
import { SigningKeys } from "../core/signing";
import { attemptSpanId, attemptTraceHeaders, parseTraceparent, type TraceContext } from "../core/trace";
import { bucketObject } from "../placement";
import { CONSUMER_TRIES } from "../protocol/fire";
import { pullQueueOf } from "../pull/pull-queue";
import { deliverToWorker } from "./handler";
import { acceptFireMessages, groupByBucket, type ReceivedFire } from "./message";
import { Permits } from "./permits";
import { RoundTrips } from "./round-trips";
import { deliver } from "./webhook";

type Lease = LeaseGrant;
type BucketStub = DurableObjectStub<Bucket>;

export async function handleFireBatch(batch: MessageBatch<unknown>, env: Env): Promise<void> {
  const config = configOf(env);
  const fires = await acceptFireMessages(batch, env);

  // 1. claim, one RPC per bucket for all its messages' executions
  const claimed = await Promise.all(
    [...groupByBucket(fires)].map(([bucket, ofBucket]) => claimBucket(bucket, ofBucket, bucketObject(env, bucket))),
  );
  const leases = claimed.flatMap((c) => c.leases.map((lease) => ({ lease, stub: c.stub })));

  // 2. a message is acked once every execution it carries was claimed, refused as a duplicate or
  // held by its pull queue: from here the leases own them. It is retried whole when its bucket's
  // claim failed; the executions the consumer failed on alone go on by themselves (passOn)
  const retry = new Set(claimed.flatMap((c) => (c.ok ? [] : c.messages)));
  const failed = claimed.flatMap((c) => c.failed);
  const offers = claimed.flatMap((c) => c.offers);
  if (offers.length > 0) failed.push(...(await offerToPullQueues(offers, env)));
  const failedBy = Map.groupBy(failed, (f) => f.message);
  await Promise.all(fires.map((fire) => settleMessage(fire, retry.has(fire.message), failedBy.get(fire.message), env, config)));

  // 3. deliver, and report, inside this invocation: production keeps work a handler leaves in
  // waitUntil only ~30 s after it returns, and an attempt may take timeoutMs (docs/platform-limits.md)
  if (leases.length > 0) await deliverAll(leases, env, config);
}

/**
 * Delivers claimed executions under one concurrency limit, each with its flow-control permit
 * (permits.ts); each outcome is reported as soon as it is known (batched per bucket while a report
 * is in flight), and a lease is heartbeated until its report is in: an early finisher must not
 * lose its lease while slower targets still run.
 */
async function deliverAll(claimed: { lease: Lease; stub: BucketStub }[], env: Env, config: Config): Promise<void> {
  const keys = signingKeysOf(config);
  const unreported = new Map(claimed.map((l) => [l.lease.executionId, l]));
  const stopHeartbeat = startHeartbeat(unreported, config);
  // completions per bucket, in as few round trips as they allow
  const reporters = new Map<BucketStub, RoundTrips<CompletionReport>>();
  try {
    const report = (stub: BucketStub, r: CompletionReport) =>
      getOrMake(reporters, stub, () => completionsTo(stub, (id) => unreported.delete(id))).add(r);
    const permits = new Permits(claimed, env, config);
    // one limit for the whole batch: a request queued behind the connection limit would already
    // be spending its timeout
    await forEachLimited(claimed, config.DELIVERY_CONCURRENCY, async ({ lease, stub }) => {
      // flow control first: what its key holds back longer than a short wait goes back to its
      // bucket, due again later
      const permit = await permits.acquire(lease);
      if (!permit.start) {
        report(stub, { executionId: lease.executionId, token: lease.token, outcome: { kind: "wait", retryAt: permit.retryAt } });
        return;
      }
      const startedAt = Date.now();
      const outcome = await deliverLease(lease, env, config, keys);
      if (lease.trace) logTracedAttempt(lease, lease.trace, outcome, startedAt);
      permits.release(lease, outcome);
      const { flowWaitMs } = permit;
      report(stub, { executionId: lease.executionId, token: lease.token, outcome, ...(flowWaitMs > 0 ? { flowWaitMs } : {}) });
    });
    await Promise.all([...[...reporters.values()].map((r) => r.drained()), permits.drained()]);
  } finally {
    stopHeartbeat();
  }
}

/**
 * Hands pull targets' executions to their pull queues (one RPC per tenant and queue); answers the
 * executions whose queue did not take them, to go on (the bucket answers a repeated claim with the
 * same offer, and the queue holds an offer once).
 */
async function offerToPullQueues(offers: ClaimedOffer[], env: Env): Promise<FailedExecution[]> {
  const byQueue = Map.groupBy(offers, ({ offer }) => pullQueueName(offer.tenant, offer.queue));
  const failed: FailedExecution[] = [];
  await Promise.all(
    [...byQueue.values()].map(async (group) => {
      const { tenant, queue } = group[0]!.offer;
      try {
        await pullQueueOf(env, tenant, queue).offer(
          group.map(({ offer, bucket }) => ({ executionId: offer.executionId, dueAt: offer.dueAt, bucket, priority: offer.priority })),
        );
      } catch (error) {
        console.error(`offering to pull queue ${queue} failed`, error);
        failed.push(
          ...group.map(({ offer, message }) => ({
            message,
            ref: { executionId: offer.executionId, tenant: offer.tenant, dueAt: offer.dueAt },
          })),
        );
      }
    }),
  );
  return failed;
}

/** An execution the consumer failed on (its claim threw, its pull queue refused it), with the message that carried it. */
interface FailedExecution {
  message: Message<unknown>;
  ref: FireRef;
}

/** Acks a message, or retries it whole: when its bucket's claim failed, or passing on its failed executions did. */
async function settleMessage(fire: ReceivedFire, retryWhole: boolean, failed: FailedExecution[] | undefined, env: Env, config: Config) {
  const refs = failed?.map((f) => f.ref);
  const acked = !retryWhole && (refs === undefined || (await passOn(env, config, fire, refs)));
  if (acked) fire.message.ack();
  else fire.message.retry({ delaySeconds: claimRetryDelaySeconds(fire.message.attempts) });
}

/**
 * The executions of a message the consumer failed on go on alone, so the others of their group,
 * claimed or held by a pull queue, are never judged with them (a whole message retried to the
 * dead-letter queue would be judged whole): a new message of just those, counting their tries, sent
 * to the bucket's fire queue after the retry delay; past CONSUMER_TRIES, they are marked dead as
 * poison, as the dead-letter consumer would. False when that failed too: the message is retried whole.
 */
async function passOn(env: Env, config: Config, fire: ReceivedFire, failed: FireRef[]): Promise<boolean> {
  const tries = (fire.tries ?? 0) + 1;
  const stub = bucketObject(env, fire.bucket);
  try {
    if (tries >= CONSUMER_TRIES) {
      await stub.markPoisoned(failed.map(({ executionId, dueAt }) => ({ executionId, dueAt })));
      return true;
    }
    const queue = config.fireQueues[fireQueueOf(fire.bucket, config.fireQueues.length)];
    if (!queue) return false;
    const body: FireGroup = { v: 2, bucket: fire.bucket, executions: failed, tries };
    await queue.sendBatch([{ body, contentType: "json", delaySeconds: claimRetryDelaySeconds(tries) }]);
    await stub.bump("fire_messages_total", SYSTEM_TENANT, 1).catch(() => undefined);
    return true;
  } catch (error) {
    console.error(`passing on ${failed.length} failed execution(s) of bucket ${fire.bucket} failed`, error);
    return false;
  }
}

/** A claim's offer, with the message that carried it. */
interface ClaimedOffer {
  offer: PullOffer;
  bucket: number;
  message: Message<unknown>;
}

/** One attempt of a lease: an RPC to its handler Worker, or a signed request to its HTTP target. */
function deliverLease(lease: Lease, env: Env, config: Config, keys: SigningKeys): Promise<DeliveryOutcome> {
  const { executionId, jobId, tenant, attempt, dueAt, target } = lease;
  // a job created before the 14-minute cap may hold a longer timeout: it could not end inside the invocation
  const timeoutMs = Math.min(lease.timeoutMs, LIMITS.timeoutMs.max);
  const trace = lease.trace ? attemptTraceHeaders(lease.trace, executionId, attempt) : null;
  if (isWorkerTarget(target)) return deliverToWorker({ executionId, jobId, tenant, attempt, dueAt, target, timeoutMs, trace }, env, config);
  if (!isHttpTarget(target)) throw new Error(`${executionId}: a pull target is leased by its workers, never delivered`);
  return keys.forTenant(tenant).then(
    (tenantKeys) => deliver({ executionId, jobId, attempt, target, timeoutMs, trace }, tenantKeys, Date.now()),
    // a misconfigured secret fails this attempt (retried, then dead), never the whole batch
    (error: unknown): DeliveryOutcome => ({
      kind: "failed",
      failure: "retryable",
      httpStatus: null,
      error: `no usable signing secret: ${error instanceof Error ? error.message : String(error)}`,
    }),
  );
}

/**
 * A traced attempt as one structured log line: Workers Logs keep it, and export it with the
 * Worker's OpenTelemetry logs (docs/trace-context.md), so a collector joins it to the trace.
 */
function logTracedAttempt(lease: Lease, trace: TraceContext, outcome: DeliveryOutcome, startedAt: number): void {
  const parent = parseTraceparent(trace.traceparent);
  if (!parent) return;
  console.log(
    JSON.stringify({
      event: "attempt",
      trace_id: parent.traceId,
      span_id: attemptSpanId(lease.executionId, lease.attempt),
      parent_span_id: parent.parentId,
      execution_id: lease.executionId,
      job_id: lease.jobId,
      attempt: lease.attempt,
      outcome: outcome.kind,
      http_status: outcome.httpStatus,
      duration_ms: Date.now() - startedAt,
    }),
  );
}

/** A bucket's completion reports; a report counts as delivered once its round trip ended, answered or not. */
function completionsTo(stub: BucketStub, onReported: (executionId: string) => void): RoundTrips<CompletionReport> {
  return new RoundTrips(async (reports) => {
    try {
      await stub.complete(reports);
    } catch (error) {
      // the leases expire and the bucket retries these attempts: at-least-once holds
      console.error("complete failed", error);
    }
    for (const r of reports) onReported(r.executionId);
  });
}

/** The value under `key`, made and stored first if there is none. */
function getOrMake<K, V>(map: { get(key: K): V | undefined; set(key: K, value: V): unknown }, key: K, make: () => V): V {
  let value = map.get(key);
  if (value === undefined) {
    value = make();
    map.set(key, value);
  }
  return value;
}

/**
 * Claims the executions of a bucket's messages in one RPC. An unreachable bucket (a deploy, an
 * overload) retries its messages with a growing delay, so seconds of unavailability never exhaust
 * max_retries and turn due executions into "poison"; an execution whose own claim failed goes on
 * alone (passOn).
 */
async function claimBucket(
  bucket: number,
  fires: ReceivedFire[],
  stub: BucketStub,
): Promise<{
  ok: boolean;
  messages: Message<unknown>[];
  stub: BucketStub;
  leases: Lease[];
  offers: ClaimedOffer[];
  failed: FailedExecution[];
}> {
  const messages = fires.map((f) => f.message);
  const refs = fires.flatMap((f) => f.executions.map((ref) => ({ ref, message: f.message })));
  try {
    const results = await stub.claim(refs.map(({ ref }) => ({ executionId: ref.executionId, dueAt: ref.dueAt })));
    const leases = results.filter((c): c is Lease => c.ok);
    // the bucket answers in the order asked: each result belongs to the execution at its place
    const offers = results.flatMap((c, i): ClaimedOffer[] =>
      !c.ok && c.code === "offered" ? [{ offer: c, bucket, message: refs[i]!.message }] : [],
    );
    const failed = results.flatMap((c, i) => (!c.ok && c.code === "failed" ? [refs[i]!] : []));
    return { ok: true, messages, stub, leases, offers, failed };
  } catch (error) {
    console.error(`claim on bucket ${bucket} failed`, error);
    return { ok: false, messages, stub, leases: [], offers: [], failed: [] };
  }
}

const keysByConfig = new WeakMap<Config, SigningKeys>();

function signingKeysOf(config: Config): SigningKeys {
  return getOrMake(keysByConfig, config, () => new SigningKeys(config));
}

/** Every third of the lease, extends the leases still running: one heartbeat RPC per bucket. */
function startHeartbeat(running: Map<string, { lease: Lease; stub: BucketStub }>, config: Config): () => void {
  const timer = setInterval(
    () => {
      for (const [stub, held] of Map.groupBy(running.values(), (r) => r.stub)) {
        const refs: LeaseRef[] = held.map(({ lease }) => ({ executionId: lease.executionId, token: lease.token }));
        stub.heartbeat(refs).catch((error: unknown) => console.error("heartbeat failed", error));
      }
    },
    Math.max(100, Math.floor(config.LEASE_MS / 3)),
  );
  return () => clearInterval(timer);
}

async function forEachLimited<T>(items: T[], limit: number, run: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < items.length) await run(items[next++]!);
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
}

/** 2, 4, 8, ... seconds, at most a minute: the n-th delivery of a message whose claim failed. */
export function claimRetryDelaySeconds(attempts: number): number {
  return Math.min(60, 2 ** Math.max(1, attempts));
}
