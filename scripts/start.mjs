// `npm start`: the scheduler on http://127.0.0.1:$PORT (default 8787) with local D1, Durable
// Objects, Queues and cron, state persisted under .wrangler/state, and beside it the example
// handler Worker (examples/handler), bound as EXAMPLE_HANDLER: jobs may target {"worker": "example"}.
// wrangler dev never fires cron triggers by itself: once the server answers, scripts/lib/cron.mjs
// fires wrangler.toml's [triggers] crons at it as production does (the scan every minute).
import { spawn } from "node:child_process";
import { join } from "node:path";
import { cadenceOf, readCrons, startCron } from "./lib/cron.mjs";
import { applyMigrations, ensureDevVars, LOCAL_RUNTIME_ENV, ROOT, WRANGLER, writeLocalConfig } from "./local-env.mjs";

const port = process.env.PORT ?? "8787";
const url = `http://127.0.0.1:${port}`;
const crons = readCrons(join(ROOT, "wrangler.toml"));
const persistTo = join(ROOT, ".wrangler", "state");
const vars = ensureDevVars();
const configs = writeLocalConfig();
applyMigrations(persistTo);

const key = (vars.API_KEYS ?? "").split(",")[0]?.split(":")[1] ?? "";
console.log(`\nScheduler: ${url}`);
console.log(`API key (tenant "local") is in .dev.vars, API_KEYS: export KEY=${key}`);
if (crons.length > 0) {
  const schedules = crons.map((cron) => `"${cron}" ${cadenceOf(cron)}`).join(", ");
  console.log(`Cron (wrangler.toml): fired here ${schedules} (UTC), as in production, so the scanner runs locally too`);
}
console.log("");

const child = spawn(
  process.execPath,
  [
    WRANGLER,
    "dev",
    ...configs,
    "--ip",
    "127.0.0.1",
    "--port",
    port,
    "--persist-to",
    persistTo,
    "--test-scheduled",
    "--show-interactive-dev-session=false",
  ],
  { cwd: ROOT, stdio: "inherit", env: { ...process.env, ...LOCAL_RUNTIME_ENV } },
);
let exited = false;
/** @type {ReturnType<typeof startCron> | null} */
let cron = null;
for (const signal of ["SIGINT", "SIGTERM"]) process.on(signal, () => child.kill(signal));
child.on("exit", (code) => {
  exited = true;
  cron?.stop();
  process.exit(code ?? 0);
});

// the cron starts once the server answers, so its first run does not race wrangler's start
if (crons.length > 0) {
  for (;;) {
    if (exited) break;
    const up = await fetch(`${url}/healthz`, { signal: AbortSignal.timeout(5000) }).then(
      (res) => res.ok,
      () => false,
    );
    if (up) {
      cron = startCron({ url, crons });
      break;
    }
    await new Promise((resolve) => setTimeout(resolve, 500));
  }
}
