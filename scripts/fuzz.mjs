// `npm run fuzz [-- --seed <n>] [-- --runs <n>]`: the property-based API fuzz
// (test/integration/fuzz.test.ts) with many more cases than CI runs, under a random seed unless
// one is given (FUZZ_SEED / FUZZ_RUNS work too). Prints the seed first, so a failure can be
// replayed exactly: npm run fuzz -- --seed <n> --runs <n>.
//
// The test reads VITE_FUZZ_SEED / VITE_FUZZ_RUNS (vite hands VITE_* variables to the workerd
// test as import.meta.env); FUZZ_SEED / FUZZ_RUNS are passed as well for a vitest.config.ts that
// binds them.
import { spawn } from "node:child_process";
import { randomInt } from "node:crypto";
import { join } from "node:path";
import { integerOption } from "./lib/env.mjs";
import { ROOT } from "./local-env.mjs";

const option = (name, fallback) => integerOption("FUZZ", name, fallback);

const seed = option("seed", randomInt(0, 2 ** 31 - 1));
const runs = option("runs", 5000);
// five properties run `runs` cases each; the idempotency race runs a third as many (each case is several requests)
const cases = 5 * runs + Math.max(10, Math.floor(runs / 3));
console.log(`fuzz: FUZZ_SEED=${seed} FUZZ_RUNS=${runs} (${cases} cases over 6 properties)`);

const started = Date.now();
const child = spawn(
  process.execPath,
  [join(ROOT, "node_modules", "vitest", "vitest.mjs"), "run", "--project", "integration", "test/integration/fuzz.test.ts"],
  {
    cwd: ROOT,
    stdio: "inherit",
    env: { ...process.env, VITE_FUZZ_SEED: String(seed), VITE_FUZZ_RUNS: String(runs), FUZZ_SEED: String(seed), FUZZ_RUNS: String(runs) },
  },
);
const stop = (signal) => child.kill(signal);
process.on("SIGINT", stop);
process.on("SIGTERM", stop);
child.on("exit", (code, signal) => {
  const seconds = Math.round((Date.now() - started) / 1000);
  const verdict = code === 0 ? "passed" : "FAILED";
  console.log(
    `fuzz: ${verdict} with FUZZ_SEED=${seed} FUZZ_RUNS=${runs} (${cases} cases, ${seconds} s); replay: npm run fuzz -- --seed ${seed} --runs ${runs}`,
  );
  process.exit(code ?? (signal ? 1 : 0));
});
