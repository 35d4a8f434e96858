/** The fire message as it crosses the queue: validated on the way in, never trusted. */
import { z } from "zod";
import type { FireMessage } from "../env";

const FireMessageSchema = z.object({
  v: z.literal(1),
  executionId: z.string().regex(/^exe_[0-9a-z]{26}$/),
  bucket: z.number().int().min(0),
  tenant: z.string().min(1),
  dueAt: z.number().int(),
});

export function parseFireMessage(body: unknown, buckets: number): FireMessage | null {
  const parsed = FireMessageSchema.safeParse(body);
  if (!parsed.success || parsed.data.bucket >= buckets) return null;
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
