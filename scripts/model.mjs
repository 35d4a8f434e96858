// `npm run model [-- --seed <n>] [-- --runs <n>] [-- --commands <n>] [-- --verbose]`: the
// model-based test of the whole lifecycle (test/integration/model.test.ts) with many more
// sequences than CI runs, under a random seed unless one is given (MODEL_SEED / MODEL_RUNS /
// MODEL_COMMANDS work too). Prints the seed first, so a failure can be replayed exactly:
// npm run model -- --seed <n> --runs <n>. fast-check prints the shrunk command sequence.
//
// The test reads VITE_MODEL_* (vite hands VITE_* variables to the workerd test as import.meta.env).
import { spawn } from "node:child_process";
import { randomInt } from "node:crypto";
import { join } from "node:path";
import { integerOption } from "./lib/env.mjs";
import { ROOT } from "./local-env.mjs";

const option = (name, fallback) => integerOption("MODEL", name, fallback);

const seed = option("seed", randomInt(0, 2 ** 31 - 1));
const runs = option("runs", 500);
const commands = option("commands", 40);
const verbose = process.argv.includes("--verbose") ? "1" : "0";
console.log(`model: MODEL_SEED=${seed} MODEL_RUNS=${runs} MODEL_COMMANDS=${commands}`);

const started = Date.now();
const child = spawn(
  process.execPath,
  [
    join(ROOT, "node_modules", "vitest", "vitest.mjs"),
    "run",
    "--project",
    "integration",
    "test/integration/model.test.ts",
    // each sequence takes a few seconds (and shrinking a failure many more): no fixed budget
    `--testTimeout=${Math.max(600_000, runs * 30_000)}`,
  ],
  {
    cwd: ROOT,
    stdio: "inherit",
    env: {
      ...process.env,
      VITE_MODEL_SEED: String(seed),
      VITE_MODEL_RUNS: String(runs),
      VITE_MODEL_COMMANDS: String(commands),
      VITE_MODEL_VERBOSE: verbose,
    },
  },
);
const stop = (signal) => child.kill(signal);
process.on("SIGINT", stop);
process.on("SIGTERM", stop);
child.on("exit", (code, signal) => {
  const seconds = Math.round((Date.now() - started) / 1000);
  const verdict = code === 0 ? "passed" : "FAILED";
  console.log(
    `model: ${verdict} with MODEL_SEED=${seed} MODEL_RUNS=${runs} (${seconds} s); replay: npm run model -- --seed ${seed} --runs ${runs}`,
  );
  process.exit(code ?? (signal ? 1 : 0));
});
