/**
 * The served document: GET /openapi.json needs no key and is byte for byte the committed
 * openapi.json; the document's routes are exactly the Worker's. (Every answer any integration
 * test gets is also held to the document: helpers.ts api() → conformance.ts.)
 */
import { describe, expect, it } from "vitest";
import committed from "../../openapi.json";
import { app } from "../../src/api/app";
import { ROUTES } from "../../src/api/openapi";
import { api } from "./helpers";

describe("GET /openapi.json", () => {
  it("is served without a key, and is the committed openapi.json", async () => {
    const res = await api("/openapi.json", {}, null);
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toMatch(/^application\/json/);
    expect(await res.json()).toEqual(committed);
  });

  it("documents exactly the routes the Worker serves", () => {
    const served = app.routes
      .filter((r) => r.method !== "ALL")
      .map((r) => `${r.method} ${r.path.replace(/:([^/]+)/g, "{$1}")}`)
      .sort();
    const documented = ROUTES.map((r) => `${r.method.toUpperCase()} ${r.path}`).sort();
    expect(documented).toEqual([...new Set(served)]);
  });

  it("holds answers to the document: an answer with a field it does not name fails the check", async () => {
    const { assertDocumented } = await import("./conformance");
    const job = { error: { code: "x", message: "y", field: null }, extra: 1 };
    const drifted = new Response(JSON.stringify(job), { status: 404, headers: { "content-type": "application/json" } });
    await expect(assertDocumented("GET", "http://scheduler/v1/jobs/job_1", drifted)).rejects.toThrow(/does not match openapi.json/);
    const undocumented = new Response("{}", { status: 418 });
    await expect(assertDocumented("GET", "http://scheduler/v1/jobs/job_1", undocumented)).rejects.toThrow(/does not list/);
  });
});
