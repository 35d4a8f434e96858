/**
 * Offers made again are told to their pull queues, under their priority now, which then hold them
 * by it alone: one whose priority changed while it waited (a PATCH: jobs.ts offerAgain), so a PATCH
 * answered 200 is the order of the next lease (issue 36 item 8); one whose lease its queue gave
 * back (outcomes.ts release, item 6). A queue that cannot be told: its offers are returned, for the
 * bucket to dispatch again (jobs.ts offerAgainUntold), so the next claim offers them anew.
 */
import { pullQueueOf } from "../pull/pull-queue";
import type { BucketState } from "./state";

type Reoffer = ReturnType<BucketState["executions"]["takeReoffers"]>[number];

/** Tells each queue its offers made again (flight.ts takeReoffers); returns those that could not be told. */
export async function tellPullQueues(env: Env, s: BucketState): Promise<Reoffer[]> {
  const offers = s.executions.takeReoffers();
  if (offers.length === 0) return [];
  const bucket = s.bucket ?? 0;
  const untold: Reoffer[] = [];
  await Promise.all(
    [...Map.groupBy(offers, (o) => `${o.tenant}\n${o.queue}`).values()].map(async (group) => {
      const { tenant, queue } = group[0]!;
      try {
        await pullQueueOf(env, tenant, queue).offer(
          group.map((o) => ({ executionId: o.executionId, bucket, dueAt: o.dueAt, priority: o.priority })),
        );
      } catch (error) {
        console.error(`telling pull queue ${queue} of its offers again failed; they are dispatched again`, error);
        untold.push(...group);
      }
    }),
  );
  return untold;
}
