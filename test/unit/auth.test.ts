/** Bearer API keys: API_KEYS="tenant:key,tenant:key", compared in constant time. */
import { beforeAll, describe, expect, it } from "vitest";
import { parseApiKeys, tenantOfKey } from "../../src/api/auth";

// crypto.subtle.timingSafeEqual is a workerd extension that Node lacks. Install a stand-in in this
// file only; like workerd's, it throws on unequal lengths, so these tests also prove tenantOfKey
// never calls it with buffers of different lengths.
beforeAll(() => {
  const subtle = crypto.subtle as SubtleCrypto & { timingSafeEqual?: unknown };
  if (typeof subtle.timingSafeEqual === "function") return;
  Object.defineProperty(subtle, "timingSafeEqual", {
    configurable: true,
    value: (a: ArrayBuffer | ArrayBufferView, b: ArrayBuffer | ArrayBufferView): boolean => {
      const x = ArrayBuffer.isView(a) ? new Uint8Array(a.buffer, a.byteOffset, a.byteLength) : new Uint8Array(a);
      const y = ArrayBuffer.isView(b) ? new Uint8Array(b.buffer, b.byteOffset, b.byteLength) : new Uint8Array(b);
      if (x.byteLength !== y.byteLength) throw new TypeError("Input buffers must have the same byte length");
      let diff = 0;
      for (let i = 0; i < x.byteLength; i++) diff |= x[i]! ^ y[i]!;
      return diff === 0;
    },
  });
});

describe("parseApiKeys", () => {
  it.each<[string, { tenant: string; key: string }[]]>([
    [
      "a:k1,b:k2",
      [
        { tenant: "a", key: "k1" },
        { tenant: "b", key: "k2" },
      ],
    ],
    [
      "  a:k1 ,\n b:k2  ",
      [
        { tenant: "a", key: "k1" },
        { tenant: "b", key: "k2" },
      ],
    ],
    ["", []],
    [" , ,", []],
    [
      "a:k1,,b:k2,",
      [
        { tenant: "a", key: "k1" },
        { tenant: "b", key: "k2" },
      ],
    ],
    [
      "acme:k1,acme:k2",
      [
        { tenant: "acme", key: "k1" },
        { tenant: "acme", key: "k2" },
      ],
    ], // key rotation: two live keys
    ["a:k:with:colons", [{ tenant: "a", key: "k:with:colons" }]], // the first colon splits
    // malformed entries are skipped, the rest still parse
    ["nocolon,a:k1", [{ tenant: "a", key: "k1" }]],
    [":keyonly,a:k1", [{ tenant: "a", key: "k1" }]],
    ["tenantonly:,a:k1", [{ tenant: "a", key: "k1" }]],
    [":", []],
  ])("%j", (value, expected) => {
    expect(parseApiKeys(value)).toEqual(expected);
  });

  it("trims whitespace around the colon too (a key with a leading space could never be presented as a Bearer token)", () => {
    expect(parseApiKeys("acme : k1, globex: k2")).toEqual([
      { tenant: "acme", key: "k1" },
      { tenant: "globex", key: "k2" },
    ]);
  });
});

describe("tenantOfKey", () => {
  const keys = parseApiKeys("acme:test-key-acme,acme:test-key-acme-2,globex:test-key-globex,initech:short");

  it.each([
    ["test-key-acme", "acme"],
    ["test-key-acme-2", "acme"], // a tenant with two keys: both work
    ["test-key-globex", "globex"],
    ["short", "initech"],
  ])("%s -> %s", (presented, tenant) => {
    expect(tenantOfKey(keys, presented)).toBe(tenant);
  });

  it.each([
    ["unknown key", "nope"],
    ["empty", ""],
    ["prefix of a key", "test-key"],
    ["prefix of a key, one char short", "test-key-acm"],
    ["key plus a suffix", "test-key-globex-x"],
    ["same length, last char differs", "test-key-acmf"],
    ["another case", "TEST-KEY-ACME"],
    ["a tenant name", "acme"],
    ["tenant:key pair", "acme:test-key-acme"],
    ["with whitespace", " test-key-acme"],
  ])("%s -> null", (_name, presented) => {
    expect(tenantOfKey(keys, presented)).toBeNull();
  });

  it("no keys configured: nobody gets in", () => {
    expect(tenantOfKey([], "test-key-acme")).toBeNull();
    expect(tenantOfKey([], "")).toBeNull();
  });

  it("compares multi-byte keys by bytes", () => {
    const unicode = parseApiKeys("umlaut:schlüssel");
    expect(tenantOfKey(unicode, "schlüssel")).toBe("umlaut");
    expect(tenantOfKey(unicode, "schlussel")).toBeNull(); // same char count, different byte length
  });
});
