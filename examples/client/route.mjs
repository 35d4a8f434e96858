// route.mjs: a Next.js route handler (app/hook/route.js); the same function serves a Worker's fetch
import { Receiver, WebhookVerificationError } from "edge-scheduler-client/receiver";

const receiver = new Receiver({ secret: process.env.SECRET });

export async function POST(request) {
  try {
    const { executionId, attempt, body } = await receiver.verifyRequest(request);
    console.log("attempt", attempt, "of", executionId, JSON.stringify(body));
    return Response.json({ ok: true });
  } catch (error) {
    if (error instanceof WebhookVerificationError) return Response.json({ error: error.code }, { status: 401 });
    throw error;
  }
}
