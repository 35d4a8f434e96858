/**
 * The fire message: what a bucket's alarm sends to a fire queue and the fire consumer reads
 * (consumer/message.ts parses every one with these schemas: a queue message is never trusted).
 * A message queued by one release may be consumed by the next, and during a deploy a consumer of
 * either release may read a message of the other: every change here is one both can read
 * (test/contract/README.md).
 */
import { z } from "zod";
import { idShape } from "../core/id";

export const ExecutionIdSchema = z.string().regex(idShape("exe"));

/**
 * A bucket beyond BUCKETS is still a bucket: jobs keep the bucket they were created in, and a
 * lowered setting must not strand them. Only a bound far beyond any configuration is refused.
 */
export const MAX_BUCKET = 100_000;
export const BucketSchema = z
  .number()
  .int()
  .min(0)
  .max(MAX_BUCKET - 1);

/**
 * The most executions one message may carry: a queue message is at most 128 KB, and a ref is about
 * 90 bytes (the bucket's groups are far smaller: FIRE_GROUP_SIZE).
 */
export const MAX_GROUP = 1_000;

/**
 * Deliveries of one message that fail for the consumer's own reasons before the executions of a
 * message are given up as poison: the first and the fire queues' max_retries (14) more, as the
 * queue counts a message's own retries. With claimRetryDelaySeconds' 2, 4, 8, ... 60 s that is about
 * 10 minutes: a bucket that cannot be reached (or cannot yet answer a newer consumer) through a
 * deploy's deferred update (300 s, wrangler.toml) never turns due executions into poison
 * (test/integration/deploy-claims.test.ts).
 */
export const CONSUMER_TRIES = 15;

/** One execution of a fire message: the due time names the dispatch (a retry has another). */
export const FireRefSchema = z.object({ executionId: ExecutionIdSchema, tenant: z.string().min(1), dueAt: z.number().int() });
export type FireRef = z.infer<typeof FireRefSchema>;

/**
 * What the bucket sends to a fire queue: a group of its executions sent by one alarm pass, ids
 * only (the claim returns each target). One message, one claim and one report for the group;
 * each execution keeps its own lease, fencing, attempts and dead letter.
 */
export const FireGroupSchema = z.object({
  v: z.literal(2),
  bucket: BucketSchema,
  executions: z.array(FireRefSchema).min(1).max(MAX_GROUP),
  /** deliveries the consumer failed on these executions so far (a group it passed on: consumer/fire.ts passOn) */
  tries: z.number().int().min(0).optional(),
});
export type FireGroup = z.infer<typeof FireGroupSchema>;

/** The single-execution message of earlier versions, still accepted: an upgrade may find some queued. */
export const FireMessageSchema = z.object({
  v: z.literal(1),
  executionId: ExecutionIdSchema,
  bucket: BucketSchema,
  tenant: z.string().min(1),
  dueAt: z.number().int(),
});
export type FireMessage = z.infer<typeof FireMessageSchema>;
