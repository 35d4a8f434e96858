/**
 * Bulk actions: cancel, pause or resume many jobs, or redrive many dead executions, by ids or by a
 * filter, in the background (actions/bulk-action.ts), and read one's progress. Documented in
 * actions.openapi.ts.
 */
import { type Context, Hono } from "hono";
import { type ActionState, BULK_JOB_KINDS, type BulkKind, bulkActionName, type Selector } from "../../actions/bulk-action";
import { isId, newId } from "../../core/id";
import { toRfc3339 } from "../../core/when";
import { objectOf } from "../../placement";
import { BulkJobsInput, BulkRedriveInput } from "../../schemas/requests";
import type { ActionView } from "../../schemas/responses";
import { ApiError, fromZodError } from "../../use-cases/errors";
import type { ApiEnv } from "../context";
import { idempotencyKeyHeader, limit, notFound, readJson, SINGLE_BODY_BYTES } from "../request";

export const actions = new Hono<ApiEnv>();

for (const kind of BULK_JOB_KINDS) {
  actions.post(`/v1/jobs/${kind}`, limit(SINGLE_BODY_BYTES), async (c) => {
    const parsed = BulkJobsInput.safeParse(await readJson(c));
    if (!parsed.success) throw fromZodError(parsed.error);
    const { ids, filter } = parsed.data;
    return startAction(c, kind, ids ? { ids: [...new Set(ids)] } : { filter: { ...filter } });
  });
}

actions.post("/v1/dlq/redrive", limit(SINGLE_BODY_BYTES), async (c) => {
  const parsed = BulkRedriveInput.safeParse(await readJson(c));
  if (!parsed.success) throw fromZodError(parsed.error);
  const { ids, filter } = parsed.data;
  return startAction(c, "redrive", ids ? { ids: [...new Set(ids)] } : { dead: { ...filter } });
});

actions.get("/v1/actions/:id", async (c) => {
  const id = c.req.param("id");
  if (!isId("act", id)) throw notFound("action");
  const state = await objectOf(c.env, c.env.BULK_ACTION, bulkActionName(c.get("tenant"), id)).view();
  if (!state) throw notFound("action");
  return c.json(presentAction(state));
});

/** Starts a bulk action (or finds the one its Idempotency-Key started): 202 with its progress. */
async function startAction(c: Context<ApiEnv>, kind: BulkKind, selector: Selector): Promise<Response> {
  const tenant = c.get("tenant");
  const headerKey = idempotencyKeyHeader(c);
  // a key names the action: the same key again finds it (whatever it was asked to do then)
  const id =
    headerKey === undefined ? newId("act", Date.now(), crypto.getRandomValues(new Uint8Array(16))) : await actionIdOf(kind, headerKey);
  const { state, reused } = await objectOf(c.env, c.env.BULK_ACTION, bulkActionName(tenant, id)).start({
    id,
    tenant,
    kind,
    selector,
    now: Date.now(),
  });
  if (reused) {
    throw new ApiError(
      "idempotency_key_reused",
      `Idempotency-Key started action ${id} with another selection; use a new key`,
      "Idempotency-Key",
    );
  }
  c.header("location", `/v1/actions/${id}`);
  return c.json(presentAction(state), 202);
}

/** A selector's filter as the request spelled it. */
function filterOf(selector: Exclude<Selector, { ids: string[] }>): Record<string, string> {
  if ("dead" in selector) return { ...selector.dead };
  const { status, label } = selector.filter;
  return { ...(status ? { status } : {}), ...(label ? { label: `${label.key}:${label.value}` } : {}) };
}

/** An action id from an Idempotency-Key: per tenant (the object's name holds the tenant) and kind. */
async function actionIdOf(kind: string, key: string): Promise<string> {
  const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(`${kind}\n${key}`)));
  return newId("act", 0, digest.slice(0, 16));
}

function presentAction(state: ActionState): ActionView {
  const { selector } = state;
  return {
    id: state.id,
    kind: state.kind,
    status: state.status,
    ...("ids" in selector ? { ids: selector.ids.length } : { filter: filterOf(selector) }),
    matched: state.matched,
    done: state.done,
    failed: state.failed,
    failures: state.failures,
    createdAt: toRfc3339(state.createdAt),
    finishedAt: toRfc3339(state.finishedAt),
  };
}
