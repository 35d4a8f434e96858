/**
 * Keeps src/core free of I/O (STYLE.md: "pure logic ... no bindings, no Date.now(), no Math.random(),
 * no fetch: time and randomness are passed in"). Comments are stripped before checking, so a
 * comment may mention what the code must not do.
 */
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";

const coreDir = join(import.meta.dirname, "../../src/core");
const files = readdirSync(coreDir, { recursive: true, encoding: "utf8" })
  .filter((f) => /\.(ts|js|mjs)$/.test(f))
  .sort();

/** Drops block and line comments (string contents are kept; good enough for this source). */
function code(source: string): string {
  return source.replace(/\/\*[\s\S]*?\*\//g, "").replace(/(^|[^:\\])\/\/.*$/gm, "$1");
}

const FORBIDDEN: [string, RegExp][] = [
  ["Date.now(", /\bDate\.now\s*\(/],
  ["new Date() without an argument", /\bnew\s+Date\s*\(\s*\)/],
  ["Date() called as a function", /(?<![.\w]|new\s)Date\s*\(/],
  ["Math.random(", /\bMath\.random\s*\(/],
  ["crypto randomness", /\bcrypto\.(getRandomValues|randomUUID)\s*\(/],
  ["performance.now(", /\bperformance\.now\s*\(/],
  ["fetch(", /\bfetch\s*\(/],
  ["timers", /\b(setTimeout|setInterval|scheduler\.wait)\s*\(/],
  ["cloudflare: modules", /cloudflare:/],
  ["env. (bindings)", /\benv\./],
  ["node: modules", /["']node:/],
  ["console", /\bconsole\./],
];

/** Third-party modules core may use: computation only, no I/O. */
const PURE_LIBRARIES = new Set(["croner"]);

describe("src/core is pure", () => {
  it("has files to check", () => {
    expect(files.length).toBeGreaterThanOrEqual(10);
  });

  describe.each(files)("%s", (file) => {
    const source = code(readFileSync(join(coreDir, file), "utf8"));

    it.each(FORBIDDEN)("contains no %s", (_what, pattern) => {
      const hits = source.split("\n").filter((line) => pattern.test(line));
      expect(hits).toEqual([]);
    });

    it("imports nothing from outside core (bindings, storage, API) except pure libraries", () => {
      // a type-only import is erased at build time: it can bring no I/O (the handler contract's types)
      const values = source.replace(/\bimport\s+type\s+\{[^}]*\}\s*from\s+["'][^"']+["'];?/g, "");
      const specifiers = [...values.matchAll(/\bfrom\s+["']([^"']+)["']|\bimport\s*\(\s*["']([^"']+)["']/g)].map((m) => m[1] ?? m[2]!);
      const outside = specifiers.filter((s) => !s.startsWith("./") && !PURE_LIBRARIES.has(s));
      expect(outside).toEqual([]);
    });
  });
});

describe("the purity check itself", () => {
  it.each([
    ["const t = Date.now();", true],
    ["const d = new Date();", true],
    ["const d = new Date( );", true],
    ["const s = Date();", true],
    ["const r = Math.random();", true],
    ["await fetch(url)", true],
    ['import { env } from "cloudflare:workers";', true],
    ["const q = env.FIRE_QUEUE_0;", true],
    ["const d = new Date(at).toISOString();", false],
    ["const ms = Date.parse(input);", false],
    ["const at = Date.UTC(2026, 0, 1);", false],
    ["// Date.now() is read by the shell", false],
    ["/* Math.random() */ const x = 1;", false],
  ])("%j flagged: %s", (line, flagged) => {
    const stripped = code(line);
    expect(FORBIDDEN.some(([, p]) => p.test(stripped))).toBe(flagged);
  });
});
