// burst: N jobs all due at the same instant, created before it: drain time (due -> last arrival).
// The due time is T0 + max(5 s, expected enqueue time + 2 s); the expected enqueue time comes from
// the delayed scenario of the same run when it ran, else from BENCH_BURST_ENQUEUE_RATE.
import { arrivalsPerSecond, deliveredCount, deliveryFigures, enqueueSequential, jobSpec, rate, stageSample } from "../lib/jobs.mjs";
import { benchCpuSeconds } from "../lib/procstat.mjs";
import { windowFigures } from "../lib/queue-latency.mjs";
import { withSession } from "../lib/session.mjs";
import { cpuMsPerDelivery, round, shuffle, sleep, summary, waitUntil } from "../lib/stats.mjs";
import { burstLeadMs, LEAD_MS, SEED } from "../lib/workload.mjs";

export async function burst(params, ctx) {
  const { n, minLeadMs = LEAD_MS, expectedEnqueueRate, drainTimeoutMs, sample } = params;
  return withSession("burst", ctx, async ({ quiet, loadAvgAtStart, target, first, api, sampler, alive, schedulerFigures }) => {
    const url = `${target.url}/burst`;
    const order = shuffle(
      Array.from({ length: n }, (_, i) => i),
      SEED.burst,
    );
    const leadMs = burstLeadMs(n, expectedEnqueueRate, minLeadMs);
    const benchCpu0 = process.cpuUsage();
    sampler.mark("start");
    const t0 = Date.now();
    const dueAt = t0 + leadMs;
    const due = new Float64Array(n).fill(dueAt);
    const enq = await enqueueSequential(api, order, (i) => jobSpec(url, i, dueAt), n);
    sampler.mark("enqueued");
    const enqueueMs = enq.endedAt - t0;
    const createdAfterDue = order.filter((i) => enq.acceptedAt[i] > dueAt).length;

    const allIn = await waitUntil(() => !alive() || deliveredCount(target, n) >= n, dueAt + drainTimeoutMs, 100);
    await sleep(1000);
    sampler.mark("end");
    const d = deliveryFigures(target, due, n);
    const drainMs = d.lastArrival === null ? null : d.lastArrival - dueAt;
    const stages = await stageSample(api, enq.ids, due, d.first, sample);
    const scheduler = await schedulerFigures();
    // the latency mode (SCHEDULER_QUEUE_LATENCY): the buckets' windows in use while the burst drained
    const queueLatency = ctx.settings.QUEUE_LATENCY ?? null;
    const buckets = Number(ctx.settings.BUCKETS);
    return {
      scenario: "burst",
      params: { n, chunk: 1000, leadMs, expectedEnqueueRate, drainTimeoutMs, settings: ctx.settings },
      enqueue: {
        ms: enqueueMs,
        jobsPerSec: rate(n - enq.refused, enqueueMs),
        refused: enq.refused,
        firstError: enq.firstError,
        batchMs: summary(enq.batchMs),
        finishedBeforeDue: enq.endedAt <= dueAt,
        createdAfterDue,
      },
      drainMs,
      drainJobsPerSec: drainMs ? rate(d.figures.delivered, drainMs) : null,
      drainJobsPerSecPerBucket: drainMs ? rate(d.figures.delivered / buckets, drainMs) : null,
      queueLatency,
      ...(queueLatency ? { dispatchWindow: windowFigures(first.held, dueAt, d.lastArrival ?? Date.now()) } : {}),
      firstArrivalAfterDueMs: d.firstArrival === null ? null : d.firstArrival - dueAt,
      ...d.figures,
      allDeliveredWithinDeadline: allIn,
      completionsPerSec: arrivalsPerSecond(target, dueAt),
      quietBeforeStart: quiet,
      loadAvgAtStart,
      runtime: {
        cpuMsPerDelivery: cpuMsPerDelivery(sampler.cpu("start", "end"), d.figures.delivered),
        cpuSeconds: sampler.cpu("start", "end"),
        cpuSecondsFiringPhase: sampler.cpu("enqueued", "end"),
        wallSeconds: round((Date.now() - t0) / 1000, 1),
        peakRssMb: sampler.peakRssMb(),
        processes: sampler.processCounts(),
        stackAliveAtEnd: alive(),
        machine: sampler.machine("start", "end"),
        machineFiringPhase: sampler.machine("enqueued", "end"),
        stackStartMs: first.startMs,
      },
      benchCpuSeconds: benchCpuSeconds(benchCpu0),
      stages,
      scheduler,
    };
  });
}
