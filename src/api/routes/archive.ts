/** The tenant's history archive (docs/deploying.md, "History archive"). Documented in archive.openapi.ts. */
import { Hono } from "hono";
import { listArchive, r2CursorOf, tenantPrefix } from "../../archive/archive";
import { ArchiveObjectQuery, ListArchiveQuery } from "../../schemas/requests";
import { ApiError, fromZodError } from "../../use-cases/errors";
import type { ApiEnv } from "../context";
import { badCursor, singleQuery } from "../request";

export const archive = new Hono<ApiEnv>();

/** The tenant's archive objects, in time order: one R2 list a page. */
archive.get("/v1/archive", async (c) => {
  const query = ListArchiveQuery.safeParse(singleQuery(c));
  if (!query.success) throw fromZodError(query.error);
  if (query.data.cursor !== undefined && r2CursorOf(query.data.cursor) === null) throw badCursor();
  const bucket = archiveOf(c.env);
  try {
    return c.json(await listArchive(bucket, c.get("tenant"), query.data));
  } catch (error) {
    // R2 refuses a cursor it did not hand out
    if (query.data.cursor === undefined) throw error;
    throw badCursor();
  }
});

/** One archive object of the tenant, as stored (gzip NDJSON): one R2 read. */
archive.get("/v1/archive/object", async (c) => {
  const query = ArchiveObjectQuery.safeParse(singleQuery(c));
  if (!query.success) throw fromZodError(query.error);
  const { key } = query.data;
  const bucket = archiveOf(c.env);
  // another tenant's object is indistinguishable from a missing one
  const object = key.startsWith(tenantPrefix(c.get("tenant"))) ? await bucket.get(key) : null;
  if (!object) throw new ApiError("not_found", "archive object not found", "key");
  return c.body(object.body, 200, { "content-type": "application/gzip", "content-length": String(object.size) });
});

/** The archive bucket; a deployment without one answers 404 naming the setting. */
function archiveOf(env: Env): R2Bucket {
  if (!env.ARCHIVE) throw new ApiError("archive_not_configured", "this deployment has no history archive (bind an R2 bucket as ARCHIVE)");
  return env.ARCHIVE;
}
