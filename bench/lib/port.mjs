// A free loopback port for a server the bench starts (the peers' Redis, the floor's wrangler dev),
// so a run never collides with another run, a stack or a Redis the machine already has.
import { createServer } from "node:net";

/** A TCP port free on 127.0.0.1 right now (the kernel's pick). */
export function freePort() {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      const port = typeof address === "object" && address ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}
