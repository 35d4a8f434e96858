/**
 * What `npm run deploy` (scripts/deploy.mjs) decides from wrangler.toml and the account before it
 * creates anything (issue 35 item 10 and the D1 part of item 8): the generated
 * .wrangler-deploy.toml without [[r2_buckets]] on an account without R2, with LOCATION_HINT in
 * [vars] when the hint is given for the run; which hint is in effect; whether an account's
 * subscriptions show a paid Workers plan. The deploy itself, against a fake API: e2e/deploy.test.ts.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { LOCATION_HINTS, locationHintOf, PreflightError, withoutR2Buckets, withVar, workersPlanOf } from "../../scripts/deploy.mjs";

const WRANGLER_TOML = readFileSync(join(import.meta.dirname, "../../wrangler.toml"), "utf8");

describe("the generated deploy config", () => {
  it("an account without R2 deploys wrangler.toml without its [[r2_buckets]] block, every other line kept", () => {
    const text = [
      'name = "x"',
      "",
      "[[r2_buckets]]",
      'binding = "ARCHIVE"',
      'bucket_name = "a"',
      "",
      "[[durable_objects.bindings]]",
      'name = "B"',
      "",
    ].join("\n");
    const out = withoutR2Buckets(text);
    expect(out).not.toMatch(/^\[\[r2_buckets\]\]/m);
    expect(out).not.toContain("ARCHIVE");
    expect(out).toContain('name = "x"\n');
    expect(out).toContain('[[durable_objects.bindings]]\nname = "B"\n');
    // the shipped wrangler.toml: only the ARCHIVE block goes
    const shipped = withoutR2Buckets(WRANGLER_TOML);
    expect(shipped).not.toMatch(/^\s*binding = "ARCHIVE"/m);
    expect(shipped.split("\n").filter((l) => /^\[/.test(l))).toEqual(
      WRANGLER_TOML.split("\n").filter((l) => /^\[/.test(l) && l !== "[[r2_buckets]]"),
    );
  });

  it("LOCATION_HINT goes into [vars]: added after its header, replaced when there, [vars] added when missing", () => {
    expect(withVar('[vars]\nBUCKETS = "8"\n\n[other]\n', "LOCATION_HINT", "weur")).toBe(
      '[vars]\nLOCATION_HINT = "weur"\nBUCKETS = "8"\n\n[other]\n',
    );
    expect(withVar('[vars]\nLOCATION_HINT = "enam"\n', "LOCATION_HINT", "weur")).toBe('[vars]\nLOCATION_HINT = "weur"\n');
    expect(withVar('name = "x"\n[triggers]\ncrons = []\n', "LOCATION_HINT", "oc")).toBe(
      'name = "x"\n[triggers]\ncrons = []\n\n[vars]\nLOCATION_HINT = "oc"\n',
    );
    // [vars.X] is another table: the var goes into [vars] itself
    expect(withVar('[vars.HANDLER_WORKERS.a]\nbinding = "A"\n', "LOCATION_HINT", "oc")).toBe(
      '[vars.HANDLER_WORKERS.a]\nbinding = "A"\n\n[vars]\nLOCATION_HINT = "oc"\n',
    );
    // the shipped wrangler.toml ends with an empty [vars]
    expect(withVar(WRANGLER_TOML, "LOCATION_HINT", "apac")).toMatch(/^\[vars\]\nLOCATION_HINT = "apac"\n/m);
  });
});

describe("the location hint in effect", () => {
  it("SCHEDULER_LOCATION_HINT wins over wrangler.toml [vars] LOCATION_HINT; neither is none", () => {
    expect(locationHintOf({}, {})).toBeNull();
    expect(locationHintOf({ LOCATION_HINT: "enam" }, {})).toEqual({ hint: "enam", source: "wrangler.toml [vars]" });
    expect(locationHintOf({ LOCATION_HINT: "enam" }, { SCHEDULER_LOCATION_HINT: "weur" })).toEqual({
      hint: "weur",
      source: "SCHEDULER_LOCATION_HINT",
    });
    expect(locationHintOf({}, { SCHEDULER_LOCATION_HINT: " " })).toBeNull();
  });

  it("only the six hints D1 accepts; anything else stops the deploy before it starts, naming where it was set", () => {
    expect(LOCATION_HINTS).toEqual(["wnam", "enam", "weur", "eeur", "apac", "oc"]);
    for (const hint of LOCATION_HINTS) expect(locationHintOf({}, { SCHEDULER_LOCATION_HINT: hint })?.hint).toBe(hint);
    // Durable Objects also take sam, afr and me; D1 does not
    expect(() => locationHintOf({}, { SCHEDULER_LOCATION_HINT: "me" })).toThrow(PreflightError);
    expect(() => locationHintOf({}, { SCHEDULER_LOCATION_HINT: "me" })).toThrow(/^SCHEDULER_LOCATION_HINT must be one of/);
    expect(() => locationHintOf({ LOCATION_HINT: "WEUR" }, {})).toThrow(/^wrangler.toml \[vars\] LOCATION_HINT must be one of/);
  });
});

describe("the Workers plan an account's subscriptions show", () => {
  const sub = (id: string, publicName?: string) => ({
    rate_plan: { id, ...(publicName ? { public_name: publicName } : {}) },
    state: "Paid",
  });
  it.each([
    ["Workers Paid by its id", [sub("workers_paid")], "paid"],
    ["Workers Paid by its name", [sub("wp-2024", "Workers Paid")], "paid"],
    ["a Workers Enterprise contract", [sub("workers-enterprise", "Workers Enterprise")], "paid"],
    ["no subscription", [], "free"],
    ["only other products", [sub("r2_paid", "R2 Paid"), sub("free")], "free"],
    ["Workers Free", [sub("workers_free", "Workers Free")], "free"],
  ] as const)("%s: %s", (_label, subscriptions, expected) => {
    expect(workersPlanOf([...subscriptions])).toBe(expected);
  });
});
