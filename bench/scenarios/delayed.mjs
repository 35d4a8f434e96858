// delayed: N one-off jobs due at T0 + 5 s + 10 s * i/N (absolute runAt), created through
// POST /v1/jobs/batch in chunks of 1000, sequentially, in a shuffled order. T0 = start of enqueue.
import { arrivalsPerSecond, deliveredCount, deliveryFigures, enqueueSequential, jobSpec, rate, stageSample } from "../lib/jobs.mjs";
import { benchCpuSeconds } from "../lib/procstat.mjs";
import { withSession } from "../lib/session.mjs";
import { cpuMsPerDelivery, round, shuffle, sleep, summary, waitUntil } from "../lib/stats.mjs";
import { delayedDueAt, LEAD_MS, SEED, SPREAD_MS } from "../lib/workload.mjs";

export async function delayed(params, ctx) {
  const { n, leadMs = LEAD_MS, spreadMs = SPREAD_MS, drainTimeoutMs, sample } = params;
  return withSession("delayed", ctx, async ({ quiet, loadAvgAtStart, target, first, api, sampler, alive, schedulerFigures }) => {
    const url = `${target.url}/delayed`;
    const order = shuffle(
      Array.from({ length: n }, (_, i) => i),
      SEED.delayed,
    );
    const due = new Float64Array(n);
    const benchCpu0 = process.cpuUsage();
    sampler.mark("start");
    const t0 = Date.now();
    for (let i = 0; i < n; i++) due[i] = delayedDueAt(t0, i, n, leadMs, spreadMs);
    const enq = await enqueueSequential(api, order, (i) => jobSpec(url, i, due[i]), n);
    sampler.mark("enqueued");
    const benchCpuEnqueue = benchCpuSeconds(benchCpu0);
    const enqueueMs = enq.endedAt - t0;
    const createdAfterDue = order.filter((i) => enq.acceptedAt[i] > due[i]).length;

    const lastDue = t0 + leadMs + spreadMs;
    const allIn = await waitUntil(() => !alive() || deliveredCount(target, n) >= n, lastDue + drainTimeoutMs, 200);
    await sleep(1000); // late duplicates
    sampler.mark("end");
    const d = deliveryFigures(target, due, n);
    const cpuEnqueue = sampler.cpu("start", "enqueued");
    const cpuTotal = sampler.cpu("start", "end");
    const stages = await stageSample(api, enq.ids, due, d.first, sample);
    const scheduler = await schedulerFigures();
    return {
      scenario: "delayed",
      params: { n, chunk: 1000, order: "shuffled", leadMs, spreadMs, drainTimeoutMs, settings: ctx.settings },
      enqueue: {
        ms: enqueueMs,
        jobsPerSec: rate(n - enq.refused, enqueueMs),
        refused: enq.refused,
        firstError: enq.firstError,
        batchMs: summary(enq.batchMs),
        finishedBeforeFirstDue: enq.endedAt <= t0 + leadMs,
        createdAfterDue,
      },
      ...d.figures,
      allDeliveredWithinDeadline: allIn,
      lastArrivalAfterLastDueMs: d.lastArrival === null ? null : d.lastArrival - lastDue,
      completionsPerSec: arrivalsPerSecond(target, t0 + leadMs),
      quietBeforeStart: quiet,
      loadAvgAtStart,
      runtime: {
        cpuMsPerDelivery: cpuMsPerDelivery(cpuTotal, d.figures.delivered),
        cpuSeconds: cpuTotal,
        cpuSecondsEnqueuePhase: cpuEnqueue,
        cpuSecondsFiringPhase: sampler.cpu("enqueued", "end"),
        wallSeconds: round((Date.now() - t0) / 1000, 1),
        peakRssMb: sampler.peakRssMb(),
        processes: sampler.processCounts(),
        stackAliveAtEnd: alive(),
        machine: sampler.machine("start", "end"),
        machineEnqueuePhase: sampler.machine("start", "enqueued"),
        stackStartMs: first.startMs,
      },
      benchCpuSeconds: { enqueuePhase: benchCpuEnqueue, total: benchCpuSeconds(benchCpu0) },
      stages,
      scheduler,
    };
  });
}
