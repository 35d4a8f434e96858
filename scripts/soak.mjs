// `npm run soak` (not part of CI): the real local stack (wrangler dev) under a steady
// create-and-fire load for SOAK_SECONDS (default 600) at SOAK_RATE jobs/s (default 20), against a
// loopback target that randomly answers 200, 500, 429 (Retry-After: 1) or hangs past the job's
// timeout. At the end it waits (bounded) until every accepted execution is terminal or still
// legitimately scheduled, checks that the counts add up (invariant 4) per job and against
// /v1/metrics, and prints one JSON line: accepted, succeeded, dead, lost, duplicates, p99 lag of
// first attempts, peak memory and whether the runtime's memory is flat. Exit code 1 when
// something was lost, the counts do not add up or the memory grew.
//
// Memory: every SOAK_GC_SECONDS the soak collects garbage in every isolate of the runtime, then
// reads the runtime's RSS and JS heaps (scripts/runtime-inspector.mjs says why local workerd
// needs the nudge). Flat means: from the end of the warm-up (the first third of the load) to the
// end of the load, the collected RSS grew by at most SOAK_FLAT_PERCENT (default 10).
// SOAK_GC_SECONDS=0 never collects and samples the RSS every 30 s: local workerd's own growth.
//
// Settings (env): SOAK_SECONDS=600 SOAK_RATE=20 SOAK_SEED=<random> SOAK_SETTLE_SECONDS=180
// SOAK_GC_SECONDS=30 SOAK_FLAT_PERCENT=10 SOAK_PORT=18970 (the stack; the target listens on
// SOAK_PORT + 1, wrangler's inspector for the scheduler's worker on SOAK_PORT + 2). Run heavy
// things one at a time on a shared machine: flock /tmp/heavy.lock npm run soak.
// SCHEDULER_<NAME>=<value> sets the scheduler's setting <NAME> (src/config.ts) for the run (e.g.
// SCHEDULER_HISTORY_RETENTION_MS=60000 to see memory once finished jobs leave D1); the result's
// `settings` are all the settings in effect (`npm run config -- stack`). SOAK_VAR_<NAME> still
// works for now, with a warning.
import { randomBytes, randomInt } from "node:crypto";
import { rmSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { OK, startReceiver } from "../test/support/receiver.mjs";
import { effectiveConfig } from "./config.mjs";
import { envNumber, settingOverrides } from "./lib/env.mjs";
import { sleep, startStack } from "./local-stack.mjs";
import { connectRuntimeInspector, residentKb, stackProcesses } from "./runtime-inspector.mjs";

const SECONDS = envNumber("SOAK_SECONDS", 600);
// 20 jobs/s is what a shared 2-core machine holds with this failure mix (about 1.7 deliveries per
// job, 15% of them hanging 1 s); at 50 the local queue consumer falls behind, the dispatch
// deadline re-sends what is still queued, and the first-attempt lag grows past a minute
const RATE = envNumber("SOAK_RATE", 20);
const SEED = envNumber("SOAK_SEED", randomInt(0, 2 ** 31 - 1), { integer: true });
const SETTLE_SECONDS = envNumber("SOAK_SETTLE_SECONDS", 180);
const PORT = envNumber("SOAK_PORT", 18970, { integer: true, min: 1, max: 65533 });
/** 0: never collect (the runtime's RSS is then sampled every 30 s, to see local workerd's own growth) */
const GC_SECONDS = envNumber("SOAK_GC_SECONDS", 30);
const SAMPLE_SECONDS = GC_SECONDS === 0 ? 30 : Math.max(5, GC_SECONDS);
const FLAT_PERCENT = envNumber("SOAK_FLAT_PERCENT", 10);
const OVERRIDES = settingOverrides({ legacy: ["SOAK_VAR_"] });
// every setting in effect, for the result; a bad SCHEDULER_<NAME> stops the soak here
const { settings: SETTINGS } = await effectiveConfig({
  place: "stack",
  vars: { API_KEYS: "(per run)", WEBHOOK_SECRET: "(per run)", ALLOW_LOOPBACK_TARGETS: "true" },
  overrides: OVERRIDES,
});

const TIMEOUT_MS = 1000;
const RETRY = { maxAttempts: 4, initialDelayMs: 500, factor: 2, jitter: 0.2 };
/** what the target answers, by share of requests */
const MIX = [
  ["ok", 0.55],
  ["fail500", 0.15],
  ["throttle429", 0.15],
  ["hang", 0.15],
];
const TICK_MS = 200;

/** mulberry32: the target's answers are reproducible for a seed (request order still varies) */
function prng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

// --- the target -------------------------------------------------------------------------------

/** The shared loopback receiver (test/support/receiver.mjs) answering by MIX, verifying signatures and counting. */
async function startTarget(secret, random) {
  const state = {
    deliveries: 0,
    byAnswer: Object.fromEntries(MIX.map(([k]) => [k, 0])),
    signatureFailures: 0,
    /** webhook-id -> 2xx answers actually written to a live connection */
    answered2xx: new Map(),
    /** webhook-id -> arrival time of attempt 1 */
    firstArrival: new Map(),
  };
  const pick = () => {
    let r = random();
    for (const [kind, share] of MIX) {
      if (r < share) return kind;
      r -= share;
    }
    return "ok";
  };
  /** what the target answers, by kind; a hang answers 200 past the job's timeout (too late: the scheduler aborted) */
  const ANSWERS = {
    ok: OK,
    fail500: { status: 500, body: "soak failure" },
    throttle429: { status: 429, body: "slow down", headers: { "retry-after": "1" } },
    hang: { status: 200, body: "late", afterMs: TIMEOUT_MS + 1000 },
  };
  const receiver = await startReceiver({
    port: PORT + 1,
    secret,
    respond: () => {
      const kind = pick();
      state.byAnswer[kind]++;
      return ANSWERS[kind];
    },
    onRequest: (request) => {
      if (request.aborted) return; // the caller went away mid-body
      state.deliveries++;
      if (request.signatureError !== null) state.signatureFailures++;
      if (request.attempt === 1 && !state.firstArrival.has(request.webhookId)) state.firstArrival.set(request.webhookId, request.at);
    },
    onAnswered: (request) => {
      if (request.status >= 200 && request.status < 300)
        state.answered2xx.set(request.webhookId, (state.answered2xx.get(request.webhookId) ?? 0) + 1);
    },
  });
  return { url: receiver.url, state, close: () => receiver.stop() };
}

// --- the API --------------------------------------------------------------------------------------

/** Several keys of one tenant: the per-key rate limit (1000 requests / 10 s) bounds one key, not the run. */
function apiClient(baseUrl, keys) {
  let turn = 0;
  return async function request(method, path, body) {
    for (let attempt = 0; attempt < 20; attempt++) {
      const key = keys[turn++ % keys.length];
      const res = await fetch(`${baseUrl}${path}`, {
        method,
        headers: { authorization: `Bearer ${key}`, ...(body === undefined ? {} : { "content-type": "application/json" }) },
        body: body === undefined ? undefined : JSON.stringify(body),
        signal: AbortSignal.timeout(30_000),
      });
      if (res.status === 429) {
        await res.body?.cancel();
        await sleep(Math.min(10, Number(res.headers.get("retry-after")) || 1) * 100);
        continue;
      }
      const text = await res.text();
      let json = null;
      try {
        json = JSON.parse(text);
      } catch {
        /* not JSON */
      }
      return { status: res.status, body: json ?? text };
    }
    return { status: 429, body: null };
  };
}

async function forEachLimited(items, limit, run) {
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(limit, items.length) }, async () => {
      while (next < items.length) await run(items[next++]);
    }),
  );
}

function percentile(values, p) {
  if (values.length === 0) return null;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length, Math.max(1, Math.ceil((p / 100) * sorted.length))) - 1];
}

const mb = (kb) => (kb === null ? null : Math.round(kb / 102.4) / 10);

// --- the run ----------------------------------------------------------------------------------------

async function main() {
  const keys = Array.from({ length: 8 }, () => randomBytes(24).toString("base64url"));
  const secret = `whsec_${randomBytes(32).toString("base64")}`;
  const target = await startTarget(secret, prng(SEED));
  let stack = null;
  let sampler = null;
  const cleanup = async () => {
    if (sampler) clearInterval(sampler);
    if (stack) {
      await stack.stop();
      if (stack.persistTo.startsWith(tmpdir()) && stack.persistTo.includes("scheduler-state-"))
        rmSync(stack.persistTo, { recursive: true, force: true });
      stack = null;
    }
    await target.close();
  };
  const onSignal = () => {
    // exit once cleaned up, whatever the clean-up met (the exit is the outcome)
    void cleanup().finally(() => process.exit(130));
  };
  process.once("SIGINT", onSignal);
  process.once("SIGTERM", onSignal);

  try {
    let log = "";
    console.error(`soak: seed ${SEED}, ${SECONDS} s at ${RATE} jobs/s; starting the stack on ${PORT}`);
    stack = await startStack({
      port: PORT,
      inspectorPort: PORT + 2,
      v8Flags: ["--expose-gc"], // the soak's collections (scripts/runtime-inspector.mjs)
      vars: { ...OVERRIDES, API_KEYS: keys.map((k) => `soak:${k}`).join(","), WEBHOOK_SECRET: secret, ALLOW_LOOPBACK_TARGETS: "true" },
      log: (line) => {
        if (log.length < 100_000) log += line;
      },
    });
    const api = apiClient(stack.url, keys);

    const { proxy } = stackProcesses(stack.pid);
    const inspector = await connectRuntimeInspector({ pgrp: stack.pid, workerName: "edge-scheduler", workerInspectorPort: PORT + 2 });
    const t0 = Date.now();
    const peakKb = { runtime: 0, proxy: 0 };
    const collected = []; // { at, runtimeKb, proxyKb, allHeapBytes, schedulerHeapBytes, unanswered }
    let collecting = false;
    const collectAndSample = async () => {
      const heaps = GC_SECONDS === 0 ? { allBytes: null, workerBytes: null, unanswered: [] } : await inspector.collectAndMeasure();
      collected.push({
        at: Date.now() - t0,
        runtimeKb: residentKb(inspector.pid),
        proxyKb: proxy ? residentKb(proxy) : null,
        allHeapBytes: heaps.allBytes,
        schedulerHeapBytes: heaps.workerBytes,
        unanswered: heaps.unanswered,
      });
    };
    let tick = 0;
    const sample = () => {
      // the peak as it happens, every 5 s; after a collection every SAMPLE_SECONDS
      peakKb.runtime = Math.max(peakKb.runtime, residentKb(inspector.pid) ?? 0);
      if (proxy) peakKb.proxy = Math.max(peakKb.proxy, residentKb(proxy) ?? 0);
      if (tick++ % Math.round(SAMPLE_SECONDS / 5) !== 0 || collecting) return;
      collecting = true;
      collectAndSample()
        .catch(() => {}) // a busy runtime may not answer: that sample is skipped
        .finally(() => {
          collecting = false;
        });
    };
    sample();
    sampler = setInterval(sample, 5000);

    // steady create-and-fire: every tick, the batch that keeps the total at elapsed × rate
    const jobs = []; // { id, dueAt }
    let requested = 0;
    let createErrors = 0;
    let inFlight = 0;
    const loadEnd = t0 + SECONDS * 1000;
    const creates = [];
    while (Date.now() < loadEnd) {
      const due = Math.floor(((Date.now() - t0) / 1000) * RATE);
      const n = Math.min(1000, due - requested);
      if (n > 0 && inFlight < 4) {
        requested += n;
        inFlight++;
        const batch = Array.from({ length: n }, (_, i) => ({
          name: `soak-${requested - n + i}`,
          target: { url: `${target.url}/soak`, body: { i: requested - n + i } },
          delay: 1000,
          timeoutMs: TIMEOUT_MS,
          retry: RETRY,
        }));
        creates.push(
          api("POST", "/v1/jobs/batch", { jobs: batch })
            .then((res) => {
              if (res.status !== 200) {
                createErrors += n;
                return;
              }
              for (const r of res.body.results) {
                if (r.status === 201) jobs.push({ id: r.job.id, dueAt: Date.parse(r.job.nextRunAt) });
                else createErrors++;
              }
            })
            .catch(() => {
              createErrors += n;
            })
            .finally(() => {
              inFlight--;
            }),
        );
      }
      await sleep(TICK_MS);
    }
    await Promise.all(creates);
    const loadSeconds = (Date.now() - t0) / 1000;
    const loadEndAt = Date.now() - t0;
    console.error(`soak: load done: ${jobs.length} accepted, ${createErrors} refused or failed; settling (at most ${SETTLE_SECONDS} s)`);

    // settle: until every accepted execution is terminal (metrics) or the bound passes
    const settleEnd = Date.now() + SETTLE_SECONDS * 1000;
    let metrics = null;
    while (Date.now() < settleEnd) {
      const res = await api("GET", "/v1/metrics");
      if (res.status === 200) {
        metrics = res.body;
        const c = metrics.counters;
        if (c.succeeded_total + c.dead_total >= jobs.length) break;
      }
      await sleep(2000);
    }
    await sleep(2500); // outcomes reach D1 at most once per FLUSH_DELAY_MS
    metrics = (await api("GET", "/v1/metrics")).body;
    clearInterval(sampler);
    sampler = null;
    while (collecting) await sleep(100);
    await collectAndSample().catch(() => {}); // after the settle: what the run left behind

    // per job: where its execution is, and its first attempt's lag
    const counts = { succeeded: 0, dead: 0, scheduled: 0, inFlight: 0, missing: 0 };
    const deadReasons = {};
    const firstLags = [];
    const arrivalLags = [];
    await forEachLimited(jobs, 16, async (job) => {
      const res = await api("GET", `/v1/jobs/${job.id}/executions`);
      const execution = res.status === 200 ? res.body.executions?.[0] : undefined;
      if (!execution) {
        counts.missing++;
        return;
      }
      const s = execution.status;
      if (s === "succeeded") counts.succeeded++;
      else if (s === "dead") {
        counts.dead++;
        deadReasons[execution.deadReason] = (deadReasons[execution.deadReason] ?? 0) + 1;
      } else if (s === "scheduled" || s === "pending") counts.scheduled++;
      else if (s === "dispatched" || s === "running") counts.inFlight++;
      else counts.missing++;
      const first = execution.attempts?.find?.((a) => a.attempt === 1);
      if (first && typeof first.lagMs === "number") firstLags.push(first.lagMs);
      // end to end: when attempt 1 reached the target, against the due time
      const arrived = target.state.firstArrival.get(execution.id);
      if (arrived !== undefined) arrivalLags.push(arrived - Date.parse(execution.dueAt));
    });
    const accepted = jobs.length;
    const lost = accepted - counts.succeeded - counts.dead - counts.scheduled - counts.inFlight;
    const duplicates = [...target.state.answered2xx.values()].filter((n) => n > 1).length;

    // flat: the collected RSS at the end of the load against the end of the warm-up
    const during = collected.filter((sample) => sample.at <= loadEndAt && sample.runtimeKb);
    const warm = during.find((sample) => sample.at >= loadEndAt / 3) ?? null;
    const last = during.at(-1) ?? null;
    const growthPercent =
      warm && last && last !== warm ? Math.round(((last.runtimeKb - warm.runtimeKb) / warm.runtimeKb) * 1000) / 10 : null;
    const toMb = (bytes) => (bytes === null ? null : Math.round(bytes / 104857.6) / 10);
    const c = metrics?.counters ?? {};
    const result = {
      soak: "steady",
      seed: SEED,
      seconds: SECONDS,
      rate: RATE,
      settings: SETTINGS,
      overrides: OVERRIDES,
      achievedRate: Math.round((accepted / loadSeconds) * 10) / 10,
      accepted,
      succeeded: counts.succeeded,
      dead: counts.dead,
      deadByReason: deadReasons,
      stillScheduled: counts.scheduled,
      inFlight: counts.inFlight,
      lost,
      duplicates,
      createErrors,
      invariant4: lost === 0 && accepted === counts.succeeded + counts.dead + counts.scheduled + counts.inFlight,
      metricsAgree: c.succeeded_total === counts.succeeded && c.dead_total === counts.dead,
      metrics: {
        succeeded_total: c.succeeded_total,
        dead_total: c.dead_total,
        retries_total: c.retries_total,
        failed_attempts_total: c.failed_attempts_total,
        duplicates_suppressed_total: c.duplicates_suppressed_total,
        lease_expired_total: c.lease_expired_total,
        redispatch_total: c.redispatch_total,
        stale_lease_rejects_total: c.stale_lease_rejects_total,
      },
      deliveries: target.state.deliveries,
      answers: target.state.byAnswer,
      signatureFailures: target.state.signatureFailures,
      firstAttemptLagMs: {
        p50: percentile(firstLags, 50),
        p99: percentile(firstLags, 99),
        max: firstLags.length ? Math.max(...firstLags) : null,
        n: firstLags.length,
      },
      firstArrivalLagMs: {
        p50: percentile(arrivalLags, 50),
        p99: percentile(arrivalLags, 99),
        max: arrivalLags.length ? Math.max(...arrivalLags) : null,
        n: arrivalLags.length,
      },
      metricsLagP99Ms: metrics?.fire_lag_ms?.p99 ?? null,
      peakRssMb: { runtime: mb(peakKb.runtime), devProxy: proxy ? mb(peakKb.proxy) : null },
      memory: {
        flat: growthPercent !== null && growthPercent <= FLAT_PERCENT,
        growthAfterWarmupPercent: growthPercent,
        limitPercent: FLAT_PERCENT,
        collectEverySeconds: GC_SECONDS,
        isolates: inspector.isolates.length,
        unansweredIsolates: [...new Set(collected.flatMap((sample) => sample.unanswered))],
        // after each collection: seconds since start, runtime RSS, JS heap of every isolate and of the scheduler's
        samples: collected.map((sample) => [
          Math.round(sample.at / 1000),
          mb(sample.runtimeKb),
          toMb(sample.allHeapBytes),
          toMb(sample.schedulerHeapBytes),
        ]),
        sampleColumns: ["s", "runtimeRssMb", "allIsolatesHeapMb", "schedulerHeapMb"],
        // wrangler's dev proxy (not deployed): it has no inspector, so it is not collected
        devProxyRssMb: collected.map((sample) => mb(sample.proxyKb)),
      },
      loadAvg1m: Math.round(loadavg()[0] * 100) / 100,
    };
    console.log(JSON.stringify(result));
    if (!result.invariant4) {
      console.error(`soak: the counts do not add up; stack log tail:\n${log.slice(-4000)}`);
      process.exitCode = 1;
    }
    if (!result.memory.flat) {
      console.error(`soak: the runtime's memory grew ${growthPercent}% after warm-up (limit ${FLAT_PERCENT}%)`);
      process.exitCode = 1;
    }
  } finally {
    process.off("SIGINT", onSignal);
    process.off("SIGTERM", onSignal);
    await cleanup();
  }
}

main().catch((error) => {
  console.error("soak failed:", error);
  process.exit(1);
});
