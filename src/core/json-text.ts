/**
 * Reading a request's JSON so that what is stored is what was sent. JSON.parse alone accepts
 * text the scheduler cannot deliver faithfully: a lone surrogate (`"\ud800"`) has no UTF-8 form,
 * so a body holding one would be signed over other bytes than the ones sent; a number beyond a
 * 64-bit float (`1e400`, `12345678901234567890`) would be re-serialized as another number.
 * Those values are parsed into `Unfaithful` markers, which validation refuses by field; raw
 * bytes that are not UTF-8 are refused whole. Pure.
 */

/** Where a request's JSON could not be kept as sent, and why. */
export class Unfaithful {
  /** `advice` suits free-form JSON (a body, metadata), where a string keeps any text */
  constructor(
    readonly problem: string,
    readonly advice: string | null = null,
  ) {}
}

export type JsonPath = (string | number)[];

export type ParsedJson =
  | { ok: true; value: unknown }
  | { ok: false; problem: "not_utf8" }
  | { ok: false; problem: "not_json" }
  | { ok: false; problem: "too_deep"; path: JsonPath };

const utf8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: false }); // a leading BOM is dropped (RFC 8259 allows it)

interface ReviverContext {
  source?: string;
}

/**
 * Parses UTF-8 JSON bytes; values that would not survive storage and delivery become `Unfaithful`.
 * Most requests need no review and take JSON.parse alone (the reviver costs ~5x the parse). A
 * document too deep for the (recursive) reviver is refused with the path to its first value
 * deeper than `reportDepth` (where a schema's own depth limit would have named it).
 */
export function parseJsonBytes(bytes: ArrayBuffer | Uint8Array, reportDepth: number): ParsedJson {
  let text: string;
  try {
    text = utf8.decode(bytes);
  } catch {
    return { ok: false, problem: "not_utf8" };
  }
  try {
    return { ok: true, value: needsReview(text) ? JSON.parse(text, faithfulReviver as never) : JSON.parse(text) };
  } catch (error) {
    if (!(error instanceof RangeError)) return { ok: false, problem: "not_json" };
    // the reviver overflowed the stack; JSON.parse itself does not recurse
    return { ok: false, problem: "too_deep", path: firstDeeperThan(JSON.parse(text), reportDepth) ?? [] };
  }
}

/** Text decoded from UTF-8 is well-formed, so a lone surrogate can only come from a \uD800-\uDFFF escape. */
const SURROGATE_ESCAPE = /\\u[dD][89a-fA-F]/;
/** Number-like runs anywhere in the text (inside strings too: a false alarm only costs the review). */
const NUMBER_LIKE = /(\d+)(?:\.(\d+))?(?:[eE][+-]?(\d+))?/g;

/**
 * Whether the text may hold a value the reviver would mark: a surrogate escape, or a number with
 * more than 15 digits or a 3-digit exponent. Up to 15 significant digits and |exponent| < 100, a
 * decimal survives a 64-bit float and its shortest form exactly (DBL_DIG is 15).
 */
function needsReview(text: string): boolean {
  if (SURROGATE_ESCAPE.test(text)) return true;
  for (const m of text.matchAll(NUMBER_LIKE)) {
    if (m[1]!.length + (m[2]?.length ?? 0) > 15 || (m[3]?.length ?? 0) > 2) return true;
  }
  return false;
}

/** The path to the first value nested deeper than `depth` levels, without recursion; null if none is. */
export function firstDeeperThan(value: unknown, depth: number): JsonPath | null {
  const found = walk(value, (_item, at) => at.depth >= depth && _item !== null && typeof _item === "object");
  return found && pathOf(found.at);
}

/** The first `Unfaithful` value in a parsed document and its path, without recursion. */
export function findUnfaithful(value: unknown): { path: JsonPath; problem: string; advice: string | null } | null {
  const found = walk(value, (item) => item instanceof Unfaithful);
  if (!found) return null;
  const { problem, advice } = found.item as Unfaithful;
  return { path: pathOf(found.at), problem, advice };
}

/** Where a value sits: a chain of keys to the root (built per node, turned into a path only when asked). */
interface Place {
  key: string | number | null;
  parent: Place | null;
  depth: number;
}

/** Depth-first in document order; the first value `stop` accepts, with its place. */
function walk(value: unknown, stop: (item: unknown, at: Place) => boolean): { item: unknown; at: Place } | null {
  const stack: [unknown, Place][] = [[value, { key: null, parent: null, depth: 0 }]];
  while (stack.length > 0) {
    const [item, at] = stack.pop()!;
    if (stop(item, at)) return { item, at };
    if (item === null || typeof item !== "object" || item instanceof Unfaithful) continue;
    const entries = Array.isArray(item) ? item.map((v, i) => [i, v] as const) : Object.entries(item);
    for (let i = entries.length - 1; i >= 0; i--) {
      stack.push([entries[i]![1], { key: entries[i]![0], parent: at, depth: at.depth + 1 }]);
    }
  }
  return null;
}

function pathOf(at: Place): JsonPath {
  const path: JsonPath = [];
  for (let p: Place | null = at; p !== null && p.key !== null; p = p.parent) path.unshift(p.key);
  return path;
}

function faithfulReviver(this: unknown, key: string, value: unknown, context?: ReviverContext): unknown {
  if (!key.isWellFormed()) return new Unfaithful("a key must be well-formed Unicode (no lone surrogates)");
  if (typeof value === "string" && !value.isWellFormed()) {
    return new Unfaithful("must be well-formed Unicode (no lone surrogates): it has no UTF-8 form to send");
  }
  if (typeof value === "number") {
    // a runtime without source text access cannot check: refuse rather than change a number silently
    const source = context?.source;
    if (source === undefined) return new Unfaithful("the number could not be checked for an exact 64-bit float form");
    if (!sameNumber(source, value)) {
      return new Unfaithful(
        `the number ${source.length > 40 ? `${source.slice(0, 40)}…` : source} would be sent as ${JSON.stringify(value)} ` +
          "(JSON numbers are kept as 64-bit floats, in their shortest form)",
        "send it as a string to keep its text",
      );
    }
  }
  return value;
}

const NUMBER = /^(-?)(\d+)(?:\.(\d+))?(?:[eE]([+-]?\d+))?$/;

/**
 * Whether a JSON number's source text and the text JSON.stringify gives for its parsed value
 * denote the same decimal number (`1.0` and `1` do; `12345678901234567890` and
 * `12345678901234567000` do not; `1e400` became Infinity, which has no JSON form).
 */
export function sameNumber(source: string, value: number): boolean {
  if (!Number.isFinite(value)) return false;
  if (JSON.stringify(value) === source) return true;
  const m = NUMBER.exec(source);
  // a long exponent (any finite value has |exponent| < 400) leaves 0 only for a zero mantissa;
  // checked before BigInt meets millions of digits
  if (m?.[4] !== undefined && m[4].replace(/^[+-]?0*/, "").length > 6) return value === 0 && /^-?[0.]*$/.test(source.split(/[eE]/)[0]!);
  const a = decimalOf(source);
  const b = decimalOf(JSON.stringify(value));
  return a !== null && b !== null && a.digits === b.digits && a.exponent === b.exponent && a.negative === b.negative;
}

/** A decimal as digits × 10^exponent with no leading or trailing zeros; zero has no sign. */
function decimalOf(text: string): { negative: boolean; digits: string; exponent: bigint } | null {
  const m = NUMBER.exec(text);
  if (!m) return null;
  const fraction = m[3] ?? "";
  let digits = (m[2]! + fraction).replace(/^0+/, "");
  if (digits === "") return { negative: false, digits: "", exponent: 0n };
  let exponent = BigInt(m[4] ?? "0") - BigInt(fraction.length); // BigInt: a source exponent may have any length
  const trailing = digits.length - digits.replace(/0+$/, "").length;
  digits = digits.slice(0, digits.length - trailing);
  exponent += BigInt(trailing);
  return { negative: m[1] === "-", digits, exponent };
}
