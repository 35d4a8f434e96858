// `npm run bench`: the scheduler on the real local stack (wrangler dev, local tracing off) against a
// loopback webhook target. Prints one JSON object per scenario (one line each) and writes them all
// to bench/results/latest.json. Parameters by env var; see bench/README.md.
import { spawn } from "node:child_process";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { cpus } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { codeIdentity, snapshot, sourceHash } from "./lib/snapshot.mjs";
import { killAllStacks, useCodeRoot, varOverrides } from "./lib/stack.mjs";
import { effectiveSettings } from "./lib/session.mjs";
import { burst } from "./scenarios/burst.mjs";
import { crash } from "./scenarios/crash.mjs";
import { delayed } from "./scenarios/delayed.mjs";
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

  const env = process.env;
  const int = (name, fallback) => {
    const v = env[name];
    if (v === undefined || v === "") return fallback;
    const n = Number(v);
    if (!Number.isFinite(n) || n < 0) throw new Error(`${name} must be a non-negative number, got ${v}`);
    return n;
  };

  const scenarios = (env.BENCH_SCENARIOS ?? "delayed,burst,crash,steady").split(",").map((s) => s.trim()).filter(Boolean);
  for (const s of scenarios) if (!["delayed", "burst", "crash", "steady"].includes(s)) throw new Error(`unknown scenario ${s}`);
  const n = int("BENCH_N", 20_000);
  const params = {
    delayed: { n, drainTimeoutMs: int("BENCH_DRAIN_TIMEOUT_S", 60) * 1000, sample: int("BENCH_STAGE_SAMPLE", 100) },
    burst: {
      n,
      drainTimeoutMs: int("BENCH_DRAIN_TIMEOUT_S", 60) * 1000,
      expectedEnqueueRate: int("BENCH_BURST_ENQUEUE_RATE", 4000),
      sample: int("BENCH_STAGE_SAMPLE", 100),
    },
    crash: {
      n: int("BENCH_CRASH_N", 1000),
      handlerMs: int("BENCH_CRASH_HANDLER_MS", 2000),
      killWaitMs: int("BENCH_CRASH_KILL_WAIT_S", 300) * 1000,
      timeoutMs: int("BENCH_CRASH_TIMEOUT_S", 600) * 1000,
    },
    steady: {
      rates: (env.BENCH_STEADY_RATES ?? "250,500,1000,2000").split(",").map(Number).filter((r) => r > 0).sort((a, b) => a - b),
      seconds: int("BENCH_STEADY_SECONDS", 60),
      drainTimeoutMs: int("BENCH_DRAIN_TIMEOUT_S", 60) * 1000,
    },
  };

  const wranglerVersion = JSON.parse(readFileSync(join(ROOT, "node_modules", "wrangler", "package.json"), "utf8")).version;
  const machine = { cpus: cpus().length, cpuModel: cpus()[0]?.model, node: process.version, wrangler: wranglerVersion };
  // BENCH_CODE_ROOT: profile another copy of the project (e.g. one with timing logs added)
  const sourceRoot = env.BENCH_CODE_ROOT ?? ROOT;
  const frozen = env.BENCH_SNAPSHOT === "0" ? null : snapshot(sourceRoot);
  const codeRoot = frozen ? frozen.root : sourceRoot;
  useCodeRoot(codeRoot);
  const code = { ...codeIdentity(sourceRoot), sourceHash: sourceHash(codeRoot), snapshot: frozen !== null, ...(env.BENCH_CODE_ROOT ? { root: sourceRoot } : {}) };
  // the config in effect: wrangler.toml [vars], the local profile startStack applies (the
  // non-secret settings of .dev.vars.example, when the scripts have one), then BENCH_VAR_*
  const localEnv = await import(pathToFileURL(join(codeRoot, "scripts", "local-env.mjs")).href);
  const profile = typeof localEnv.localProfile === "function" ? localEnv.localProfile() : {};
  const settings = effectiveSettings(readFileSync(join(codeRoot, "wrangler.toml"), "utf8"), { ...profile, ...varOverrides() });
  const ctx = { resultsDir: RESULTS, settings, quietWaitMs: int("BENCH_QUIET_WAIT_S", 120) * 1000 };

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
    const line = { ...result, code, machine, at: new Date().toISOString() };
    results.push(line);
    sent.push(new Promise((resolve) => process.send(JSON.stringify(line), () => resolve())));
    writeFileSync(join(RESULTS, "latest.json"), `${JSON.stringify(results, null, 2)}\n`);
  };

  async function runScenario(name) {
    if (name === "delayed") {
      const r = await delayed(params.delayed, ctx);
      emit(r);
      // the burst's due time leaves room for an enqueue at the rate just measured
      if (r.enqueue.jobsPerSec && !env.BENCH_BURST_ENQUEUE_RATE) params.burst.expectedEnqueueRate = r.enqueue.jobsPerSec;
    } else if (name === "burst") emit(await burst(params.burst, ctx));
    else if (name === "crash") emit(await crash(params.crash, ctx));
    else if (name === "steady") emit(await steady(params.steady, ctx, emit));
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
