// create.mjs: KEY=... node create.mjs (SCHEDULER_URL and HOOK_URL override where it sends what)
import { SchedulerClient, SchedulerError } from "edge-scheduler-client";

const scheduler = new SchedulerClient({
  baseUrl: process.env.SCHEDULER_URL ?? "http://127.0.0.1:8787",
  apiKey: process.env.KEY,
});

// one idempotency key per call, reused by the client's own retries: a retried create never makes two jobs
const job = await scheduler.jobs.create({
  target: { url: process.env.HOOK_URL ?? "http://127.0.0.1:9000/hook", body: { hello: "world" } },
  delay: "5s",
});
console.log("created", job.id, "due", job.nextRunAt);

// list methods are async iterators that follow the cursors
for await (const active of scheduler.jobs.list({ status: "active" })) console.log("active", active.id);

// every dead execution gets a fresh attempt budget (one whose job was canceled meanwhile cannot: 409)
for await (const dead of scheduler.dlq.list()) {
  await scheduler.dlq.redrive(dead.id).catch((error) => console.log("not redriven", dead.id, error.code));
}

try {
  await scheduler.jobs.get("job_does_not_exist");
} catch (error) {
  if (!(error instanceof SchedulerError)) throw error;
  console.log("error", error.status, error.code, error.field); // 404 not_found id
}
