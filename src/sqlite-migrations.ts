/**
 * The Durable Objects' SQLite schemas are append-only migrations with monotonic ids (STYLE.md
 * habit 10): each object applies the ones it has not applied yet, in its constructor.
 */
export interface SqliteMigration {
  id: number;
  sql: string;
}

export function applyMigrations(sql: SqlStorage, migrations: ReadonlyArray<SqliteMigration>): void {
  sql.exec("CREATE TABLE IF NOT EXISTS schema_migrations (id INTEGER PRIMARY KEY)");
  const applied = new Set(
    sql
      .exec<{ id: number }>("SELECT id FROM schema_migrations")
      .toArray()
      .map((r) => r.id),
  );
  for (const migration of migrations) {
    if (applied.has(migration.id)) continue;
    sql.exec(migration.sql);
    sql.exec("INSERT INTO schema_migrations (id) VALUES (?)", migration.id);
  }
}
