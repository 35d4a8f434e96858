import { it } from "vitest";
import { env } from "cloudflare:workers";
import { api, receiverUrl } from "./helpers";
it("probe", async () => {
  const url = `${receiverUrl()}/ok`;
  for (const key of ["plain", "é", "💥", "\ud800", "a\udfffb", "a\u0000b", "1e3", "123", " x "]) {
    const body = { target: { url }, delay: "2h", idempotencyKey: key };
    const res = await api("/v1/jobs", { method: "POST", body });
    const n = (await env.DB.prepare("SELECT count(*) AS n FROM jobs WHERE idempotency_key = ?").bind(key).first<{ n: number }>())!.n;
    const again = await api("/v1/jobs", { method: "POST", body });
    console.log("RESULT", JSON.stringify(key), res.status, "rows", n, "again", again.status, (await again.text()).slice(0, 80));
  }
});
