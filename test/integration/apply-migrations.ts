// Setup files run outside isolated storage and may run more than once; applyD1Migrations only
// applies what is missing. Every D1 shard (DB, DB_1, ...: db/shards.ts) gets every migration.
import { applyD1Migrations } from "cloudflare:test";
import { env } from "cloudflare:workers";

const bound = env as unknown as Record<string, D1Database | undefined>;
for (let shard = 0; bound[shard === 0 ? "DB" : `DB_${shard}`]; shard++) {
  await applyD1Migrations(bound[shard === 0 ? "DB" : `DB_${shard}`]!, env.TEST_MIGRATIONS);
}

// The local profile (src/platform/profile.ts) records every production limit a test's code
// exceeded, also where the code caught the error: any is a failure of the test it happened in (a
// test that provokes one on purpose takes it with takeViolations()).
import { afterEach } from "vitest";
import { takeViolations } from "../../src/platform/invocations";

afterEach(() => {
  const seen = takeViolations();
  if (seen.length > 0)
    throw new Error(`production would refuse this:\n${seen.map((v) => `- ${v.message} (in ${v.invocation})`).join("\n")}`);
});
