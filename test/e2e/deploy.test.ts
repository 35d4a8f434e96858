/**
 * `npm run deploy` (scripts/deploy.mjs, README "Deploying") against a fake of the Cloudflare API
 * (test/support/fake-cloudflare.mjs, on loopback, recording every call), through the pinned
 * wrangler, with CLOUDFLARE_API_BASE_URL, CLOUDFLARE_API_TOKEN and CLOUDFLARE_ACCOUNT_ID set and
 * HOME, XDG_CONFIG_HOME and TMPDIR in a temporary directory, so no real credentials are read and
 * nothing leaves the machine. In order, on one fake account:
 *
 *   1. a first deploy, refused by the API right after its queues were created: it stops, naming
 *      the failure, with the D1 databases and queues made;
 *   2. the rerun finishes: every D1 database, queue and R2 bucket created exactly once over both
 *      runs, every migration applied to every shard, the two secrets put once, the API key printed
 *      once (and equal to what API_KEYS holds), and the Worker's upload carries every binding of
 *      wrangler.toml, with the ids of the databases created;
 *   3. a second deploy creates nothing and puts no secret: one upload, the same ids;
 *   4. `npm run deploy -- --dry-run` makes no API call.
 *
 * Then, each on a fresh fake account, what a first real account may lack (issue 35 item 10),
 * answered before anything is created: no workers.dev subdomain and the Workers Free plan stop the
 * deploy with what to do, creating nothing; R2 not enabled (code 10042) deploys without the
 * archive and says so; and the location hint (SCHEDULER_LOCATION_HINT) reaches every D1 and R2
 * create and the Worker's LOCATION_HINT.
 *
 * No secret is in any file the runs wrote (their HOME, .wrangler/, .wrangler-deploy.toml). Each
 * deploy's calls are printed (the closing note of issue 28).
 */
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DEPLOY_CONFIG, isPlaceholderId, planOf } from "../../scripts/deploy.mjs";
import { startFakeCloudflare } from "../support/fake-cloudflare.mjs";
import { type ProcessRun, runProcess } from "./harness.ts";

const PORT = 18980;
const ROOT = fileURLToPath(new URL("../..", import.meta.url));
const WORKER = "edge-scheduler";
const MIGRATIONS = readdirSync(join(ROOT, "migrations"))
  .filter((f) => f.endsWith(".sql"))
  .sort();
/** one deploy is about 20 wrangler runs of ~2 s on a shared 2-core machine */
const RUN_TIMEOUT_MS = 150_000;

type Fake = Awaited<ReturnType<typeof startFakeCloudflare>>;
type Call = Fake["calls"][number];
type Binding = { name: string; type: string; [key: string]: unknown };

let fake: Fake;
let home: string;
const plan = await planOf(join(ROOT, "wrangler.toml"));

/** `node scripts/deploy.mjs` as npm run deploy runs it, against the fake, in a clean environment (plus `extra`) */
function deploy(args: string[] = [], api: Fake = fake, extra: Record<string, string> = {}): Promise<ProcessRun> {
  const env: NodeJS.ProcessEnv = {};
  // nothing of the caller's Cloudflare or wrangler settings (a real token, an account) reaches the run
  for (const [key, value] of Object.entries(process.env)) if (!/^(CLOUDFLARE_|CF_|WRANGLER_)/.test(key)) env[key] = value;
  Object.assign(env, {
    HOME: home,
    XDG_CONFIG_HOME: join(home, ".config"),
    TMPDIR: join(home, "tmp"),
    CLOUDFLARE_API_BASE_URL: api.url,
    CLOUDFLARE_API_TOKEN: "fake-api-token",
    CLOUDFLARE_ACCOUNT_ID: api.accountId,
    WRANGLER_SEND_METRICS: "false",
    WRANGLER_HIDE_BANNER: "true", // the banner's update check would ask the npm registry
    CI: "true",
    ...extra,
  });
  return runProcess(process.execPath, [join(ROOT, "scripts", "deploy.mjs"), ...args], { env, cwd: ROOT, timeoutMs: RUN_TIMEOUT_MS });
}

/** a call as the closing note shows it: method, path below the account, what it created or put */
function show(call: Call): string {
  const path = call.path.replace(`/accounts/${fake.accountId}`, "").replace(/[0-9a-f]{8}-[0-9a-f-]{27}|[0-9a-f]{32}/g, "<id>");
  return `${call.method} ${path}${call.query}${call.name ? ` [${call.name}]` : ""} -> ${call.status}${call.injected ? " (injected failure)" : ""}`;
}

/** the calls, one line each, a run of the same call as one line with its count */
function print(title: string, calls: Call[]): void {
  const lines: { text: string; count: number }[] = [];
  for (const call of calls) {
    const text = show(call);
    const last = lines.at(-1);
    if (last?.text === text) last.count++;
    else lines.push({ text, count: 1 });
  }
  console.log(`${title}: ${calls.length} API calls\n${lines.map((l) => `  ${l.text}${l.count > 1 ? ` (x${l.count})` : ""}`).join("\n")}`);
}

const isCreate = (c: Call) =>
  (c.method === "POST" && /\/(d1\/database|queues|r2\/buckets|queues\/[^/]+\/consumers)$/.test(c.path)) ||
  (c.method === "PUT" && /\/workers\/scripts\/[^/]+\/secrets$/.test(c.path));
const named = (calls: Call[], method: string, pattern: RegExp) =>
  calls
    .filter((c) => c.method === method && pattern.test(c.path) && c.status < 400)
    .map((c) => c.name)
    .sort();
const sha256 = (text: string) => createHash("sha256").update(text).digest("hex");

/** every file under `dir` (bounded: at most 5,000) */
function filesUnder(dir: string): string[] {
  const out: string[] = [];
  const walk = (d: string) => {
    for (const entry of readdirSync(d, { withFileTypes: true })) {
      if (out.length >= 5_000) return;
      const path = join(d, entry.name);
      if (entry.isDirectory()) walk(path);
      else if (entry.isFile()) out.push(path);
    }
  };
  if (existsSync(dir)) walk(dir);
  return out;
}

beforeAll(async () => {
  fake = await startFakeCloudflare({ port: PORT });
  home = mkdtempSync(join(tmpdir(), "deploy-home-"));
  // wrangler asks the npm registry for its latest version after an error; a fresh cached answer keeps it on loopback
  mkdirSync(join(home, "tmp", "update-check"), { recursive: true });
  writeFileSync(
    join(home, "tmp", "update-check", "wrangler-latest.json"),
    JSON.stringify({ latest: null, lastUpdate: Date.now() + 3_600_000 }),
  );
});

afterAll(async () => {
  await fake?.stop();
  if (home?.startsWith(tmpdir()) && home.includes("deploy-home-")) rmSync(home, { recursive: true, force: true });
});

describe("npm run deploy against a fake Cloudflare API", () => {
  let apiKey = "";
  let output = "";
  let firstCalls: Call[] = [];

  it("wrangler.toml names what the deploy makes", () => {
    expect(plan.name).toBe(WORKER);
    expect(plan.databases.map((d) => d.binding)).toEqual(["DB", "DB_1", "DB_2", "DB_3"]);
    expect(plan.databases.every((d) => isPlaceholderId(d.id))).toBe(true);
    expect(plan.queues.sort()).toEqual(["fire", "fire-1", "fire-2", "fire-3", "fire-dlq"]);
    expect(plan.buckets.map((b) => b.name)).toEqual(["scheduler-archive"]);
  });

  it("a first deploy refused right after its queues stops; the rerun finishes, creating everything once", async () => {
    // the API refuses the call after the last queue create, once
    const queueCreates = (c: Call) => c.method === "POST" && c.path.endsWith("/queues");
    fake.failNextAfter((c) => queueCreates(c) && fake.calls.filter(queueCreates).length === plan.queues.length);
    const interrupted = await deploy();
    const interruptedCalls = [...fake.calls];
    print("first deploy, interrupted", interruptedCalls);
    expect(interrupted.code, interrupted.stdout + interrupted.stderr).not.toBe(0);
    expect(interrupted.stderr).toContain("npm run deploy stopped");
    expect(interruptedCalls.some((c) => c.injected)).toBe(true);
    expect(fake.state.databases).toHaveLength(plan.databases.length);
    expect(fake.state.queues).toHaveLength(plan.queues.length);
    expect(fake.state.buckets).toHaveLength(0);
    expect(fake.state.scripts.size).toBe(0); // no code, no secret before the migrations

    const resumed = await deploy();
    const resumedCalls = fake.calls.slice(interruptedCalls.length);
    print("first deploy, resumed", resumedCalls);
    expect(resumed.code, resumed.stdout + resumed.stderr).toBe(0);
    firstCalls = [...fake.calls];
    output = interrupted.stdout + interrupted.stderr + resumed.stdout + resumed.stderr;

    // nothing the fake does not know was asked, and nothing created twice over both runs
    expect(firstCalls.filter((c) => c.unknown).map(show)).toEqual([]);
    // the preflight found what it needs; without a location hint, no create carries one
    expect(resumed.stdout).toContain(`workers.dev subdomain: ${fake.subdomain}.workers.dev`);
    expect(resumed.stdout).toContain("Workers Paid plan: yes");
    expect(resumed.stdout).toContain("Location hint: none");
    expect(firstCalls.filter((c) => c.location !== undefined).map(show)).toEqual([]);
    expect(named(firstCalls, "POST", /\/d1\/database$/)).toEqual(plan.databases.map((d) => d.name).sort());
    expect(named(firstCalls, "POST", /\/queues$/)).toEqual([...plan.queues].sort());
    expect(named(firstCalls, "POST", /\/r2\/buckets$/)).toEqual(["scheduler-archive"]);
    expect(named(firstCalls, "PUT", /\/secrets$/)).toEqual(["API_KEYS", "WEBHOOK_SECRET"]);
    expect(named(firstCalls, "POST", /\/consumers$/)).toEqual([...plan.queues].sort());
    expect(firstCalls.filter((c) => c.status >= 400 && c.method !== "GET" && !c.injected).map(show)).toEqual([
      // the first secret put finds no Worker; wrangler makes it an empty draft and puts again
      `PUT /workers/scripts/${WORKER}/secrets [WEBHOOK_SECRET] -> 404`,
    ]);
    // the resumed run created none of what the interrupted one had
    expect(resumedCalls.filter((c) => c.method === "POST" && /\/(d1\/database|queues)$/.test(c.path))).toEqual([]);

    // every shard has every migration, applied once
    for (const db of fake.state.databases) expect(db.migrations, db.name).toEqual(MIGRATIONS);

    // the migrations and the secrets came before the code: the one upload with bindings is the last create
    const script = fake.state.scripts.get(WORKER);
    expect(script).toBeDefined();
    const uploads = script!.uploads.filter((u) => (u.metadata.bindings ?? []).length > 0);
    expect(uploads).toHaveLength(1);
    const lastQuery = firstCalls.findLastIndex((c) => c.path.endsWith("/query"));
    const lastSecret = firstCalls.findLastIndex((c) => c.path.endsWith("/secrets") && c.method === "PUT");
    const upload = firstCalls.findIndex((c) => c.name === "worker");
    expect(upload).toBeGreaterThan(lastQuery);
    expect(upload).toBeGreaterThan(lastSecret);

    // the upload carries every binding, the D1 ones with the ids of the databases created
    const bindings = uploads[0]!.metadata.bindings as Binding[];
    const byName = new Map(bindings.map((b) => [b.name, b]));
    for (const d of plan.databases) {
      const created = fake.state.databases.find((db) => db.name === d.name);
      expect(byName.get(d.binding), d.binding).toMatchObject({ type: "d1", id: created?.uuid });
    }
    for (const [binding, queue] of [
      ["FIRE_QUEUE_0", "fire"],
      ["FIRE_QUEUE_1", "fire-1"],
      ["FIRE_QUEUE_2", "fire-2"],
      ["FIRE_QUEUE_3", "fire-3"],
    ]) {
      expect(byName.get(binding!), binding).toMatchObject({ type: "queue", queue_name: queue });
    }
    expect(byName.get("ARCHIVE")).toMatchObject({ type: "r2_bucket", bucket_name: "scheduler-archive" });
    for (const [binding, className] of [
      ["BUCKET", "Bucket"],
      ["FLOW_KEY", "FlowKey"],
      ["BULK_ACTION", "BulkAction"],
      ["PULL_QUEUE", "PullQueue"],
      ["IDEMPOTENCY_KEYS", "IdempotencyKeys"],
    ]) {
      expect(byName.get(binding!), binding).toMatchObject({ type: "durable_object_namespace", class_name: className });
    }
    expect(byName.get("API_RATE_LIMITER")).toMatchObject({ type: "ratelimit" });
    // the secrets put before are kept by the upload
    expect(uploads[0]!.metadata.keep_bindings).toContain("secret_text");
    // every consumer is the Worker's; the fire queues dead-letter to fire-dlq
    for (const q of fake.state.queues) {
      expect(
        q.consumers.map((c) => c.script),
        q.queue_name,
      ).toEqual([WORKER]);
      if (q.queue_name !== "fire-dlq") expect(q.consumers[0]?.dead_letter_queue, q.queue_name).toBe("fire-dlq");
    }

    // the API key: printed once, and it is what API_KEYS holds for tenant "default"
    const keys = [...resumed.stdout.matchAll(/^ {2}([A-Za-z0-9_-]{32})$/gm)].map((m) => m[1]!);
    expect(keys).toHaveLength(1);
    apiKey = keys[0]!;
    expect(output.split(apiKey)).toHaveLength(2);
    expect(script!.secrets.get("API_KEYS")).toBe(sha256(`default:${apiKey}`));
    expect(script!.secrets.get("WEBHOOK_SECRET")).toMatch(/^[0-9a-f]{64}$/);
    expect(output).not.toMatch(/whsec_[A-Za-z0-9+/]{43}=/);
    expect(resumed.stdout).toContain("npx wrangler secret put API_KEYS"); // how to rotate it
    expect(resumed.stdout).toContain(`https://${WORKER}.${fake.subdomain}.workers.dev`);
    expect(resumed.stdout).toContain(`curl https://${WORKER}.${fake.subdomain}.workers.dev/v1/jobs -H "Authorization: Bearer $KEY"`);

    // the generated config holds the ids; wrangler.toml keeps its placeholders
    const generated = readFileSync(DEPLOY_CONFIG, "utf8");
    for (const db of fake.state.databases) expect(generated).toContain(`database_id = "${db.uuid}"`);
    expect((await planOf(join(ROOT, "wrangler.toml"))).databases.every((d) => isPlaceholderId(d.id))).toBe(true);
  });

  it("a second deploy creates nothing and puts no secret", async () => {
    expect(apiKey).not.toBe("");
    const before = fake.calls.length;
    const ids = fake.state.databases.map((d) => d.uuid);
    const run = await deploy();
    const calls = fake.calls.slice(before);
    print("second deploy", calls);
    expect(run.code, run.stdout + run.stderr).toBe(0);
    output += run.stdout + run.stderr;
    expect(calls.filter((c) => c.unknown).map(show)).toEqual([]);
    expect(calls.filter(isCreate).map(show)).toEqual([]);
    expect(calls.filter((c) => c.status >= 400).map(show)).toEqual([]);
    // one upload, the Worker's, with the same databases
    expect(calls.filter((c) => c.name === "worker" || c.name === "draft").map((c) => c.name)).toEqual(["worker"]);
    const uploads = fake.state.scripts.get(WORKER)!.uploads;
    const d1 = (uploads.at(-1)!.metadata.bindings as Binding[]).filter((b) => b.type === "d1").map((b) => b.id);
    expect(d1.sort()).toEqual([...ids].sort());
    expect(fake.state.databases.map((d) => d.uuid)).toEqual(ids);
    for (const db of fake.state.databases) expect(db.migrations, db.name).toEqual(MIGRATIONS);
    expect(run.stdout).not.toContain("shown this once");
    expect(run.stdout).toContain("API_KEYS is set");
  });

  it("--dry-run stays offline", async () => {
    const before = fake.calls.length;
    const run = await deploy(["--dry-run"]);
    expect(run.code, run.stdout + run.stderr).toBe(0);
    expect(fake.calls.slice(before).map(show)).toEqual([]);
    expect(run.stdout).toContain("--dry-run: exiting now.");
  });

  it("no secret is in any file the runs wrote", () => {
    expect(apiKey).not.toBe("");
    const files = [...filesUnder(home), ...filesUnder(join(ROOT, ".wrangler", "deploy-output")), DEPLOY_CONFIG];
    expect(files.length).toBeGreaterThan(1); // wrangler's own logs, at least
    const holding = files.filter((f) => {
      if (statSync(f).size > 50_000_000) return false;
      const text = readFileSync(f, "latin1");
      return text.includes(apiKey) || /whsec_[A-Za-z0-9+/]{43}=/.test(text);
    });
    expect(holding).toEqual([]);
  });

  it("a first deploy that fails after its secrets has already shown the API key; the rerun keeps it", async () => {
    const other = await startFakeCloudflare({ port: PORT + 1 });
    try {
      // the API refuses the call after the API_KEYS put, once: wrangler deploy fails after both secrets are in
      other.failNextAfter((c) => c.method === "PUT" && c.name === "API_KEYS");
      const failed = await deploy([], other);
      expect(failed.code, failed.stdout + failed.stderr).not.toBe(0);
      const keys = [...failed.stdout.matchAll(/^ {2}([A-Za-z0-9_-]{32})$/gm)].map((m) => m[1]!);
      expect(keys).toHaveLength(1);
      expect(other.state.scripts.get(WORKER)!.secrets.get("API_KEYS")).toBe(sha256(`default:${keys[0]!}`));
      const rerun = await deploy([], other);
      expect(rerun.code, rerun.stdout + rerun.stderr).toBe(0);
      expect(rerun.stdout).toContain("API_KEYS is set");
      expect(other.state.scripts.get(WORKER)!.secrets.get("API_KEYS")).toBe(sha256(`default:${keys[0]!}`));
    } finally {
      await other.stop();
    }
  });
});

describe("a first deploy on a real account: what it may lack, answered before anything is created (issue 35 item 10)", () => {
  /** `npm run deploy` once on a fresh fake account (`account` as startFakeCloudflare takes it); its calls printed */
  async function onAccount(title: string, account: Parameters<typeof startFakeCloudflare>[0], extra: Record<string, string> = {}) {
    const api = await startFakeCloudflare(account);
    try {
      const run = await deploy([], api, extra);
      print(title, api.calls);
      return { run, api };
    } finally {
      await api.stop();
    }
  }
  /** the account is as it was: no call but reads, nothing in it */
  const expectNothingCreated = (api: Fake) => {
    expect(api.calls.filter((c) => c.method !== "GET").map(show)).toEqual([]);
    expect(api.state.databases).toEqual([]);
    expect(api.state.queues).toEqual([]);
    expect(api.state.buckets).toEqual([]);
    expect(api.state.scripts.size).toBe(0);
  };
  const uploadedBindings = (api: Fake) =>
    (api.state.scripts
      .get(WORKER)
      ?.uploads.filter((u) => (u.metadata.bindings ?? []).length > 0)
      .at(-1)?.metadata.bindings ?? []) as Binding[];

  it("without a workers.dev subdomain it stops, saying where to register one, and creates nothing", async () => {
    const { run, api } = await onAccount("no workers.dev subdomain", { subdomain: null });
    expect(run.code, run.stdout + run.stderr).not.toBe(0);
    expect(run.stdout).toContain("workers.dev subdomain: none");
    expect(run.stderr).toContain("This account has no workers.dev subdomain");
    expect(run.stderr).toContain(`https://dash.cloudflare.com/${api.accountId}/workers/onboarding`);
    expect(run.stderr).toContain("Nothing was created or changed.");
    expectNothingCreated(api);
  });

  it("on the Workers Free plan it stops, naming the Workers Paid plan and why, and creates nothing", async () => {
    const { run, api } = await onAccount("Workers Free plan", { plan: "free" });
    expect(run.code, run.stdout + run.stderr).not.toBe(0);
    expect(run.stdout).toContain("Workers Paid plan: no (Workers Free)");
    expect(run.stderr).toContain("The scheduler needs the Workers Paid plan");
    expect(run.stderr).toContain("10 ms of CPU and 50 subrequests");
    expect(run.stderr).toContain(`https://dash.cloudflare.com/${api.accountId}/workers/plans`);
    expect(run.stderr).toContain("Nothing was created or changed.");
    expectNothingCreated(api);
  });

  it("without R2 (code 10042) it deploys without the archive and says so once; a login that cannot read billing is told the plan it needs", async () => {
    // `wrangler login`'s OAuth scopes include no billing: the usual first deploy cannot read the plan
    const { run, api } = await onAccount("R2 not enabled, billing unreadable", { r2: false, plan: "unreadable" });
    expect(run.code, run.stdout + run.stderr).toBe(0);
    expect(run.stdout.split("\n").filter((line) => line.includes("10042"))).toEqual([
      `  History archive: off, R2 is not enabled on this account (code 10042): deploying without the ARCHIVE binding, finished history is only purged. To turn it on, enable R2 at https://dash.cloudflare.com/${api.accountId}/r2/overview and run npm run deploy again.`,
    ]);
    expect(run.stdout).toMatch(
      /Workers Paid plan: required \(.*10 ms of CPU.*\); not checked: this login cannot read the account's billing/,
    );
    // no R2 call but the preflight's read; the Worker is whole but for ARCHIVE
    expect(api.calls.filter((c) => c.path.includes("/r2/")).map(show)).toEqual(["GET /r2/buckets?per_page=1 -> 403"]);
    const bindings = uploadedBindings(api);
    expect(bindings.map((b) => b.name)).not.toContain("ARCHIVE");
    expect(bindings.filter((b) => b.type === "d1")).toHaveLength(plan.databases.length);
    expect(bindings.filter((b) => b.type === "queue")).toHaveLength(4);
    expect(readFileSync(DEPLOY_CONFIG, "utf8")).not.toMatch(/^\[\[r2_buckets\]\]/m);
    for (const db of api.state.databases) expect(db.migrations, db.name).toEqual(MIGRATIONS);
  });

  it("a location hint reaches every D1 and R2 create and the Worker's LOCATION_HINT; a bad one stops before any call", async () => {
    const bad = await onAccount("a bad location hint", {}, { SCHEDULER_LOCATION_HINT: "mars" });
    expect(bad.run.code).not.toBe(0);
    expect(bad.run.stderr).toContain('SCHEDULER_LOCATION_HINT must be one of wnam, enam, weur, eeur, apac, oc, got "mars"');
    expect(bad.api.calls.map(show)).toEqual([]);

    const { run, api } = await onAccount("location hint weur", {}, { SCHEDULER_LOCATION_HINT: "weur" });
    expect(run.code, run.stdout + run.stderr).toBe(0);
    expect(run.stdout).toContain("Location hint: weur (SCHEDULER_LOCATION_HINT)");
    const creates = api.calls.filter((c) => c.method === "POST" && /\/(d1\/database|r2\/buckets)$/.test(c.path) && c.status < 400);
    expect(creates.map((c) => `${c.name} ${c.location}`).sort()).toEqual(
      [...plan.databases.map((d) => `${d.name} weur`), "scheduler-archive weur"].sort(),
    );
    expect(uploadedBindings(api).find((b) => b.name === "LOCATION_HINT")).toMatchObject({ type: "plain_text", text: "weur" });
  });
});
