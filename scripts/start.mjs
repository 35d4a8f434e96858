// `npm start`: the scheduler on http://127.0.0.1:$PORT (default 8787) with local D1, Durable
// Objects, Queues and cron, state persisted under .wrangler/state (PERSIST_TO=dir overrides), and
// beside it the example handler Worker (examples/handler), bound as EXAMPLE_HANDLER: jobs may
// target {"worker": "example"}. wrangler dev never fires cron triggers by itself: once the server
// answers, scripts/lib/cron.mjs fires wrangler.toml's [triggers] crons at it as production does
// (the scan every minute).
//
// Until the stack is ready it prints a few lines of its own (where it listens, the API key, what
// each D1 shard migrated); what wrangler prints until then (the migrations' tables, its bindings,
// twice) goes to .wrangler/start.log (beside the state), and is printed when the start fails. From "Ready on" on,
// wrangler's output (each request, the Worker's logs) passes through as it comes.
import { spawn } from "node:child_process";
import { appendFileSync, mkdirSync, writeFileSync } from "node:fs";
import { dirname, isAbsolute, join, relative, resolve } from "node:path";
import { stripVTControlCharacters } from "node:util";
import { cadenceOf, readCrons, startCron } from "./lib/cron.mjs";
import {
  applyShardMigrations,
  describeMigrations,
  ensureDevVars,
  LOCAL_RUNTIME_ENV,
  migrationFiles,
  ROOT,
  shardBindings,
  WRANGLER,
  writeLocalConfig,
} from "./local-env.mjs";

const port = process.env.PORT ?? "8787";
const url = `http://127.0.0.1:${port}`;
const crons = readCrons(join(ROOT, "wrangler.toml"));
const persistTo = process.env.PERSIST_TO ? resolve(process.env.PERSIST_TO) : join(ROOT, ".wrangler", "state");
/** beside the state: .wrangler/start.log by default */
const logPath = join(dirname(persistTo), "start.log");
/** a path as a person reads it: relative to here when it is under here */
const shown = (path) => {
  const rel = relative(process.cwd(), path);
  return rel === "" ? "." : rel.startsWith("..") || isAbsolute(rel) ? path : rel;
};
/** wrangler's own lines that must be seen even before it is ready */
const WRANGLER_PROBLEM = /\[(ERROR|WARNING)\]/;

mkdirSync(dirname(logPath), { recursive: true });
writeFileSync(logPath, "");
const log = (text) => appendFileSync(logPath, stripVTControlCharacters(text));

const vars = ensureDevVars();
const configs = writeLocalConfig();
const known = migrationFiles().length;
for (const binding of shardBindings()) {
  try {
    const result = await applyShardMigrations(binding, persistTo, { log });
    console.log(`D1 ${describeMigrations(result, known)}`);
  } catch (error) {
    // the whole output of the failed shard: wrangler's error is at its end
    console.error(error instanceof Error && "output" in error ? String(error.output) : error);
    console.error(`D1 ${binding}: the migrations failed (above; everything wrangler printed: ${shown(logPath)})`);
    process.exit(1);
  }
}

const key = (vars.API_KEYS ?? "").split(",")[0]?.split(":")[1] ?? "";
console.log(`Scheduler: ${url} (state in ${shown(persistTo)}; wrangler's start output: ${shown(logPath)})`);
console.log(`API key (tenant "local", in .dev.vars): export KEY=${key}`);
if (crons.length > 0) {
  const schedules = crons.map((cron) => `"${cron}" ${cadenceOf(cron)}`).join(", ");
  console.log(`Cron (wrangler.toml): fired here ${schedules} (UTC), as in production, so the scanner runs locally too`);
}

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
  {
    cwd: ROOT,
    stdio: ["inherit", "pipe", "pipe"],
    // piped, wrangler would drop its colours
    env: { ...process.env, ...LOCAL_RUNTIME_ENV, ...(process.stdout.isTTY && !process.env.NO_COLOR ? { FORCE_COLOR: "1" } : {}) },
  },
);

let ready = false;
let exited = false;
/** @type {ReturnType<typeof startCron> | null} */
let cron = null;
/** what wrangler printed before it was ready, printed if it exits before */
let early = "";

/** The stack answers: from now on wrangler's output shows, and the cron fires (not racing wrangler's start). */
const becomeReady = () => {
  ready = true;
  if (crons.length > 0 && !exited) cron = startCron({ url, crons });
};

/**
 * wrangler's output, a line at a time. Until it says "Ready on" it goes to the log only (its
 * warnings and errors to the terminal too); from then on it shows, except the table of bindings
 * wrangler prints again whenever the example handler connects or the config reloads (to the log).
 * @param {NodeJS.WriteStream} out
 */
const relay = (out) => {
  let partial = "";
  let inBindings = false;
  return (data) => {
    if (!ready) early += data;
    const lines = (partial + data).split("\n");
    partial = lines.pop() ?? "";
    for (const line of lines) {
      const plain = stripVTControlCharacters(line);
      if (!ready) {
        log(`${line}\n`);
        if (/Ready on /.test(plain)) {
          out.write(`${line}\n`);
          becomeReady();
        } else if (WRANGLER_PROBLEM.test(plain)) process.stderr.write(`${line}\n`);
      } else if (inBindings || / has access to the following bindings:$/.test(plain)) {
        log(`${line}\n`);
        inBindings = plain.trim() !== ""; // the table ends at a blank line
      } else out.write(`${line}\n`);
    }
  };
};
child.stdout.setEncoding("utf8").on("data", relay(process.stdout));
child.stderr.setEncoding("utf8").on("data", relay(process.stderr));

for (const signal of ["SIGINT", "SIGTERM"]) process.on(signal, () => child.kill(signal));
child.on("exit", (code, signal) => {
  exited = true;
  cron?.stop();
  if (!ready && !signal) {
    process.stderr.write(early);
    console.error(`wrangler dev exited before it was ready (exit ${code}; its output above and in ${shown(logPath)})`);
  }
  process.exit(code ?? 0);
});

// should a later wrangler stop saying "Ready on", the server answering is the sign, so its output is not held for good
setTimeout(async () => {
  while (!ready && !exited) {
    const up = await fetch(`${url}/healthz`, { signal: AbortSignal.timeout(5000) }).then(
      (res) => res.ok,
      () => false,
    );
    if (up && !ready) {
      console.log(`Ready on ${url}`);
      becomeReady();
    } else await new Promise((resolve) => setTimeout(resolve, 1000));
  }
}, 60_000).unref();
