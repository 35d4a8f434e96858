/** The OpenAPI entries of archive.ts. */

import { ArchiveObjectQuery, ListArchiveQuery } from "../../schemas/requests";
import { ArchiveList } from "../../schemas/responses";
import { type ApiRoute, BODY_ERRORS, error, json } from "../route-doc";

export const ARCHIVE_ROUTES: ApiRoute[] = [
  {
    method: "get",
    path: "/v1/archive",
    operationId: "listArchive",
    summary: "The tenant's history archive objects (gzip NDJSON, one line per execution), in time order",
    request: { query: ListArchiveQuery },
    responses: {
      200: json(ArchiveList, "a page; follow nextCursor"),
      400: BODY_ERRORS[400],
      404: error("archive_not_configured: no R2 bucket is bound as ARCHIVE"),
    },
  },
  {
    method: "get",
    path: "/v1/archive/object",
    operationId: "getArchiveObject",
    summary: "One archive object of the tenant, as stored (application/gzip)",
    request: { query: ArchiveObjectQuery },
    responses: {
      200: {
        description: "the object: gzip-compressed NDJSON",
        content: { "application/gzip": { schema: { type: "string", format: "binary" } } },
      },
      400: BODY_ERRORS[400],
      404: error("no such object of the tenant, or archive_not_configured"),
    },
  },
];
