// `npm start`: the scheduler on http://127.0.0.1:$PORT (default 8787) with local D1, Durable
// Objects, Queues and cron, state persisted under .wrangler/state, and beside it the example
// handler Worker (examples/handler), bound as EXAMPLE_HANDLER: jobs may target {"worker": "example"}.
import { spawn } from "node:child_process";
import { join } from "node:path";
import { applyMigrations, ensureDevVars, LOCAL_RUNTIME_ENV, ROOT, WRANGLER, writeLocalConfig } from "./local-env.mjs";

const port = process.env.PORT ?? "8787";
const persistTo = join(ROOT, ".wrangler", "state");
const vars = ensureDevVars();
applyMigrations(persistTo);
const configs = writeLocalConfig();

const key = (vars.API_KEYS ?? "").split(",")[0]?.split(":")[1] ?? "";
console.log(`\nScheduler: http://127.0.0.1:${port}`);
console.log(`API key (tenant "local") is in .dev.vars, API_KEYS: export KEY=${key}\n`);

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
for (const signal of ["SIGINT", "SIGTERM"]) process.on(signal, () => child.kill(signal));
child.on("exit", (code) => process.exit(code ?? 0));
