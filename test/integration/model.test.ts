/**
 * Promises that hold under every interleaving (issue 24): a model-based test of the whole
 * lifecycle. fast-check generates sequences of what users and the platform do (model/model.ts):
 * creates (one-off near and far, recurring, batch, idempotency keys), PATCH of run time and
 * schedule back and forth, cancel, pause, resume, redrive, bulk actions, targets answering
 * 2xx/4xx/5xx, 429/503 with any Retry-After, or hanging, pull workers leasing, heartbeating,
 * completing late or never, flow-control keys paused and resumed, and the failures: a bucket
 * restart, a bucket RPC that throws before it runs or after (its answer lost), D1 down, a lost or
 * duplicated queue message, alarms that run late, two requests at once. It runs them against the
 * real system in workerd (model/world.ts), checks the model's promises after every step, then
 * heals every fault, moves the clock past every due time and checks that nothing is stuck,
 * everything ran on time, and the metrics count what happened (model/run.ts).
 *
 * Runs: MODEL_RUNS sequences of up to MODEL_COMMANDS commands (defaults below), from MODEL_SEED;
 * `npm run model -- --runs 500` for a long run. A failure prints the seed, the shrunk command
 * sequence and its replay path; each defect it found is kept as a regular test in
 * interleavings.test.ts.
 */
import { env } from "cloudflare:workers";
import fc from "fast-check";
import { describe, it } from "vitest";
import { captureFireGroupsForFile, fileClock } from "./helpers";
import { commandsArb } from "./model/model";
import { PHASE_PERIOD_MS, runSequence } from "./model/run";
import { installHarness } from "./model/world";

const viteEnv = ((import.meta as unknown as { env?: Record<string, string | undefined> }).env ?? {}) as Record<string, string | undefined>;
const bound = env as unknown as Record<string, unknown>;
function setting(name: string, fallback: number): number {
  const raw = viteEnv[`VITE_${name}`] ?? (typeof bound[name] === "string" && bound[name] !== "" ? (bound[name] as string) : undefined);
  const n = raw === undefined ? fallback : Number(raw);
  if (!Number.isSafeInteger(n) || n < 0) throw new Error(`${name} must be a non-negative integer, got ${raw}`);
  return n;
}
const SEED = setting("MODEL_SEED", 20_261_201);
const RUNS = setting("MODEL_RUNS", 25);
const MAX_COMMANDS = setting("MODEL_COMMANDS", 40);
const VERBOSE = setting("MODEL_VERBOSE", 0) > 0;
const TRACE = setting("MODEL_VERBOSE", 0) > 1;

// the clock starts a year ahead, so no alarm the objects arm ever fires by itself: the harness runs them
const clock = fileClock(365 * 86_400_000);
const sent = captureFireGroupsForFile();
installHarness(clock, sent);

describe(`model-based: the lifecycle under every interleaving (MODEL_SEED=${SEED}, MODEL_RUNS=${RUNS})`, () => {
  it(
    "keeps every promise of the README through random sequences of changes, target answers and platform failures",
    async () => {
      const tally = { runs: 0, jobs: 0, requests: 0, pulls: 0, steps: 0, restarts: 0, commands: {} as Record<string, number> };
      const started = performance.now();
      // the phase: where in the schedules' period the run starts (the counterexample prints it first)
      const phaseArb = fc.integer({ min: 0, max: PHASE_PERIOD_MS - 1 });
      const property = fc.asyncProperty(phaseArb, commandsArb(MAX_COMMANDS), async (phaseMs, commands) => {
        const { model, world } = await runSequence(commands, { phaseMs, verbose: VERBOSE, trace: TRACE });
        tally.runs += 1;
        tally.jobs += model.jobs.length;
        tally.requests += world.requests.length;
        tally.pulls += model.pullStarts.length;
        tally.steps += model.steps.length;
        tally.restarts += world.restarts;
        for (const step of model.steps) {
          const name = step.slice(0, step.indexOf("("));
          tally.commands[name] = (tally.commands[name] ?? 0) + 1;
        }
      });
      await fc.assert(property, { seed: SEED, numRuns: RUNS });
      const seconds = Math.round((performance.now() - started) / 1000);
      console.log(
        `model: ${tally.runs} sequences ran clean in ${seconds} s (MODEL_SEED=${SEED}, up to ${MAX_COMMANDS} commands): ${JSON.stringify(tally)}`,
      );
    },
    // a sequence takes a few seconds alone; on a loaded 2-core machine (the whole suite at once) several times that
    Math.max(1_200_000, RUNS * 40_000),
  );
});
