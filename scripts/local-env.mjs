// Shared by `npm start`, the end-to-end tests and the benchmark: local state, .dev.vars, migrations.
import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { existsSync, readdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { stripVTControlCharacters } from "node:util";

export const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..");
export const WRANGLER = join(ROOT, "node_modules", "wrangler", "bin", "wrangler.js");

/**
 * Environment for the local runtime. X_LOCAL_OBSERVABILITY=false turns off wrangler's local
 * per-invocation tracing (on by default since wrangler 4.114; it costs several times the CPU);
 * the cf-object fetch needs the internet, which a local stack does not have.
 */
export const LOCAL_RUNTIME_ENV = {
  X_LOCAL_OBSERVABILITY: "false",
  CLOUDFLARE_CF_FETCH_ENABLED: "false",
  WRANGLER_SEND_METRICS: "false",
};

/** Creates .dev.vars from .dev.vars.example with a fresh API key and secret when it is missing. */
export function ensureDevVars(path = join(ROOT, ".dev.vars")) {
  if (!existsSync(path)) {
    const text = readFileSync(join(ROOT, ".dev.vars.example"), "utf8")
      .replace("__RANDOM_API_KEY__", randomBytes(24).toString("base64url"))
      .replace("__RANDOM_SECRET__", randomBytes(32).toString("base64"));
    writeFileSync(path, text, { mode: 0o600 });
  }
  return parseDevVars(readFileSync(path, "utf8"));
}

export function parseDevVars(text) {
  const vars = {};
  for (const line of text.split("\n")) {
    const m = /^\s*([A-Z0-9_]+)\s*=\s*"?(.*?)"?\s*$/.exec(line);
    if (m) vars[m[1]] = m[2];
  }
  return vars;
}

/**
 * The local profile: the non-secret settings of .dev.vars.example (e.g. BUCKETS), which end-to-end
 * tests, the bench and the soak apply too, so they run the scheduler as `npm start` does (each run
 * brings its own credentials).
 */
export function localProfile() {
  const vars = parseDevVars(readFileSync(join(ROOT, ".dev.vars.example"), "utf8"));
  for (const secret of ["API_KEYS", "WEBHOOK_SECRET", "WEBHOOK_SECRETS"]) delete vars[secret]; // SECRET_SETTINGS in src/config.ts
  return vars;
}

/**
 * D1 shards of every local stack (src/db/shards.ts): two, so every path that spans shards (lists,
 * the sync pass, the flush, idempotency keys) runs every day, not only in a deployment that grew.
 */
export const LOCAL_SHARDS = 2;

/** The binding names of the local shards: DB, DB_1, ... */
export function shardBindings(count = LOCAL_SHARDS) {
  return Array.from({ length: count }, (_, i) => (i === 0 ? "DB" : `DB_${i}`));
}

/**
 * `wrangler.toml`'s text with exactly `shards` D1 shards: its own `DB` (shard 0) kept, its other
 * shards' blocks (DB_1, ...) replaced by local databases of their own. The local stack and the
 * integration tests run a shard count of their own, whatever a deployment binds.
 */
export function withShards(wranglerText, shards) {
  const blocks = wranglerText.split(/^(?=\[)/m);
  const isOtherShard = (block) => block.startsWith("[[d1_databases]]") && /^\s*binding\s*=\s*"DB_\d+"/m.test(block);
  const kept = blocks.filter((block) => !isOtherShard(block)).join("");
  const local = shardBindings(shards)
    .slice(1)
    .map(
      (binding, i) => `
[[d1_databases]]
binding = "${binding}"
database_name = "scheduler-${i + 1}"
database_id = "00000000-0000-0000-0000-${String(i + 1).padStart(12, "0")}"
migrations_dir = "migrations"
`,
    )
    .join("");
  return `${kept.trimEnd()}\n${local}`;
}

/** The entry every local run runs: src/index.ts under the local profile (src/platform/local-worker.ts). */
export const LOCAL_MAIN = "src/platform/local-worker.ts";

/**
 * Compatibility flags only a local run has: AsyncLocalStorage, with which the local profile follows
 * each invocation (src/platform/profile.ts), and queue_consumer_no_wait_for_wait_until, with which the
 * profile answers the local queue while a consumer's handler runs on: the local queue runs one batch
 * at a time, production up to max_concurrency (src/platform/local-worker.ts). The Worker's own code
 * never leaves work in a queue consumer's waitUntil.
 */
export const LOCAL_COMPATIBILITY_FLAGS = ["nodejs_als", "queue_consumer_no_wait_for_wait_until"];

/**
 * `wrangler.toml`'s text as a local run runs it: its `main` the local profile's entry, and the local
 * compatibility flags added to its own.
 */
export function asLocalRun(wranglerText) {
  const main = /^main\s*=\s*"[^"]*"/m;
  const flags = /^compatibility_flags\s*=\s*\[([^\]]*)\]/m;
  if (!main.test(wranglerText)) throw new Error('wrangler.toml has no main = "..." line for the local profile to replace');
  let text = wranglerText.replace(main, `main = "${LOCAL_MAIN}"`);
  const own = flags.exec(text);
  const merged = [...new Set([...(own ? [...own[1].matchAll(/"([^"]+)"/g)].map((m) => m[1]) : []), ...LOCAL_COMPATIBILITY_FLAGS])];
  const line = `compatibility_flags = [${merged.map((f) => `"${f}"`).join(", ")}]`;
  text = own ? text.replace(flags, line) : text.replace(/^(compatibility_date\s*=.*)$/m, `$1\n${line}`);
  return text;
}

/** The local config of a stack with `shards` D1 shards (the usual one for LOCAL_SHARDS). */
export function localConfigPath(shards = LOCAL_SHARDS) {
  return shards === LOCAL_SHARDS ? LOCAL_CONFIG : join(ROOT, `.wrangler-local-${shards}.toml`);
}

/** The command that applies D1 migrations to one local shard under `persistTo` (the local config names them all). */
export function migrationsCommand(binding, persistTo, shards = LOCAL_SHARDS) {
  return [WRANGLER, "d1", "migrations", "apply", binding, "--local", "-c", localConfigPath(shards), "--persist-to", persistTo];
}

/** how much of a failed migration's output its error message quotes */
const MIGRATION_TAIL_CHARS = 2000;

/**
 * @typedef {{ binding: string, applied: string[] | null }} ShardMigrations
 *   applied: the migrations this run applied, in order ([] when the shard was up to date; null when
 *   wrangler's output said neither, which a changed wrangler could do)
 */

/**
 * Applies the D1 migrations to one local shard under `persistTo` (`shards`: the stack's shard count,
 * whose local config names the shard) and answers what it applied. wrangler's output (a table of
 * every migration for each one it runs: about 300 lines for a new database) goes to `log` only. A
 * failure rejects with an Error quoting the output's end, its whole output in `error.output`.
 * @param {string} binding
 * @param {string} persistTo
 * @param {{ shards?: number, log?: (text: string) => void }} [options]
 * @returns {Promise<ShardMigrations>}
 */
export function applyShardMigrations(binding, persistTo, { shards = LOCAL_SHARDS, log = () => {} } = {}) {
  const child = spawn(process.execPath, migrationsCommand(binding, persistTo, shards), {
    cwd: ROOT,
    stdio: ["ignore", "pipe", "pipe"],
    env: { ...process.env, ...LOCAL_RUNTIME_ENV, CI: "true" },
  });
  let output = "";
  const take = (data) => {
    output += String(data);
    log(String(data));
  };
  child.stdout.setEncoding("utf8").on("data", take);
  child.stderr.setEncoding("utf8").on("data", take);
  return new Promise((resolve, reject) => {
    child.on("error", reject);
    child.on("close", (code, signal) => {
      if (code === 0) return resolve({ binding, applied: migrationsApplied(output) });
      const error = new Error(
        `wrangler d1 migrations apply ${binding} failed (${signal ?? `exit ${code}`}); its last output:\n${output.slice(-MIGRATION_TAIL_CHARS)}`,
      );
      reject(Object.assign(error, { output }));
    });
  });
}

/**
 * Applies the D1 migrations to every local shard under `persistTo`, one after the other (the local
 * config written first), and answers what each applied; as applyShardMigrations says.
 * @param {string} persistTo
 * @param {{ shards?: number, log?: (text: string) => void }} [options]
 * @returns {Promise<ShardMigrations[]>}
 */
export async function applyMigrations(persistTo, { shards = LOCAL_SHARDS, log = () => {} } = {}) {
  writeLocalConfig({ shards });
  const results = [];
  for (const binding of shardBindings(shards)) results.push(await applyShardMigrations(binding, persistTo, { shards, log }));
  return results;
}

/**
 * The migrations one run of `wrangler d1 migrations apply` applied, read from its output: the
 * names its tables list ("Migrations to be applied", then one status table per migration run), or
 * none when it said "No migrations to apply!"; null when it says neither.
 * @param {string} output
 * @returns {string[] | null}
 */
export function migrationsApplied(output) {
  const text = stripVTControlCharacters(output); // colours, when wrangler thinks it may
  if (/No migrations to apply/.test(text)) return [];
  const names = [...text.matchAll(/│\s*([^\s│]+\.sql)\s*│/g)].map((m) => m[1]);
  return names.length > 0 ? [...new Set(names)] : null;
}

/** The D1 migrations in migrations/, in the order they apply. */
export function migrationFiles() {
  return readdirSync(join(ROOT, "migrations"))
    .filter((name) => name.endsWith(".sql"))
    .sort();
}

/**
 * One line for a person about a shard's migrations: "DB: 10 migrations applied (0001_init.sql …
 * 0010_callbacks.sql)", "DB_1: up to date (10 migrations)".
 * @param {ShardMigrations} result
 * @param {number} [known] how many migrations migrations/ holds
 */
export function describeMigrations({ binding, applied }, known = migrationFiles().length) {
  if (applied === null) return `${binding}: migrations applied (wrangler's output did not say which)`;
  if (applied.length === 0) return `${binding}: up to date (${known} migration${known === 1 ? "" : "s"})`;
  const which = applied.length === 1 ? applied[0] : `${applied[0]} … ${applied.at(-1)}`;
  return `${binding}: ${applied.length} migration${applied.length === 1 ? "" : "s"} applied (${which})`;
}

/** The example handler Worker (examples/handler), which every local stack runs beside the scheduler. */
export const EXAMPLE_HANDLER_CONFIG = join(ROOT, "examples", "handler", "wrangler.toml");

/** The scheduler's local config, written by writeLocalConfig (git-ignored). */
export const LOCAL_CONFIG = join(ROOT, ".wrangler-local.toml");

/**
 * The local stack's fire consumers take batches of this many messages (groups of FIRE_GROUP_SIZE,
 * 10 in .dev.vars.example), not production's one: the local runtime has no limit of 6 open
 * connections per invocation, and fewer, larger consumer invocations are most of its floor
 * (npm run bench:floor). 10 × 10: a batch of 100 groups (1,000 executions) held the flow-control
 * permits of the leases waiting for a lane and sent a fifth of a burst back to its buckets, and
 * cost more CPU per delivery than 10 × 10 (npm run bench, burst of 5,000). docs/guarantees.md "Delivery groups".
 */
export const LOCAL_FIRE_BATCH = 10;

/** `text` (wrangler.toml) with every fire queue consumer's max_batch_size set to LOCAL_FIRE_BATCH. */
export function withLocalFireBatches(text) {
  return text.replace(
    /(\[\[queues\.consumers\]\]\nqueue = "fire(?:-\d+)?"\n)max_batch_size = [^\n]*/g,
    (_block, head) => `${head}max_batch_size = ${LOCAL_FIRE_BATCH}  # the local profile (scripts/local-env.mjs LOCAL_FIRE_BATCH)`,
  );
}

/** What the local stack adds to HANDLER_WORKERS: the example handler, as "example", for every tenant. */
const EXAMPLE_GRANT = { example: { binding: "EXAMPLE_HANDLER", tenants: ["*"] } };

/**
 * Writes LOCAL_CONFIG: wrangler.toml plus what only a local stack has, a service binding
 * EXAMPLE_HANDLER to the example handler's Handler entrypoint and HANDLER_WORKERS naming it (in
 * [vars], so .dev.vars or a --var can still override it). wrangler.toml itself never binds the
 * example: a deploy would need that Worker. Returns wrangler dev's config arguments: this config
 * first (the primary: the scheduler answers on the port, its D1 is the one the migrations apply
 * to, the same database as wrangler.toml's), then the example's (`wrangler dev -c
 * .wrangler-local.toml -c examples/handler/wrangler.toml`). Written to a temporary file and
 * renamed, so stacks starting at once never read half a file.
 */
export function writeLocalConfig({ shards = LOCAL_SHARDS } = {}) {
  let text = readFileSync(join(ROOT, "wrangler.toml"), "utf8");
  // a deployment's own grants (README: HANDLER_WORKERS = '{...}', one line) are kept, the example's added
  const own = /^[ \t]*HANDLER_WORKERS[ \t]*=[ \t]*'([^'\n]*)'[ \t]*(#.*)?$/m;
  const granted = own.exec(text);
  if (!granted && /^\s*HANDLER_WORKERS\s*=/m.test(text)) {
    throw new Error(
      "wrangler.toml sets HANDLER_WORKERS in a form writeLocalConfig cannot merge: write it as HANDLER_WORKERS = '<JSON>' on one line",
    );
  }
  const setting = `HANDLER_WORKERS = '${JSON.stringify({ ...(granted ? JSON.parse(granted[1]) : {}), ...EXAMPLE_GRANT })}'`;
  // keys right after the [vars] header are its; without one, a [vars] table of our own at the end
  const varsHeader = /^\[vars\][ \t]*(#.*)?$/m;
  if (granted) text = text.replace(own, setting);
  else if (varsHeader.test(text)) text = text.replace(varsHeader, (header) => `${header}\n${setting}`);
  else text = `${text.trimEnd()}\n\n[vars]\n${setting}\n`;
  text = withShards(text, shards);
  text = withLocalFireBatches(text);
  text = asLocalRun(text);
  text = `# Generated by scripts/local-env.mjs from wrangler.toml for the local stack; edit wrangler.toml instead.
${text.trimEnd()}

# The example handler Worker, run beside the scheduler (-c examples/handler/wrangler.toml).
[[services]]
binding = "EXAMPLE_HANDLER"
service = "example-handler"
entrypoint = "Handler"
`;
  // rewritten only when it changed: a running stack's wrangler watches its config and would reload
  const path = localConfigPath(shards);
  if (!existsSync(path) || readFileSync(path, "utf8") !== text) {
    const temporary = `${path}.${process.pid}.${randomBytes(4).toString("hex")}.tmp`;
    writeFileSync(temporary, text);
    renameSync(temporary, path);
  }
  return ["-c", path, "-c", EXAMPLE_HANDLER_CONFIG];
}
