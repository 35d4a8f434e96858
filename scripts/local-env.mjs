// Shared by `npm start`, the end-to-end tests and the benchmark: local state, .dev.vars, migrations.
import { execFileSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

export const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..");
export const WRANGLER = join(ROOT, "node_modules", "wrangler", "bin", "wrangler.js");

/**
 * Environment for the local runtime. X_LOCAL_OBSERVABILITY=false turns off wrangler's local
 * per-invocation tracing (on by default since wrangler 4.114; it costs several times the CPU);
 * the cf-object fetch needs the internet, which a local stack does not have.
 */
export const LOCAL_RUNTIME_ENV = {
  X_LOCAL_OBSERVABILITY: "false",
  CLOUDFLARE_CF_FETCH_ENABLED: "false",
  WRANGLER_SEND_METRICS: "false",
};

/** Creates .dev.vars from .dev.vars.example with a fresh API key and secret when it is missing. */
export function ensureDevVars(path = join(ROOT, ".dev.vars")) {
  if (!existsSync(path)) {
    const text = readFileSync(join(ROOT, ".dev.vars.example"), "utf8")
      .replace("__RANDOM_API_KEY__", randomBytes(24).toString("base64url"))
      .replace("__RANDOM_SECRET__", randomBytes(32).toString("base64"));
    writeFileSync(path, text, { mode: 0o600 });
  }
  return parseDevVars(readFileSync(path, "utf8"));
}

export function parseDevVars(text) {
  const vars = {};
  for (const line of text.split("\n")) {
    const m = /^\s*([A-Z0-9_]+)\s*=\s*"?(.*?)"?\s*$/.exec(line);
    if (m) vars[m[1]] = m[2];
  }
  return vars;
}

/**
 * The local profile: the non-secret settings of .dev.vars.example (e.g. BUCKETS), which end-to-end
 * tests, the bench and the soak apply too, so they run the scheduler as `npm start` does (each run
 * brings its own credentials).
 */
export function localProfile() {
  const vars = parseDevVars(readFileSync(join(ROOT, ".dev.vars.example"), "utf8"));
  for (const secret of ["API_KEYS", "WEBHOOK_SECRET", "WEBHOOK_SECRETS"]) delete vars[secret]; // SECRET_SETTINGS in src/config.ts
  return vars;
}

/** Applies D1 migrations to the local database under `persistTo`. */
export function applyMigrations(persistTo) {
  execFileSync(process.execPath, [WRANGLER, "d1", "migrations", "apply", "DB", "--local", "--persist-to", persistTo], {
    cwd: ROOT,
    stdio: ["ignore", "inherit", "inherit"],
    env: { ...process.env, ...LOCAL_RUNTIME_ENV, CI: "true" },
  });
}
