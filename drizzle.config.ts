/**
 * drizzle-kit reads the D1 schema from src/db/schema.ts. migrations/ is written by hand (append-only,
 * applied by wrangler): drizzle-kit only exports the DDL it would create, which `npm run db:check`
 * (scripts/check-schema.mjs) compares with migrations/. Do not point `drizzle-kit generate` at migrations/.
 */
import { defineConfig } from "drizzle-kit";

export default defineConfig({
  dialect: "sqlite",
  schema: "./src/db/schema.ts",
});
