/**
 * The I/O half of the flush (flush.ts builds what it writes): one D1 batch per shard, then the
 * dead executions whose outcome is in D1 reported to their tenant's alerts. The bucket then lets
 * the written rows go (flush.ts settle); a crash before that re-runs them (at-least-once).
 */
import { alertsOf } from "../alerts/alerts";
import { shardsOf } from "../db/shards";
import { writeOutcomes } from "../db/write-outcomes";
import { type Outcomes, remark } from "./flush";
import { type BucketState, countD1Rows } from "./state";

/**
 * Writes each shard's outcomes and schedule projections to D1; the schedules of a shard that
 * failed are marked dirty again (remark). Returns the shards that failed: their rows wait.
 */
export async function writeFlush(s: BucketState, env: Env, outcomes: Outcomes, now: number): Promise<Set<number>> {
  const shards = shardsOf(env);
  const failedShards = new Set<number>();
  await Promise.all(
    [...outcomes.byShard].map(async ([index, { finished, projections, callbacks }]) => {
      const shard = shards.all[index];
      try {
        if (!shard) throw new Error(`D1 shard ${index} is not bound`);
        countD1Rows(s.tally, index, await writeOutcomes(shard.db, finished, projections, now, callbacks));
      } catch (error) {
        console.error(`writing outcomes to D1 shard ${index} failed; retrying`, error);
        failedShards.add(index);
      }
    }),
  );
  remark(s, outcomes.schedules, failedShards);
  await reportDeaths(env, outcomes, failedShards);
  return failedShards;
}

/**
 * Dead executions whose outcome is in D1 go to their tenant's alerts (alerts/alerts.ts: one
 * RPC per tenant with deaths in this flush; a tenant without an alert target drops them). A
 * failed report loses only those alerts, never an outcome.
 */
async function reportDeaths(env: Env, outcomes: Outcomes, failedShards: Set<number>): Promise<void> {
  const deaths = [...outcomes.byShard]
    .filter(([index]) => !failedShards.has(index))
    .flatMap(([, { finished }]) => finished.filter((f) => f.status === "dead"));
  if (deaths.length === 0) return;
  await Promise.all(
    [...Map.groupBy(deaths, (d) => d.tenant)].map(([tenant, ofTenant]) =>
      alertsOf(env, tenant)
        .record(
          ofTenant.map((d) => ({
            executionId: d.id,
            jobId: d.jobId,
            deadAt: d.finishedAt,
            deadReason: d.deadReason,
            attempts: d.attempts,
            lastHttpStatus: d.lastHttpStatus,
            lastError: d.lastError,
          })),
        )
        .catch((error: unknown) => console.error(`reporting deaths to the alerts of ${tenant} failed`, error)),
    ),
  );
}
