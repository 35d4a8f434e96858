/**
 * The dead-letter consumer: the fire queue gave up on these messages (the consumer could not
 * reach their bucket max_retries times; an execution the consumer failed on by itself goes on
 * alone instead: fire.ts passOn), so each execution a message names is judged by itself: the
 * dispatch it names is marked dead with reason "poison" only if it is still that dispatch and no
 * lease holds it (the bucket ignores an earlier dispatch, a leased or finished execution).
 * Bounded: this queue has max_retries and no dead-letter queue of its own.
 */
import { bucketName } from "../core/bucketing";
import { acceptFireMessages, groupByBucket } from "./message";

export async function handleDeadLetterBatch(batch: MessageBatch<unknown>, env: Env): Promise<void> {
  const valid = await acceptFireMessages(batch, env);
  await Promise.all(
    [...groupByBucket(valid)].map(async ([bucket, fires]) => {
      try {
        await env.BUCKET.getByName(bucketName(bucket)).markPoisoned(
          fires.flatMap((f) => f.executions.map((e) => ({ executionId: e.executionId, dueAt: e.dueAt }))),
        );
        for (const f of fires) f.message.ack();
      } catch (error) {
        console.error(`markPoisoned on bucket ${bucket} failed`, error);
        for (const f of fires) f.message.retry();
      }
    }),
  );
}
