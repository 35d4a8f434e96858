/**
 * The HTTP API (Hono): one sub-app a resource (routes/<resource>.ts, each with its OpenAPI entries
 * beside it), mounted with app.route() as Hono's examples do, behind one error envelope. Every /v1
 * route and /metrics need a bearer key; /healthz and /openapi.json do not.
 */
import { type Context, Hono } from "hono";
import { checkShardCount, describeFailure, ShardsFull, ShardsLowered, ShardUnavailable, shardsOf } from "../db/shards";
import { ApiError, errorBody } from "../use-cases/errors";
import { requireApiKey } from "./auth";
import type { ApiEnv } from "./context";
import { openApiDocument } from "./openapi";
import { actions } from "./routes/actions";
import { alerts } from "./routes/alerts";
import { archive } from "./routes/archive";
import { deadLetters } from "./routes/dead-letters";
import { executions } from "./routes/executions";
import { flowControl } from "./routes/flow-control";
import { jobs } from "./routes/jobs";
import { metrics } from "./routes/metrics";
import { pull } from "./routes/pull";

export const app = new Hono<ApiEnv>();

app.onError((error, c) => {
  if (error instanceof ApiError) return respondError(c, error);
  // no shard has room for new jobs: 507, naming them and what to do
  if (error instanceof ShardsFull) {
    console.error(error);
    return respondError(c, new ApiError("shards_full", error.message));
  }
  // a shard that did not answer: only what needs it fails, with a 503 naming it
  if (error instanceof ShardUnavailable || error instanceof ShardsLowered) {
    // the cause (D1's text: SQL, parameters) is logged, never answered
    console.error(describeFailure(error));
    const code = error instanceof ShardsLowered ? "shards_lowered" : "shard_unavailable";
    return respondError(c, new ApiError(code, error.message, null, { "retry-after": "1" }));
  }
  console.error("unhandled API error", error);
  return c.json(errorBody("internal", "internal error; nothing you sent was lost"), 500);
});
app.notFound((c) => {
  const allowed = methodsAllowedOn(c.req.path);
  if (allowed.length === 0) return c.json(errorBody("not_found", `no route ${c.req.method} ${c.req.path}`), 404);
  c.header("allow", allowed.join(", "));
  return c.json(
    errorBody("method_not_allowed", `${c.req.method} is not allowed on ${c.req.path}; use ${allowed.join(", ")}`, "method"),
    405,
  );
});

app.get("/healthz", (c) => c.json({ ok: true }));
app.get("/openapi.json", (c) => c.json(openApiDocument()));

app.use("/v1/*", requireApiKey);
app.use("/metrics", requireApiKey);
// fewer shards bound than the deployment has had would strand jobs: every request is refused until they are back
app.use("/v1/*", async (c, next) => {
  await checkShardCount(shardsOf(c.env));
  await next();
});
app.use("/metrics", async (c, next) => {
  await checkShardCount(shardsOf(c.env));
  await next();
});

// each resource's routes spell their whole paths, so a path reads the same here, in its file and in openapi.json
app.route("/", jobs);
app.route("/", actions);
app.route("/", executions);
app.route("/", archive);
app.route("/", deadLetters);
app.route("/", alerts);
app.route("/", flowControl);
app.route("/", pull);
app.route("/", metrics);

function respondError(c: Context, error: ApiError): Response {
  for (const [name, value] of Object.entries(error.headers)) c.header(name, value);
  return c.json(errorBody(error.code, error.message, error.field), error.status);
}

let routeMethods: { pattern: RegExp; method: string }[] | undefined;

/** The methods the routes serve on a path (Hono answers HEAD with GET's handler). */
function methodsAllowedOn(path: string): string[] {
  routeMethods ??= app.routes
    .filter((r) => r.method !== "ALL")
    .map((r) => ({ pattern: new RegExp(`^${r.path.replace(/:[^/]+/g, "[^/]+")}$`), method: r.method }));
  const methods = new Set(routeMethods.filter((r) => r.pattern.test(path)).map((r) => r.method));
  if (methods.has("GET")) methods.add("HEAD");
  return [...methods].sort();
}
