// The peak JS heap of the scheduler's isolate (its Worker and Durable Objects share it, as in
// production) during a scan over the largest payloads the API takes (issue 35, item 3), on the
// real local stack (not part of CI; run heavy things one at a time on a shared machine).
//
//   npx node scripts/heap-peak.mjs sync    a sync pass pulling HEAP_JOBS (default 120) jobs of the
//                                           largest spec (test/support/largest-job.mjs, ~0.82 MB
//                                           each) into HEAP_BUCKETS buckets (default 1; one D1 shard)
//   npx node scripts/heap-peak.mjs purge   a history purge with the archive (R2) bound over
//                                           HEAP_HISTORY (default 300) finished jobs and as many
//                                           occurrences per shard, each with the largest attempt
//                                           log, labels and name (~91 KB), on HEAP_SHARDS (3) shards
//
// The sync run creates its jobs through the batch API due in an hour (beyond the lookahead: in D1
// only), then restarts the stack with LOOKAHEAD_MS of two hours, so its next scan reads and
// applies them all. The purge run seeds D1 with SQL (40 days old) before the stack starts. The
// scan measured is the stack's own (its local cron, every minute), the first after a mark.
//
// How: DevTools cannot read a heap while a request runs (the runtime answers it between requests),
// so V8 traces every collection (--trace-gc, every one a full collection: --gc-global) and the
// script reads the scheduler's isolate's from the runtime's output (scripts/runtime-inspector.mjs
// parseGcTrace), between two gc() it calls in that isolate over DevTools (which name it). Prints
// one JSON line, MiB as V8 counts them: the live heap before the scan, the most in use when a
// collection began (garbage included), the most live after one, and what the scan did.
// HEAP_PORT (default 18990; the inspector on HEAP_PORT + 2).
import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { largestJob } from "../test/support/largest-job.mjs";
import { envNumber } from "./lib/env.mjs";
import { LOCAL_RUNTIME_ENV, localConfigPath, migrationsCommand, ROOT, shardBindings, WRANGLER, writeLocalConfig } from "./local-env.mjs";
import { startStack } from "./local-stack.mjs";
import { connectRuntimeInspector, parseGcTrace } from "./runtime-inspector.mjs";

const MODE = process.argv[2];
if (MODE !== "sync" && MODE !== "purge") {
  console.error("usage: npx node scripts/heap-peak.mjs sync|purge");
  process.exit(2);
}
const PORT = envNumber("HEAP_PORT", 18990, { integer: true, min: 1, max: 65533 });
const JOBS = envNumber("HEAP_JOBS", 120, { integer: true, min: 1 });
const HISTORY = envNumber("HEAP_HISTORY", 300, { integer: true, min: 1 });
const SHARDS = MODE === "sync" ? 1 : envNumber("HEAP_SHARDS", 3, { integer: true, min: 1, max: 8 });
/** the sync run's buckets: the scan syncs six at once (scanner/scan.ts), and locally every bucket shares the isolate */
const BUCKETS = MODE === "sync" ? envNumber("HEAP_BUCKETS", 1, { integer: true, min: 1, max: 32 }) : 1;
const KEY = `heap-${Date.now()}`;
const VARS = {
  API_KEYS: `acme:${KEY}`,
  WEBHOOK_SECRET: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
  ALLOW_LOOPBACK_TARGETS: "true",
  BUCKETS: String(BUCKETS),
};
/** MiB, as V8 traces them */
const MiB = (bytes) => Math.round((bytes / 2 ** 20) * 10) / 10;
/** coreutils' stdbuf library: the runtime's stdout line-buffered (a pipe's would be held in 4 KB blocks) */
const STDBUF = "/usr/libexec/coreutils/libstdbuf.so";

const persistTo = mkdtempSync(join(tmpdir(), "heap-peak-"));
let stack = null;
try {
  if (MODE === "sync") {
    // the jobs, due in an hour: in D1 only (the create hands to buckets only what is due within the lookahead)
    stack = await startStack({ port: PORT, persistTo, shards: SHARDS, vars: VARS });
    const per = 16; // ~13 MB of request, under the batch's 16 MB
    for (let done = 0; done < JOBS; done += per) {
      const jobs = Array.from({ length: Math.min(per, JOBS - done) }, () => largestJob("http://127.0.0.1:9/never", { delay: "1h" }));
      const res = await fetch(`${stack.url}/v1/jobs/batch`, {
        method: "POST",
        headers: { authorization: `Bearer ${KEY}`, "content-type": "application/json" },
        body: JSON.stringify({ jobs }),
      });
      const body = await res.json();
      if (res.status !== 200 || body.results.some((r) => r.status !== 201))
        throw new Error(`create answered ${res.status}: ${JSON.stringify(body).slice(0, 300)}`);
    }
    await stack.stop();
    stack = null;
  } else {
    writeLocalConfig({ shards: SHARDS });
    for (const [shard, binding] of shardBindings(SHARDS).entries()) {
      run(migrationsCommand(binding, persistTo, SHARDS));
      run([
        WRANGLER,
        "d1",
        "execute",
        binding,
        "--local",
        "-c",
        localConfigPath(SHARDS),
        "--persist-to",
        persistTo,
        "--command",
        historySql(shard, HISTORY),
      ]);
    }
  }
  const cronRuns = [];
  let output = "";
  // V8's trace of each collection, line-buffered so none waits in a buffer (parseGcTrace)
  process.env.LD_PRELOAD = STDBUF;
  process.env._STDBUF_O = "L";
  stack = await startStack({
    port: PORT,
    persistTo,
    shards: SHARDS,
    inspectorPort: PORT + 2,
    logLevel: "log",
    // every collection a full one: each one's "after" is the live heap then (--gc-global)
    v8Flags: ["--expose-gc", "--trace-gc", "--gc-global"],
    vars: { ...VARS, ...(MODE === "sync" ? { LOOKAHEAD_MS: "7200000" } : {}) },
    log: (line) => {
      output += line;
      if (line.includes("[local cron]")) cronRuns.push(line.trim());
    },
  });
  delete process.env.LD_PRELOAD;
  const inspector = await connectRuntimeInspector({ pgrp: stack.pid, workerName: "edge-scheduler", workerInspectorPort: PORT + 2 });
  await fetch(`${stack.url}/healthz`); // the isolate starts with a request
  // gc() in the scheduler's isolate before and after the scan: its traced "testing" collections
  // name the isolate and bracket the scan
  const testing = async () => {
    const from = output.length;
    const bytes = await inspector.collectWorker();
    for (let i = 0; i < 50; i++) {
      const found = parseGcTrace(output.slice(from)).filter((c) => c.reason.startsWith("testing"));
      if (found.length > 0) return { bytes, at: output.length, isolate: found.at(-1).isolate };
      await new Promise((r) => setTimeout(r, 100));
    }
    throw new Error("the runtime printed no trace of gc(): is its stdout line-buffered?");
  };
  const before = await testing();
  const markedAt = Date.now();
  // the stack's next scan, its local cron's (every minute, as production's): the first one that
  // starts after the mark (bounded)
  let scanRun = null;
  for (let i = 0; i < 1500 && scanRun === null; i++) {
    scanRun = cronRuns.map(cronRunOf).find((r) => r !== null && r.at >= markedAt) ?? null;
    if (scanRun === null) await new Promise((r) => setTimeout(r, 100));
  }
  if (scanRun === null) throw new Error("no scan ran within 150 s");
  const after = await testing();
  if (after.isolate !== before.isolate) throw new Error("the two gc() traces name different isolates");
  const during = parseGcTrace(output.slice(before.at, after.at)).filter(
    (c) => c.isolate === before.isolate && !c.reason.startsWith("testing"),
  );
  const metrics = await (await fetch(`${stack.url}/v1/metrics`, { headers: { authorization: `Bearer ${KEY}` } })).json();
  await stack.stop();
  stack = null;
  const left = MODE === "purge" ? shardBindings(SHARDS).map((binding) => remaining(binding)) : undefined;
  const counters = metrics.counters ?? {};
  console.log(
    JSON.stringify({
      mode: MODE,
      ...(MODE === "sync"
        ? { jobs: JOBS, buckets: BUCKETS, pulled: counters.scanner_recovered_total }
        : { historyPerShard: HISTORY, shards: SHARDS, leftInD1: left }),
      // the scheduler's isolate: live heap before the scan, the most in use when a collection began, the most live after one
      baselineMiB: MiB(before.bytes),
      peakInUseMiB: Math.max(0, ...during.map((c) => c.beforeMB)),
      peakLiveMiB: Math.max(0, ...during.map((c) => c.afterMB)),
      afterMiB: MiB(after.bytes),
      collections: during.length,
      scan: scanRun,
    }),
  );
} finally {
  await stack?.stop();
  rmSync(persistTo, { recursive: true, force: true });
}

/** A local cron's run as scripts/lib/cron.mjs logs it: its scheduled time and how long it ran; null for another line. */
function cronRunOf(line) {
  const m = /at (\S+): ran in (\d+) ms/.exec(line);
  return m ? { at: Date.parse(m[1]), ms: Number(m[2]), line } : null;
}

function run(args) {
  execFileSync(process.execPath, args, {
    cwd: ROOT,
    stdio: ["ignore", "ignore", "inherit"],
    env: { ...process.env, ...LOCAL_RUNTIME_ENV, CI: "true" },
  });
}

/** Finished jobs and occurrences left on a shard (wrangler d1 execute's JSON). */
function remaining(binding) {
  const out = execFileSync(
    process.execPath,
    [
      WRANGLER,
      "d1",
      "execute",
      binding,
      "--local",
      "-c",
      localConfigPath(SHARDS),
      "--persist-to",
      persistTo,
      "--json",
      "--command",
      "SELECT (SELECT count(*) FROM jobs) AS jobs, (SELECT count(*) FROM occurrences) AS occurrences",
    ],
    { cwd: ROOT, env: { ...process.env, ...LOCAL_RUNTIME_ENV, CI: "true" } },
  );
  return JSON.parse(String(out))[0].results[0];
}

/**
 * `count` finished one-off jobs and `count` occurrences of them, 40 days old, each with the
 * largest attempt log (20 attempts of a 1,024-character error and a 256-character response, in
 * 3-byte characters), labels (16 of 63 and 128 characters) and name (200 characters): about 91 KB
 * of history a row, as test/support/largest-job.mjs largestAttemptLog builds it.
 */
function historySql(shard, count) {
  const old = Date.now() - 40 * 86_400_000;
  const euros = (n) => `replace(printf('%.${n}c', '*'), '*', '€')`;
  return `WITH RECURSIVE
  n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ${count}),
  a(k) AS (SELECT 1 UNION ALL SELECT k + 1 FROM a WHERE k < 20),
  l(k) AS (SELECT 0 UNION ALL SELECT k + 1 FROM l WHERE k < 15),
  big(log, labels) AS (SELECT
    (SELECT json_group_array(json_object('attempt', k, 'dueAt', ${old} + k * 1000, 'startedAt', ${old} + k * 1000,
      'finishedAt', ${old} + k * 1000 + 500, 'outcome', 'failed', 'httpStatus', 500, 'error', ${euros(1024)}, 'waitMs', 1,
      'response', ${euros(256)})) FROM a),
    (SELECT json_group_object(substr('label-' || k || '-' || printf('%.63c', 'k'), 1, 63), ${euros(128)}) FROM l))
INSERT INTO jobs (tenant, id, name, bucket, status, version, synced, spec, next_run_at, created_at, updated_at, fired, run_status,
  attempts, last_error, finished_at, attempt_log, labels)
SELECT 'acme', printf('job_%02d%024d', ${shard}, i), ${euros(200)}, 0, 'completed', 1, 1, '{}', ${old}, ${old}, ${old}, 0, 'dead',
  20, ${euros(1024)}, ${old}, big.log, big.labels FROM n, big;
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ${count})
INSERT INTO occurrences (id, tenant, job_id, due_at, occurrence, status, attempts, last_error, finished_at, attempt_log)
SELECT printf('exe_%02d%024do', ${shard}, i), 'acme', printf('job_%02d%024d', ${shard}, i), ${old}, 1, 'dead', 20, ${euros(1024)}, ${old},
  (SELECT attempt_log FROM jobs WHERE id = printf('job_%02d%024d', ${shard}, 1)) FROM n;`;
}
