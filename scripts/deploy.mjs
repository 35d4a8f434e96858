// `npm run deploy`: the scheduler on a Cloudflare account, from nothing or as an upgrade, in one
// command (docs/deploying.md). After `npx wrangler login` (or with CLOUDFLARE_API_TOKEN and
// CLOUDFLARE_ACCOUNT_ID in CI) it reads wrangler.toml and, each step checking before it acts:
//
//   0. preflight, reads only, before anything is created: the account has a workers.dev subdomain
//      (unless wrangler.toml routes the Worker elsewhere) and the Workers Paid plan (when the login
//      can read its billing), or it stops saying what to do; without R2 (code 10042) it deploys
//      without the archive and says how to turn it on; it prints the location hint in effect;
//   1. D1: creates every database of [[d1_databases]] the account lacks (by database_name), with
//      the location hint when one is set;
//   2. Queues: creates every queue the producers and consumers name, dead-letter queues included;
//   3. R2: creates every bucket of [[r2_buckets]] the account lacks (with the location hint);
//   4. applies the D1 migrations to every shard (`wrangler d1 migrations apply <binding> --remote`),
//      before any new code runs: an upgrade's schema is in place when its code starts;
//   5. secrets: on the first deploy generates WEBHOOK_SECRET (whsec_ + base64 of 32 random bytes)
//      and a first API key, puts them (`wrangler secret put`, the value on stdin) and prints the key
//      once, with how to rotate it; a secret that exists is never touched;
//   6. deploys (`wrangler deploy`), then prints the URL and a first curl.
//
// Run again it creates nothing and changes nothing that exists; interrupted, it resumes where it
// stopped (every step is a check, then what is missing). No secret is written anywhere, and the
// only one printed is the new API key, once. Every create and put goes through wrangler, so whatever
// wrangler is logged in with (OAuth from `wrangler login`, an API token) is what it uses; the
// preflight's reads, which no wrangler command makes, use the same credentials
// (`wrangler auth token --json`), held in this process only, against the same API
// (CLOUDFLARE_API_BASE_URL as wrangler reads it).
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
// Location. D1 databases and R2 buckets are placed once, when created (near the machine that
// creates them, without a hint), and never move; Durable Objects near their first caller. With
// LOCATION_HINT in wrangler.toml [vars] (kept for every deploy) or SCHEDULER_LOCATION_HINT (this
// run; it wins, as SCHEDULER_<NAME> does for the local stack: scripts/lib/env.mjs), databases and
// buckets are created with that hint and the Worker reads it as LOCATION_HINT, so its objects can
// be placed near them (docs/deploying.md).
//
// Options: --dry-run (offline: `wrangler deploy --dry-run --outdir .wrangler/dry-run`, what
// `npm run deploy:check` does), --tenant <name> (the first API key's tenant; default "default"),
// --skip-plan-check (an account with Workers through a contract whose plan the check does not know).
import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdirSync, readFileSync, realpathSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { envString } from "./lib/env.mjs";
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
/** the longest one preflight read of the API may take; each is tried up to PREFLIGHT_ATTEMPTS times */
const PREFLIGHT_TIMEOUT_MS = 30_000;
const PREFLIGHT_ATTEMPTS = 3;

/**
 * The location hints D1, R2 and Durable Objects all accept: D1 takes only these six
 * (docs: d1/configuration/data-location), R2 the same (`wrangler r2 bucket create --location`),
 * Durable Objects these and sam, afr, me (durable-objects/reference/data-location).
 */
export const LOCATION_HINTS = ["wnam", "enam", "weur", "eeur", "apac", "oc"];

/** A reason to stop before anything is created: main() says that nothing was. */
export class PreflightError extends Error {}

/**
 * The ids wrangler.toml ships: a database still to be found or created by its name.
 * @param {string | undefined} id
 */
export function isPlaceholderId(id) {
  return id === undefined || id === "" || /^00000000-0000-0000-0000-00000000\d{4}$/.test(id);
}

/** WEBHOOK_SECRET's format: whsec_ and base64 of 32 random bytes (docs/security.md) */
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
 *   workersDev: boolean,
 *   vars: Record<string, unknown>,
 *   complianceRegion: string | undefined,
 * }} Plan
 *   workersDev: whether the Worker is served on workers.dev, as wrangler decides it (workers_dev,
 *   else true when no route is set), which needs the account's workers.dev subdomain
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
    workersDev: config.workers_dev ?? (config.routes ?? (config.route ? [config.route] : [])).length === 0,
    vars: config.vars ?? {},
    complianceRegion: config.compliance_region,
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

/**
 * wrangler.toml's text without its [[r2_buckets]] blocks (the ARCHIVE binding): what an account
 * without R2 deploys. The scheduler runs without ARCHIVE: the purge then only deletes.
 * @param {string} text
 */
export function withoutR2Buckets(text) {
  return text
    .split(/^(?=\[)/m)
    .map((block) =>
      /^\[\[r2_buckets\]\]/.test(block) ? "# [[r2_buckets]] left out by npm run deploy: R2 is not enabled on this account\n\n" : block,
    )
    .join("");
}

/**
 * wrangler.toml's text with `name = "value"` in [vars] (replacing the var when it is there, adding
 * [vars] when there is none); every other line as it is.
 * @param {string} text
 * @param {string} name
 * @param {string} value
 */
export function withVar(text, name, value) {
  const line = `${name} = ${JSON.stringify(value)}`;
  const blocks = text.split(/^(?=\[)/m);
  const at = blocks.findIndex((block) => /^\[vars\][ \t]*(#.*)?$/m.test(block.split("\n")[0] ?? ""));
  if (at < 0) return `${text.replace(/\n*$/, "\n")}\n[vars]\n${line}\n`;
  const block = blocks[at] ?? "";
  const existing = new RegExp(`^[ \\t]*${name}[ \\t]*=.*$`, "m");
  blocks[at] = existing.test(block)
    ? block.replace(existing, line)
    : block.replace(/^.*(\n|$)/, (header) => `${header.trimEnd()}\n${line}\n`);
  return blocks.join("");
}

/**
 * The location hint for this deploy and where it was set: SCHEDULER_LOCATION_HINT (this run)
 * wins over wrangler.toml [vars] LOCATION_HINT; none when neither is set.
 * @param {Record<string, unknown>} vars wrangler.toml [vars]
 * @param {Record<string, string | undefined>} [env]
 * @returns {{ hint: string, source: "SCHEDULER_LOCATION_HINT" | "wrangler.toml [vars]" } | null}
 */
export function locationHintOf(vars, env = process.env) {
  let fromEnv;
  try {
    fromEnv = envString("SCHEDULER_LOCATION_HINT", undefined, { oneOf: LOCATION_HINTS, env });
  } catch (error) {
    throw new PreflightError(error instanceof Error ? error.message : String(error));
  }
  if (fromEnv !== undefined) return { hint: fromEnv, source: "SCHEDULER_LOCATION_HINT" };
  const fromVars = vars.LOCATION_HINT;
  if (fromVars === undefined || fromVars === "") return null;
  if (typeof fromVars !== "string" || !LOCATION_HINTS.includes(fromVars))
    throw new PreflightError(
      `wrangler.toml [vars] LOCATION_HINT must be one of ${LOCATION_HINTS.join(", ")}, got ${JSON.stringify(fromVars)}`,
    );
  return { hint: fromVars, source: "wrangler.toml [vars]" };
}

/**
 * Whether an account's subscriptions (GET /accounts/{id}/subscriptions) include a Workers plan
 * other than Free. Cloudflare documents the list's shape (rate_plan.id, public_name) but not its
 * plan ids, so any subscription naming Workers and not Free counts ("workers_paid", "Workers
 * Paid", an Enterprise "workers-enterprise"); an account that lists none is on Workers Free.
 * @param {unknown[]} subscriptions
 * @returns {"paid" | "free"}
 */
export function workersPlanOf(subscriptions) {
  const namesOf = (/** @type {any} */ s) =>
    [s?.rate_plan?.id, s?.rate_plan?.public_name, s?.product?.name].filter((n) => typeof n === "string");
  const workers = subscriptions.filter((s) => namesOf(s).some((n) => /workers/i.test(n)));
  return workers.some((s) => !namesOf(s).some((n) => /free/i.test(n))) ? "paid" : "free";
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
// the preflight: reads only, before anything is created

/**
 * The headers wrangler itself would send: its credentials as `wrangler auth token --json` gives
 * them (an API token from the environment, the OAuth token of `wrangler login`, refreshed when
 * expired, or a global API key and email). They stay in this process: never printed or written.
 * @returns {Promise<Record<string, string>>}
 */
async function credentials() {
  const run = await wrangler(["auth", "token", "--json"], { env: { WRANGLER_WRITE_LOGS: "false", WRANGLER_HIDE_BANNER: "true" } });
  if (run.code !== 0) {
    // a failed run prints no token, only why it failed
    throw new PreflightError(
      `\`wrangler auth token\` failed: not logged in. Run \`npx wrangler login\` (or set CLOUDFLARE_API_TOKEN and CLOUDFLARE_ACCOUNT_ID), then \`npm run deploy\`. wrangler said:\n${indent(run.out)}`,
    );
  }
  /** @type {{ type?: string, token?: string, key?: string, email?: string }} */
  let auth = {};
  try {
    auth = JSON.parse(run.out.slice(run.out.indexOf("{"), run.out.lastIndexOf("}") + 1));
  } catch {
    /* answered below, without echoing what wrangler printed (it may hold the token) */
  }
  if (auth.type === "api_key" && auth.key && auth.email) return { "X-Auth-Key": auth.key, "X-Auth-Email": auth.email };
  if (auth.token) return { Authorization: `Bearer ${auth.token}` };
  throw new PreflightError("`wrangler auth token --json` printed no credentials wrangler could use; run `npx wrangler login` again");
}

/** the API wrangler talks to: CLOUDFLARE_API_BASE_URL, else Cloudflare's (FedRAMP High, staging as wrangler picks them) */
function apiBase(plan) {
  const fromEnv = process.env.CLOUDFLARE_API_BASE_URL || process.env.CF_API_BASE_URL;
  if (fromEnv) return fromEnv.replace(/\/+$/, "");
  const region = process.env.CLOUDFLARE_COMPLIANCE_REGION || plan.complianceRegion;
  const fed = region === "fedramp_high" ? ".fed" : "";
  const staging = process.env.WRANGLER_API_ENVIRONMENT === "staging" ? ".staging" : "";
  return `https://api${fed}${staging}.cloudflare.com/client/v4`;
}

/**
 * GET `path` of the Cloudflare API: its status and JSON body (null when not JSON). A network
 * error or a 5xx is tried again, PREFLIGHT_ATTEMPTS in all, then stops the deploy.
 * @returns {Promise<{ status: number, body: any }>}
 */
async function apiGet(plan, headers, path) {
  let failure = "";
  for (let attempt = 1; attempt <= PREFLIGHT_ATTEMPTS; attempt++) {
    if (attempt > 1) await new Promise((resolve) => setTimeout(resolve, 1_000 * (attempt - 1)));
    try {
      const response = await fetch(`${apiBase(plan)}${path}`, { headers, signal: AbortSignal.timeout(PREFLIGHT_TIMEOUT_MS) });
      const body = await response.json().catch(() => null);
      if (response.status < 500) return { status: response.status, body };
      failure = `HTTP ${response.status}`;
    } catch (error) {
      failure = error instanceof Error ? error.message : String(error);
    }
  }
  throw new PreflightError(`the Cloudflare API did not answer GET ${path} (${failure}); run npm run deploy again`);
}

/** an API answer's error codes and messages, for a line that says why */
const codesOf = (/** @type {any} */ body) => (Array.isArray(body?.errors) ? body.errors.map((e) => e?.code) : []);
const answerOf = (/** @type {{ status: number, body: any }} */ answer) =>
  `HTTP ${answer.status}${(answer.body?.errors ?? []).map((e) => `, ${e?.message} [code: ${e?.code}]`).join("")}`;

/**
 * What a first deploy would otherwise find out halfway, checked before anything is created: the
 * workers.dev subdomain (wrangler deploy declines without one when it cannot ask, after the
 * secrets made a draft Worker), the Workers Paid plan, whether R2 is enabled (code 10042: the
 * archive is optional, so the deploy goes on without it), and the location hint. Prints one line
 * each; stops with every problem found at once.
 * @param {Plan} plan
 * @param {string} accountId
 * @param {{ skipPlanCheck: boolean }} options
 * @returns {Promise<{ archive: boolean, location: ReturnType<typeof locationHintOf> }>}
 */
async function preflight(plan, accountId, { skipPlanCheck }) {
  const location = locationHintOf(plan.vars);
  const headers = await credentials();
  const account = `/accounts/${accountId}`;
  const dashboard = `https://dash.cloudflare.com/${accountId}`;
  const [subdomain, subscriptions, r2] = await Promise.all([
    plan.workersDev ? apiGet(plan, headers, `${account}/workers/subdomain`) : null,
    skipPlanCheck ? null : apiGet(plan, headers, `${account}/subscriptions`),
    plan.buckets.length > 0 ? apiGet(plan, headers, `${account}/r2/buckets?per_page=1`) : null,
  ]);
  /** @type {string[]} */
  const problems = [];

  if (!subdomain) console.log("  workers.dev: not used (wrangler.toml routes the Worker)");
  else if (subdomain.status < 300 && subdomain.body?.result?.subdomain)
    console.log(`  workers.dev subdomain: ${subdomain.body.result.subdomain}.workers.dev`);
  else if (codesOf(subdomain.body).includes(10007)) {
    // wrangler's own test for "no subdomain" (deploy-helpers triggers/subdomain.ts)
    console.log("  workers.dev subdomain: none");
    problems.push(
      `This account has no workers.dev subdomain, and wrangler.toml routes the Worker nowhere else, so \`wrangler deploy\` would decline after the secrets and a draft Worker exist. Register one in the dashboard (${dashboard}/workers/onboarding; wrangler has no command for it), or set routes in wrangler.toml, then run npm run deploy again.`,
    );
  } else console.log(`  workers.dev subdomain: not checked (${answerOf(subdomain)}); wrangler deploy checks it again`);

  // Free: 10 ms of CPU and 50 subrequests per invocation, 100,000 requests a day (workers/platform/limits)
  const why = "the Free plan gives an invocation 10 ms of CPU and 50 subrequests, which the cron scan and the fire consumers exceed";
  if (!subscriptions) console.log("  Workers Paid plan: not checked (--skip-plan-check)");
  else if (subscriptions.status < 300 && Array.isArray(subscriptions.body?.result)) {
    if (workersPlanOf(subscriptions.body.result) === "paid") console.log("  Workers Paid plan: yes");
    else {
      console.log("  Workers Paid plan: no (Workers Free)");
      problems.push(
        `This account is on the Workers Free plan (its subscriptions list no paid Workers plan). The scheduler needs the Workers Paid plan: ${why}. Upgrade at ${dashboard}/workers/plans, then run npm run deploy again (Workers through a contract this check does not recognise: npm run deploy -- --skip-plan-check).`,
      );
    }
  } else
    console.log(
      `  Workers Paid plan: required (${why}); not checked: this login cannot read the account's billing (${answerOf(subscriptions)}; a token with Billing Read can). Check it at ${dashboard}/workers/plans`,
    );

  let archive = plan.buckets.length > 0;
  if (!r2) console.log("  History archive: off (wrangler.toml binds no R2 bucket)");
  else if (codesOf(r2.body).includes(10042)) {
    // "Please enable R2 through the Cloudflare Dashboard" (r2/api/error-codes: NotEntitled, 403)
    archive = false;
    console.log(
      `  History archive: off, R2 is not enabled on this account (code 10042): deploying without the ARCHIVE binding, finished history is only purged. To turn it on, enable R2 at ${dashboard}/r2/overview and run npm run deploy again.`,
    );
  } else if (r2.status < 300) console.log(`  R2: enabled (the archive bucket${plan.buckets.length === 1 ? "" : "s"} below)`);
  else console.log(`  R2: not checked (${answerOf(r2)})`);

  if (location)
    console.log(
      `  Location hint: ${location.hint} (${location.source}): new D1 databases and R2 buckets are created there; the Worker reads LOCATION_HINT`,
    );
  else
    console.log(
      "  Location hint: none: new D1 databases and R2 buckets are placed near this machine (LOCATION_HINT in wrangler.toml [vars], docs/deploying.md)",
    );

  if (problems.length > 0) throw new PreflightError(problems.join("\n"));
  return { archive, location };
}

// ---------------------------------------------------------------------------------------------
// the steps

/** wrangler.toml's account_id (which wrangler itself prefers), CLOUDFLARE_ACCOUNT_ID, or the one account wrangler is logged in to */
async function account(plan) {
  if (plan.accountId) return plan.accountId;
  if (process.env.CLOUDFLARE_ACCOUNT_ID) return process.env.CLOUDFLARE_ACCOUNT_ID;
  const run = await wrangler(["whoami", "--json"]);
  if (run.code !== 0) {
    throw new PreflightError(
      `\`wrangler whoami\` failed: not logged in, offline, or a token that cannot read its memberships. Run \`npx wrangler login\` (or set CLOUDFLARE_API_TOKEN and CLOUDFLARE_ACCOUNT_ID), then \`npm run deploy\`. wrangler said:\n${indent(run.out)}`,
    );
  }
  const accounts = jsonOf(run.out, "{").accounts ?? [];
  if (accounts.length === 1) return accounts[0].id;
  const listed = accounts.map((a) => `  ${a.id}  ${a.name}`).join("\n");
  throw new PreflightError(`wrangler can reach ${accounts.length} accounts; set CLOUDFLARE_ACCOUNT_ID to the one to deploy to:\n${listed}`);
}

/**
 * every D1 database of the plan, created when missing (with the location hint: a database never
 * moves); answers binding -> id
 * @param {Plan} plan
 * @param {string | undefined} hint
 */
async function databases(plan, hint) {
  const list = async () => jsonOf(await must(["d1", "list", "--json"]), "[");
  let existing = await list();
  const missing = plan.databases.filter((d) => isPlaceholderId(d.id) && !existing.some((e) => e.name === d.name));
  await pool(missing, async (d) => {
    await must(["d1", "create", d.name, ...(hint ? ["--location", hint] : []), "--update-config=false"]);
    console.log(`  created D1 database ${d.name}${hint ? ` (location hint ${hint})` : ""}`);
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

/**
 * @param {Plan["buckets"]} list
 * @param {string | undefined} hint the location hint, honoured only when a bucket name is first created
 */
async function buckets(list, hint) {
  await pool(list, async ({ name, jurisdiction }) => {
    const where = jurisdiction ? ["-J", jurisdiction] : [];
    const info = await wrangler(["r2", "bucket", "info", name, ...where, "--json"]);
    if (info.code === 0) return console.log(`  R2 bucket ${name} exists`);
    if (!/does not exist|10006/.test(info.out)) throw new Error(`\`wrangler r2 bucket info ${name}\` failed:\n${indent(info.out)}`);
    await must(["r2", "bucket", "create", name, ...where, ...(hint ? ["--location", hint] : []), "--update-config=false"]);
    console.log(`  created R2 bucket ${name}${hint ? ` (location hint ${hint})` : ""}`);
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
  const options = { dryRun: false, tenant: "default", skipPlanCheck: false, rest: [] };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (arg === "--dry-run") options.dryRun = true;
    else if (arg === "--skip-plan-check") options.skipPlanCheck = true;
    else if (arg === "--tenant") options.tenant = argv[++i] ?? "";
    else if (arg.startsWith("--tenant=")) options.tenant = arg.slice("--tenant=".length);
    else options.rest.push(arg);
  }
  if (!/^[^\s:,]+$/.test(options.tenant))
    throw new PreflightError(`--tenant must be a name without spaces, ":" or ",", got "${options.tenant}"`);
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
    throw new PreflightError(
      `unknown arguments: ${options.rest.join(" ")} (npm run deploy [-- --dry-run] [-- --tenant <name>] [-- --skip-plan-check])`,
    );

  const plan = await planOf(CONFIG);
  console.log(`Deploying ${plan.name} (${relative(process.cwd(), CONFIG) || "wrangler.toml"})`);
  const accountId = await account(plan);
  process.env.CLOUDFLARE_ACCOUNT_ID = accountId; // every wrangler run below: no account lookup each

  console.log("Preflight (reads only: nothing is created before it passes)");
  const { archive, location } = await preflight(plan, accountId, options);

  console.log("D1 databases");
  const ids = await databases(plan, location?.hint);
  let text = withDatabaseIds(readFileSync(CONFIG, "utf8"), ids);
  if (!archive) text = withoutR2Buckets(text);
  if (location?.source === "SCHEDULER_LOCATION_HINT") text = withVar(text, "LOCATION_HINT", location.hint);
  const temporary = `${DEPLOY_CONFIG}.${process.pid}.tmp`;
  writeFileSync(
    temporary,
    `# Generated by scripts/deploy.mjs (npm run deploy) from wrangler.toml, with this account's D1 ids; edit wrangler.toml instead.\n${text}`,
  );
  renameSync(temporary, DEPLOY_CONFIG);

  console.log("Queues");
  await queues(plan);
  if (archive) {
    console.log("R2 buckets");
    await buckets(plan.buckets, location?.hint);
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
    if (error instanceof PreflightError) console.error("Nothing was created or changed.");
    else
      console.error(
        "Nothing done so far is undone, and running it again resumes from here. If the cause lasts (a token without D1, Queues, R2 or Workers edit, a limit of the account), fix that first.",
      );
    process.exit(1);
  });
}
