/** One error envelope for every HTTP error: { error: { code, message, field } }. */
import type { Context } from "hono";
import type { ContentfulStatusCode } from "hono/utils/http-status";
import type { z } from "zod";

export class ApiError extends Error {
  constructor(
    readonly status: ContentfulStatusCode,
    readonly code: string,
    message: string,
    readonly field: string | null = null,
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
  }
}

export function errorBody(code: string, message: string, field: string | null = null) {
  return { error: { code, message, field } };
}

export function respondError(c: Context, error: ApiError): Response {
  for (const [name, value] of Object.entries(error.headers)) c.header(name, value);
  return c.json(errorBody(error.code, error.message, error.field), error.status);
}

/** "jobs[3].target.url" from a zod path, with an optional prefix. */
export function fieldPath(path: ReadonlyArray<PropertyKey>, prefix = ""): string {
  let out = prefix;
  for (const part of path) {
    if (typeof part === "number") out += `[${part}]`;
    else out += out ? `.${String(part)}` : String(part);
  }
  return out;
}

/** The first zod issue as a 400 naming its field. */
export function fromZodError(error: z.ZodError, prefix = ""): ApiError {
  const issue = error.issues[0]!;
  if (issue.code === "unrecognized_keys") {
    const key = issue.keys[0] || '""'; // an empty key still gets a visible name
    const field = fieldPath([...issue.path, key], prefix);
    return new ApiError(400, "unknown_field", `unknown field "${field}"`, field);
  }
  const field = fieldPath(issue.path, prefix) || "body"; // an empty path is the request body itself
  return new ApiError(400, "invalid_field", `${field}: ${issue.message}`, field);
}
