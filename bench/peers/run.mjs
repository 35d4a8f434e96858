// `npm run bench:peers`: BullMQ doing `npm run bench`'s delayed and burst on this machine, on a
// private redis-server, with webhook delivery (DELIVER=http: a signed POST to a loopback receiver
// process) and with a no-op handler. Prints one JSON line per run on stdout, then the Markdown
// tables (report.mjs) on stderr; both also go to bench/results/peers-latest.{jsonl,md}. BullMQ and
// ioredis are this folder's own pinned dependencies (package.json, package-lock.json), installed
// here by `npm ci` on first use, never into the project's node_modules. See bench/README.md.
import { execFileSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { cpus } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { envList, envNumber } from "../../scripts/lib/env.mjs";
import { DEFAULT_ENQUEUE_RATE, LEAD_MS, SPREAD_MS } from "../lib/workload.mjs";
import { killAllChildren } from "./children.mjs";
import { ensureRedisServer, startRedis } from "./redis.mjs";
import { peersReport } from "./report.mjs";
import { runTimed } from "./timed.mjs";

const HERE = dirname(fileURLToPath(import.meta.url));
const RESULTS = join(HERE, "..", "results");
const log = (line) => console.error(`[bench:peers ${new Date().toISOString().slice(11, 19)}] ${line}`);

/** a list of names from `known` (env var `name`); an unknown one stops the run, naming the known ones */
const namesOf = (name, known, fallback = known) =>
  envList(name, fallback, {
    item: (s) => {
      if (!known.includes(s)) throw new Error(`${name}: unknown "${s}" (known: ${known.join(", ")})`);
      return s;
    },
  });

const PEERS = namesOf("PEERS", ["bullmq"]);
const SCENARIOS = namesOf("SCENARIOS", ["delayed", "burst"]);
const DELIVER = namesOf("DELIVER", ["http", "none"]);
const RUNS = envNumber("RUNS", 2, { integer: true, min: 1 });
// N as npm run bench's BENCH_N, so `BENCH_N=5000` sizes both alike
const N = envNumber("N", envNumber("BENCH_N", 20_000, { integer: true, min: 1 }), { integer: true, min: 1 });
const CONCURRENCY = envNumber("CONCURRENCY", 100, { integer: true, min: 1 });
const DRAIN_TIMEOUT_MS = envNumber("DRAIN_TIMEOUT_S", envNumber("BENCH_DRAIN_TIMEOUT_S", 60)) * 1000;
const BURST_ENQUEUE_RATE = envNumber("BURST_ENQUEUE_RATE", envNumber("BENCH_BURST_ENQUEUE_RATE", null, { min: 1 }), { min: 1 });
const QUIET_WAIT_MS = envNumber("QUIET_WAIT_S", envNumber("BENCH_QUIET_WAIT_S", 120)) * 1000;

/** BullMQ and ioredis as this folder's lockfile pins them, installed by `npm ci` here when absent or not the pinned version. */
function ensurePeerPackages() {
  const wanted = JSON.parse(readFileSync(join(HERE, "package.json"), "utf8")).dependencies;
  const stale = Object.entries(wanted).filter(([name, version]) => {
    const file = join(HERE, "node_modules", name, "package.json");
    return !existsSync(file) || JSON.parse(readFileSync(file, "utf8")).version !== version;
  });
  if (stale.length === 0) return;
  log(
    `installing ${stale.map(([n, v]) => `${n}@${v}`).join(", ")} into bench/peers/node_modules (npm ci, from bench/peers/package-lock.json)`,
  );
  // --ignore-scripts: msgpackr's native extension is a prebuilt package found at run time, its install script only checks it
  execFileSync("npm", ["ci", "--no-audit", "--no-fund", "--ignore-scripts"], { cwd: HERE, stdio: ["ignore", 2, 2], timeout: 10 * 60_000 });
}

const versionOf = (name) => JSON.parse(readFileSync(join(HERE, "node_modules", name, "package.json"), "utf8")).version;

async function main() {
  ensurePeerPackages();
  const redisServer = ensureRedisServer({ log });
  // imported only now: they were perhaps installed a moment ago
  const bullmq = await import("bullmq");
  const IORedis = (await import("ioredis")).default;
  const secret = `whsec_${randomBytes(32).toString("base64")}`;
  const redis = await startRedis(redisServer);
  log(`redis-server ${redis.version} on 127.0.0.1:${redis.port} (pid ${redis.pid}), no persistence`);
  const stopEverything = async () => {
    killAllChildren();
    await redis.stop();
  };
  for (const signal of ["SIGINT", "SIGTERM"]) {
    process.on(signal, () => {
      log(`${signal}: stopping the worker, the receiver and redis-server (pid ${redis.pid})`);
      void stopEverything().then(() => process.exit(130));
    });
  }

  const versions = { bullmq: versionOf("bullmq"), ioredis: versionOf("ioredis"), redis: redis.version };
  const machine = { cpus: cpus().length, cpuModel: cpus()[0]?.model, node: process.version };
  mkdirSync(RESULTS, { recursive: true });
  const jsonl = join(RESULTS, "peers-latest.jsonl");
  writeFileSync(jsonl, "");
  const lines = [];
  const emit = (line) => {
    const full = { ...line, machine, at: new Date().toISOString() };
    lines.push(full);
    const text = JSON.stringify(full);
    process.stdout.write(`${text}\n`);
    writeFileSync(jsonl, `${text}\n`, { flag: "a" });
  };

  let failed = false;
  try {
    for (let run = 1; run <= RUNS; run++) {
      for (const peer of PEERS) {
        for (const deliver of DELIVER) {
          // burst's due time leaves room for an enqueue at the rate the delayed before it measured (as npm run bench does)
          let expectedEnqueueRate = BURST_ENQUEUE_RATE ?? DEFAULT_ENQUEUE_RATE;
          for (const scenario of SCENARIOS) {
            log(`${peer} ${scenario}, DELIVER=${deliver}, run ${run} of ${RUNS}: ${N} jobs`);
            try {
              const params = {
                scenario,
                deliver,
                n: N,
                leadMs: LEAD_MS,
                spreadMs: SPREAD_MS,
                expectedEnqueueRate,
                drainTimeoutMs: DRAIN_TIMEOUT_MS,
                concurrency: CONCURRENCY,
                quietWaitMs: QUIET_WAIT_MS,
              };
              const line = await runTimed(params, { redis, bullmq, IORedis, secret, versions });
              emit({ ...line, run });
              if (scenario === "delayed" && BURST_ENQUEUE_RATE === null && line.enqueue.jobsPerSec)
                expectedEnqueueRate = line.enqueue.jobsPerSec;
            } catch (error) {
              failed = true;
              emit({ peer, scenario, deliver, run, error: error instanceof Error ? (error.stack ?? error.message) : String(error) });
            }
          }
        }
      }
    }
  } finally {
    log(`stopping redis-server (pid ${redis.pid})`);
    await stopEverything();
  }
  const report = peersReport(lines);
  writeFileSync(join(RESULTS, "peers-latest.md"), report);
  process.stderr.write(`\n${report}`);
  process.exitCode = failed ? 1 : 0;
}

try {
  await main();
} catch (error) {
  console.error(`bench:peers: ${error instanceof Error ? error.message : String(error)}`);
  process.exitCode = 1;
}
