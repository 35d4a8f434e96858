/**
 * kill -9 of the whole runtime mid-flight (issue 3, failure row "process restart (kill -9)"):
 * DO storage, D1 and alarms persist; the local queue's messages die with the process, and the
 * lease (LEASE_MS) and dispatch deadline (DISPATCH_TIMEOUT_MS) bring every interrupted execution
 * back. Proves: nothing accepted is lost, every delivery of a job carries one webhook-id equal to
 * its Idempotency-Key (invariant 5), so a duplicate after the crash is recognisable as one.
 */
import { afterAll, beforeAll, describe, expect, it, onTestFailed } from "vitest";
import { startStack } from "../../scripts/local-stack.mjs";
import { Api, credentials, eventually, logSink, Receiver, removeStateDir, report } from "./harness.js";

const PORT = 18830;
const RESTART_PORT = 18831;
const SLOW_JOBS = 60;
const LATER_JOBS = 40;
const SLOW_HANDLER_MS = 2_000;
/** from the restart: lease/dispatch deadlines (10 s) plus backoff, and the slow handler again */
const RECOVERY_DEADLINE_MS = 90_000;

const creds = credentials();
const sink = logSink();
const receiver = new Receiver(creds.secret).on("/slow", { kind: "slow", ms: SLOW_HANDLER_MS }).on("/later", { kind: "ok" });
let first: Awaited<ReturnType<typeof startStack>> | undefined;
let second: Awaited<ReturnType<typeof startStack>> | undefined;
let api: Api;

beforeAll(async () => {
  await receiver.listen();
  first = await startStack({ port: PORT, vars: creds.vars, log: sink.log });
  api = new Api(first.url, creds.apiKey);
});

afterAll(async () => {
  await first?.stop();
  await second?.stop();
  await receiver.close();
  removeStateDir(first?.persistTo);
});

describe("process restart (kill -9)", () => {
  it("loses nothing accepted when the runtime is killed mid-flight and restarted on the same state (failure row: process restart)", async () => {
    onTestFailed(() => console.error(sink.text().slice(-6000)));
    const now = Date.now();
    const slowStart = now + 1_500;
    const specs = [
      // slow targets due over ~3 s: about half are running when the kill comes
      ...Array.from({ length: SLOW_JOBS }, (_, i) => ({
        target: { url: `${receiver.url}/slow`, body: { kind: "slow", i } },
        runAt: slowStart + Math.round((i * 3_000) / SLOW_JOBS),
      })),
      // due 4-8 s from now: some fall due while the runtime is down
      ...Array.from({ length: LATER_JOBS }, (_, i) => ({
        target: { url: `${receiver.url}/later`, body: { kind: "later", i } },
        runAt: now + 4_000 + Math.round((i * 4_000) / LATER_JOBS),
      })),
    ];
    const jobs = await api.createJobs(specs);
    const accepted = new Set<string>(jobs.map((j) => j.id));
    expect(accepted.size).toBe(SLOW_JOBS + LATER_JOBS);

    // kill -9 once about half of the slow targets have started
    await eventually(
      "half of the slow targets start",
      () => new Set(receiver.to("/slow").map((r) => r.webhookId)).size >= SLOW_JOBS / 2,
      30_000,
      20,
    );
    first!.kill9();
    const killAt = Date.now();
    const before = receiver.requests.filter((r) => r.at <= killAt);
    const startedBeforeKill = new Set(before.map((r) => r.webhookId));
    const slowStartedBeforeKill = new Set(
      receiver
        .to("/slow")
        .filter((r) => r.at <= killAt)
        .map((r) => r.webhookId),
    );
    // interrupted: the target was still working on it when the runtime died
    const interrupted = new Set(before.filter((r) => r.completedAt === null || r.completedAt > killAt).map((r) => r.webhookId));
    const deliveredTwiceBeforeKill = before.length - startedBeforeKill.size;
    await eventually("the first runtime is gone", () => first!.exited(), 10_000, 50);
    // a request in flight on loopback can still land just after SIGKILL; anything later is the new runtime's
    const goneAt = Date.now();

    second = await startStack({ port: RESTART_PORT, persistTo: first!.persistTo, vars: creds.vars, log: sink.log });
    const restartedAt = Date.now();
    api.use(second.url);

    // every accepted job: a 2xx answered by the target at least once ...
    const answered = (jobId: string) => receiver.requests.some((r) => r.jobId === jobId && r.status === 200 && r.completedAt !== null);
    await eventually(
      "every accepted job is answered 2xx by its target",
      () => [...accepted].every(answered),
      RECOVERY_DEADLINE_MS - (Date.now() - restartedAt),
      250,
    );
    // ... and recorded as succeeded by the scheduler
    const pending = new Set(accepted);
    await eventually(
      "the scheduler reports every accepted job succeeded",
      async () => {
        for (const id of [...pending]) {
          const res = await api.job(id);
          if (res.status === 200 && res.body.latestExecution?.status === "succeeded") pending.delete(id);
        }
        return pending.size === 0;
      },
      Math.max(5_000, RECOVERY_DEADLINE_MS - (Date.now() - restartedAt)),
      1_000,
    );
    const allSucceededAt = Date.now();

    // what the target saw
    const deliveries = new Map<string, number>();
    const idsOfJob = new Map<string, Set<string>>();
    let keyMismatches = 0;
    let badSignatures = 0;
    for (const r of receiver.requests) {
      deliveries.set(r.webhookId, (deliveries.get(r.webhookId) ?? 0) + 1);
      const ids = idsOfJob.get(r.jobId) ?? new Set<string>();
      ids.add(r.webhookId);
      idsOfJob.set(r.jobId, ids);
      if (r.headers["idempotency-key"] !== r.webhookId) keyMismatches += 1;
      if (r.signatureError !== null) badSignatures += 1;
    }
    const deliveredTwice = [...deliveries.values()].filter((n) => n > 1).length;
    const jobsWithOneWebhookId = [...idsOfJob.values()].filter((ids) => ids.size === 1).length;
    // recovery: kill -> first delivery by the restarted runtime of an execution interrupted by the kill
    const redelivered = receiver.requests.filter((r) => r.at > goneAt && interrupted.has(r.webhookId));
    const firstRedeliveryAt = redelivered.length > 0 ? Math.min(...redelivered.map((r) => r.at)) : null;
    const succeeded = accepted.size - pending.size;
    const lost = [...accepted].filter((id) => !idsOfJob.has(id) || pending.has(id)).length;
    const metrics = (await api.metrics()).body;
    report("crash", {
      accepted: accepted.size,
      succeeded,
      lost,
      startedBeforeKill: startedBeforeKill.size,
      slowStartedBeforeKill: slowStartedBeforeKill.size,
      completedBeforeKill: before.filter((r) => r.completedAt !== null && r.completedAt <= killAt).length,
      interrupted: interrupted.size,
      interruptedRedelivered: new Set(redelivered.map((r) => r.webhookId)).size,
      deliveredTwiceBeforeKill,
      requests: receiver.requests.length,
      deliveredTwice,
      maxDeliveries: Math.max(...deliveries.values()),
      everyDuplicateSameWebhookId: jobsWithOneWebhookId === idsOfJob.size,
      idempotencyKeyEqualsExecutionId: keyMismatches === 0,
      badSignatures,
      restartMs: restartedAt - killAt,
      recoveryMs: firstRedeliveryAt === null ? null : firstRedeliveryAt - killAt,
      allSucceededAfterKillMs: allSucceededAt - killAt,
      counters: {
        leaseExpired: metrics.counters.lease_expired_total,
        redispatch: metrics.counters.redispatch_total,
        duplicatesSuppressed: metrics.counters.duplicates_suppressed_total,
        staleLeaseRejects: metrics.counters.stale_lease_rejects_total,
        dead: metrics.counters.dead_total,
      },
    });

    expect(lost).toBe(0);
    expect(succeeded).toBe(accepted.size);
    expect(jobsWithOneWebhookId).toBe(idsOfJob.size);
    expect(keyMismatches).toBe(0);
    expect(badSignatures).toBe(0);
    expect(metrics.counters.dead_total).toBe(0);
    // every execution the kill interrupted mid-handler ran again on the restarted runtime
    expect(interrupted.size).toBeGreaterThan(0);
    expect(new Set(redelivered.map((r) => r.webhookId)).size).toBe(interrupted.size);
  });
});
