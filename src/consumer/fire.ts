/**
 * The fire queue consumer: claim (one RPC per bucket per batch) -> deliver -> complete (one RPC
 * per bucket), heartbeating while targets run. Each message is acked or retried; the consumer
 * never throws for one message. Failures after a claim belong to the lease: an unfinished
 * attempt comes back when its lease expires, so those messages are acked.
 */
import { configOf, type Config } from "../config";
import { bucketName } from "../core/bucketing";
import type { Env, FireMessage } from "../env";
import type { ClaimResult, CompletionReport } from "../bucket/protocol";
import { acceptFireMessages, groupByBucket } from "./message";
import { SigningKeys } from "./signing";
import { deliver } from "./webhook";

/** Open connections per invocation are limited (6); a target's timeout starts when its request does. */
const DELIVERY_CONCURRENCY = 6;

export async function handleFireBatch(batch: MessageBatch<unknown>, env: Env): Promise<void> {
  const config = configOf(env);
  const valid = await acceptFireMessages(batch, env, config.BUCKETS);
  const keys = signingKeysOf(config);
  await Promise.all([...groupByBucket(valid)].map(([bucket, group]) => processBucketGroup(env, config, keys, bucket, group)));
}

async function processBucketGroup(
  env: Env,
  config: Config,
  keys: SigningKeys,
  bucket: number,
  group: { message: Message<unknown>; body: FireMessage }[],
): Promise<void> {
  const stub = env.BUCKET.getByName(bucketName(bucket));
  let claims: ClaimResult[];
  try {
    claims = await stub.claim(group.map((g) => g.body.executionId));
  } catch (error) {
    // the bucket is unreachable: the queue redelivers; after max_retries the DLQ marks it dead
    console.error(`claim on bucket ${bucket} failed`, error);
    for (const g of group) g.message.retry();
    return;
  }
  const leases = claims.filter((c): c is Extract<ClaimResult, { ok: true }> => c.ok);
  const running = new Map(leases.map((l) => [l.executionId, l]));
  const stopHeartbeat = startHeartbeat(stub, running, config.LEASE_MS);
  const reports: CompletionReport[] = [];
  try {
    await forEachLimited(leases, DELIVERY_CONCURRENCY, async (lease) => {
      const outcome = await deliver(
        { executionId: lease.executionId, jobId: lease.jobId, attempt: lease.attempt, target: lease.target, timeoutMs: lease.timeoutMs },
        await keys.forTenant(lease.tenant),
        Date.now(),
      );
      running.delete(lease.executionId);
      reports.push({ executionId: lease.executionId, token: lease.token, outcome });
    });
  } finally {
    stopHeartbeat();
  }
  if (reports.length > 0) {
    await stub.complete(reports).catch((error: unknown) => {
      // the leases expire and the bucket retries these attempts: at-least-once holds
      console.error(`complete on bucket ${bucket} failed`, error);
    });
  }
  for (const g of group) g.message.ack();
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

/** Extends the leases still running every third of the lease, in one RPC per bucket. */
function startHeartbeat(
  stub: DurableObjectStub<import("../bucket/bucket").Bucket>,
  running: Map<string, { executionId: string; token: string }>,
  leaseMs: number,
): () => void {
  const timer = setInterval(() => {
    const leases = [...running.values()].map((l) => ({ executionId: l.executionId, token: l.token }));
    if (leases.length === 0) return;
    stub.heartbeat(leases).catch((error: unknown) => console.error("heartbeat failed", error));
  }, Math.max(100, Math.floor(leaseMs / 3)));
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
