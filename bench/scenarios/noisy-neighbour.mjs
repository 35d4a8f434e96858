// noisy-neighbour: does one tenant's backlog delay another tenant's jobs? Tenant "bench" (the big
// one) creates `backlog` jobs all due at one instant D, created before it (as burst does; D is
// T0 + max(5 s, expected enqueue time + 2 s)); tenant "small" then creates `smallRate` jobs per
// second for `smallSeconds`, each due 5 s after it is sent (createPaced), timed so that its first
// jobs are due at D, while the backlog drains. Both target the same loopback target (paths
// /backlog and /small). `held`: the small tenant's jobs due while the backlog was still draining
// have first-delivery p99 lag <= 500 ms and none is missing; `backlogDrainingThroughout` says
// whether the backlog outlasted the small tenant's jobs (else the run proved less).
import { createPaced, creationFigures, deliveredCount, deliveryFigures, enqueueSequential, jobSpec, runtimeFigures } from "../lib/jobs.mjs";
import { withSession } from "../lib/session.mjs";
import { round, sleep, summary, waitUntil } from "../lib/stats.mjs";

const SMALL = "small";
/** the small tenant's p99 first-delivery lag that still counts as unaffected */
const HELD_P99_MS = 500;
const SMALL_LEAD_MS = 5000;

export async function noisyNeighbour(params, ctx) {
  const { backlog, smallRate, smallSeconds, minLeadMs = 5000, expectedEnqueueRate, drainTimeoutMs } = params;
  return withSession(
    "noisy-neighbour",
    { ...ctx, otherTenants: [SMALL] },
    async ({ quiet, loadAvgAtStart, target, first, api, apiOf, sampler, alive, schedulerFigures }) => {
      const backlogUrl = `${target.url}/backlog`;
      const smallUrl = `${target.url}/small`;
      const leadMs = Math.max(minLeadMs, Math.ceil((backlog * 1000) / expectedEnqueueRate) + 2000);
      sampler.mark("start");
      const t0 = Date.now();
      const dueAt = t0 + leadMs;
      const order = Array.from({ length: backlog }, (_, i) => i);
      const enq = await enqueueSequential(api, order, (i) => jobSpec(backlogUrl, i, dueAt), backlog);
      const backlogCreatedAfterDue = order.filter((i) => enq.acceptedAt[i] > dueAt).length;

      // the small tenant starts SMALL_LEAD_MS before D: its first jobs are due with the backlog
      const wait = dueAt - SMALL_LEAD_MS - Date.now();
      if (wait > 0) await sleep(wait);
      const pace = await createPaced(apiOf(SMALL), {
        rate: smallRate,
        seconds: smallSeconds,
        leadMs: SMALL_LEAD_MS,
        specOf: (i, due) => jobSpec(smallUrl, backlog + i, due),
      });
      sampler.mark("created");

      const n = backlog + pace.total;
      const due = new Float64Array(n);
      due.fill(dueAt, 0, backlog);
      due.set(pace.due, backlog);
      const lastSmallDue = Math.max(...pace.due);
      const allIn = await waitUntil(
        () => !alive() || deliveredCount(target, n) >= n - enq.refused - pace.refused,
        Math.max(dueAt, lastSmallDue) + drainTimeoutMs,
        500,
      );
      await sleep(1000);
      sampler.mark("end");

      const isSmall = (i) => i >= backlog;
      const big = deliveryFigures(target, due, n, { include: (i) => !isSmall(i) });
      const small = deliveryFigures(target, due, n, { include: isSmall });
      const backlogEnd = big.lastArrival;
      // the small jobs due while the backlog still drained (due before its last first delivery)
      const duringLags = [];
      let duringJobs = 0;
      for (let i = backlog; i < n; i++) {
        if (backlogEnd === null || due[i] === 0 || due[i] > backlogEnd) continue;
        duringJobs += 1;
        if (!Number.isNaN(small.first[i])) duringLags.push(small.first[i] - due[i]);
      }
      const during = summary(duringLags);
      const duringMissing = duringJobs - duringLags.length;
      const creation = creationFigures(pace, smallSeconds);
      const drainMs = backlogEnd === null ? null : backlogEnd - dueAt;
      return {
        scenario: "noisy-neighbour",
        params: {
          backlog,
          smallRate,
          smallSeconds,
          leadMs,
          smallLeadMs: SMALL_LEAD_MS,
          heldP99Ms: HELD_P99_MS,
          drainTimeoutMs,
          settings: ctx.settings,
        },
        held: during.p99 !== null && during.p99 <= HELD_P99_MS && duringMissing === 0 && small.figures.missing === 0,
        backlogDrainingThroughout: backlogEnd !== null && backlogEnd >= lastSmallDue,
        small: {
          ...small.figures,
          duringDrain: { jobs: duringJobs, missing: duringMissing, lagMs: during },
          creation: creation.figures,
        },
        backlog: {
          jobs: backlog,
          enqueue: {
            ms: enq.endedAt - enq.startedAt,
            refused: enq.refused,
            firstError: enq.firstError,
            finishedBeforeDue: enq.endedAt <= dueAt,
            createdAfterDue: backlogCreatedAfterDue,
          },
          drainMs,
          drainJobsPerSec: drainMs ? round((big.figures.delivered * 1000) / drainMs, 0) : null,
          ...big.figures,
        },
        allDeliveredWithinDeadline: allIn,
        quietBeforeStart: quiet,
        loadAvgAtStart,
        runtime: runtimeFigures(sampler, {
          delivered: big.figures.delivered + small.figures.delivered,
          createSeconds: creation.createSeconds,
          alive,
          stackStartMs: first.startMs,
        }),
        scheduler: await schedulerFigures(),
      };
    },
  );
}
