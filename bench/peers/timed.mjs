// One run of `delayed` or `burst` on BullMQ: the jobs of `npm run bench`'s scenario (bench/lib/
// workload.mjs: same count, due times, order of creation and chunks of 1,000), added with addBulk,
// each due at its absolute time; one worker process takes them (worker.mjs) and, with DELIVER=http,
// POSTs each to a receiver process (receiver.mjs). The figures are `npm run bench`'s, computed by the
// same code (bench/lib/jobs.mjs deliveryFigures) from the same record: each job's first arrival at
// the target (DELIVER=http) or its handler's start (the no-op handler), minus its due time.
import { loadavg } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { arrivalsPerSecond, CHUNK, deliveryFigures, rate } from "../lib/jobs.mjs";
import { clockTicks, machineTicks, pidCpuSeconds, waitForQuiet } from "../lib/procstat.mjs";
import { round, shuffle, sleep, summary, waitUntil } from "../lib/stats.mjs";
import { burstLeadMs, delayedDueAt, SEED } from "../lib/workload.mjs";
import { forkChild } from "./children.mjs";

const HERE = dirname(fileURLToPath(import.meta.url));

/** BullMQ's retries as the scheduler's default policy: 5 attempts, backoff from 1 s doubling (src/core/backoff.ts) */
export const JOB_OPTIONS = Object.freeze({ attempts: 5, backoff: Object.freeze({ type: "exponential", delay: 1000 }) });

/**
 * @param {{ scenario: "delayed" | "burst", deliver: "http" | "none", n: number, leadMs: number, spreadMs: number,
 *   expectedEnqueueRate: number, drainTimeoutMs: number, concurrency: number, quietWaitMs: number }} params
 * @param {{ redis: { port: number, pid: number }, bullmq: typeof import("bullmq"), IORedis: any, secret: string }} ctx
 */
export async function runTimed(params, ctx) {
  const { scenario, deliver, n, leadMs, spreadMs, drainTimeoutMs, concurrency } = params;
  const { redis, bullmq, IORedis, secret } = ctx;
  const connection = { host: "127.0.0.1", port: redis.port };
  const admin = new IORedis(connection);
  await admin.flushall();
  const queueName = `bench-${scenario}-${Date.now()}`;
  const queue = new bullmq.Queue(queueName, { connection });
  /** @type {Awaited<ReturnType<typeof forkChild>> | null} */
  let receiver = null;
  /** @type {Awaited<ReturnType<typeof forkChild>> | null} */
  let worker = null;
  try {
    await queue.waitUntilReady();
    const quiet = await waitForQuiet(params.quietWaitMs);
    const loadAvgAtStart = loadavg().map((x) => round(x, 2));
    if (deliver === "http") receiver = await forkChild(join(HERE, "receiver.mjs"), {});
    worker = await forkChild(join(HERE, "worker.mjs"), {
      QUEUE: queueName,
      REDIS_PORT: String(redis.port),
      CONCURRENCY: String(concurrency),
      DELIVER_URL: receiver ? `${receiver.ready.url}/${scenario}` : "",
      WEBHOOK_SECRET: secret,
    });
    await sleep(300); // the worker settles into its blocking wait
    const order = shuffle(
      Array.from({ length: n }, (_, i) => i),
      SEED[scenario],
    );
    const cpuAt = () => ({
      worker: pidCpuSeconds(worker.pid) ?? 0,
      redis: pidCpuSeconds(redis.pid) ?? 0,
      receiver: receiver ? (pidCpuSeconds(receiver.pid) ?? 0) : 0,
      bench: process.cpuUsage(),
      machine: machineTicks(),
      at: Date.now(),
    });
    const start = cpuAt();
    const t0 = Date.now();
    const due = new Float64Array(n);
    const lead = scenario === "burst" ? burstLeadMs(n, params.expectedEnqueueRate, leadMs) : leadMs;
    for (let i = 0; i < n; i++) due[i] = scenario === "burst" ? t0 + lead : delayedDueAt(t0, i, n, leadMs, spreadMs);
    const firstDue = t0 + lead;
    const lastDue = scenario === "burst" ? firstDue : t0 + leadMs + spreadMs;

    // enqueue: chunks of CHUNK in the seeded order, one addBulk at a time, each job at its absolute due time
    const batchMs = [];
    let createdAfterDue = 0;
    for (let k = 0; k < n; k += CHUNK) {
      const slice = order.slice(k, k + CHUNK);
      const now = Date.now();
      await queue.addBulk(
        slice.map((i) => ({
          name: "webhook",
          data: { i },
          // BullMQ runs a delayed job at timestamp + delay: the job's absolute due time
          opts: { ...JOB_OPTIONS, timestamp: now, delay: Math.max(0, due[i] - now) },
        })),
      );
      const doneAt = Date.now();
      batchMs.push(doneAt - now);
      for (const i of slice) if (doneAt > due[i]) createdAfterDue += 1;
    }
    const enqueued = cpuAt();
    const enqueueMs = enqueued.at - t0;

    const allDone = await waitUntil(
      () => {
        const p = worker.latest.get("progress");
        return worker.exited() || (p !== undefined && Number(p.completed) + Number(p.failed) >= n);
      },
      lastDue + drainTimeoutMs,
      100,
    );
    await sleep(1000); // late duplicates, as npm run bench waits for them
    const end = cpuAt();
    const brokerCounts = await queue.getJobCounts("completed", "failed", "active", "wait", "delayed", "prioritized");
    const done = await worker.request("dump");
    const received = receiver ? await receiver.request("dump") : null;

    // the record the figures come from: arrivals at the target (DELIVER=http) or handler starts (no-op)
    const source = received ?? { indexes: done.starts.indexes, ats: done.starts.ats, ids: done.starts.indexes.map(String) };
    const arrivals = source.indexes.map((i, k) => ({ i, at: source.ats[k], id: source.ids[k] }));
    const d = deliveryFigures({ arrivals }, due, n);
    const starts = deliveryFigures({ arrivals: done.starts.indexes.map((i, k) => ({ i, at: done.starts.ats[k], id: String(i) })) }, due, n);

    const cpu = (from, to) => ({
      worker: round(to.worker - from.worker, 2),
      redis: round(to.redis - from.redis, 2),
      producer: round((to.bench.user + to.bench.system - from.bench.user - from.bench.system) / 1e6, 2),
    });
    const total = cpu(start, end);
    const enqueuePhase = cpu(start, enqueued);
    const receiverCpu = round(end.receiver - start.receiver, 2);
    // the producer's share is its enqueue (addBulk); the bench's own bookkeeping after it is not BullMQ's
    const peerCpu = total.worker + total.redis + enqueuePhase.producer;
    const busy = (end.machine.busy - start.machine.busy) / clockTicks;
    const delivered = d.figures.delivered;
    return {
      peer: "bullmq",
      scenario,
      deliver,
      params: {
        n,
        chunk: CHUNK,
        order: "shuffled",
        leadMs: lead,
        ...(scenario === "delayed" ? { spreadMs } : { expectedEnqueueRate: params.expectedEnqueueRate }),
        drainTimeoutMs,
        concurrency,
        jobOptions: JOB_OPTIONS,
        removeOnComplete: false,
      },
      versions: ctx.versions,
      enqueue: {
        ms: enqueueMs,
        jobsPerSec: rate(n, enqueueMs),
        batchMs: summary(batchMs),
        [scenario === "burst" ? "finishedBeforeDue" : "finishedBeforeFirstDue"]: enqueued.at <= firstDue,
        createdAfterDue,
      },
      ...(scenario === "burst"
        ? {
            drainMs: d.lastArrival === null ? null : d.lastArrival - firstDue,
            drainJobsPerSec: d.lastArrival === null ? null : rate(delivered, d.lastArrival - firstDue),
            firstArrivalAfterDueMs: d.firstArrival === null ? null : d.firstArrival - firstDue,
          }
        : { lastArrivalAfterLastDueMs: d.lastArrival === null ? null : d.lastArrival - lastDue }),
      ...d.figures,
      // with DELIVER=http the lag above is the arrival at the target; this is the handler's start before the POST
      ...(received ? { handlerStartLagMs: starts.figures.lagMs } : {}),
      allDeliveredWithinDeadline: allDone,
      completionsPerSec: arrivalsPerSecond({ arrivals }, firstDue),
      jobs: { completed: done.completed, failed: done.failed, failedAttempts: done.failedAttempts, brokerCounts },
      quietBeforeStart: quiet,
      loadAvgAtStart,
      runtime: {
        cpuMsPerDelivery: delivered
          ? { all: round((peerCpu * 1000) / delivered, 3), workerAndRedis: round(((total.worker + total.redis) * 1000) / delivered, 3) }
          : null,
        cpuSeconds: { worker: total.worker, redis: total.redis, producerEnqueue: enqueuePhase.producer },
        cpuSecondsEnqueuePhase: enqueuePhase,
        receiverCpuSeconds: receiver ? receiverCpu : null,
        wallSeconds: round((end.at - t0) / 1000, 1),
        machine: {
          wallSeconds: round((end.at - start.at) / 1000, 2),
          busyCpuSeconds: round(busy, 2),
          peerCpuSeconds: round(total.worker + total.redis + total.producer, 2),
          receiverCpuSeconds: receiverCpu,
          // other processes on the machine: noise in every figure (read it first)
          otherCpuSeconds: round(Math.max(0, busy - total.worker - total.redis - total.producer - receiverCpu), 2),
          idleCpuSeconds: round((end.machine.idle - start.machine.idle) / clockTicks, 2),
        },
      },
    };
  } finally {
    await worker?.stop();
    await receiver?.stop();
    await queue.close();
    admin.disconnect();
  }
}
