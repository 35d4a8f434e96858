// A small fake of the Cloudflare API, for test/e2e/deploy.test.ts: the endpoints `npm run deploy`
// (scripts/deploy.mjs) reaches through wrangler, on 127.0.0.1, with in-memory state (D1 databases
// and their applied migrations, queues and their consumers, R2 buckets, the Worker's script,
// secrets and settings) and a record of every call. wrangler talks to it when
// CLOUDFLARE_API_BASE_URL is its `url`. Only what wrangler 4.156's commands read is answered; any
// other path is a 404 the record shows (`unknown`), so a new call wrangler makes is seen, never
// answered by accident. `failNextAfter` refuses one call (a 400 wrangler does not retry), as an
// interrupted deploy would leave things. What a first real account may lack is chosen per fake
// (issue 35 item 10), each answered as the API answers it: no workers.dev subdomain
// (`subdomain: null`: code 10007, what wrangler tests for), the Workers Free plan or a login that
// cannot read billing (`plan`), R2 not enabled (`r2: false`: code 10042, 403, on every R2 path,
// r2/api/error-codes).
import { createHash, randomUUID } from "node:crypto";
import { createServer } from "node:http";

/**
 * @typedef {{ method: string, path: string, query: string, status: number, name?: string, location?: string, unknown?: boolean, injected?: boolean }} Call
 *   name: what a create or a put names (a database, queue, bucket, secret; a consumer's queue; an upload's "draft" or "worker")
 *   location: the location hint a D1 or R2 create carried (primary_location_hint, locationHint)
 * @typedef {{ uuid: string, name: string, created_at: string, version: string, migrations: string[] }} Database
 * @typedef {{ queue_id: string, queue_name: string, created_on: string, modified_on: string, consumers: Record<string, unknown>[] }} Queue
 * @typedef {{ metadata: Record<string, any>, parts: string[] }} Upload
 */

const PREFIX = "/client/v4";

/**
 * Starts the fake on 127.0.0.1 (an ephemeral port unless `port`). Stop it with its own stop().
 *   subdomain: the account's workers.dev subdomain; null: it has none
 *   plan: "paid" (Workers Paid), "free" (Workers Free), "unreadable" (a login without Billing Read,
 *     as `wrangler login`'s OAuth scopes are)
 *   r2: whether R2 is enabled on the account
 * @param {{ port?: number, accountId?: string, subdomain?: string | null, plan?: "paid" | "free" | "unreadable", r2?: boolean }} [options]
 */
export async function startFakeCloudflare({
  port = 0,
  accountId = "0123456789abcdef0123456789abcdef",
  subdomain = /** @type {string | null} */ ("fake-account"),
  plan = /** @type {"paid" | "free" | "unreadable"} */ ("paid"),
  r2 = true,
} = {}) {
  /** @type {Call[]} */
  const calls = [];
  const state = {
    /** @type {Database[]} */
    databases: [],
    /** @type {Queue[]} */
    queues: [],
    /** @type {{ name: string, creation_date: string }[]} */
    buckets: [],
    /** @type {Map<string, { uploads: Upload[], secrets: Map<string, string>, schedules: unknown[], workersDev: boolean, versions: string[] }>} */
    scripts: new Map(),
  };
  /** @type {((call: Call) => boolean) | null} */
  let failAfter = null;
  let failNext = false;

  const server = createServer((req, res) => {
    /** @type {Buffer[]} */
    const chunks = [];
    req.on("data", (chunk) => chunks.push(chunk));
    req.on("end", () => {
      const url = new URL(req.url ?? "/", "http://127.0.0.1");
      const path = url.pathname.startsWith(PREFIX) ? url.pathname.slice(PREFIX.length) : url.pathname;
      /** @type {Call} */
      const call = { method: req.method ?? "GET", path, query: url.search, status: 200 };
      calls.push(call);
      const send = (/** @type {number} */ status, /** @type {unknown} */ body) => {
        call.status = status;
        res.writeHead(status, { "content-type": "application/json" });
        res.end(JSON.stringify(body));
      };
      if (failNext) {
        failNext = false;
        call.injected = true;
        send(400, {
          success: false,
          errors: [{ code: 7000, message: "injected failure (test/support/fake-cloudflare.mjs)" }],
          messages: [],
          result: null,
        });
        return;
      }
      handle(call, url, Buffer.concat(chunks), req.headers["content-type"] ?? "")
        .then(({ status = 200, result, resultInfo, errors, graphql }) => {
          if (failAfter?.(call)) {
            failAfter = null;
            failNext = true;
          }
          if (graphql) return send(status, graphql);
          send(status, {
            success: status < 400,
            errors: errors ?? [],
            messages: [],
            result: result ?? null,
            ...(resultInfo ? { result_info: resultInfo } : {}),
          });
        })
        .catch((/** @type {unknown} */ error) =>
          send(500, { success: false, errors: [{ code: 10000, message: String(error) }], result: null }),
        );
    });
  });

  const now = () => new Date().toISOString();
  const notFound = (/** @type {number} */ code, /** @type {string} */ message) => ({ status: 404, errors: [{ code, message }] });
  /** one page of a list, as the API pages them (page, per_page) */
  const page = (/** @type {unknown[]} */ items, /** @type {URL} */ url) => {
    const perPage = Number(url.searchParams.get("per_page") ?? 20);
    const n = Number(url.searchParams.get("page") ?? 1);
    const result = items.slice((n - 1) * perPage, n * perPage);
    return { result, resultInfo: { page: n, per_page: perPage, count: result.length, total_count: items.length } };
  };
  const script = (/** @type {string} */ name) => state.scripts.get(name);
  const ensureScript = (/** @type {string} */ name) => {
    let s = state.scripts.get(name);
    if (!s) {
      s = { uploads: [], secrets: new Map(), schedules: [], workersDev: false, versions: [] };
      state.scripts.set(name, s);
    }
    return s;
  };
  const scriptMissing = () => notFound(10007, "This Worker does not exist on your account.");

  /**
   * @param {Call} call
   * @param {URL} url
   * @param {Buffer} body
   * @param {string} contentType
   * @returns {Promise<{ status?: number, result?: unknown, resultInfo?: unknown, errors?: unknown[], graphql?: unknown }>}
   */
  async function handle(call, url, body, contentType) {
    const { method, path } = call;
    const json = () => (body.length ? JSON.parse(body.toString("utf8")) : {});
    let m;
    // who is asking
    if (method === "GET" && path === "/user/tokens/verify") return { result: { id: "token", status: "active" } };
    if (method === "GET" && path === "/accounts") return { result: [{ id: accountId, name: "Fake account" }] };
    if (method === "GET" && path === "/memberships") return { result: [{ id: "m", account: { id: accountId, name: "Fake account" } }] };
    if (method === "GET" && path === "/user") return { result: { id: "user", email: "user@example.com" } };
    // the R2 bucket's metrics (wrangler r2 bucket info): an empty bucket
    if (method === "POST" && path === "/graphql")
      return { result: null, graphql: { data: { viewer: { accounts: [{ r2StorageAdaptiveGroups: [] }] } }, errors: null } };
    const account = `/accounts/${accountId}`;
    if (!path.startsWith(`${account}/`)) return { ...notFound(7003, `no such account or route: ${path}`) };
    const rest = path.slice(account.length);

    // the account's plan (GET /accounts/{id}/subscriptions, Billing Read). Cloudflare documents the
    // list's shape, not its plan ids: Workers Paid as third parties report it; a Free account lists
    // no paid Workers plan
    if (rest === "/subscriptions" && method === "GET") {
      if (plan === "unreadable") return { status: 403, errors: [{ code: 10000, message: "Authentication error" }] };
      if (plan === "free") return { result: [] };
      return {
        result: [
          {
            id: "0f6c3d0e1c6f4b3a9a3c8d2e7b5a4f10",
            rate_plan: { id: "workers_paid", public_name: "Workers Paid", currency: "USD", scope: "account", is_contract: false },
            state: "Paid",
            frequency: "monthly",
            price: 5,
            currency: "USD",
            current_period_start: now(),
            current_period_end: now(),
          },
        ],
      };
    }
    // an account that never enabled R2: every R2 call is refused (NotEntitled)
    if (!r2 && rest.startsWith("/r2/"))
      return { status: 403, errors: [{ code: 10042, message: "Please enable R2 through the Cloudflare Dashboard." }] };

    // D1
    if (rest === "/d1/database" && method === "GET") {
      const name = url.searchParams.get("name");
      return page(
        state.databases.filter((d) => !name || d.name === name).map(({ migrations, ...d }) => d),
        url,
      );
    }
    if (rest === "/d1/database" && method === "POST") {
      const { name, primary_location_hint } = json();
      call.name = name;
      if (primary_location_hint !== undefined) call.location = primary_location_hint;
      if (state.databases.some((d) => d.name === name))
        return { status: 400, errors: [{ code: 7502, message: "A database with that name already exists" }] };
      const db = { uuid: randomUUID(), name, created_at: now(), version: "production", migrations: [] };
      state.databases.push(db);
      return { result: { uuid: db.uuid, name: db.name, created_at: db.created_at, version: db.version } };
    }
    m = method === "GET" ? /^\/d1\/database\/([^/]+)$/.exec(rest) : null;
    if (m) {
      const key = decodeURIComponent(m[1] ?? "");
      const db = state.databases.find((d) => d.uuid === key || d.name === key);
      if (!db) return notFound(7404, "The database could not be found");
      return { result: { uuid: db.uuid, name: db.name, created_at: db.created_at, version: db.version, num_tables: 0, file_size: 0 } };
    }
    m = method === "POST" ? /^\/d1\/database\/([^/]+)\/query$/.exec(rest) : null;
    if (m) {
      const db = state.databases.find((d) => d.uuid === m?.[1]);
      if (!db) return notFound(7404, "The database could not be found");
      const { sql } = json();
      const meta = { duration: 1, rows_read: 0, rows_written: 0, changes: 0, size_after: 0 };
      // wrangler's migration table: listed (SELECT * FROM "d1_migrations"), and one INSERT per migration applied
      if (/^SELECT \*\s+FROM "d1_migrations"/.test(sql)) {
        return { result: [{ results: db.migrations.map((name, i) => ({ id: i + 1, name, applied_at: now() })), success: true, meta }] };
      }
      const applied = /INSERT INTO "d1_migrations" \(name\)\s+values \('((?:[^']|'')*)'\);\s*$/.exec(sql);
      if (applied) db.migrations.push((applied[1] ?? "").replace(/''/g, "'"));
      return { result: [{ results: [], success: true, meta }] };
    }

    // Queues
    if (rest === "/queues" && method === "GET") {
      const name = url.searchParams.get("name");
      const items = state.queues
        .filter((q) => !name || q.queue_name === name)
        .map(({ consumers, ...q }) => ({
          ...q,
          producers_total_count: 0,
          consumers_total_count: consumers.length,
          consumers,
          producers: [],
        }));
      return page(items, url);
    }
    if (rest === "/queues" && method === "POST") {
      const { queue_name } = json();
      call.name = queue_name;
      if (state.queues.some((q) => q.queue_name === queue_name))
        return { status: 400, errors: [{ code: 11009, message: "Queue name already taken" }] };
      const queue = { queue_id: randomUUID().replace(/-/g, ""), queue_name, created_on: now(), modified_on: now(), consumers: [] };
      state.queues.push(queue);
      const { consumers, ...shown } = queue;
      return { result: shown };
    }
    m = /^\/queues\/([^/]+)\/consumers$/.exec(rest);
    if (m) {
      const queue = state.queues.find((q) => q.queue_id === m?.[1]);
      if (!queue) return notFound(11000, "Queue not found");
      if (method === "GET") return { result: queue.consumers };
      if (method === "POST") {
        const { script_name, ...rest } = json();
        call.name = queue.queue_name;
        // a queue has one consumer per Worker, as the API has it
        if (queue.consumers.some((c) => c.script === script_name))
          return { status: 400, errors: [{ code: 11004, message: "consumer already exists" }] };
        const consumer = { consumer_id: randomUUID().replace(/-/g, ""), ...rest, script: script_name, created_on: now() };
        queue.consumers.push(consumer);
        return { result: consumer };
      }
    }
    m = method === "PUT" ? /^\/queues\/([^/]+)\/consumers\/([^/]+)$/.exec(rest) : null;
    if (m) {
      const queue = state.queues.find((q) => q.queue_id === m?.[1]);
      const at = queue?.consumers.findIndex((c) => c.consumer_id === m?.[2]) ?? -1;
      if (!queue || at < 0) return notFound(11000, "Consumer not found");
      const { script_name, ...changes } = json();
      queue.consumers[at] = { ...queue.consumers[at], ...changes, script: script_name };
      return { result: queue.consumers[at] };
    }

    // R2
    if (rest === "/r2/buckets" && method === "GET") return { result: { buckets: state.buckets } };
    if (rest === "/r2/buckets" && method === "POST") {
      const { name, locationHint } = json();
      call.name = name;
      if (locationHint !== undefined) call.location = locationHint;
      if (state.buckets.some((b) => b.name === name))
        return { status: 409, errors: [{ code: 10004, message: "The bucket you tried to create already exists" }] };
      const bucket = { name, creation_date: now() };
      state.buckets.push(bucket);
      return { result: bucket };
    }
    m = method === "GET" ? /^\/r2\/buckets\/([^/]+)$/.exec(rest) : null;
    if (m) {
      const bucket = state.buckets.find((b) => b.name === decodeURIComponent(m?.[1] ?? ""));
      if (!bucket) return notFound(10006, "The specified bucket does not exist.");
      return { result: { ...bucket, location: "ENAM", storage_class: "Standard" } };
    }

    // Workers: the script, its secrets and settings
    m = /^\/workers\/scripts\/([^/]+)\/secrets$/.exec(rest);
    if (m) {
      const s = script(m[1] ?? "");
      const put = method === "PUT" ? json() : null;
      if (put) call.name = put.name;
      if (!s) return scriptMissing();
      if (method === "GET") return { result: [...s.secrets.keys()].map((name) => ({ name, type: "secret_text" })) };
      if (put) {
        // only a digest is kept: the fake holds no secret, the test compares what it printed
        s.secrets.set(put.name, createHash("sha256").update(String(put.text)).digest("hex"));
        return { result: { name: put.name, type: "secret_text" } };
      }
    }
    m = method === "PUT" ? /^\/workers\/scripts\/([^/]+)$/.exec(rest) : null;
    if (m) {
      const form = await new Response(body, { headers: { "content-type": contentType } }).formData();
      const metadata = JSON.parse(String(await textOf(form.get("metadata"))));
      // a binding to R2 on an account without it is refused (code as wrangler users report it)
      const bucket = (metadata.bindings ?? []).find((/** @type {{ type: string }} */ b) => b.type === "r2_bucket");
      if (!r2 && bucket)
        return {
          status: 400,
          errors: [
            {
              code: 10136,
              message: `R2 binding error for bucket '${bucket.bucket_name}': Please enable R2 through the Cloudflare Dashboard.`,
            },
          ],
        };
      const s = ensureScript(m[1] ?? "");
      s.uploads.push({ metadata, parts: [...form.keys()] });
      call.name = (metadata.bindings ?? []).length > 0 ? "worker" : "draft";
      const id = randomUUID();
      s.versions.push(id);
      return {
        result: { id: m[1], etag: id, deployment_id: id, startup_time_ms: 1, has_modules: true, handlers: ["fetch", "queue", "scheduled"] },
      };
    }
    m = method === "GET" ? /^\/workers\/services\/([^/]+)$/.exec(rest) : null;
    if (m) {
      if (!script(m[1] ?? "")) return scriptMissing();
      return {
        result: { id: m[1], default_environment: { environment: "production", script: { id: m[1], last_deployed_from: "wrangler" } } },
      };
    }
    m = /^\/workers\/scripts\/([^/]+)\/schedules$/.exec(rest);
    if (m) {
      const s = script(m[1] ?? "");
      if (!s) return scriptMissing();
      if (method === "PUT") s.schedules = json();
      return { result: { schedules: s.schedules } };
    }
    m = /^\/workers\/scripts\/([^/]+)\/subdomain$/.exec(rest);
    if (m) {
      const s = script(m[1] ?? "");
      if (!s) return scriptMissing();
      if (method === "POST") s.workersDev = Boolean(json().enabled);
      return { result: { enabled: s.workersDev, previews_enabled: s.workersDev } };
    }
    m = method === "GET" ? /^\/workers\/scripts\/([^/]+)\/deployments$/.exec(rest) : null;
    if (m) {
      const s = script(m[1] ?? "");
      if (!s) return scriptMissing();
      const latest = s.versions.at(-1);
      const deployments = latest
        ? [
            {
              id: `deployment-${latest}`,
              source: "wrangler",
              strategy: "percentage",
              created_on: now(),
              versions: [{ version_id: latest, percentage: 100 }],
            },
          ]
        : [];
      return { result: { deployments } };
    }
    m = method === "GET" ? /^\/workers\/scripts\/([^/]+)\/settings$/.exec(rest) : null;
    if (m) {
      const s = script(m[1] ?? "");
      const last = s?.uploads.at(-1);
      if (!s || !last) return scriptMissing();
      return {
        result: {
          bindings: last.metadata.bindings ?? [],
          compatibility_date: last.metadata.compatibility_date,
          compatibility_flags: last.metadata.compatibility_flags ?? [],
        },
      };
    }
    m = method === "GET" ? /^\/workers\/workers\/([^/]+)$/.exec(rest) : null;
    if (m) {
      const s = script(m[1] ?? "");
      if (!s) return scriptMissing();
      return { result: { id: m[1], name: m[1], subdomain: { enabled: s.workersDev, previews_enabled: s.workersDev } } };
    }
    if (rest === "/workers/subdomain" && method === "GET") {
      if (subdomain === null) return notFound(10007, "workers.api.error.not_found");
      return { result: { subdomain } };
    }
    m = method === "POST" ? /^\/workers\/scripts\/([^/]+)\/assets-upload-session$/.exec(rest) : null;
    if (m) {
      // every file already uploaded: no bucket to send, the completion token at once
      return { result: { jwt: "fake-assets-completion-token", buckets: [] } };
    }

    call.unknown = true;
    return notFound(7003, `the fake Cloudflare API does not know ${method} ${path}`);
  }

  await new Promise((resolve) => server.listen(port, "127.0.0.1", () => resolve(undefined)));
  const address = server.address();
  if (address === null || typeof address === "string") throw new Error("the fake Cloudflare API has no port");
  return {
    /** CLOUDFLARE_API_BASE_URL */
    url: `http://127.0.0.1:${address.port}${PREFIX}`,
    accountId,
    subdomain,
    calls,
    state,
    /** after the next call `matches` answers, the call after it is refused once (a 400) */
    failNextAfter(/** @type {(call: Call) => boolean} */ matches) {
      failAfter = matches;
    },
    stop() {
      return new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve(undefined));
      });
    },
  };
}

/** @param {FormDataEntryValue | null} value */
async function textOf(value) {
  if (value === null) return "{}";
  return typeof value === "string" ? value : await value.text();
}
