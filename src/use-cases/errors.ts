/** The use-cases' refusals, each answered in one error envelope: { error: { code, message, field } } (api/app.ts). */
import type { ContentfulStatusCode } from "hono/utils/http-status";
import type { z } from "zod";
import { findUnfaithful } from "../core/json-text";

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

/** "jobs[3].target.url" from a zod path, with an optional prefix. */
export function fieldPath(path: ReadonlyArray<PropertyKey>, prefix = ""): string {
  let out = prefix;
  for (const part of path) {
    if (typeof part === "number") out += `[${part}]`;
    else {
      // a key that is not well-formed Unicode is shown escaped, so the error itself is valid text
      const name = typeof part === "string" && !part.isWellFormed() ? JSON.stringify(part).slice(1, -1) : String(part);
      out += out ? `.${name}` : name;
    }
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

/** A 400 naming the first value of a request that could not be stored and sent as given (core/json-text.ts). */
export function refuseUnfaithful(raw: unknown, prefix = ""): void {
  const found = findUnfaithful(raw);
  if (!found) return;
  const field = fieldPath(found.path, prefix) || "body";
  const freeForm = found.path[0] === "metadata" || (found.path[0] === "target" && found.path[1] === "body");
  const message = `${field}: ${found.problem}${freeForm && found.advice ? `; ${found.advice}` : ""}`;
  throw new ApiError(400, "invalid_field", message, field);
}
