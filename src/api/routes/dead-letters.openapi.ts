/** The OpenAPI entries of dead-letters.ts. */

import { ListDeadQuery } from "../../schemas/requests";
import { ExecutionList, RedrivenView } from "../../schemas/responses";
import { type ApiRoute, BODY_ERRORS, error, executionId, json } from "../route-doc";

export const DEAD_LETTER_ROUTES: ApiRoute[] = [
  {
    method: "post",
    path: "/v1/executions/{id}/redrive",
    operationId: "redriveExecution",
    summary: "Run a dead execution again with a fresh attempt budget",
    request: { params: executionId },
    responses: {
      202: json(RedrivenView, "redriven"),
      404: error("no such execution"),
      409: error(
        "not_dead, job_canceled, job_inactive, or conflict (the job changed meanwhile); or the bucket's refusal: duplicate, unknown, not_due",
      ),
    },
  },
  {
    method: "get",
    path: "/v1/dlq",
    operationId: "listDeadExecutions",
    summary: "Dead executions, latest first",
    request: { query: ListDeadQuery },
    responses: { 200: json(ExecutionList, "a page; follow nextCursor"), 400: BODY_ERRORS[400] },
  },
];
