/**
 * The dead-letter consumer: the fire queue gave up on these messages (the consumer failed on
 * them max_retries times), so the dispatch each names is marked dead with reason "poison"
 * (the bucket ignores a message of an earlier dispatch and an execution under a lease).
 * Bounded: this queue has max_retries and no dead-letter queue of its own.
 */
import { bucketName } from "../core/bucketing";
import { acceptFireMessages, groupByBucket } from "./message";

export async function handleDeadLetterBatch(batch: MessageBatch<unknown>, env: Env): Promise<void> {
  const valid = await acceptFireMessages(batch, env);
  await Promise.all(
    [...groupByBucket(valid)].map(async ([bucket, group]) => {
      try {
        await env.BUCKET.getByName(bucketName(bucket)).markPoisoned(
          group.map((g) => ({ executionId: g.body.executionId, dueAt: g.body.dueAt })),
        );
        for (const g of group) g.message.ack();
      } catch (error) {
        console.error(`markPoisoned on bucket ${bucket} failed`, error);
        for (const g of group) g.message.retry();
      }
    }),
  );
}
