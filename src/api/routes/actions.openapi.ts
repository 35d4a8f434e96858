/** The OpenAPI entries of actions.ts. */
import { z } from "zod";
import { BulkJobsInput, BulkRedriveInput } from "../../schemas/requests";
import { ActionView } from "../../schemas/responses";
import { type ApiRoute, BODY_ERRORS, error, json, jsonBody } from "../route-doc";

const BulkJobs = BulkJobsInput.meta({ id: "BulkJobs" });
const BulkRedrive = BulkRedriveInput.meta({ id: "BulkRedrive" });

/** A route that starts a bulk action: 202 with it (or with the one its Idempotency-Key started). */
function bulkRoute(path: string, operationId: string, what: string, body: z.ZodType): ApiRoute {
  return {
    method: "post",
    path,
    operationId,
    summary: `${what}, by ids or by a filter, in the background`,
    request: {
      headers: z.object({
        "Idempotency-Key": z.string().min(1).max(200).optional().meta({ description: "the same key again answers the same action" }),
      }),
      ...jsonBody(body),
    },
    responses: {
      202: {
        ...json(ActionView, "started (or, with a key seen before, the action it started)"),
        headers: { Location: { schema: { type: "string" } } },
      },
      ...BODY_ERRORS,
      409: error("idempotency_key_reused: the Idempotency-Key started an action with another selection"),
    },
  };
}

export const ACTION_ROUTES: ApiRoute[] = [
  ...(["cancel", "pause", "resume"] as const).map((kind) =>
    bulkRoute(`/v1/jobs/${kind}`, `${kind}Jobs`, `${kind[0]!.toUpperCase()}${kind.slice(1)} many jobs`, BulkJobs),
  ),
  bulkRoute("/v1/dlq/redrive", "redriveDeadExecutions", "Redrive many dead executions", BulkRedrive),
  {
    method: "get",
    path: "/v1/actions/{id}",
    operationId: "getAction",
    summary: "A bulk action's progress",
    request: { params: z.object({ id: z.string().meta({ description: "act_…" }) }) },
    responses: { 200: json(ActionView, "the action"), 404: error("no such action") },
  },
];
