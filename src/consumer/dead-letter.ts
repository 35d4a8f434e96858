import { bucketObject } from "../placement";
import { acceptFireMessages, groupByBucket } from "./message";

export async function handleDeadLetterBatch(batch: MessageBatch<unknown>, env: Env): Promise<void> {
  const valid = await acceptFireMessages(batch, env);
  await Promise.all(
    [...groupByBucket(valid)].map(async ([bucket, fires]) => {
      try {
        await bucketObject(env, bucket).markPoisoned(
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
