/**
 * The OpenAPI 3.1 document, generated from the zod schemas the routes validate with (schemas.ts)
 * and answer with (responses.ts). Each routes file's entries stand beside it (routes/<resource>.openapi.ts,
 * apart from its handlers so that Node, which builds the document for `npm run openapi`, need not
 * load a Durable Object class); this module joins them. They are written beside the Hono routes
 * rather than through @hono/zod-openapi, because that package's validators would replace the API's
 * own body reading (bytes first: 415 for a foreign media type, 400 for bytes that are not UTF-8,
 * depth and lone-surrogate checks before parsing) and its one error envelope. A test holds the two
 * route lists equal, and `npm run openapi` writes the committed openapi.json that another test compares.
 */
import { OpenAPIRegistry, OpenApiGeneratorV31, type ResponseConfig } from "@asteasolutions/zod-to-openapi";
import { Health } from "../schemas/responses";
import { type ApiRoute, error, json } from "./route-doc";
import { ACTION_ROUTES } from "./routes/actions.openapi";
import { ALERT_ROUTES } from "./routes/alerts.openapi";
import { ARCHIVE_ROUTES } from "./routes/archive.openapi";
import { DEAD_LETTER_ROUTES } from "./routes/dead-letters.openapi";
import { EXECUTION_ROUTES } from "./routes/executions.openapi";
import { FLOW_CONTROL_ROUTES } from "./routes/flow-control.openapi";
import { JOB_ROUTES } from "./routes/jobs.openapi";
import { METRICS_ROUTES } from "./routes/metrics.openapi";
import { PULL_ROUTES } from "./routes/pull.openapi";

/** What every route with a key may answer. */
const KEYED_ERRORS = {
  401: error("missing, malformed or unknown API key"),
  429: {
    ...error("over the key's rate limit (1000 requests per 10 s)"),
    headers: { "Retry-After": { schema: { type: "integer" }, description: "seconds to wait" } },
  },
  500: error(
    "internal: a dependency failed (D1 unavailable); nothing accepted before was lost. A create may have been stored: send it again with the same idempotency key",
  ),
  503: {
    ...error(
      "a D1 shard the request needs did not answer (`shard_unavailable`, the message names it), fewer shards are bound than the deployment has had (`shards_lowered`), or a debounced create could not be completed (`unavailable`); retry with the same idempotency key",
    ),
    headers: { "Retry-After": { schema: { type: "integer" }, description: "seconds to wait" } },
  },
} satisfies Record<number, ResponseConfig>;

/** The routes app.ts serves itself, with no key. */
const SERVICE_ROUTES: ApiRoute[] = [
  {
    method: "get",
    path: "/healthz",
    operationId: "health",
    summary: "Liveness",
    keyed: false,
    responses: { 200: json(Health, "alive") },
  },
  {
    method: "get",
    path: "/openapi.json",
    operationId: "openapi",
    summary: "This document",
    keyed: false,
    responses: { 200: { description: "OpenAPI 3.1", content: { "application/json": { schema: { type: "object" } } } } },
  },
];

/** Every route of the API, in the order of the README's API table. */
export const ROUTES: ApiRoute[] = [
  ...JOB_ROUTES,
  ...ACTION_ROUTES,
  ...EXECUTION_ROUTES,
  ...ARCHIVE_ROUTES,
  ...DEAD_LETTER_ROUTES,
  ...ALERT_ROUTES,
  ...FLOW_CONTROL_ROUTES,
  ...PULL_ROUTES,
  ...METRICS_ROUTES,
  ...SERVICE_ROUTES,
];

/** The statuses a route may answer: its own and, for a keyed route, 401 and 429. */
export function documentedResponses({ keyed, responses }: ApiRoute): Record<number, ResponseConfig> {
  return keyed === false ? responses : { ...responses, ...KEYED_ERRORS };
}

let document: ReturnType<OpenApiGeneratorV31["generateDocument"]> | undefined;

/** The document (built once per isolate: it depends on nothing but the code). */
export function openApiDocument() {
  if (document) return document;
  const registry = new OpenAPIRegistry();
  const bearer = registry.registerComponent("securitySchemes", "apiKey", {
    type: "http",
    scheme: "bearer",
    description: "an API key; each key belongs to one tenant",
  });
  for (const route of ROUTES) {
    const { keyed, ...config } = route;
    registry.registerPath({ ...config, security: keyed === false ? [] : [{ [bearer.name]: [] }], responses: documentedResponses(route) });
  }
  document = new OpenApiGeneratorV31(registry.definitions).generateDocument({
    openapi: "3.1.0",
    info: {
      title: "edge-scheduler",
      version: "1",
      description: "Schedule HTTP calls at a time, after a delay, or on a cron schedule; at-least-once, signed per Standard Webhooks.",
    },
  });
  return document;
}
