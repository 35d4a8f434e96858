// One scenario's world: a loopback target, a fresh stack on a fresh state directory, an API client
// and a sampler of the runtime's processes. Everything is torn down in finally blocks.
import { loadavg } from "node:os";
import { join } from "node:path";
import { Api, schedulerFigures } from "./api.mjs";
import { GroupSampler, waitForQuiet } from "./procstat.mjs";
import { credentials, launch, removeState } from "./stack.mjs";
import { Target } from "./target.mjs";

/**
 * Runs `body({ target, stack, api, sampler, creds, restart })` and always stops the stack(s),
 * closes the target and removes the temporary state. `options.overrides`: the run's settings
 * (SCHEDULER_<NAME>), passed to every stack; `options.shards`: D1 shards (default the local
 * profile's); `options.targetDelayMs`:
 * how long the target takes to answer (see Target); `options.otherTenants`: more tenants, whose
 * clients `apiOf(name)` returns (the body's `api` is tenant "bench").
 */
export async function withSession(name, options, body) {
  const logDir = join(options.resultsDir, "logs");
  const target = await new Target({ delayMs: options.targetDelayMs ?? 0 }).listen();
  const creds = credentials(options.overrides, options.otherTenants ?? []);
  const sampler = new GroupSampler(500);
  const launched = [];
  const quiet = await waitForQuiet(options.quietWaitMs ?? 0);
  const loadAvgAtStart = loadavg().map((x) => Math.round(x * 100) / 100);
  let persistTo;
  try {
    const first = await launch({ name, creds, logDir, shards: options.shards });
    launched.push(first);
    persistTo = first.stack.persistTo;
    sampler.addGroup(first.stack.pid);
    sampler.start();
    const api = new Api(first.stack.url, creds.apiKey);
    const others = Object.entries(creds.keys).map(([name, key]) => [name, new Api(first.stack.url, key)]);
    const apiOf = (name) => {
      const found = others.find(([n]) => n === name);
      if (!found) throw new Error(`no tenant "${name}" in this session`);
      return found[1];
    };
    let current = first;
    /** a restart on the same state directory (the crash scenario) */
    const restart = async () => {
      const next = await launch({ name: `${name}-restart`, creds, persistTo, logDir, shards: options.shards });
      launched.push(next);
      current = next;
      sampler.addGroup(next.stack.pid);
      api.use(next.stack.url);
      for (const [, other] of others) other.use(next.stack.url);
      return next;
    };
    /** false once the current stack's process group is gone (a wait then stops early) */
    const alive = () => !current.stack.exited();
    return await body({
      quiet,
      loadAvgAtStart,
      target,
      first,
      api,
      apiOf,
      sampler,
      creds,
      restart,
      alive,
      schedulerFigures: () => schedulerFigures(api, options.settings),
    });
  } finally {
    sampler.stop();
    for (const l of launched) {
      try {
        await l.close();
      } catch (error) {
        console.error(`stopping ${name} failed`, error);
      }
    }
    await target.close();
    removeState(persistTo);
  }
}
