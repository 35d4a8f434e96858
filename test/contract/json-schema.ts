/**
 * A JSON Schema (draft 2020-12) validator for the keywords the wire's schemas use (zod's
 * z.toJSONSchema output, src/protocol/wire.ts). It runs inside workerd, where validators that
 * compile schemas to code (ajv) cannot: the runtime forbids eval. A keyword it does not know is an
 * error, never ignored, so a schema it cannot check never passes silently. Pure.
 */

export type JsonSchema = Record<string, unknown> | boolean;

/** Annotations: they say what a value means, never which values are valid. */
const ANNOTATIONS = new Set(["description", "examples", "default", "title", "$comment", "$schema", "id", "$defs"]);
const KNOWN = new Set([
  ...ANNOTATIONS,
  "$ref",
  "type",
  "const",
  "enum",
  "format",
  "pattern",
  "minLength",
  "maxLength",
  "minimum",
  "maximum",
  "exclusiveMinimum",
  "exclusiveMaximum",
  "properties",
  "required",
  "additionalProperties",
  "propertyNames",
  "items",
  "prefixItems",
  "minItems",
  "maxItems",
  "anyOf",
  "oneOf",
  "allOf",
  "contentMediaType",
  "contentSchema",
]);

/** The errors of `value` against `schema` (none: valid), each with the JSON path of the value. */
export function validate(schema: JsonSchema, value: unknown, path = "$"): string[] {
  const errors: string[] = [];
  check(schema, value, path, typeof schema === "object" ? schema : {}, errors);
  return errors;
}

/** Resolves a local reference (`#/$defs/Name`) against the document it is in. */
export function resolveRef(ref: string, root: Record<string, unknown>): JsonSchema {
  if (!ref.startsWith("#/")) throw new Error(`only local references are supported, not ${ref}`);
  let at: unknown = root;
  for (const part of ref.slice(2).split("/"))
    at = (at as Record<string, unknown> | undefined)?.[part.replaceAll("~1", "/").replaceAll("~0", "~")];
  if (at === undefined) throw new Error(`unresolved reference ${ref}`);
  return at as JsonSchema;
}

function typeOf(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "array";
  if (typeof value === "number") return Number.isInteger(value) ? "integer" : "number";
  return typeof value;
}

function typeMatches(want: string, value: unknown): boolean {
  const got = typeOf(value);
  return want === got || (want === "number" && got === "integer");
}

function check(schema: JsonSchema, value: unknown, path: string, root: Record<string, unknown>, errors: string[]): void {
  if (schema === true) return;
  if (schema === false) {
    errors.push(`${path}: no value is allowed here`);
    return;
  }
  for (const keyword of Object.keys(schema))
    if (!KNOWN.has(keyword)) throw new Error(`${path}: unsupported JSON Schema keyword "${keyword}"`);
  const s = schema as Record<string, unknown>;
  if (typeof s.$ref === "string") check(resolveRef(s.$ref, root), value, path, root, errors);
  if (s.type !== undefined) {
    const types = Array.isArray(s.type) ? (s.type as string[]) : [s.type as string];
    if (!types.some((t) => typeMatches(t, value))) {
      errors.push(`${path}: expected ${types.join(" or ")}, got ${typeOf(value)}`);
      return;
    }
  }
  if ("const" in s && JSON.stringify(s.const) !== JSON.stringify(value)) errors.push(`${path}: expected ${JSON.stringify(s.const)}`);
  if (Array.isArray(s.enum) && !s.enum.some((e) => JSON.stringify(e) === JSON.stringify(value)))
    errors.push(`${path}: ${JSON.stringify(value)} is not one of ${JSON.stringify(s.enum)}`);
  if (typeof value === "string") checkString(s, value, path, root, errors);
  if (typeof value === "number") checkNumber(s, value, path, errors);
  if (Array.isArray(value)) checkArray(s, value, path, root, errors);
  else if (typeof value === "object" && value !== null) checkObject(s, value as Record<string, unknown>, path, root, errors);
  checkCombinators(s, value, path, root, errors);
}

function checkString(s: Record<string, unknown>, value: string, path: string, root: Record<string, unknown>, errors: string[]): void {
  const length = [...value].length;
  if (typeof s.minLength === "number" && length < s.minLength) errors.push(`${path}: shorter than ${s.minLength}`);
  if (typeof s.maxLength === "number" && length > s.maxLength) errors.push(`${path}: longer than ${s.maxLength}`);
  if (typeof s.pattern === "string" && !new RegExp(s.pattern).test(value)) errors.push(`${path}: does not match ${s.pattern}`);
  if (s.format === "date-time" && Number.isNaN(Date.parse(value))) errors.push(`${path}: not a date-time`);
  if (s.contentMediaType === "application/json") {
    let parsed: unknown;
    try {
      parsed = JSON.parse(value);
    } catch {
      errors.push(`${path}: not JSON text`);
      return;
    }
    const content = s.contentSchema as JsonSchema | undefined;
    // the content is a document of its own: its references resolve against it
    if (content !== undefined) check(content, parsed, `${path}(json)`, typeof content === "object" ? content : root, errors);
  }
}

function checkNumber(s: Record<string, unknown>, value: number, path: string, errors: string[]): void {
  if (typeof s.minimum === "number" && value < s.minimum) errors.push(`${path}: below ${s.minimum}`);
  if (typeof s.maximum === "number" && value > s.maximum) errors.push(`${path}: above ${s.maximum}`);
  if (typeof s.exclusiveMinimum === "number" && value <= s.exclusiveMinimum) errors.push(`${path}: not above ${s.exclusiveMinimum}`);
  if (typeof s.exclusiveMaximum === "number" && value >= s.exclusiveMaximum) errors.push(`${path}: not below ${s.exclusiveMaximum}`);
}

function checkArray(s: Record<string, unknown>, value: unknown[], path: string, root: Record<string, unknown>, errors: string[]): void {
  if (typeof s.minItems === "number" && value.length < s.minItems) errors.push(`${path}: fewer than ${s.minItems} items`);
  if (typeof s.maxItems === "number" && value.length > s.maxItems) errors.push(`${path}: more than ${s.maxItems} items`);
  const prefix = (s.prefixItems as JsonSchema[] | undefined) ?? [];
  for (const [i, item] of value.entries()) {
    const itemSchema = i < prefix.length ? prefix[i] : (s.items as JsonSchema | undefined);
    if (itemSchema !== undefined) check(itemSchema, item, `${path}[${i}]`, root, errors);
  }
}

function checkObject(
  s: Record<string, unknown>,
  value: Record<string, unknown>,
  path: string,
  root: Record<string, unknown>,
  errors: string[],
): void {
  const properties = (s.properties as Record<string, JsonSchema> | undefined) ?? {};
  for (const key of (s.required as string[] | undefined) ?? []) if (!(key in value)) errors.push(`${path}: missing ${key}`);
  for (const [key, item] of Object.entries(value)) {
    const at = `${path}.${key}`;
    if (s.propertyNames !== undefined) check(s.propertyNames as JsonSchema, key, `${at}(name)`, root, errors);
    if (key in properties) check(properties[key]!, item, at, root, errors);
    else if (s.additionalProperties !== undefined) check(s.additionalProperties as JsonSchema, item, at, root, errors);
  }
}

function checkCombinators(s: Record<string, unknown>, value: unknown, path: string, root: Record<string, unknown>, errors: string[]): void {
  const passes = (schemas: JsonSchema[]) => schemas.map((one) => validateIn(one, value, path, root));
  if (Array.isArray(s.anyOf) && !passes(s.anyOf as JsonSchema[]).some((e) => e.length === 0))
    errors.push(`${path}: matches none of ${s.anyOf.length} alternatives (${closest(passes(s.anyOf as JsonSchema[]))})`);
  if (Array.isArray(s.oneOf)) {
    const matched = passes(s.oneOf as JsonSchema[]).filter((e) => e.length === 0).length;
    if (matched !== 1) errors.push(`${path}: matches ${matched} of ${s.oneOf.length} alternatives, not exactly one`);
  }
  if (Array.isArray(s.allOf)) for (const one of s.allOf as JsonSchema[]) check(one, value, path, root, errors);
}

function validateIn(schema: JsonSchema, value: unknown, path: string, root: Record<string, unknown>): string[] {
  const errors: string[] = [];
  check(schema, value, path, root, errors);
  return errors;
}

/** The alternative that came closest, for the message: its fewest errors. */
function closest(results: string[][]): string {
  const best = [...results].sort((a, b) => a.length - b.length)[0] ?? [];
  return best.slice(0, 3).join("; ");
}
