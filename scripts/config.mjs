// `npm run config [-- production|local|stack]`: the scheduler's settings in effect, as JSON, secrets
// shown only as set or unset. Each place layers its sources over the defaults of src/config.ts:
//   production  wrangler.toml [vars], then the secrets (`wrangler secret put`, not known here)
//   local       `npm start`: [vars], then .dev.vars (.dev.vars.example until npm start creates it)
//   stack       e2e, bench and soak (scripts/local-stack.mjs): [vars], then .dev.vars or .env if
//               the directory has one (wrangler dev reads it), then the local profile, then the
//               run's own vars (fresh credentials) and its SCHEDULER_<NAME> overrides
// `from` says which source set each setting (a setting not in it is at its default). wrangler.toml
// and .dev.vars are read by wrangler's own config reader, so what is shown is what wrangler passes on.
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { SETTING_PREFIX, settingOverrides } from "./lib/env.mjs";

const PROJECT = join(fileURLToPath(import.meta.url), "..", "..");
export const PLACES = ["production", "local", "stack"];

/**
 * @param {{ root?: string, place?: string, vars?: Record<string, string>, overrides?: Record<string, string> }} [options]
 *   root: the project copy whose src/config.ts, wrangler.toml and scripts are read (default: this one)
 *   vars: what the run passes besides overrides (its credentials; stack only)
 *   overrides: SCHEDULER_<NAME> settings (stack only); unknown names and secrets are refused
 * @returns {Promise<{ settings: Record<string, unknown>, from: Record<string, string> }>}
 */
export async function effectiveConfig({ root = PROJECT, place = "stack", vars = {}, overrides = {} } = {}) {
  if (!PLACES.includes(place)) throw new Error(`place must be one of ${PLACES.join(", ")}, got "${place}"`);
  const { ConfigSchema, SECRET_SETTINGS } = await import(pathToFileURL(join(root, "src", "config.ts")).href);
  if (!ConfigSchema || !SECRET_SETTINGS) throw new Error(`${root}/src/config.ts exports no ConfigSchema and SECRET_SETTINGS`);
  const names = Object.keys(ConfigSchema.shape);
  const settable = names.filter((n) => !SECRET_SETTINGS.includes(n));
  for (const name of Object.keys(overrides)) {
    if (!names.includes(name)) throw new Error(`${SETTING_PREFIX}${name}: no such setting (settings: ${settable.join(", ")})`);
    if (SECRET_SETTINGS.includes(name)) throw new Error(`${SETTING_PREFIX}${name}: a secret; every run makes its own credentials`);
  }

  const { unstable_readConfig, unstable_getVarsForDev } = await import("wrangler");
  const configPath = join(root, "wrangler.toml");
  const wranglerVars = { ...unstable_readConfig({ config: configPath }, { hideWarnings: true }).vars };
  /** [source, vars], later ones win, as wrangler merges them; a source may name each var's own */
  const layers = [["wrangler.toml [vars]", wranglerVars]];
  if (place === "production") {
    layers.push(["wrangler secret put", Object.fromEntries(SECRET_SETTINGS.map((name) => [name, "(wrangler secret)"]))]);
  } else {
    // .dev.vars (or, without it, .env files) by wrangler's own reader, without the [vars] under it
    const file = Object.fromEntries(
      Object.entries(unstable_getVarsForDev(configPath, undefined, {}, undefined, true)).map(([k, v]) => [
        k,
        typeof v === "string" ? v : v.value,
      ]),
    );
    const { localProfile, parseDevVars } = await import(pathToFileURL(join(root, "scripts", "local-env.mjs")).href);
    if (place === "local" && !existsSync(join(root, ".dev.vars"))) {
      layers.push([
        ".dev.vars.example (npm start copies it to .dev.vars)",
        parseDevVars(readFileSync(join(root, ".dev.vars.example"), "utf8")),
      ]);
    } else {
      layers.push([existsSync(join(root, ".dev.vars")) ? ".dev.vars" : ".env", file]);
    }
    if (place === "stack")
      layers.push(
        ["local profile (.dev.vars.example)", localProfile()],
        ["the run", vars],
        [(name) => `${SETTING_PREFIX}${name}`, overrides],
      );
  }

  const env = {};
  const from = {};
  for (const [source, layer] of layers) {
    for (const [name, value] of Object.entries(layer)) {
      env[name] = value;
      from[name] = typeof source === "function" ? source(name) : source;
    }
  }
  const parsed = ConfigSchema.safeParse(env);
  if (!parsed.success) {
    const why = parsed.error.issues.map(
      (i) => `${i.path.join(".")}=${JSON.stringify(env[i.path[0]])} (from ${from[i.path[0]]}): ${i.message}`,
    );
    throw new Error(`invalid settings in ${place}: ${why.join("; ")}`);
  }
  const settings = {};
  const sources = {};
  for (const name of names) {
    const secret = SECRET_SETTINGS.includes(name);
    const value = parsed.data[name];
    settings[name] = !secret ? value : place === "production" ? "(wrangler secret)" : value ? "(set)" : "(unset)";
    if (from[name]) sources[name] = from[name];
  }
  return { settings, from: sources };
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  try {
    const asked = process.argv.slice(2);
    for (const place of asked)
      if (!PLACES.includes(place)) throw new Error(`usage: npm run config [-- ${PLACES.join("|")}], got "${place}"`);
    // every stack run brings fresh credentials (bench, soak and e2e make them per run)
    const run = { API_KEYS: "(fresh per run)", WEBHOOK_SECRET: "(fresh per run)" };
    const out = {};
    for (const place of asked.length ? asked : PLACES) {
      out[place] = await effectiveConfig(place === "stack" ? { place, vars: run, overrides: settingOverrides() } : { place });
    }
    console.log(JSON.stringify(asked.length === 1 ? out[asked[0]] : out, null, 2));
  } catch (error) {
    console.error(`config: ${error instanceof Error ? error.message : error}`);
    process.exitCode = 2;
  }
}
