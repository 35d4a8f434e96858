/**
 * What a route's OpenAPI entry is made of: each routes file's entries (routes/<resource>.openapi.ts)
 * are built from these, and openapi.ts joins them into the document.
 */
import type { ResponseConfig, RouteConfig } from "@asteasolutions/zod-to-openapi";
import { z } from "zod";
import { ErrorEnvelope } from "../schemas/responses";

/** A route as documented; `keyed: false` routes need no API key. */
export interface ApiRoute extends Omit<RouteConfig, "responses"> {
  responses: Record<number, ResponseConfig>;
  keyed?: false;
}

export const json = (schema: z.ZodType, description: string): ResponseConfig => ({
  description,
  content: { "application/json": { schema } },
});

export const error = (description: string): ResponseConfig => json(ErrorEnvelope, description);

export const BODY_ERRORS = {
  400: error("invalid input; `field` names the field at fault"),
  413: error("the body is larger than the route allows"),
  415: error("the body is not application/json"),
} satisfies Record<number, ResponseConfig>;

export const jsonBody = (schema: z.ZodType, required = true) => ({
  body: { required, content: { "application/json": { schema } } },
});

export const jobId = z.object({ id: z.string().meta({ description: "the job's id (job_…)" }) });
export const executionId = z.object({ id: z.string().meta({ description: "the execution's id (exe_…)" }) });
