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
import { type FlowAnswer, type FlowAsk, type GoverningKey, governingKey } from "../core/flow";
import { isHttpTarget, isWorkerTarget, LIMITS } from "../core/job";
import { SYSTEM_TENANT } from "../core/metrics";
import { pullQueueName } from "../core/pull";
import type { DeliveryOutcome } from "../core/response";
import { attemptSpanId, attemptTraceHeaders, parseTraceparent, type TraceContext } from "../core/trace";
import { type FlowKey, type FlowRelease, flowKeyName, flowKeyOf } from "../flow/flow-key";
import { bucketObject } from "../placement";
import { CONSUMER_TRIES } from "../protocol/fire";
import { pullQueueOf } from "../pull/pull-queue";
import { deliverToWorker } from "./handler";
import { acceptFireMessages, groupByBucket, type ReceivedFire } from "./message";
import { SigningKeys } from "./signing";
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
 * Delivers claimed executions under one concurrency limit; each outcome is reported as soon as
 * it is known (batched per bucket while a report is in flight), and a lease is heartbeated until
 * its report is in: an early finisher must not lose its lease while slower targets still run.
 */
async function deliverAll(claimed: { lease: Lease; stub: BucketStub }[], env: Env, config: Config): Promise<void> {
  const keys = signingKeysOf(config);
  const unreported = new Map(claimed.map((l) => [l.lease.executionId, l]));
  const stopHeartbeat = startHeartbeat(unreported, config);
  // completions per bucket and flow releases per key, each in as few round trips as they allow
  const reporters = new Map<BucketStub, RoundTrips<CompletionReport>>();
  const releasers = new Map<string, RoundTrips<FlowRelease>>();
  try {
    const report = (stub: BucketStub, r: CompletionReport) =>
      getOrMake(reporters, stub, () => completionsTo(stub, (id) => unreported.delete(id))).add(r);
    const releaserOf = (tenant: string, key: string) =>
      getOrMake(releasers, flowKeyName(tenant, key), () => releasesTo(flowKeyOf(env, tenant, key)));
    // each lease's key: its job's own, else its HTTP target's origin's (a handler Worker has none)
    const governed = claimed.map((c) => {
      const url = isHttpTarget(c.lease.target) ? c.lease.target.url : null;
      return { ...c, flow: governingKey(c.lease.flowControl, url, config.ORIGIN_PARALLELISM, c.lease.executionId) };
    });
    // permits are asked for a lane's worth of leases at a time, when the first of them is about to
    // start: asked all at once, the leases of a large batch waiting for a lane would hold their
    // keys' permits meanwhile, and a busy key would send the rest back to their buckets
    const answers = new Map<string, Promise<FlowAnswer>>();
    let asked = 0;
    const askAhead = (index: number) => {
      if (index < asked) return;
      const next = governed.slice(asked, asked + config.DELIVERY_CONCURRENCY);
      asked += next.length;
      for (const [id, answer] of askFlowKeys(next, env, config)) answers.set(id, answer);
    };
    // one limit for the whole batch: a request queued behind the connection limit would already
    // be spending its timeout
    await forEachLimited(governed, config.DELIVERY_CONCURRENCY, async ({ lease, stub, flow }, index) => {
      askAhead(index);
      // flow control first: a short wait is spent here, asking again; what its key holds back
      // longer goes back to its bucket, due again later
      const first = answers.get(lease.executionId) ?? (flow ? askAgain(env, config, lease, flow) : undefined);
      const { answer, waitedMs: flowWaitMs } =
        first && flow ? await waitForPermit(await first, () => askAgain(env, config, lease, flow)) : { answer: undefined, waitedMs: 0 };
      if (answer && !answer.granted) {
        report(stub, { executionId: lease.executionId, token: lease.token, outcome: { kind: "wait", retryAt: answer.retryAt } });
        return;
      }
      // after a wait here, start only if the lease is still ours and the job still active (a
      // cancel or pause meanwhile): else free the permit and report a wait, which ends it canceled
      if (flow && flowWaitMs > 0 && !(await stillToStart(stub, lease))) {
        releaserOf(lease.tenant, flow.key).add({ executionId: lease.executionId });
        report(stub, { executionId: lease.executionId, token: lease.token, outcome: { kind: "wait", retryAt: Date.now() } });
        return;
      }
      const startedAt = Date.now();
      const outcome = await deliverLease(lease, env, config, keys);
      if (lease.trace) logTracedAttempt(lease, lease.trace, outcome, startedAt);
      if (flow) releaserOf(lease.tenant, flow.key).add(flowReleaseOf(lease, outcome));
      report(stub, { executionId: lease.executionId, token: lease.token, outcome, ...(flowWaitMs > 0 ? { flowWaitMs } : {}) });
    });
    await Promise.all([...reporters.values(), ...releasers.values()].map((r) => r.drained()));
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

/**
 * Asks each flow-control key once (one RPC per key per lane's worth of leases, an origin's
 * included) which of its leases may start now: each governed lease's answer, by execution id.
 * The others (no key, origin keys off) start without waiting for it.
 */
function askFlowKeys(leases: { lease: Lease; flow: GoverningKey | null }[], env: Env, config: Config): Map<string, Promise<FlowAnswer>> {
  const byKey = new Map<string, { flow: GoverningKey; group: Lease[] }>();
  for (const { lease, flow } of leases)
    if (flow) getOrMake(byKey, flowKeyName(lease.tenant, flow.key), () => ({ flow, group: [] })).group.push(lease);
  const answers = new Map<string, Promise<FlowAnswer>>();
  for (const { flow, group } of byKey.values()) {
    const asks = group.map((lease) => flowAskOf(lease, config));
    const asked = askKey(env, group[0]!.tenant, flow, asks);
    for (const [i, a] of asks.entries())
      answers.set(
        a.executionId,
        asked.then((all) => all[i]!),
      );
  }
  return answers;
}

/**
 * A wait for a permit this short is spent in the consumer, asking the key again when it said to,
 * instead of in the bucket: a slot freed by a delivery that just ended is taken a round trip
 * later, not after an alarm, a queue and a claim (about 100 ms locally, which held a key limited
 * to 50/s near 22/s), and no row moves. The lease is heartbeated meanwhile. A longer wait (a
 * pause, a Retry-After, a far rate slot) goes back to the bucket at once.
 */
const CONSUMER_WAIT = { eachMaxMs: 500, totalMs: 2_000, eachMinMs: 20 } as const;

/**
 * Asks again while each wait is short and their sum within CONSUMER_WAIT.totalMs (at least
 * eachMinMs apiece: at most 100 asks); returns the last answer and the time waited here.
 */
async function waitForPermit(first: FlowAnswer, askAgain: () => Promise<FlowAnswer>): Promise<{ answer: FlowAnswer; waitedMs: number }> {
  let answer = first;
  let waitedMs = 0;
  while (!answer.granted) {
    const wait = Math.max(CONSUMER_WAIT.eachMinMs, answer.retryAt - Date.now());
    if (wait > CONSUMER_WAIT.eachMaxMs || waitedMs + wait > CONSUMER_WAIT.totalMs) break;
    await scheduler.wait(wait);
    waitedMs += wait;
    answer = await askAgain();
  }
  return { answer, waitedMs };
}

/** Whether a lease that waited may start: still live (a heartbeat, which also extends it) and its job not canceled or paused. */
async function stillToStart(stub: BucketStub, lease: Lease): Promise<boolean> {
  try {
    const [result] = await stub.heartbeat([{ executionId: lease.executionId, token: lease.token }]);
    return result?.ok === true && result.canceled !== true;
  } catch (error) {
    // unknown: start it (at-least-once; a stale lease's outcome is fenced off by the bucket)
    console.error("heartbeat before a waited start failed", error);
    return true;
  }
}

/** One lease's ask again, after a wait. */
async function askAgain(env: Env, config: Config, lease: Lease, flow: GoverningKey): Promise<FlowAnswer> {
  return (await askKey(env, lease.tenant, flow, [flowAskOf(lease, config)]))[0]!;
}

/** A lease's ask: its permit may be held for its timeout plus the lease (a dead consumer's slot comes back then). */
function flowAskOf(lease: Lease, config: Config): FlowAsk {
  return {
    executionId: lease.executionId,
    firstDueAt: lease.firstDueAt,
    holdMs: lease.timeoutMs + config.LEASE_MS,
    priority: lease.priority,
  };
}

/** Asks a key; an unreachable key holds its asks for a second (its limits are never assumed away). */
function askKey(env: Env, tenant: string, flow: GoverningKey, asks: FlowAsk[]): Promise<FlowAnswer[]> {
  return flowKeyOf(env, tenant, flow.key)
    .ask(flow.limits, asks)
    .catch((error: unknown): FlowAnswer[] => {
      console.error(`flow key ${flow.key} unreachable`, error);
      return asks.map((a) => ({ executionId: a.executionId, granted: false, retryAt: Date.now() + 1_000 }));
    });
}

/** Frees the delivery's slot of its key; a 429 or 503 with Retry-After slows the whole key that long (at most FLOW_WAIT_MAX_MS: FlowGate.release caps it). */
function flowReleaseOf(lease: Lease, outcome: DeliveryOutcome): FlowRelease {
  const slowDown =
    outcome.kind === "failed" && (outcome.httpStatus === 429 || outcome.httpStatus === 503) ? outcome.retryAfterMs : undefined;
  return { executionId: lease.executionId, ...(slowDown === undefined ? {} : { retryAfterMs: slowDown }) };
}

/**
 * Items a batch's deliveries report to one object wait this long for the others that finish
 * with them: a batch's deliveries to a fast target end within a few milliseconds of each other,
 * and sending the first alone cost a round trip (a billed request, and on the local runtime about
 * half a millisecond of its one thread) per batch and object. Holding a lease or a permit 10 ms
 * longer changes nothing a user sees.
 */
const GATHER_MS = 10;

/**
 * Sends items to one object: GATHER_MS after the first when nothing is in flight, else together
 * with the others that arrive meanwhile (one RPC per round trip, however many finish). `send`
 * never throws.
 */
class RoundTrips<T> {
  private pending: T[] = [];
  private inFlight: Promise<void> | null = null;

  constructor(private readonly send: (items: T[]) => Promise<void>) {}

  add(item: T): void {
    this.pending.push(item);
    this.inFlight ??= this.flush();
  }

  async drained(): Promise<void> {
    while (this.inFlight !== null) await this.inFlight;
  }

  private async flush(): Promise<void> {
    await scheduler.wait(GATHER_MS);
    while (this.pending.length > 0) {
      const items = this.pending;
      this.pending = [];
      await this.send(items);
    }
    this.inFlight = null;
  }
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

/** A flow key's releases; one that fails is not retried: its permits lapse. */
function releasesTo(key: DurableObjectStub<FlowKey>): RoundTrips<FlowRelease> {
  return new RoundTrips((releases) =>
    key.release(releases).catch((error: unknown) => console.error("flow release failed (the permits lapse)", error)),
  );
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

async function forEachLimited<T>(items: T[], limit: number, run: (item: T, index: number) => Promise<void>): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const index = next++;
      await run(items[index]!, index);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
}

/** 2, 4, 8, ... seconds, at most a minute: the n-th delivery of a message whose claim failed. */
export function claimRetryDelaySeconds(attempts: number): number {
  return Math.min(60, 2 ** Math.max(1, attempts));
}
