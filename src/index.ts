/** The Worker: HTTP API, fire and dead-letter queue consumers, the cron scanner, and the Bucket class. */
import { app } from "./api/app";
import { handleDeadLetterBatch } from "./consumer/dead-letter";
import { handleFireBatch } from "./consumer/fire";
import { scan } from "./scanner/scan";

export { BulkAction } from "./actions/bulk-action";
export { Alerts } from "./alerts/alerts";
export { Bucket } from "./bucket/bucket";
export { DebounceKeys } from "./debounce/debounce-keys";
export { FlowKey } from "./flow/flow-key";
export { IdempotencyKeys } from "./idempotency/idempotency-keys";
export { PullQueue } from "./pull/pull-queue";

export default {
  fetch: app.fetch,

  async queue(batch: MessageBatch<unknown>, env: Env): Promise<void> {
    if (batch.queue.endsWith("-dlq")) await handleDeadLetterBatch(batch, env);
    else await handleFireBatch(batch, env);
  },

  /** The scan, awaited: its work ends with the invocation (a cron trigger's runs up to 15 minutes). */
  async scheduled(controller: ScheduledController, env: Env): Promise<void> {
    try {
      const report = await scan(env, controller.scheduledTime);
      if (report.failedBuckets.length > 0 || report.failedShards.length > 0 || report.refused) console.error("scan incomplete", report);
    } catch (error) {
      console.error("scan failed", error);
    }
  },
} satisfies ExportedHandler<Env, unknown>;
