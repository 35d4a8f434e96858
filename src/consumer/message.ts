/** The fire message as it crosses the queue: validated on the way in, never trusted. */
import { z } from "zod";
import type { FireRef } from "../bucket/protocol";
import { bucketName } from "../core/bucketing";
import { SYSTEM_TENANT } from "../core/metrics";

const executionId = z.string().regex(/^exe_[0-9a-z]{26}$/);
const tenant = z.string().min(1);
const dueAt = z.number().int();
const bucket = z.number().int().min(0);

/**
 * The most executions one message may carry: a queue message is at most 128 KB, and a ref is about
 * 90 bytes (the bucket's groups are far smaller: FIRE_GROUP_SIZE).
 */
const MAX_GROUP = 1_000;

const FireGroupSchema = z.object({
  v: z.literal(2),
  bucket,
  executions: z.array(z.object({ executionId, tenant, dueAt })).min(1).max(MAX_GROUP),
  tries: z.number().int().min(0).optional(),
});
const FireMessageSchema = z.object({ v: z.literal(1), executionId, bucket, tenant, dueAt });

/**
 * A bucket beyond BUCKETS is still a bucket: jobs keep the bucket they were created in, and a
 * lowered setting must not strand them. Only a bound far beyond any configuration is refused.
 */
export const MAX_BUCKET = 100_000;

/** A fire message's bucket and executions: a group (v2), or a single execution of an earlier version (v1). */
export interface Fire {
  bucket: number;
  executions: FireRef[];
  /** a group the consumer passed on: how often it failed on these executions */
  tries?: number;
}

export function parseFire(body: unknown): Fire | null {
  const group = FireGroupSchema.safeParse(body);
  if (group.success) {
    const { bucket, executions, tries } = group.data;
    return bucket < MAX_BUCKET ? { bucket, executions, ...(tries === undefined ? {} : { tries }) } : null;
  }
  const single = FireMessageSchema.safeParse(body);
  if (!single.success || single.data.bucket >= MAX_BUCKET) return null;
  const { executionId, tenant, dueAt } = single.data;
  return { bucket: single.data.bucket, executions: [{ executionId, tenant, dueAt }] };
}

/** A fire message with what it carries. */
export interface ReceivedFire extends Fire {
  message: Message<unknown>;
}

/** Messages grouped by bucket, so each bucket gets one claim and one complete per batch. */
export function groupByBucket<M extends { bucket: number }>(fires: M[]): Map<number, M[]> {
  return Map.groupBy(fires, (f) => f.bucket);
}

/**
 * Splits a batch into fire messages and the rest. Malformed messages are acked (retrying can
 * never help), counted in malformed_messages_total, and never affect the other messages.
 */
export async function acceptFireMessages(batch: MessageBatch<unknown>, env: Env): Promise<ReceivedFire[]> {
  const valid: ReceivedFire[] = [];
  let malformed = 0;
  for (const message of batch.messages) {
    const fire = parseFire(message.body);
    if (fire) valid.push({ message, ...fire });
    else {
      malformed += 1;
      message.ack();
    }
  }
  if (malformed > 0) {
    console.warn(`dropped ${malformed} malformed message(s) from queue ${batch.queue}`);
    await env.BUCKET.getByName(bucketName(0))
      .bump("malformed_messages_total", SYSTEM_TENANT, malformed)
      .catch(() => undefined);
  }
  return valid;
}
