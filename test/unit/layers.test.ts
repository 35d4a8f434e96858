/**
 * The layers of src/ (issue 37 item 1; DEVELOPERS.md "Layers"), measured from the source tree: no
 * file over 400 lines (none in src/db/ over 300, no routes file over 200), nothing outside src/api/
 * imports src/api/, and no import runs back up the layers below. An import is any `import ... from`,
 * `export ... from` or `import("...")` of a file of src/; a type-only import counts like the rest,
 * except where EXEMPT says why not.
 */
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { describe, expect, it } from "vitest";

const SRC = resolve(import.meta.dirname, "../../src");

/**
 * The layers, lowest first: a file may import its own layer and those below it. Each entry is a
 * path under src/ (a folder ends with "/"); the longest that matches places a file.
 */
const LAYERS: { name: string; paths: string[] }[] = [
  { name: "core", paths: ["core/"] },
  {
    // what the parties agree on, and the settings. One layer because they lean on each other and cannot
    // be ordered: config.ts is read by Node as it stands (npm run config) and so imports nothing but
    // types, the API's schemas take a handler Worker's name from it, the wire carries the API's schemas
    // (a debounced create, its answer), and the settings type the fire queue by the wire's message
    name: "contracts and settings",
    paths: ["protocol/", "schemas/", "config.ts", "platform/"],
  },
  {
    // D1, and how a Durable Object is reached: IdempotencyKeys' callers' side stands apart from the object
    name: "storage and placement",
    paths: ["db/", "placement.ts", "sqlite-migrations.ts", "idempotency/key-claims.ts"],
  },
  {
    // the archive keeps finished executions as the API shows them (present.ts), and a create answers an
    // idempotent replay whose job the purge took from it: it reads and writes R2 for the use-cases
    name: "use-cases",
    paths: ["use-cases/", "archive/"],
  },
  { name: "Durable Objects", paths: ["bucket/", "flow/", "pull/", "alerts/", "idempotency/", "debounce/", "actions/"] },
  // the Worker's queue and cron handlers: they call the objects, which never call them
  { name: "consumers and the scanner", paths: ["consumer/", "scanner/"] },
  { name: "http", paths: ["api/"] },
  { name: "worker", paths: ["index.ts"] },
  // the Worker under the local profile: the entry of every local run and test, never deployed
  { name: "local", paths: ["platform/local-worker.ts"] },
];

/** Files outside the layers, and imports that may run up them, each with why. */
const EXEMPT = {
  // the bindings, declared globally as `wrangler types` does: each object's class types its namespace
  files: ["worker-env.d.ts"],
  // the wire's schemas are held equal to the types the parties own beside their code (protocol/objects.ts
  // `Same`): a type-only import, erased, so the wire runs no party's code
  typeImportsFrom: ["protocol/"],
};

const MAX_LINES = 400;
const MAX_DB_LINES = 300;
const MAX_ROUTES_LINES = 200;

interface Import {
  from: string;
  to: string;
  typeOnly: boolean;
}

const files = (readdirSync(SRC, { recursive: true, encoding: "utf8" }) as string[])
  .filter((f) => f.endsWith(".ts"))
  .map((f) => f.split("\\").join("/"))
  .sort();

/** Lines as wc -l counts them. */
function lineCount(file: string): number {
  return readFileSync(join(SRC, file), "utf8").split("\n").length - 1;
}

function importsOf(file: string): Import[] {
  const source = readFileSync(join(SRC, file), "utf8");
  const found: Import[] = [];
  const statement = /^(import|export)(\s+type)?\s[^;]*?from\s+"(\.[^"]+)"/gms;
  const dynamic = /\bimport\(\s*"(\.[^"]+)"\s*\)/g;
  for (const m of source.matchAll(statement)) {
    const names = /\{([^}]*)\}/.exec(m[0])?.[1];
    const everyNameTyped =
      names !== undefined &&
      names.trim() !== "" &&
      names
        .split(",")
        .map((n) => n.trim())
        .filter((n) => n !== "")
        .every((n) => n.startsWith("type "));
    found.push({ from: file, to: resolveImport(file, m[3]!), typeOnly: m[2] !== undefined || everyNameTyped });
  }
  for (const m of source.matchAll(dynamic)) found.push({ from: file, to: resolveImport(file, m[1]!), typeOnly: false });
  return found;
}

/** The file an import names, relative to src/ (".." outside src/ for a package of this repository). */
function resolveImport(file: string, specifier: string): string {
  const target = relative(SRC, resolve(SRC, dirname(file), specifier))
    .split("\\")
    .join("/");
  return target.endsWith(".ts") || target.endsWith(".mjs") || target.endsWith(".js") ? target : `${target}.ts`;
}

function layerOf(file: string): number | undefined {
  let best: { layer: number; length: number } | undefined;
  LAYERS.forEach(({ paths }, layer) => {
    for (const path of paths) {
      const matches = path.endsWith("/") ? file.startsWith(path) : file === path;
      if (matches && (best === undefined || path.length > best.length)) best = { layer, length: path.length };
    }
  });
  return best?.layer;
}

const layered = files.filter((f) => !EXEMPT.files.includes(f));
const imports = layered.flatMap(importsOf).filter((i) => !i.to.startsWith(".."));

describe("the layers of src/", () => {
  it("reads the tree", () => {
    expect(layered.length).toBeGreaterThan(50);
    expect(imports.length).toBeGreaterThan(300);
  });

  it("places every file of src/ in a layer (a new folder gets one here)", () => {
    expect(layered.filter((f) => layerOf(f) === undefined)).toEqual([]);
  });

  it(`has no file over ${MAX_LINES} lines`, () => {
    const long = files.map((f) => `${f} ${lineCount(f)}`).filter((entry) => Number(entry.split(" ")[1]) > MAX_LINES);
    expect(long).toEqual([]);
  });

  it(`has no file in src/db/ over ${MAX_DB_LINES} lines`, () => {
    const long = files
      .filter((f) => f.startsWith("db/"))
      .map((f) => `${f} ${lineCount(f)}`)
      .filter((entry) => Number(entry.split(" ")[1]) > MAX_DB_LINES);
    expect(long).toEqual([]);
  });

  it(`has no routes file over ${MAX_ROUTES_LINES} lines`, () => {
    const routes = files.filter((f) => f.startsWith("api/routes/"));
    expect(routes.length).toBeGreaterThan(5);
    const long = routes.map((f) => `${f} ${lineCount(f)}`).filter((entry) => Number(entry.split(" ")[1]) > MAX_ROUTES_LINES);
    expect(long).toEqual([]);
  });

  it("imports src/api/ from nowhere outside it (index.ts serves its app)", () => {
    const outside = imports.filter((i) => i.to.startsWith("api/") && !i.from.startsWith("api/") && i.from !== "index.ts");
    expect(outside.map((i) => `${i.from} -> ${i.to}`)).toEqual([]);
  });

  it("has no import that runs back up the layers", () => {
    const upward = imports.filter((i) => {
      const from = layerOf(i.from);
      const to = layerOf(i.to);
      if (from === undefined || to === undefined || to <= from) return false;
      return !(i.typeOnly && EXEMPT.typeImportsFrom.some((path) => i.from.startsWith(path)));
    });
    expect(
      upward.map(
        (i) =>
          `${i.from} -> ${i.to}${i.typeOnly ? " (type)" : ""}: ${LAYERS[layerOf(i.from)!]!.name} below ${LAYERS[layerOf(i.to)!]!.name}`,
      ),
    ).toEqual([]);
  });

  it("reads imports as written: a value import, a type-only one, a file placed apart from its folder", () => {
    expect(imports).toContainEqual({ from: "index.ts", to: "api/app.ts", typeOnly: false });
    expect(imports).toContainEqual({ from: "protocol/objects.ts", to: "actions/bulk-action.ts", typeOnly: true });
    expect(layerOf("idempotency/key-claims.ts")).toBeLessThan(layerOf("idempotency/idempotency-keys.ts")!);
  });
});
