#!/usr/bin/env node
// The published package runs its build. A checkout of the repository runs the source itself when
// Node strips types (>= 22.18; `npx edge-scheduler` there uses the repository's own Node 24), so it
// needs no build step.
import { existsSync } from "node:fs";

const source = new URL("../src/cli.ts", import.meta.url);
const built = new URL("../dist/cli.js", import.meta.url);
if (existsSync(source) && process.features.typescript) await import(source.href);
else if (existsSync(built)) await import(built.href);
else {
  console.error("edge-scheduler: run it on Node >= 22.18 (npx edge-scheduler), or build it first: npm run build -w edge-scheduler-client");
  process.exitCode = 2;
}
