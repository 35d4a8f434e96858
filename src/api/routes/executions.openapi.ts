/** The OpenAPI entries of executions.ts. */
import { z } from "zod";
import { ListExecutionsQuery } from "../../schemas/requests";
import { ArchivedExecutionView, ExecutionList, ExecutionView, JobExecutions } from "../../schemas/responses";
import { type ApiRoute, BODY_ERRORS, error, executionId, jobId, json } from "../route-doc";

export const EXECUTION_ROUTES: ApiRoute[] = [
  {
    method: "get",
    path: "/v1/jobs/{id}/executions",
    operationId: "listJobExecutions",
    summary: "A job's executions, latest first, with their attempts",
    request: { params: jobId },
    responses: { 200: json(JobExecutions, "at most 100 executions"), 404: error("no such job") },
  },
  {
    method: "get",
    path: "/v1/executions",
    operationId: "listExecutions",
    summary:
      "Your executions, newest first, filtered: one-off jobs' and finished occurrences (with jobId, the job's live ones too); a page may be short, follow nextCursor",
    request: { query: ListExecutionsQuery },
    responses: { 200: json(ExecutionList, "a page; follow nextCursor"), 400: BODY_ERRORS[400] },
  },
  {
    method: "get",
    path: "/v1/executions/{id}",
    operationId: "getExecution",
    summary: "One execution",
    request: { params: executionId },
    responses: {
      200: json(
        z.union([ExecutionView, ArchivedExecutionView]),
        "the execution; once D1 no longer holds it, from the history archive (`archived: true`; one R2 list per 1,000 objects of its hour, and one read)",
      ),
      404: error("no such execution"),
    },
  },
];
