/**
 * Every answer the integration tests get is held to the OpenAPI document: a route the document
 * names must answer a status it lists, with a body its schema for that status parses (strict:
 * an extra field fails). So a response that drifts from openapi.json fails whichever test saw it.
 */
import { z } from "zod";
import { documentedResponses, ROUTES } from "../../src/api/openapi";

const routes = ROUTES.map((route) => ({
  method: route.method.toUpperCase(),
  pattern: new RegExp(`^${route.path.replace(/\{[^}]+\}/g, "[^/]+")}$`),
  responses: documentedResponses(route),
}));

/** Throws when `response` (to `method` `url`) is not what the document says; unknown paths (404/405) are not checked. */
export async function assertDocumented(method: string, url: string, response: Response): Promise<void> {
  const path = new URL(url).pathname;
  const route = routes.find((r) => (r.method === method || (method === "HEAD" && r.method === "GET")) && r.pattern.test(path));
  if (!route || method === "HEAD") return;
  const documented = route.responses[response.status];
  if (!documented) throw new Error(`${method} ${path} answered ${response.status}, which openapi.json does not list for it`);
  const media = documented.content?.["application/json"];
  const schema = media && "schema" in media ? media.schema : undefined;
  if (!(schema instanceof z.ZodType)) return;
  const body: unknown = await response.clone().json();
  const parsed = schema.safeParse(body);
  if (!parsed.success) {
    throw new Error(
      `${method} ${path} ${response.status} does not match openapi.json: ${z.prettifyError(parsed.error)}\n${JSON.stringify(body).slice(0, 2000)}`,
    );
  }
}
