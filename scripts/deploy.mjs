// `npm run deploy`: the scheduler on a Cloudflare account, from nothing or as an upgrade, in one
// command (README "Deploying"). After `npx wrangler login` (or with CLOUDFLARE_API_TOKEN and
// CLOUDFLARE_ACCOUNT_ID in CI) it reads wrangler.toml and, each step checking before it acts:
//
//   1. D1: creates every database of [[d1_databases]] the account lacks (by database_name);
//   2. Queues: creates every queue the producers and consumers name, dead-letter queues included;
//   3. R2: creates every bucket of [[r2_buckets]] the account lacks;
//   4. applies the D1 migrations to every shard (`wrangler d1 migrations apply <binding> --remote`),
//      before any new code runs: an upgrade's schema is in place when its code starts;
//   5. secrets: on the first deploy generates WEBHOOK_SECRET (whsec_ + base64 of 32 random bytes)
//      and a first API key, puts them (`wrangler secret put`, the value on stdin) and prints the key
//      once, with how to rotate it; a secret that exists is never touched;
//   6. deploys (`wrangler deploy`), then prints the URL and a first curl.
//
// Run again it creates nothing and changes nothing that exists; interrupted, it resumes where it
// stopped (every step is a check, then what is missing). No secret is written anywhere, and the
// only one printed is the new API key, once. Everything goes through wrangler, so whatever
// wrangler is logged in with (OAuth from `wrangler login`, an API token) is what it uses.
//
// D1 ids. wrangler.toml is the deployment as committed, the same for every account, so it keeps its
// placeholder ids (00000000-…-00000000000N). The account is the one record of which database
// holds each shard: every deploy looks the databases up by database_name and writes the ids into
// a generated copy of wrangler.toml, .wrangler-deploy.toml (git-ignored, next to it so every
// relative path in it still holds, as .wrangler-local.toml does for the local stack), which the
// migrations and the deploy read (`-c`). Rewriting wrangler.toml in place would leave the working
// tree changed after every deploy, make a CI checkout (placeholders again) differ from the machine
// that deployed, and bind one checkout to one account; Cloudflare's own provisioning (wrangler
// deploy since 4.45) likewise finds resources by name and writes nothing back. An id that is not
// a placeholder (a deployment set up by hand) is used as it is, and must be in the account.
//
// Options: --dry-run (offline: `wrangler deploy --dry-run --outdir .wrangler/dry-run`, what
// `npm run deploy:check` does), --tenant <name> (the first API key's tenant; default "default").
import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdirSync, readFileSync, realpathSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { ROOT, WRANGLER } from "./local-env.mjs";

export const CONFIG = join(ROOT, "wrangler.toml");
/** wrangler.toml with this account's D1 ids: what the migrations and the deploy read (git-ignored) */
export const DEPLOY_CONFIG = join(ROOT, ".wrangler-deploy.toml");
/** where wrangler deploy writes its structured output (the URLs), read back here */
const OUTPUT_DIR = join(ROOT, ".wrangler", "deploy-output");
/** wrangler commands run at once (checks and creates); each is a Node process */
const CONCURRENCY = 3;
/** the longest one wrangler command may take before it is stopped (a deploy of a large bundle is minutes) */
const COMMAND_TIMEOUT_MS = 15 * 60_000;

/**
 * The ids wrangler.toml ships: a database still to be found or created by its name.
 * @param {string | undefined} id
 */
export function isPlaceholderId(id) {
  return id === undefined || id === "" || /^00000000-0000-0000-0000-00000000\d{4}$/.test(id);
}

/** WEBHOOK_SECRET's format: whsec_ and base64 of 32 random bytes (README "Security") */
export function newWebhookSecret() {
  return `whsec_${randomBytes(32).toString("base64")}`;
}

/** an API key as the local stack's .dev.vars gets one: 24 random bytes, base64url (no ":" or ",") */
export function newApiKey() {
  return randomBytes(24).toString("base64url");
}

/**
 * @typedef {{
 *   name: string,
 *   accountId: string | undefined,
 *   databases: { binding: string, name: string, id: string | undefined }[],
 *   queues: string[],
 *   buckets: { name: string, jurisdiction: string | undefined }[],
 * }} Plan
 */

/**
 * The resources wrangler.toml names: D1 databases, queues (producers, consumers and their
 * dead-letter queues, each once), R2 buckets, and the Worker's name.
 * @param {string} path
 * @returns {Promise<Plan>}
 */
export async function planOf(path) {
  const { unstable_readConfig } = await import("wrangler");
  const config = unstable_readConfig({ config: path }, { hideWarnings: true });
  const queues = new Set();
  for (const p of config.queues?.producers ?? []) queues.add(p.queue);
  for (const c of config.queues?.consumers ?? []) {
    queues.add(c.queue);
    if (c.dead_letter_queue) queues.add(c.dead_letter_queue);
  }
  return {
    name: config.name,
    accountId: config.account_id,
    databases: (config.d1_databases ?? []).map((d) => ({ binding: d.binding, name: d.database_name, id: d.database_id })),
    queues: [...queues],
    buckets: (config.r2_buckets ?? []).map((b) => ({ name: b.bucket_name, jurisdiction: b.jurisdiction })),
  };
}

/**
 * wrangler.toml's text with each [[d1_databases]] block's database_id set to `ids[binding]`
 * (added after the binding when the block has none); every other line as it is.
 * @param {string} text
 * @param {Record<string, string>} ids
 */
export function withDatabaseIds(text, ids) {
  const blocks = text.split(/^(?=\[)/m);
  const out = blocks.map((block) => {
    if (!/^\[\[d1_databases\]\]/.test(block)) return block;
    const binding = /^\s*binding\s*=\s*"([^"]+)"/m.exec(block)?.[1];
    const id = binding === undefined ? undefined : ids[binding];
    if (id === undefined) return block;
    const line = `database_id = "${id}"`;
    if (/^\s*database_id\s*=.*$/m.test(block)) return block.replace(/^\s*database_id\s*=.*$/m, line);
    return block.replace(/^(\s*binding\s*=.*)$/m, `$1\n${line}`);
  });
  return out.join("");
}

// ---------------------------------------------------------------------------------------------
// running wrangler

/**
 * Runs wrangler with `args` from the project root and answers its exit code and output (captured,
 * not shown, unless `show`). `input` goes to its stdin (a secret's value: never an argument, never
 * a file); without it stdin is closed, so wrangler never waits on a prompt. The child is stopped by
 * its own pid after COMMAND_TIMEOUT_MS.
 * @param {string[]} args
 * @param {{ input?: string, show?: boolean, env?: Record<string, string> }} [options]
 * @returns {Promise<{ code: number | null, out: string }>}
 */
export function wrangler(args, { input, show = false, env = {} } = {}) {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [WRANGLER, ...args], {
      cwd: ROOT,
      env: { ...process.env, ...env },
      stdio: [input === undefined ? "ignore" : "pipe", show ? "inherit" : "pipe", show ? "inherit" : "pipe"],
    });
    let out = "";
    child.stdout?.on("data", (chunk) => {
      out += chunk;
    });
    child.stderr?.on("data", (chunk) => {
      out += chunk;
    });
    if (input !== undefined) child.stdin?.end(input);
    const timer = setTimeout(() => child.kill("SIGKILL"), COMMAND_TIMEOUT_MS);
    child.on("error", (error) => {
      clearTimeout(timer);
      reject(error);
    });
    child.on("close", (code) => {
      clearTimeout(timer);
      resolve({ code, out });
    });
  });
}

/** wrangler's answer, or an error carrying its output */
async function must(args, options) {
  const run = await wrangler(args, options);
  if (run.code !== 0) throw new Error(`\`wrangler ${args.join(" ")}\` failed (exit ${run.code}):\n${indent(run.out)}`);
  return run.out;
}

/** the JSON value wrangler printed (it may print other lines around it) */
function jsonOf(out, open) {
  const start = out.indexOf(open);
  const end = out.lastIndexOf(open === "[" ? "]" : "}");
  if (start < 0 || end < start) throw new Error(`wrangler printed no JSON:\n${indent(out)}`);
  return JSON.parse(out.slice(start, end + 1));
}

/** `fn` over `items`, at most CONCURRENCY at once, results in order */
async function pool(items, fn) {
  const results = new Array(items.length);
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const i = next++;
      results[i] = await fn(items[i], i);
    }
  };
  await Promise.all(Array.from({ length: Math.min(CONCURRENCY, items.length) }, worker));
  return results;
}

const indent = (text) =>
  text
    .trim()
    .split("\n")
    .map((line) => `    ${line}`)
    .join("\n");

// ---------------------------------------------------------------------------------------------
// the steps

/** wrangler.toml's account_id (which wrangler itself prefers), CLOUDFLARE_ACCOUNT_ID, or the one account wrangler is logged in to */
async function account(plan) {
  if (plan.accountId) return plan.accountId;
  if (process.env.CLOUDFLARE_ACCOUNT_ID) return process.env.CLOUDFLARE_ACCOUNT_ID;
  const run = await wrangler(["whoami", "--json"]);
  if (run.code !== 0) {
    throw new Error(
      `\`wrangler whoami\` failed: not logged in, offline, or a token that cannot read its memberships. Run \`npx wrangler login\` (or set CLOUDFLARE_API_TOKEN and CLOUDFLARE_ACCOUNT_ID), then \`npm run deploy\`. wrangler said:\n${indent(run.out)}`,
    );
  }
  const accounts = jsonOf(run.out, "{").accounts ?? [];
  if (accounts.length === 1) return accounts[0].id;
  const listed = accounts.map((a) => `  ${a.id}  ${a.name}`).join("\n");
  throw new Error(`wrangler can reach ${accounts.length} accounts; set CLOUDFLARE_ACCOUNT_ID to the one to deploy to:\n${listed}`);
}

/** every D1 database of the plan, created when missing; answers binding -> id */
async function databases(plan) {
  const list = async () => jsonOf(await must(["d1", "list", "--json"]), "[");
  let existing = await list();
  const missing = plan.databases.filter((d) => isPlaceholderId(d.id) && !existing.some((e) => e.name === d.name));
  await pool(missing, async (d) => {
    await must(["d1", "create", d.name, "--update-config=false"]);
    console.log(`  created D1 database ${d.name}`);
  });
  if (missing.length > 0) existing = await list();
  /** @type {Record<string, string>} */
  const ids = {};
  for (const d of plan.databases) {
    if (isPlaceholderId(d.id)) {
      const found = existing.find((e) => e.name === d.name);
      if (!found) throw new Error(`D1 database ${d.name} was created but the account does not list it yet; run npm run deploy again`);
      ids[d.binding] = found.uuid;
      if (!missing.includes(d)) console.log(`  D1 database ${d.name} (${d.binding}) exists`);
    } else {
      if (!existing.some((e) => e.uuid === d.id)) {
        throw new Error(`wrangler.toml binds ${d.binding} to D1 database id ${d.id}, which this account does not have`);
      }
      ids[d.binding] = d.id;
      console.log(`  D1 database ${d.name} (${d.binding}) exists (its id from wrangler.toml)`);
    }
  }
  return ids;
}

async function queues(plan) {
  await pool(plan.queues, async (name) => {
    const info = await wrangler(["queues", "info", name]);
    if (info.code === 0) return console.log(`  queue ${name} exists`);
    if (!/does not exist/.test(info.out)) throw new Error(`\`wrangler queues info ${name}\` failed:\n${indent(info.out)}`);
    await must(["queues", "create", name]);
    console.log(`  created queue ${name}`);
  });
}

async function buckets(plan) {
  await pool(plan.buckets, async ({ name, jurisdiction }) => {
    const where = jurisdiction ? ["-J", jurisdiction] : [];
    const info = await wrangler(["r2", "bucket", "info", name, ...where, "--json"]);
    if (info.code === 0) return console.log(`  R2 bucket ${name} exists`);
    if (!/does not exist|10006/.test(info.out)) throw new Error(`\`wrangler r2 bucket info ${name}\` failed:\n${indent(info.out)}`);
    await must(["r2", "bucket", "create", name, ...where, "--update-config=false"]);
    console.log(`  created R2 bucket ${name}`);
  });
}

async function migrations(plan) {
  // the shards at once (each is its own database); a failure stops the deploy before any code is
  // uploaded, and the rerun applies what is still missing: wrangler records each migration in the
  // shard's d1_migrations table in the same request as the migration itself
  await pool(plan.databases, async ({ binding }) => {
    const out = await must(["d1", "migrations", "apply", binding, "--remote", "-c", DEPLOY_CONFIG]);
    const applied = new Set(out.match(/\b[\w.-]+\.sql\b/g) ?? []).size;
    console.log(
      `  ${binding}: ${/No migrations to apply/.test(out) ? "up to date" : `${applied} migration${applied === 1 ? "" : "s"} applied`}`,
    );
  });
}

/**
 * WEBHOOK_SECRET and API_KEYS, each put only when the Worker lacks it. Answers the new API key
 * when this deploy made one. wrangler writes no log file of these runs and sanitizes its debug
 * output, so the value exists only in this process, wrangler's and the request.
 */
async function secrets(plan, tenant) {
  const listed = await wrangler(["secret", "list", "--format", "json", "-c", DEPLOY_CONFIG]);
  /** @type {string[]} */
  let have = [];
  if (listed.code === 0) have = jsonOf(listed.out, "[").map((s) => s.name);
  else if (!listed.out.includes(`Worker "${plan.name}" not found`))
    throw new Error(`\`wrangler secret list\` failed:\n${indent(listed.out)}`); // no Worker yet: no secret
  const put = async (name, value) => {
    // the first put on a new account creates the Worker as an empty draft (wrangler's own way), so the
    // scheduler's code never runs without its secrets
    await must(["secret", "put", name, "-c", DEPLOY_CONFIG], {
      input: value,
      env: { WRANGLER_WRITE_LOGS: "false", WRANGLER_LOG_SANITIZE: "true" },
    });
  };
  if (have.includes("WEBHOOK_SECRET")) console.log("  WEBHOOK_SECRET is set");
  else {
    await put("WEBHOOK_SECRET", newWebhookSecret());
    console.log("  WEBHOOK_SECRET generated and set");
  }
  if (have.includes("API_KEYS")) {
    console.log("  API_KEYS is set");
    return null;
  }
  const key = newApiKey();
  await put("API_KEYS", `${tenant}:${key}`);
  console.log(`  API_KEYS set: a first key for tenant "${tenant}"`);
  // shown now, not after the deploy: a step after this one may fail, and a secret cannot be read back
  printKey(key, tenant);
  return key;
}

/** The new API key, once, with how to rotate it. */
function printKey(key, tenant) {
  console.log(`
  Your API key (tenant "${tenant}"), shown this once; it is stored nowhere but the Worker's secret API_KEYS:

  ${key}

  To rotate it: make a new key (node -e "console.log(crypto.randomBytes(24).toString('base64url'))"), run
  \`npx wrangler secret put API_KEYS\` with "${tenant}:<old key>,${tenant}:<new key>", move your clients to
  the new key, then put "${tenant}:<new key>" alone. More tenants: "tenant:key" pairs, comma-separated.
`);
}

async function deploy() {
  rmSync(OUTPUT_DIR, { recursive: true, force: true });
  mkdirSync(OUTPUT_DIR, { recursive: true });
  const outputFile = join(OUTPUT_DIR, "output.json");
  const run = await wrangler(["deploy", "-c", DEPLOY_CONFIG], { show: true, env: { WRANGLER_OUTPUT_FILE_PATH: outputFile } });
  if (run.code !== 0) throw new Error(`\`wrangler deploy\` failed (exit ${run.code}); its output is above`);
  let targets = [];
  try {
    for (const line of readFileSync(outputFile, "utf8").split("\n")) {
      if (!line.trim()) continue;
      const entry = JSON.parse(line);
      if (entry.type === "deploy") targets = entry.targets ?? [];
    }
  } catch {
    /* no output file: the URL is in wrangler's own output above */
  }
  // targets also name the cron schedules and queues; the URLs are the host names among them
  return targets
    .filter((t) => /^(https?:\/\/)?[\w-]+(\.[\w-]+)+(\/\S*)?$/.test(t))
    .map((t) => (/^https?:\/\//.test(t) ? t : `https://${t}`));
}

function parseArgs(argv) {
  const options = { dryRun: false, tenant: "default", rest: [] };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (arg === "--dry-run") options.dryRun = true;
    else if (arg === "--tenant") options.tenant = argv[++i] ?? "";
    else if (arg.startsWith("--tenant=")) options.tenant = arg.slice("--tenant=".length);
    else options.rest.push(arg);
  }
  if (!/^[^\s:,]+$/.test(options.tenant)) throw new Error(`--tenant must be a name without spaces, ":" or ",", got "${options.tenant}"`);
  return options;
}

async function main() {
  const options = parseArgs(process.argv.slice(2));
  if (options.dryRun) {
    // offline: builds and validates the bundle, reaches no account
    // no usage metrics, no update check: nothing leaves the machine
    const run = await wrangler(["deploy", "--dry-run", "--outdir", ".wrangler/dry-run", ...options.rest], {
      show: true,
      env: { WRANGLER_SEND_METRICS: "false", WRANGLER_HIDE_BANNER: "true" },
    });
    process.exit(run.code ?? 1);
  }
  if (options.rest.length > 0)
    throw new Error(`unknown arguments: ${options.rest.join(" ")} (npm run deploy [-- --dry-run] [-- --tenant <name>])`);

  const plan = await planOf(CONFIG);
  console.log(`Deploying ${plan.name} (${relative(process.cwd(), CONFIG) || "wrangler.toml"})`);
  process.env.CLOUDFLARE_ACCOUNT_ID = await account(plan); // every wrangler run below: no account lookup each

  console.log("D1 databases");
  const ids = await databases(plan);
  const temporary = `${DEPLOY_CONFIG}.${process.pid}.tmp`;
  writeFileSync(
    temporary,
    `# Generated by scripts/deploy.mjs (npm run deploy) from wrangler.toml, with this account's D1 ids; edit wrangler.toml instead.\n${withDatabaseIds(readFileSync(CONFIG, "utf8"), ids)}`,
  );
  renameSync(temporary, DEPLOY_CONFIG);

  console.log("Queues");
  await queues(plan);
  if (plan.buckets.length > 0) {
    console.log("R2 buckets");
    await buckets(plan);
  }
  console.log("D1 migrations, every shard before the new code");
  await migrations(plan);
  console.log("Secrets");
  const key = await secrets(plan, options.tenant);
  console.log("Deploy");
  const urls = await deploy();
  const url = urls[0] ?? "https://<your Worker's URL>";

  console.log(`\n${plan.name} is deployed${urls.length ? `: ${urls.join(", ")}` : ""}`);
  if (key) console.log("Your API key was printed above, under Secrets.");
  console.log(`
Try it (KEY is your API key):

  curl ${url}/v1/jobs -H "Authorization: Bearer $KEY"
`);
}

// run as a program (npm run deploy), not when a test imports planOf and the rest
if (process.argv[1] && realpathSync(fileURLToPath(import.meta.url)) === realpathSync(process.argv[1])) {
  main().catch((error) => {
    console.error(`\nnpm run deploy stopped: ${error instanceof Error ? error.message : String(error)}`);
    console.error(
      "Nothing done so far is undone, and running it again resumes from here. If the cause lasts (an account without the Workers Paid plan Queues need, R2 not enabled, a token without D1, Queues or Workers edit), fix that first; without an archive, remove [[r2_buckets]] from wrangler.toml.",
    );
    process.exit(1);
  });
}
