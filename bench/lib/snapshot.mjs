// The code under test, frozen: `wrangler dev` watches the project and reloads (restarting workerd,
// which drops the local queue's in-memory messages) whenever a source file changes. Edits made
// while a bench runs would then show up as multi-second stalls. So by default the bench copies
// src/, scripts/, migrations/ and the config files to a temporary directory (node_modules linked)
// and starts the stack from there with the same scripts/local-stack.mjs. BENCH_SNAPSHOT=0 runs in
// place. The figures name the commit and a hash of the copied sources.
import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { cpSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";

// the handler kit's source and the example handler Worker run in every local stack too, and the
// Worker serves the console's files (wrangler.toml [assets])
const COPIED = [
  "src",
  "public",
  "scripts",
  "migrations",
  "wrangler.toml",
  ".dev.vars.example",
  "package.json",
  "tsconfig.json",
  "packages/handler/src",
  "examples/handler/src",
  "examples/handler/wrangler.toml",
];

function files(dir) {
  const out = [];
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) out.push(...files(path));
    else out.push(path);
  }
  return out;
}

/** sha256 over the copied sources (path + content), short. */
export function sourceHash(root) {
  const hash = createHash("sha256");
  for (const entry of COPIED) {
    const path = join(root, entry);
    if (!existsSync(path)) continue;
    const list = statSync(path).isDirectory() ? files(path).sort() : [path];
    for (const f of list) hash.update(relative(root, f)).update("\0").update(readFileSync(f)).update("\0");
  }
  return hash.digest("hex").slice(0, 12);
}

export function codeIdentity(root) {
  const git = (...args) => {
    try {
      return execFileSync("git", args, { cwd: root, encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] }).trim();
    } catch {
      return null;
    }
  };
  // .dev.vars.example too: its local profile is part of every stack's settings
  const dirty = git("status", "--porcelain", "--", ...COPIED.filter((entry) => entry !== "package.json" && entry !== "tsconfig.json"));
  return {
    commit: git("rev-parse", "--short", "HEAD"),
    uncommittedFiles: dirty === null ? null : dirty.split("\n").filter(Boolean).length,
    sourceHash: sourceHash(root),
  };
}

/** Copies the project's runnable parts; returns the copy's root and a remover. */
export function snapshot(root) {
  const dir = mkdtempSync(join(tmpdir(), "bench-code-"));
  for (const entry of COPIED) {
    const from = join(root, entry);
    if (existsSync(from)) cpSync(from, join(dir, entry), { recursive: true }); // creates the parent folders
  }
  symlinkSync(join(root, "node_modules"), join(dir, "node_modules"), "dir");
  return {
    root: dir,
    remove() {
      if (dir.startsWith(tmpdir()) && dir.includes("bench-code-")) rmSync(dir, { recursive: true, force: true });
    },
  };
}
