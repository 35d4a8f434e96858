/**
 * The fire queue consumer: claim (one RPC per bucket per batch), ack, then deliver -> complete
 * (one RPC per bucket), heartbeating while targets run. Each message is acked or retried; the
 * consumer never throws for one message. Failures after a claim belong to the lease: an
 * unfinished attempt comes back when its lease expires, so a claimed message is acked at once and
 * its delivery runs on in ctx.waitUntil. With the queue_consumer_no_wait_for_wait_until flag
 * (wrangler.toml) the queue then moves on: a slow or hanging target holds its own invocation,
 * never the next batch.
 */

import type { Bucket } from "../bucket/bucket";
import type { ClaimResult, CompletionReport, FireMessage, LeaseRef } from "../bucket/protocol";
import { type Config, configOf } from "../config";
import { bucketName } from "../core/bucketing";
import type { DeliveryOutcome } from "../core/response";
import { acceptFireMessages, groupByBucket } from "./message";
import { SigningKeys } from "./signing";
import { deliver } from "./webhook";

type Lease = Extract<ClaimResult, { ok: true }>;
type BucketStub = DurableObjectStub<Bucket>;

export async function handleFireBatch(batch: MessageBatch<unknown>, env: Env, ctx: ExecutionContext): Promise<void> {
  const config = configOf(env);
  const valid = await acceptFireMessages(batch, env);
  const groups = [...groupByBucket(valid)].map(([bucket, messages]) => ({
    bucket,
    messages,
    stub: env.BUCKET.getByName(bucketName(bucket)),
  }));

  // 1. claim, one RPC per bucket
  const claimed = await Promise.all(groups.map((group) => claimGroup(group)));
  const leases = claimed.flatMap((c) => c.leases.map((lease) => ({ lease, stub: c.stub })));

  // 2. ack everything that was claimed or refused as a duplicate: from here the leases own it
  for (const c of claimed) if (c.ok) for (const m of c.messages) m.message.ack();

  // 3. deliver after the handler returns
  if (leases.length > 0) ctx.waitUntil(deliverAll(leases, config));
}

/**
 * Delivers claimed executions under one concurrency limit; each outcome is reported as soon as
 * it is known (batched per bucket while a report is in flight), and a lease is heartbeated until
 * its report is in: an early finisher must not lose its lease while slower targets still run.
 */
async function deliverAll(leases: { lease: Lease; stub: BucketStub }[], config: Config): Promise<void> {
  const keys = signingKeysOf(config);
  const unreported = new Map(leases.map((l) => [l.lease.executionId, l]));
  const stopHeartbeat = startHeartbeat(unreported, config);
  const reporters = new Map<BucketStub, CompletionReporter>();
  try {
    // one limit for the whole batch: a request queued behind the connection limit would already
    // be spending its timeout
    await forEachLimited(leases, config.DELIVERY_CONCURRENCY, async ({ lease, stub }) => {
      const outcome = await keys.forTenant(lease.tenant).then(
        (tenantKeys) =>
          deliver(
            {
              executionId: lease.executionId,
              jobId: lease.jobId,
              attempt: lease.attempt,
              target: lease.target,
              timeoutMs: lease.timeoutMs,
            },
            tenantKeys,
            Date.now(),
          ),
        // a misconfigured secret fails this attempt (retried, then dead), never the whole batch
        (error: unknown): DeliveryOutcome => ({
          kind: "failed",
          failure: "retryable",
          httpStatus: null,
          error: `no usable signing secret: ${error instanceof Error ? error.message : String(error)}`,
        }),
      );
      let reporter = reporters.get(stub);
      if (!reporter) {
        reporter = new CompletionReporter(stub, (id) => unreported.delete(id));
        reporters.set(stub, reporter);
      }
      reporter.add({ executionId: lease.executionId, token: lease.token, outcome });
    });
    await Promise.all([...reporters.values()].map((r) => r.drained()));
  } finally {
    stopHeartbeat();
  }
}

/**
 * Sends a bucket's completion reports: at once when none is in flight, else together with the
 * others that arrive meanwhile (one RPC per bucket per round trip, however many finish).
 */
class CompletionReporter {
  private pending: CompletionReport[] = [];
  private inFlight: Promise<void> | null = null;

  constructor(
    private readonly stub: BucketStub,
    private readonly onReported: (executionId: string) => void,
  ) {}

  add(report: CompletionReport): void {
    this.pending.push(report);
    this.inFlight ??= this.flush();
  }

  async drained(): Promise<void> {
    while (this.inFlight !== null) await this.inFlight;
  }

  private async flush(): Promise<void> {
    while (this.pending.length > 0) {
      const reports = this.pending;
      this.pending = [];
      try {
        await this.stub.complete(reports);
      } catch (error) {
        // the leases expire and the bucket retries these attempts: at-least-once holds
        console.error("complete failed", error);
      }
      for (const r of reports) this.onReported(r.executionId);
    }
    this.inFlight = null;
  }
}

/**
 * Claims a bucket's executions. An unreachable bucket (a deploy, an overload) retries its
 * messages with a growing delay, so seconds of unavailability never exhaust max_retries and
 * turn due executions into "poison".
 */
async function claimGroup(group: {
  bucket: number;
  messages: { message: Message<unknown>; body: FireMessage }[];
  stub: BucketStub;
}): Promise<{ ok: boolean; stub: BucketStub; leases: Lease[]; messages: typeof group.messages }> {
  try {
    const results = await group.stub.claim(group.messages.map((m) => ({ executionId: m.body.executionId, dueAt: m.body.dueAt })));
    const leases = results.filter((c): c is Lease => c.ok);
    return { ok: true, stub: group.stub, leases, messages: group.messages };
  } catch (error) {
    console.error(`claim on bucket ${group.bucket} failed`, error);
    for (const m of group.messages) m.message.retry({ delaySeconds: claimRetryDelaySeconds(m.message.attempts) });
    return { ok: false, stub: group.stub, leases: [], messages: group.messages };
  }
}

const keysByConfig = new WeakMap<Config, SigningKeys>();

function signingKeysOf(config: Config): SigningKeys {
  let keys = keysByConfig.get(config);
  if (!keys) {
    keys = new SigningKeys(config);
    keysByConfig.set(config, keys);
  }
  return keys;
}

/** Every third of the lease, extends the leases still running: one heartbeat RPC per bucket. */
function startHeartbeat(running: Map<string, { lease: Lease; stub: BucketStub }>, config: Config): () => void {
  const timer = setInterval(
    () => {
      const byStub = new Map<BucketStub, LeaseRef[]>();
      for (const { lease, stub } of running.values()) {
        const list = byStub.get(stub) ?? [];
        list.push({ executionId: lease.executionId, token: lease.token });
        byStub.set(stub, list);
      }
      for (const [stub, list] of byStub) stub.heartbeat(list).catch((error: unknown) => console.error("heartbeat failed", error));
    },
    Math.max(100, Math.floor(config.LEASE_MS / 3)),
  );
  return () => clearInterval(timer);
}

async function forEachLimited<T>(items: T[], limit: number, run: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const item = items[next++]!;
      await run(item);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
}

/** 2, 4, 8, ... seconds, at most a minute: the n-th delivery of a message whose claim failed. */
export function claimRetryDelaySeconds(attempts: number): number {
  return Math.min(60, 2 ** Math.max(1, attempts));
}
