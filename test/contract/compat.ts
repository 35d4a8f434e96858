/**
 * Whether the wire's schemas now are a compatible evolution of a release's snapshot: during a deploy
 * each party may run either release, so every value one release sends must be read by the other, in
 * both directions (test/contract/README.md). The rules, per schema the two releases share:
 * - no message kind and no RPC of the snapshot is removed (an old sender or caller still uses it);
 * - an object keeps every property, each with a compatible schema and the same required-ness;
 *   a property may be added only as optional, and only where the old schema allows unknown ones;
 * - an RPC keeps its arguments; one may be added at the end, optional (an old caller omits it);
 * - a union keeps its alternatives, each compatible with one of the other side's;
 * - every constraint (type, const, enum, pattern, format, bounds, lengths) stays as it was.
 * A message kind or an RPC may be added: that no new sender uses one before the previous release can
 * read it is the contract test's part (b). Pure: two JSON documents in, the breaks found out.
 */
import { type JsonSchema, resolveRef } from "./json-schema";

export interface WireSnapshot {
  messages: Record<string, JsonSchema>;
  rpcs: Record<string, Record<string, { args: JsonSchema; result: JsonSchema }>>;
}

const ANNOTATIONS = new Set(["description", "examples", "default", "title", "$comment", "$schema", "$defs", "id"]);
/** Constraints that must stay exactly as they were. */
const FIXED = [
  "type",
  "const",
  "enum",
  "pattern",
  "format",
  "minimum",
  "maximum",
  "exclusiveMinimum",
  "exclusiveMaximum",
  "minLength",
  "maxLength",
  "minItems",
  "maxItems",
  "contentMediaType",
];
const STRUCTURE = new Set([
  "$ref",
  "properties",
  "required",
  "additionalProperties",
  "propertyNames",
  "items",
  "prefixItems",
  "anyOf",
  "oneOf",
  "contentSchema",
]);

/** The breaks of `now` against `before`, each naming where it is; none: compatible. */
export function incompatibilities(before: WireSnapshot, now: WireSnapshot): string[] {
  const breaks: string[] = [];
  for (const [name, schema] of Object.entries(before.messages)) {
    const current = now.messages[name];
    if (current === undefined) breaks.push(`message ${name}: removed (a message of the previous release may still be queued)`);
    else compare(schema, current, docs(schema, current), `message ${name}`, breaks);
  }
  for (const [object, methods] of Object.entries(before.rpcs)) {
    for (const [method, rpc] of Object.entries(methods)) {
      const current = now.rpcs[object]?.[method];
      const at = `${object}.${method}`;
      if (current === undefined) {
        breaks.push(`${at}: removed (a caller of the previous release still calls it)`);
        continue;
      }
      compare(rpc.args, current.args, docs(rpc.args, current.args), `${at} args`, breaks);
      compare(rpc.result, current.result, docs(rpc.result, current.result), `${at} result`, breaks);
    }
  }
  return breaks;
}

interface Docs {
  before: Record<string, unknown>;
  now: Record<string, unknown>;
}

function docs(before: JsonSchema, now: JsonSchema): Docs {
  return { before: typeof before === "object" ? before : {}, now: typeof now === "object" ? now : {} };
}

function deref(schema: JsonSchema, root: Record<string, unknown>): JsonSchema {
  let s = schema;
  for (let hops = 0; typeof s === "object" && typeof s.$ref === "string"; hops++) {
    if (hops > 20) throw new Error(`reference loop at ${s.$ref}`);
    const { $ref, ...rest } = s;
    const target = resolveRef($ref as string, root);
    s = typeof target === "object" ? { ...target, ...rest } : target;
  }
  return s;
}

function compare(beforeRaw: JsonSchema, nowRaw: JsonSchema, d: Docs, path: string, breaks: string[]): void {
  const before = deref(beforeRaw, d.before);
  const now = deref(nowRaw, d.now);
  if (typeof before === "boolean" || typeof now === "boolean") {
    if (before !== now) breaks.push(`${path}: was ${JSON.stringify(before)}, is ${JSON.stringify(now)}`);
    return;
  }
  for (const keyword of new Set([...Object.keys(before), ...Object.keys(now)]))
    if (!ANNOTATIONS.has(keyword) && !STRUCTURE.has(keyword) && !FIXED.includes(keyword))
      throw new Error(`${path}: unsupported JSON Schema keyword "${keyword}"`);
  for (const keyword of FIXED) {
    const was = normalized(keyword, before[keyword]);
    const is = normalized(keyword, now[keyword]);
    if (was !== is) breaks.push(`${path}: ${keyword} was ${was ?? "absent"}, is ${is ?? "absent"}`);
  }
  compareObjects(before, now, d, path, breaks);
  compareArrays(before, now, d, path, breaks);
  compareUnions(before, now, d, path, breaks);
  if (before.propertyNames !== undefined || now.propertyNames !== undefined)
    compare((before.propertyNames as JsonSchema) ?? true, (now.propertyNames as JsonSchema) ?? true, d, `${path} (names)`, breaks);
  if (before.contentSchema !== undefined || now.contentSchema !== undefined) {
    // JSON text: its content is a document of its own (its references resolve against it)
    const was = (before.contentSchema as JsonSchema) ?? true;
    const is = (now.contentSchema as JsonSchema) ?? true;
    compare(was, is, docs(was, is), `${path} (json)`, breaks);
  }
}

function normalized(keyword: string, value: unknown): string | undefined {
  if (value === undefined) return undefined;
  if ((keyword === "type" || keyword === "enum") && Array.isArray(value)) return JSON.stringify([...value].map(String).sort());
  return JSON.stringify(value);
}

function compareObjects(before: Record<string, unknown>, now: Record<string, unknown>, d: Docs, path: string, breaks: string[]): void {
  const was = (before.properties as Record<string, JsonSchema> | undefined) ?? {};
  const is = (now.properties as Record<string, JsonSchema> | undefined) ?? {};
  const wasRequired = new Set((before.required as string[] | undefined) ?? []);
  const isRequired = new Set((now.required as string[] | undefined) ?? []);
  for (const [key, schema] of Object.entries(was)) {
    const at = `${path}.${key}`;
    if (!(key in is)) {
      breaks.push(`${at}: removed`);
      continue;
    }
    if (wasRequired.has(key) !== isRequired.has(key))
      breaks.push(`${at}: was ${wasRequired.has(key) ? "required" : "optional"}, is ${isRequired.has(key) ? "required" : "optional"}`);
    compare(schema, is[key]!, d, at, breaks);
  }
  for (const key of Object.keys(is)) {
    if (key in was) continue;
    if (isRequired.has(key)) breaks.push(`${path}.${key}: added as required (the previous release never sends it)`);
    else if (before.additionalProperties === false)
      breaks.push(`${path}.${key}: added where the previous release refuses unknown properties`);
  }
  if (before.additionalProperties !== undefined || now.additionalProperties !== undefined)
    compare((before.additionalProperties as JsonSchema) ?? true, (now.additionalProperties as JsonSchema) ?? true, d, `${path}.*`, breaks);
}

function compareArrays(before: Record<string, unknown>, now: Record<string, unknown>, d: Docs, path: string, breaks: string[]): void {
  const was = (before.prefixItems as JsonSchema[] | undefined) ?? [];
  const is = (now.prefixItems as JsonSchema[] | undefined) ?? [];
  for (const [i, schema] of was.entries()) {
    if (i >= is.length) breaks.push(`${path}[${i}]: removed`);
    else compare(schema, is[i]!, d, `${path}[${i}]`, breaks);
  }
  // an argument added at the end: the previous release's callers omit it, its objects ignore it
  const minItems = typeof now.minItems === "number" ? now.minItems : 0;
  for (let i = was.length; i < is.length; i++) {
    if (i < minItems) breaks.push(`${path}[${i}]: added as required (the previous release never sends it)`);
    if (before.items === false) breaks.push(`${path}[${i}]: added where the previous release refuses more items`);
  }
  if (before.items !== undefined || now.items !== undefined) {
    // only past the prefix the two had in common: a new prefix item was held above
    if (is.length === was.length) compare((before.items as JsonSchema) ?? true, (now.items as JsonSchema) ?? true, d, `${path}[]`, breaks);
  }
}

function compareUnions(before: Record<string, unknown>, now: Record<string, unknown>, d: Docs, path: string, breaks: string[]): void {
  const was = ((before.anyOf ?? before.oneOf) as JsonSchema[] | undefined) ?? null;
  const is = ((now.anyOf ?? now.oneOf) as JsonSchema[] | undefined) ?? null;
  if (was === null && is === null) return;
  if (was === null || is === null) {
    breaks.push(`${path}: ${was === null ? "became" : "is no longer"} a union`);
    return;
  }
  /** whether an alternative of the snapshot and one of now are compatible */
  const fits = (old: JsonSchema, current: JsonSchema) => {
    const found: string[] = [];
    compare(old, current, d, path, found);
    return found.length === 0;
  };
  for (const [i, alternative] of was.entries())
    if (!is.some((current) => fits(alternative, current))) breaks.push(`${path}|${i}: no alternative now reads what it held`);
  for (const [i, alternative] of is.entries())
    if (!was.some((old) => fits(old, alternative))) breaks.push(`${path}|new ${i}: the previous release reads no such value`);
}
