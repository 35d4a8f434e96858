// receiver.mjs: SECRET=whsec_... node receiver.mjs (PORT overrides 9000)
import { createServer } from "node:http";
import { Receiver, WebhookVerificationError } from "edge-scheduler-client/receiver";

const receiver = new Receiver({ secret: process.env.SECRET });
const done = new Set(); // use a unique key in your database in production

createServer(async (req, res) => {
  try {
    const delivery = await receiver.verifyNode(req); // reads the raw body itself
    if (!done.has(delivery.executionId)) {
      console.log("attempt", delivery.attempt, "doing the work for", delivery.executionId, JSON.stringify(delivery.body));
      done.add(delivery.executionId); // do the effect and record the key in one transaction
    }
    res.writeHead(200).end("ok");
  } catch (error) {
    res.writeHead(error instanceof WebhookVerificationError ? 401 : 500).end();
  }
}).listen(Number(process.env.PORT ?? 9000), "127.0.0.1");
