// `npm run db:check`: fails when src/db/schema.ts and migrations/ disagree, in either direction.
// migrations/*.sql are applied in order to one empty in-memory SQLite, the DDL drizzle-kit would
// create for schema.ts (`drizzle-kit export`) to another; then the facts SQLite itself reports
// (sqlite_master and pragmas: tables, WITHOUT ROWID, columns, types, NOT NULL, defaults, keys,
// CHECKs, indexes with their order and partial WHERE, foreign keys, views, triggers) must match.
// Column order is not compared: drizzle names every column it writes. Offline, about 2 s.
import { execFileSync } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { registerHooks } from "node:module";
import { join } from "node:path";
import { DatabaseSync } from "node:sqlite";
import { pathToFileURL } from "node:url";

const ROOT = join(import.meta.dirname, "..");
const started = performance.now();

// --- the two databases

const migrated = new DatabaseSync(":memory:");
const migrations = readdirSync(join(ROOT, "migrations"))
  .filter((f) => f.endsWith(".sql"))
  .sort();
for (const file of migrations) migrated.exec(readFileSync(join(ROOT, "migrations", file), "utf8"));

const drizzleKit = join(ROOT, "node_modules/drizzle-kit/bin.cjs");
const exported = execFileSync(process.execPath, [drizzleKit, "export", "--config", "drizzle.config.ts"], {
  cwd: ROOT,
  encoding: "utf8",
  stdio: ["ignore", "pipe", "inherit"],
});
const declared = new DatabaseSync(":memory:");
declared.exec(withoutRowid(exported, await withoutRowidTables()));

/** The tables schema.ts declares WITHOUT ROWID (drizzle cannot: drizzle-orm#408). */
async function withoutRowidTables() {
  // schema.ts imports its neighbours without extensions, as the Worker's bundler does
  registerHooks({
    resolve(specifier, context, next) {
      try {
        return next(specifier, context);
      } catch (error) {
        if (error?.code !== "ERR_MODULE_NOT_FOUND" || !specifier.startsWith(".")) throw error;
        return next(`${specifier}.ts`, context);
      }
    },
  });
  const { getTableName } = await import("drizzle-orm");
  // a computed URL: tsc's Node project must not compile schema.ts (it belongs to the Worker's)
  const schema = await import(pathToFileURL(join(ROOT, "src/db/schema.ts")).href);
  return new Set(schema.withoutRowid.map((table) => getTableName(table)));
}

/** drizzle-kit's DDL with WITHOUT ROWID on `tables` (each must be one it creates). */
function withoutRowid(ddl, tables) {
  const missing = new Set(tables);
  const out = ddl.replace(/(CREATE TABLE `([^`]+)` \([\s\S]*?\n\))(;)/g, (all, create, name, end) => {
    if (!missing.delete(name)) return all;
    return `${create} WITHOUT ROWID${end}`;
  });
  if (missing.size > 0) throw new Error(`withoutRowid names tables drizzle-kit does not create: ${[...missing].join(", ")}`);
  return out;
}

// --- SQL text, normalized where SQLite keeps it as written (CHECKs, partial WHERE, views)

/** Splits SQL into code and string literals and drops comments; yields [text, isLiteral]. */
function* tokens(sql) {
  let i = 0;
  let code = "";
  while (i < sql.length) {
    const c = sql[i];
    if (c === "-" && sql[i + 1] === "-") {
      const end = sql.indexOf("\n", i);
      i = end < 0 ? sql.length : end;
      code += " ";
    } else if (c === "/" && sql[i + 1] === "*") {
      const end = sql.indexOf("*/", i + 2);
      i = end < 0 ? sql.length : end + 2;
      code += " ";
    } else if (c === "'") {
      let j = i + 1;
      while (j < sql.length && !(sql[j] === "'" && sql[j + 1] !== "'")) j += sql[j] === "'" ? 2 : 1;
      if (code) yield [code, false];
      code = "";
      yield [sql.slice(i, j + 1), true];
      i = j + 1;
    } else {
      code += c;
      i++;
    }
  }
  if (code) yield [code, false];
}

/** Identifier quotes, table qualifiers, case and spacing do not matter; literals do. */
function normalize(sql) {
  let out = "";
  for (const [text, literal] of tokens(sql)) {
    out += literal
      ? text
      : text
          .replace(/["`[\]]/g, "")
          .toLowerCase()
          .replace(/\b[a-z_][a-z0-9_]*\./g, "")
          .replace(/\s+/g, " ")
          .replace(/\s*([(),=<>!+*/-])\s*/g, "$1");
  }
  return out.trim();
}

/** The bodies of the CHECK (...) clauses of a CREATE TABLE statement. */
function checks(createSql) {
  const text = normalize(createSql);
  const found = [];
  for (const match of text.matchAll(/\bcheck\(/g)) {
    let depth = 0;
    let inLiteral = false;
    for (let j = match.index + match[0].length - 1; j < text.length; j++) {
      if (text[j] === "'") inLiteral = !inLiteral;
      if (inLiteral) continue;
      if (text[j] === "(") depth++;
      if (text[j] === ")" && --depth === 0) {
        found.push(text.slice(match.index + match[0].length, j));
        break;
      }
    }
  }
  return found.sort();
}

// --- facts: "what" -> "how", one line each

function facts(db) {
  const all = (sql, ...args) => db.prepare(sql).all(...args);
  const out = new Map();
  const objects = all("SELECT type, name, tbl_name AS tbl, sql FROM sqlite_master WHERE name NOT LIKE 'sqlite_%' ORDER BY name");
  for (const { type, name, sql } of objects.filter((o) => o.type === "view" || o.type === "trigger")) {
    out.set(`${type} ${name}`, normalize(sql));
  }
  for (const { name: table, sql } of objects.filter((o) => o.type === "table")) {
    const { wr, strict } = all("SELECT wr, strict FROM pragma_table_list WHERE name = ?", table)[0];
    out.set(`table ${table}`, [wr ? "WITHOUT ROWID" : "rowid", strict ? "STRICT" : ""].filter(Boolean).join(" "));
    for (const c of all("SELECT * FROM pragma_table_xinfo(?)", table)) {
      const parts = [c.type.toUpperCase() || "(no type)", c.notnull ? "NOT NULL" : "NULL"];
      if (c.dflt_value !== null) parts.push(`DEFAULT ${normalize(c.dflt_value)}`);
      if (c.pk) parts.push(`PRIMARY KEY #${c.pk}`);
      if (c.hidden) parts.push(`hidden ${c.hidden}`);
      out.set(`column ${table}.${c.name}`, parts.join(" "));
    }
    for (const body of checks(sql)) out.set(`check ${table}: ${body}`, "present");
    for (const fk of all("SELECT * FROM pragma_foreign_key_list(?)", table)) {
      out.set(`foreign key ${table}.${fk.from} #${fk.seq}`, `-> ${fk.table}.${fk.to} on update ${fk.on_update} on delete ${fk.on_delete}`);
    }
    for (const ix of all("SELECT * FROM pragma_index_list(?)", table)) {
      const keys = all("SELECT name, desc, coll FROM pragma_index_xinfo(?) WHERE key = 1 ORDER BY seqno", ix.name)
        .map((k) => `${k.name ?? "(expression)"}${k.desc ? " DESC" : ""}${k.coll === "BINARY" ? "" : ` COLLATE ${k.coll}`}`)
        .join(", ");
      const kind = { c: "index", u: "UNIQUE constraint", pk: "PRIMARY KEY" }[ix.origin];
      // SQLite names the indexes of constraints itself (sqlite_autoindex_<table>_<n>): key them by columns
      const what = ix.origin === "c" ? `index ${ix.name}` : `${kind} ${table} (${keys})`;
      const indexSql = objects.find((o) => o.name === ix.name)?.sql ?? "";
      const where = ix.partial
        ? ` WHERE ${normalize(indexSql)
            .replace(/^[\s\S]*?\)\s*where\b/, "")
            .trim()}`
        : "";
      out.set(what, `${ix.unique && ix.origin === "c" ? "UNIQUE " : ""}ON ${table} (${keys})${where}`);
    }
  }
  return out;
}

// --- compare

const fromMigrations = facts(migrated);
const fromSchema = facts(declared);
const names = [...new Set([...fromMigrations.keys(), ...fromSchema.keys()])].sort();
const differ = names.filter((n) => fromMigrations.get(n) !== fromSchema.get(n));
const seconds = ((performance.now() - started) / 1000).toFixed(1);
if (differ.length === 0) {
  const count = (prefix) => names.filter((n) => n.startsWith(prefix)).length;
  console.log(
    `db:check: src/db/schema.ts matches migrations/ (${migrations.length} files): ${count("table ")} tables, ` +
      `${count("column ")} columns, ${count("check ")} checks, ${count("index ")} indexes (${seconds} s)`,
  );
} else {
  console.error(`db:check: src/db/schema.ts and migrations/ disagree on ${differ.length} fact(s):\n`);
  for (const n of differ) {
    console.error(`  ${n}`);
    console.error(`    migrations/:       ${fromMigrations.get(n) ?? "(absent)"}`);
    console.error(`    src/db/schema.ts:  ${fromSchema.get(n) ?? "(absent)"}`);
  }
  console.error(
    "\nA new column, index or constraint needs both: a new numbered file in migrations/ and its declaration in" +
      "\nsrc/db/schema.ts. `npx drizzle-kit export` prints the DDL drizzle-kit derives from schema.ts.",
  );
  process.exit(1);
}
