import type { D1Migration } from "cloudflare:test";

declare global {
  namespace Cloudflare {
    interface Env {
      TEST_MIGRATIONS: D1Migration[];
      /** how many D1 shards this integration project binds (vitest.config.ts) */
      TEST_SHARDS: string;
      /** test/support/handler-worker.mjs's Handler entrypoint (vitest.config.ts) */
      TEST_HANDLER: Fetcher & { calls(): Promise<import("../../packages/handler/src/protocol").HandlerDelivery[]> };
    }
  }
}

declare module "vitest" {
  export interface ProvidedContext {
    receiverUrl: string;
  }
}
