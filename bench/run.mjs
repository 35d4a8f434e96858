// `npm run bench`: the scheduler on the real local stack (wrangler dev, local tracing off) against a
// loopback webhook target. Prints one JSON object per scenario (one line each) and writes them all
// to bench/results/latest.json. Parameters by env var (scripts/lib/env.mjs reads them); see
// bench/README.md.
import { spawn } from "node:child_process";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { cpus } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { effectiveConfig } from "../scripts/config.mjs";
import { envBool, envList, envNumber, envString, parseNumber, settingOverrides } from "../scripts/lib/env.mjs";
import { fireShape } from "./lib/shape.mjs";
import { codeIdentity, snapshot, sourceHash } from "./lib/snapshot.mjs";
import { credentials, killAllStacks, useCodeRoot } from "./lib/stack.mjs";
import { DEFAULT_ENQUEUE_RATE } from "./lib/workload.mjs";
import { burst } from "./scenarios/burst.mjs";
import { crash } from "./scenarios/crash.mjs";
import { delayed } from "./scenarios/delayed.mjs";
import { handler } from "./scenarios/handler.mjs";
import { MIXED_VARIANTS, mixed } from "./scenarios/mixed.mjs";
import { noisyNeighbour } from "./scenarios/noisy-neighbour.mjs";
import { shards } from "./scenarios/shards.mjs";
import { steady } from "./scenarios/steady.mjs";

const HERE = dirname(fileURLToPath(import.meta.url));

// stdout carries only the result lines: the scenarios run in a child process whose own stdout
// (wrangler's migration tables, which scripts/local-env.mjs prints to the inherited stdout) goes
// to stderr, and which sends each result line over IPC.
if (process.env.BENCH_CHILD !== "1") {
  const child = spawn(process.execPath, [fileURLToPath(import.meta.url)], {
    stdio: ["ignore", 2, 2, "ipc"],
    env: { ...process.env, BENCH_CHILD: "1" },
  });
  child.on("message", (line) => process.stdout.write(`${line}\n`));
  for (const signal of ["SIGINT", "SIGTERM"]) process.on(signal, () => child.kill(signal));
  child.on("exit", (code, signal) => process.exit(code ?? (signal ? 130 : 1)));
} else {
  await main();
}

async function main() {
  const ROOT = join(HERE, "..");
  const RESULTS = join(HERE, "results");

  /** a list of names from `known` (env var `name`); an unknown one stops the bench, naming the known ones */
  const namesOf = (name, known, noun) =>
    envList(name, known, {
      item: (s) => {
        if (!known.includes(s)) throw new Error(`${name}: unknown ${noun} "${s}" (${noun}s: ${known.join(", ")})`);
        return s;
      },
    });
  const SCENARIOS = ["delayed", "burst", "crash", "steady", "mixed", "noisy-neighbour", "handler", "shards"];
  // shards runs when asked (BENCH_SCENARIOS=shards): it measures storage and lists, not delivery
  const scenarios = envList(
    "BENCH_SCENARIOS",
    SCENARIOS.filter((s) => s !== "shards"),
    {
      item: (s) => {
        if (!SCENARIOS.includes(s)) throw new Error(`BENCH_SCENARIOS: unknown scenario "${s}" (scenarios: ${SCENARIOS.join(", ")})`);
        return s;
      },
    },
  );
  const count = (name, fallback) => envNumber(name, fallback, { integer: true });
  const n = count("BENCH_N", 20_000);
  const drainTimeoutMs = envNumber("BENCH_DRAIN_TIMEOUT_S", 60) * 1000;
  const burstEnqueueRate = envNumber("BENCH_BURST_ENQUEUE_RATE", null, { min: 1 });
  const params = {
    delayed: { n, drainTimeoutMs, sample: count("BENCH_STAGE_SAMPLE", 100) },
    burst: { n, drainTimeoutMs, expectedEnqueueRate: burstEnqueueRate ?? DEFAULT_ENQUEUE_RATE, sample: count("BENCH_STAGE_SAMPLE", 100) },
    crash: {
      n: count("BENCH_CRASH_N", 1000),
      handlerMs: envNumber("BENCH_CRASH_HANDLER_MS", 2000),
      killWaitMs: envNumber("BENCH_CRASH_KILL_WAIT_S", 300) * 1000,
      timeoutMs: envNumber("BENCH_CRASH_TIMEOUT_S", 600) * 1000,
    },
    steady: {
      rates: envList("BENCH_STEADY_RATES", [250, 500, 1000, 2000], { item: (r) => parseNumber("BENCH_STEADY_RATES", r, { min: 1 }) }).sort(
        (a, b) => a - b,
      ),
      seconds: envNumber("BENCH_STEADY_SECONDS", 60),
      drainTimeoutMs,
    },
    mixed: {
      variants: namesOf("BENCH_MIXED_VARIANTS", MIXED_VARIANTS, "variant"),
      rate: envNumber("BENCH_MIXED_RATE", 500, { min: 1 }),
      seconds: envNumber("BENCH_MIXED_SECONDS", 60),
      slowMs: envNumber("BENCH_MIXED_SLOW_MS", 5000),
      // the slow jobs' timeoutMs: the API takes 1000..840000 (LIMITS.timeoutMs in src/core/job.ts)
      slowTimeoutMs: envNumber("BENCH_MIXED_TIMEOUT_MS", 15_000, { integer: true, min: 1000, max: 840_000 }),
      drainTimeoutMs,
    },
    handler: { n: count("BENCH_HANDLER_N", 2000), drainTimeoutMs },
    shards: { n: count("BENCH_SHARDS_N", 200_000), shards: count("BENCH_SHARDS_COUNT", 4), pageLimit: count("BENCH_SHARDS_PAGE", 200) },
    "noisy-neighbour": {
      backlog: count("BENCH_NOISY_BACKLOG", 100_000),
      smallRate: envNumber("BENCH_NOISY_SMALL_RATE", 20, { min: 1 }),
      smallSeconds: envNumber("BENCH_NOISY_SMALL_SECONDS", 60),
      expectedEnqueueRate: burstEnqueueRate ?? DEFAULT_ENQUEUE_RATE,
      // the backlog drains at the local runtime's pace (hundreds per second): minutes, not the default minute
      drainTimeoutMs: envNumber("BENCH_NOISY_DRAIN_TIMEOUT_S", 900) * 1000,
    },
  };
  if (params.mixed.slowMs >= params.mixed.slowTimeoutMs)
    throw new Error("BENCH_MIXED_SLOW_MS must be below BENCH_MIXED_TIMEOUT_MS (the slow target answers before the job's timeout)");

  const wranglerVersion = JSON.parse(readFileSync(join(ROOT, "node_modules", "wrangler", "package.json"), "utf8")).version;
  const machine = { cpus: cpus().length, cpuModel: cpus()[0]?.model, node: process.version, wrangler: wranglerVersion };
  // BENCH_CODE_ROOT: profile another copy of the project (e.g. one with timing logs added)
  const codeRootAsked = envString("BENCH_CODE_ROOT", undefined);
  const sourceRoot = codeRootAsked ?? ROOT;
  const frozen = envBool("BENCH_SNAPSHOT", true) ? snapshot(sourceRoot) : null;
  const codeRoot = frozen ? frozen.root : sourceRoot;
  useCodeRoot(codeRoot);
  const code = {
    ...codeIdentity(sourceRoot),
    sourceHash: sourceHash(codeRoot),
    snapshot: frozen !== null,
    ...(codeRootAsked ? { root: sourceRoot } : {}),
  };
  // the settings in effect, as `npm run config` computes them for a stack of the code that runs:
  // src/config.ts defaults, wrangler.toml [vars], the local profile, the run's vars and its
  // SCHEDULER_<NAME> overrides (bad names or values stop the bench here, before any stack)
  const overrides = settingOverrides({ legacy: ["BENCH_VAR_"] });
  let settings;
  try {
    ({ settings } = await effectiveConfig({ root: codeRoot, place: "stack", vars: credentials().vars, overrides }));
  } catch (error) {
    frozen?.remove();
    throw error;
  }
  const shape = await fireShape(codeRoot, settings);
  const ctx = { resultsDir: RESULTS, settings, overrides, quietWaitMs: envNumber("BENCH_QUIET_WAIT_S", 120) * 1000 };

  // Ctrl-C or a kill: take down every stack this bench started (their own process groups) first
  for (const signal of ["SIGINT", "SIGTERM"]) {
    process.on(signal, () => {
      killAllStacks();
      frozen?.remove();
      process.exit(130);
    });
  }

  mkdirSync(RESULTS, { recursive: true });
  const results = [];
  const sent = [];
  const emit = (result) => {
    const line = { ...result, shape, code, machine, at: new Date().toISOString() };
    results.push(line);
    sent.push(new Promise((resolve) => process.send(JSON.stringify(line), () => resolve())));
    writeFileSync(join(RESULTS, "latest.json"), `${JSON.stringify(results, null, 2)}\n`);
  };

  async function runScenario(name) {
    if (name === "delayed") {
      const r = await delayed(params.delayed, ctx);
      emit(r);
      // the burst's due time leaves room for an enqueue at the rate just measured
      if (r.enqueue.jobsPerSec && burstEnqueueRate === null) params.burst.expectedEnqueueRate = r.enqueue.jobsPerSec;
    } else if (name === "burst") emit(await burst(params.burst, ctx));
    else if (name === "crash") emit(await crash(params.crash, ctx));
    else if (name === "steady") emit(await steady(params.steady, ctx, emit));
    else if (name === "mixed") emit(await mixed(params.mixed, ctx, emit));
    else if (name === "noisy-neighbour") emit(await noisyNeighbour(params["noisy-neighbour"], ctx));
    else if (name === "handler") emit(await handler(params.handler, ctx));
    else if (name === "shards") emit(await shards(params.shards, ctx));
  }

  let failed = false;
  try {
    for (const name of scenarios) {
      try {
        await runScenario(name);
      } catch (error) {
        failed = true;
        emit({ scenario: name, error: error instanceof Error ? (error.stack ?? error.message) : String(error) });
      }
    }
  } finally {
    frozen?.remove();
  }
  await Promise.all(sent);
  process.exitCode = failed ? 1 : 0;
  process.disconnect();
}
