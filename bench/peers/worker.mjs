// The BullMQ worker process (forked by timed.mjs): one Worker on the run's queue with CONCURRENCY jobs
// at once. Each job's handler notes when it started; with DELIVER_URL set (DELIVER=http) it then
// delivers the job as a webhook scheduler does (webhook.mjs: a signed POST, the answer read, a
// non-2xx or a timeout failing the attempt, which BullMQ retries by the job's backoff); without,
// it returns at once (the no-op handler).
//   IPC: -> {type: "ready"}, then {type: "progress", completed, failed, failedAttempts} every 100 ms;
//   "dump" -> the handler starts, then it closes the worker and exits.
import { Worker } from "bullmq";
import { envNumber, envString } from "../../scripts/lib/env.mjs";
import { deliver } from "./webhook.mjs";

const QUEUE = envString("QUEUE", undefined);
const REDIS_PORT = envNumber("REDIS_PORT", undefined, { integer: true, min: 1, max: 65535 });
const CONCURRENCY = envNumber("CONCURRENCY", 100, { integer: true, min: 1 });
const DELIVER_URL = envString("DELIVER_URL", "");
const WEBHOOK_SECRET = envString("WEBHOOK_SECRET", "");
const DELIVERY_TIMEOUT_MS = envNumber("DELIVERY_TIMEOUT_MS", 30_000, { integer: true, min: 1 });
if (!QUEUE || !REDIS_PORT) throw new Error("worker.mjs: QUEUE and REDIS_PORT are required");

/** flat records of each handler start: job index, time, attempt */
const starts = { indexes: [], ats: [], attempts: [] };
let completed = 0;
let failed = 0; // jobs that failed their last attempt
let failedAttempts = 0;

const worker = new Worker(
  QUEUE,
  async (job) => {
    starts.indexes.push(job.data.i);
    starts.ats.push(Date.now());
    starts.attempts.push(job.attemptsMade + 1);
    if (!DELIVER_URL) return;
    await deliver({
      url: DELIVER_URL,
      secret: WEBHOOK_SECRET,
      id: `job_${job.id}`,
      jobId: String(job.id),
      attempt: job.attemptsMade + 1,
      body: JSON.stringify({ i: job.data.i }),
      timeoutMs: DELIVERY_TIMEOUT_MS,
    });
  },
  // maxRetriesPerRequest: null is what BullMQ asks of a worker's connection (it blocks on Redis)
  { connection: { host: "127.0.0.1", port: REDIS_PORT, maxRetriesPerRequest: null }, concurrency: CONCURRENCY },
);
worker.on("completed", () => {
  completed += 1;
});
worker.on("failed", (job, error) => {
  failedAttempts += 1;
  if (job && job.attemptsMade >= (job.opts.attempts ?? 1)) failed += 1;
  if (failedAttempts <= 5) console.error(`bench:peers worker: job ${job?.id} failed: ${error?.message}`);
});
worker.on("error", (error) => console.error(`bench:peers worker: ${error.message}`));

const progress = setInterval(() => process.send?.({ type: "progress", completed, failed, failedAttempts }), 100);

process.on("message", (message) => {
  if (message.type !== "dump") return;
  clearInterval(progress);
  process.send?.({ type: "dump", starts, completed, failed, failedAttempts }, () => {
    void worker.close().then(() => process.exit(0));
  });
});
process.on("SIGTERM", () => {
  void worker.close(true).then(() => process.exit(0));
});

await worker.waitUntilReady();
process.send?.({ type: "ready" });
