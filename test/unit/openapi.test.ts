/**
 * The OpenAPI document: generated from the zod schemas (src/api/openapi.ts), committed as
 * openapi.json, and valid OpenAPI 3.1 by a real validator. `npm run openapi` rewrites the
 * committed file after a change to the API; this test fails until it is rewritten.
 */
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import SwaggerParser from "@apidevtools/swagger-parser";
import openapiTS, { astToString } from "openapi-typescript";
import { describe, expect, it } from "vitest";
import { openApiDocument, ROUTES } from "../../src/api/openapi";

const COMMITTED = join(import.meta.dirname, "../../openapi.json");
const CLIENT_TYPES = join(import.meta.dirname, "../../packages/client/src/schema.ts");
const generated = `${JSON.stringify(openApiDocument(), null, 2)}\n`;
/** The client package's types, generated from the document by openapi-typescript. */
const clientTypes = `// Generated from openapi.json by openapi-typescript (npm run openapi). Do not edit.\n\n${astToString(
  await openapiTS(structuredClone(openApiDocument()) as never, { defaultNonNullable: false }),
)}`;
if (process.env.OPENAPI_WRITE === "1") {
  writeFileSync(COMMITTED, generated);
  writeFileSync(CLIENT_TYPES, clientTypes);
}

describe("openapi.json", () => {
  it("is the document the schemas generate (run `npm run openapi` after changing the API)", () => {
    expect(readFileSync(COMMITTED, "utf8")).toBe(generated);
  });

  it("is what the client package's types were generated from (packages/client/src/schema.ts)", () => {
    expect(readFileSync(CLIENT_TYPES, "utf8")).toBe(clientTypes);
  });

  it("is valid OpenAPI 3.1 (swagger-parser: the official schema, and every $ref resolves)", async () => {
    const api = await SwaggerParser.validate(structuredClone(openApiDocument()) as never);
    expect(api).toMatchObject({ openapi: "3.1.0" });
  });

  it("names each operation once and gives every keyed route the bearer scheme and the 401 answer", () => {
    type Operation = { operationId: string; security: unknown[]; responses: Record<string, unknown> };
    const paths = openApiDocument().paths as Record<string, Record<string, Operation>>;
    const ids = Object.values(paths).flatMap((item) => Object.values(item).map((o) => o.operationId));
    expect(new Set(ids).size).toBe(ROUTES.length);
    for (const route of ROUTES) {
      const operation = paths[route.path]?.[route.method];
      expect(operation, `${route.method} ${route.path}`).toBeDefined();
      if (route.keyed === false) expect(operation?.security).toEqual([]);
      else {
        expect(operation?.security).toEqual([{ apiKey: [] }]);
        expect(Object.keys(operation?.responses ?? {})).toContain("401");
      }
    }
  });

  it("documents the one error envelope, with the field at fault", () => {
    const schemas = openApiDocument().components?.schemas as Record<string, { required?: string[]; properties?: Record<string, unknown> }>;
    expect(schemas.Error?.required).toEqual(["error"]);
    expect(schemas.Error?.properties?.error).toMatchObject({ required: ["code", "message", "field"] });
  });
});
