/** Handler Worker grants (core/handler-workers.ts) and their setting (config.ts HANDLER_WORKERS). */
import { describe, expect, it } from "vitest";
import { ConfigSchema } from "../../src/config";
import { grantedBinding } from "../../src/core/handler-workers";

const WORKERS = {
  billing: { binding: "BILLING", tenants: ["acme", "initech"] },
  shared: { binding: "SHARED", tenants: ["*"] },
};

describe("grantedBinding", () => {
  it("answers the binding of a Worker granted to the tenant, by name or by *", () => {
    expect(grantedBinding(WORKERS, "acme", "billing")).toBe("BILLING");
    expect(grantedBinding(WORKERS, "globex", "shared")).toBe("SHARED");
  });

  it("answers null for a Worker not granted, one that does not exist, and names Object.prototype has", () => {
    expect(grantedBinding(WORKERS, "globex", "billing")).toBeNull();
    for (const name of ["nope", "constructor", "toString", "__proto__", "hasOwnProperty"])
      expect(grantedBinding(WORKERS, "acme", name)).toBeNull();
  });
});

describe("HANDLER_WORKERS", () => {
  const parse = (value: unknown) => ConfigSchema.safeParse({ HANDLER_WORKERS: value });

  it("is none by default, and reads JSON text or a [vars] table", () => {
    expect(parse(undefined).data?.HANDLER_WORKERS).toEqual({});
    expect(parse("").data?.HANDLER_WORKERS).toEqual({});
    expect(parse(JSON.stringify(WORKERS)).data?.HANDLER_WORKERS).toEqual(WORKERS);
    expect(parse(WORKERS).data?.HANDLER_WORKERS).toEqual(WORKERS);
  });

  it.each<[string, unknown, string]>([
    ["text that is not JSON", "{billing: }", "is not JSON"],
    ["a name out of shape", { Billing: { binding: "B", tenants: ["*"] } }, ""],
    ["no tenants", { billing: { binding: "B", tenants: [] } }, ""],
    ["a binding that is no binding name", { billing: { binding: "a-b", tenants: ["*"] } }, "binding name"],
  ])("refuses %s, naming the setting", (_case, value, message) => {
    const parsed = parse(value);
    expect(parsed.success).toBe(false);
    expect(parsed.error?.issues[0]?.path[0]).toBe("HANDLER_WORKERS");
    expect(parsed.error?.issues.map((i) => i.message).join(" ")).toContain(message);
  });
});
