/**
 * The send of what one alarm pass took (dispatch.ts takeDispatches, fireBatches) to the bucket's
 * fire queue: one sendBatch per batch, all at once. A failed send loses nothing: its first
 * dispatches are returned to be scheduled again (they were not fired), and re-sends wait their turn.
 */
import { fireQueueOf } from "../core/bucketing";
import { SYSTEM_TENANT } from "../core/metrics";
import { type Dispatches, fireBatches } from "./dispatch";
import type { FireGroup, FireRef } from "./protocol";
import type { BucketState } from "./state";

/** Sends the dispatches; returns the first dispatches of the sends that failed. */
export async function sendFires(s: BucketState, queues: Queue<FireGroup>[], dispatches: Dispatches): Promise<FireRef[]> {
  if (dispatches.fresh.length + dispatches.again.length === 0) return [];
  if (queues.length === 0) throw new Error("no FIRE_QUEUE_0 binding");
  const queue = queues[fireQueueOf(s.bucket ?? 0, queues.length)]!;
  const failed: FireRef[] = [];
  await Promise.all(
    fireBatches(s, dispatches).map(({ groups, fresh }) =>
      queue.sendBatch(groups.map((body) => ({ body, contentType: "json" as const }))).then(
        () => s.tally.add("fire_messages_total", SYSTEM_TENANT, "", groups.length),
        (error: unknown) => {
          console.error("fire queue send failed", error);
          const refs = groups.flatMap((g) => g.executions);
          if (fresh) failed.push(...refs);
          for (const tenant of new Set(refs.map((r) => r.tenant))) s.tally.add("dispatch_errors_total", tenant);
        },
      ),
    ),
  );
  return failed;
}
