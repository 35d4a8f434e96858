/** Drizzle schema of D1: the only place D1 column names are spelled (migrations/ creates them). */
import { integer, primaryKey, sqliteTable, text } from "drizzle-orm/sqlite-core";

export const jobs = sqliteTable("jobs", {
  id: text("id").primaryKey(),
  tenant: text("tenant").notNull(),
  name: text("name"),
  status: text("status", { enum: ["active", "paused", "canceled", "completed"] }).notNull(),
  bucket: integer("bucket").notNull(),
  spec: text("spec").notNull(),
  cron: text("cron"),
  timezone: text("timezone"),
  nextRunAt: integer("next_run_at"),
  idempotencyKey: text("idempotency_key"),
  /** highest occurrence number fired (recurring jobs) */
  fired: integer("fired").notNull().default(0),
  createdAt: integer("created_at").notNull(),
  updatedAt: integer("updated_at").notNull(),
});

export const executions = sqliteTable("executions", {
  id: text("id").primaryKey(),
  jobId: text("job_id").notNull(),
  tenant: text("tenant").notNull(),
  bucket: integer("bucket").notNull(),
  timeBucket: integer("time_bucket").notNull(),
  dueAt: integer("due_at").notNull(),
  status: text("status").notNull(),
  attempts: integer("attempts").notNull(),
  lastHttpStatus: integer("last_http_status"),
  lastError: text("last_error"),
  deadReason: text("dead_reason"),
  finishedAt: integer("finished_at"),
  createdAt: integer("created_at").notNull(),
  updatedAt: integer("updated_at").notNull(),
});

export const attempts = sqliteTable(
  "attempts",
  {
    executionId: text("execution_id").notNull(),
    attempt: integer("attempt").notNull(),
    dueAt: integer("due_at").notNull(),
    startedAt: integer("started_at").notNull(),
    finishedAt: integer("finished_at"),
    outcome: text("outcome"),
    httpStatus: integer("http_status"),
    error: text("error"),
  },
  (t) => [primaryKey({ columns: [t.executionId, t.attempt] })],
);

export const idempotencyKeys = sqliteTable(
  "idempotency_keys",
  {
    tenant: text("tenant").notNull(),
    key: text("key").notNull(),
    jobId: text("job_id").notNull(),
    requestHash: text("request_hash").notNull(),
    createdAt: integer("created_at").notNull(),
  },
  (t) => [primaryKey({ columns: [t.tenant, t.key] })],
);

export type JobRow = typeof jobs.$inferSelect;
export type ExecutionRow = typeof executions.$inferSelect;
export type AttemptRow = typeof attempts.$inferSelect;
