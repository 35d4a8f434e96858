/**
 * Reading request JSON so that what is stored is what was sent (core/json-text.ts): UTF-8 only,
 * lone surrogates and numbers a 64-bit float would change become markers with their path, and a
 * pathologically deep document is refused before the (recursive) reviver runs.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { findUnfaithful, firstDeeperThan, parseJsonBytes, sameNumber } from "../../src/core/json-text";

const bytes = (text: string) => new TextEncoder().encode(text);
const parse = (text: string) => parseJsonBytes(bytes(text), 32);

describe("sameNumber", () => {
  it.each([
    ["1", true],
    ["1.0", true],
    ["1E2", true],
    ["100e-2", true],
    ["-0", true],
    ["0.0e5", true],
    ["0.1", true],
    ["1e-7", true],
    ["123456789012345678e3", false],
    ["9007199254740992", true],
    ["9007199254740993", false],
    ["12345678901234567890", false],
    ["1e400", false],
    ["1e-400", false],
    ["0.10000000000000000001", false],
    ["-1.5e+300", true],
    ["5e-324", true],
    ["2e-324", false],
    ["1.7976931348623157e308", true],
    ["1.7976931348623159e308", false],
  ])("%s round-trips: %s", (text, expected) => {
    expect(sameNumber(text, JSON.parse(text) as number)).toBe(expected);
  });

  it("decides a number with a huge exponent from its mantissa alone (BigInt never reads a million exponent digits)", () => {
    expect(sameNumber(`1e-${"9".repeat(1_000_000)}`, 0)).toBe(false);
    expect(sameNumber(`0.000e${"9".repeat(1_000_000)}`, 0)).toBe(true);
    expect(sameNumber(`-0e-${"1".repeat(1_000_000)}`, -0)).toBe(true);
  });

  it("accepts the shortest form of every finite double (property)", () => {
    fc.assert(fc.property(fc.double({ noNaN: true, noDefaultInfinity: true }), (n) => sameNumber(JSON.stringify(n), n)));
  });
});

describe("parseJsonBytes", () => {
  it("refuses bytes that are not UTF-8, and text that is not JSON", () => {
    expect(parseJsonBytes(new Uint8Array([0x7b, 0xff, 0x7d]), 32)).toEqual({ ok: false, problem: "not_utf8" });
    expect(parseJsonBytes(new Uint8Array([0x22, 0xed, 0xa0, 0x80, 0x22]), 32)).toEqual({ ok: false, problem: "not_utf8" }); // a UTF-8-encoded surrogate
    expect(parse("{")).toEqual({ ok: false, problem: "not_json" });
  });

  it("marks lone surrogates in values and keys and unfaithful numbers, and finds the first in document order with its path", () => {
    const parsed = parse('{"a":[1,{"b":"\\ud800"}],"c":1e400}');
    expect(parsed.ok).toBe(true);
    if (!parsed.ok) return;
    expect(findUnfaithful(parsed.value)).toMatchObject({ path: ["a", 1, "b"], problem: expect.stringMatching(/lone surrogates/) });
    const key = parse('{"m":{"x\\udc00":1}}');
    expect(key.ok && findUnfaithful(key.value)).toMatchObject({ path: ["m", "x\udc00"], problem: expect.stringMatching(/key/) });
    const number = parse('{"ok":"\\ud83d\\ude00","n":[12345678901234567890]}'); // a well-formed pair is fine
    expect(number.ok && findUnfaithful(number.value)).toMatchObject({
      path: ["n", 0],
      problem: expect.stringMatching(/would be sent as 12345678901234567000/),
    });
    const fine = parse('{"a":[1.0,"\\u00e9",{"b":null}]}');
    expect(fine.ok && findUnfaithful(fine.value)).toBeNull();
  });

  it("a document under review too deep for the reviver is refused with the path to the first value past the report depth; without anything to review any depth parses (the schema's depth limit names it)", () => {
    const nest = (inner: string) => `{"a":{"b":${"[".repeat(100_000)}${inner}${"]".repeat(100_000)}}}`;
    expect(parseJsonBytes(bytes(nest('"\\ud800"')), 4)).toEqual({ ok: false, problem: "too_deep", path: ["a", "b", 0, 0] });
    expect(parseJsonBytes(bytes(nest("1")), 4).ok).toBe(true);
    const reviewed = parse(`${"[".repeat(200)}12345678901234567890${"]".repeat(200)}`);
    expect(reviewed.ok && findUnfaithful(reviewed.value)?.path).toHaveLength(200);
  });

  it("reviews only what may need it, and a false alarm changes nothing (digits in strings, an escaped backslash before u)", () => {
    for (const text of ['{"s":"1234567890123456789"}', '{"s":"\\\\ud800"}', '{"n":1.5e+300}']) {
      const parsed = parse(text);
      expect(parsed).toEqual({ ok: true, value: JSON.parse(text) });
      expect(parsed.ok && findUnfaithful(parsed.value)).toBeNull();
    }
  });

  it("firstDeeperThan walks without recursion", () => {
    const deep: unknown[] = [];
    let at = deep;
    for (let i = 0; i < 100_000; i++) {
      const inner: unknown[] = [];
      at[0] = inner;
      at = inner;
    }
    expect(firstDeeperThan(deep, 3)).toEqual([0, 0, 0]);
    expect(firstDeeperThan({ a: [1, 2] }, 3)).toBeNull();
  });
});
