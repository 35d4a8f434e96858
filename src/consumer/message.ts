/** The fire message as it crosses the queue: validated on the way in, never trusted. */
import type { FireRef } from "../bucket/protocol";
import { SYSTEM_TENANT } from "../core/metrics";
import { bucketObject } from "../placement";
import { FireGroupSchema, FireMessageSchema } from "../protocol/fire";

export { MAX_BUCKET } from "../protocol/fire";

/** A fire message's bucket and executions: a group (v2), or a single execution of an earlier version (v1). */
export interface Fire {
  bucket: number;
  executions: FireRef[];
  /** a group the consumer passed on: how often it failed on these executions */
  tries?: number;
}

/** A fire message as the wire contract reads it (protocol/fire.ts: a bucket beyond MAX_BUCKET is refused), or null. */
export function parseFire(body: unknown): Fire | null {
  const group = FireGroupSchema.safeParse(body);
  if (group.success) {
    const { bucket, executions, tries } = group.data;
    return { bucket, executions, ...(tries === undefined ? {} : { tries }) };
  }
  const single = FireMessageSchema.safeParse(body);
  if (!single.success) return null;
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
    await bucketObject(env, 0)
      .bump("malformed_messages_total", SYSTEM_TENANT, malformed)
      .catch(() => undefined);
  }
  return valid;
}
