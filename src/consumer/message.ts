/** The fire message as it crosses the queue: validated on the way in, never trusted. */
import { z } from "zod";
import type { FireMessage } from "../bucket/protocol";
import { bucketName } from "../core/bucketing";
import { SYSTEM_TENANT } from "../core/metrics";

const FireMessageSchema = z.object({
  v: z.literal(1),
  executionId: z.string().regex(/^exe_[0-9a-z]{26}$/),
  bucket: z.number().int().min(0),
  tenant: z.string().min(1),
  dueAt: z.number().int(),
});

/**
 * A bucket beyond BUCKETS is still a bucket: jobs keep the bucket they were created in, and a
 * lowered setting must not strand them. Only a bound far beyond any configuration is refused.
 */
export const MAX_BUCKET = 100_000;

export function parseFireMessage(body: unknown): FireMessage | null {
  const parsed = FireMessageSchema.safeParse(body);
  if (!parsed.success || parsed.data.bucket >= MAX_BUCKET) return null;
  return parsed.data;
}

/** Messages grouped by bucket, so each bucket gets one claim and one complete per batch. */
export function groupByBucket<M extends { body: FireMessage }>(messages: M[]): Map<number, M[]> {
  const groups = new Map<number, M[]>();
  for (const m of messages) {
    const group = groups.get(m.body.bucket);
    if (group) group.push(m);
    else groups.set(m.body.bucket, [m]);
  }
  return groups;
}

/**
 * Splits a batch into fire messages and the rest. Malformed messages are acked (retrying can
 * never help), counted in malformed_messages_total, and never affect the other messages.
 */
export async function acceptFireMessages(
  batch: MessageBatch<unknown>,
  env: Env,
): Promise<{ message: Message<unknown>; body: FireMessage }[]> {
  const valid: { message: Message<unknown>; body: FireMessage }[] = [];
  let malformed = 0;
  for (const message of batch.messages) {
    const body = parseFireMessage(message.body);
    if (body) valid.push({ message, body });
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
