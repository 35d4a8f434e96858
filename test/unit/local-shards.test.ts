/**
 * scripts/local-env.mjs withShards: the local stack and the integration tests run wrangler.toml
 * with a shard count of their own (2 for `npm start`, 1 and 3 in the tests), whatever it binds.
 */
import { readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { unstable_readConfig } from "wrangler";
import { ROOT, withShards } from "../../scripts/local-env.mjs";

const wranglerToml = readFileSync(join(ROOT, "wrangler.toml"), "utf8");
const bindingsOf = (text: string) => [...text.matchAll(/^\[\[d1_databases\]\]\nbinding = "([^"]+)"/gm)].map((m) => m[1]);
const headersOf = (text: string) => [...text.matchAll(/^\[.*$/gm)].map((m) => m[0]).filter((h) => h !== "[[d1_databases]]");

describe("withShards: wrangler.toml with exactly S D1 shards", () => {
  it("wrangler.toml ships the 4 shards docs/capacity.md recommends", () => {
    expect(bindingsOf(wranglerToml)).toEqual(["DB", "DB_1", "DB_2", "DB_3"]);
  });

  it.each([1, 2, 3, 6])("S = %i: DB and DB_1..DB_{S-1}, each with the migrations; everything else as it was", (shards) => {
    const text = withShards(wranglerToml, shards);
    expect(bindingsOf(text)).toEqual(Array.from({ length: shards }, (_, i) => (i === 0 ? "DB" : `DB_${i}`)));
    expect(text.match(/^migrations_dir = "migrations"$/gm)?.length).toBe(shards);
    // shard 0 keeps wrangler.toml's database (its id), and no other table is touched
    expect(text).toContain('binding = "DB"\ndatabase_name = "scheduler"\ndatabase_id = "00000000-0000-0000-0000-000000000000"');
    expect(headersOf(text)).toEqual(headersOf(wranglerToml));
    expect(withShards(text, shards)).toBe(text);
  });

  it("wrangler reads the result as S databases, the rest of its config as wrangler.toml's", () => {
    // next to wrangler.toml: its paths (main, assets) are relative to it
    const file = join(ROOT, `.wrangler-unit-${process.pid}.toml`);
    writeFileSync(file, withShards(wranglerToml, 3));
    try {
      const read = unstable_readConfig({ config: file }, { hideWarnings: true });
      const shipped = unstable_readConfig({ config: join(ROOT, "wrangler.toml") }, { hideWarnings: true });
      expect(read.d1_databases.map((d: { binding: string }) => d.binding)).toEqual(["DB", "DB_1", "DB_2"]);
      expect(read.queues).toEqual(shipped.queues);
      expect(read.durable_objects).toEqual(shipped.durable_objects);
      expect(read.vars).toEqual(shipped.vars);
    } finally {
      rmSync(file, { force: true });
    }
  });
});
