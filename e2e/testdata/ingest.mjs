// ingest.mjs drives sluice's HTTP ingest API with Node's fetch, as a
// producer written in JavaScript would. It prints one JSON object: for each
// step, the HTTP status and the answer's body; the Go test judges them.
//
//   SLUICE_API=http://127.0.0.1:8480/v1/queues/sms SLUICE_TOKEN=... node ingest.mjs
const api = process.env.SLUICE_API;
const token = process.env.SLUICE_TOKEN;
const tag = process.env.SLUICE_TAG || "node";

async function call(method, path, body, opts = {}) {
  const headers = { Authorization: `Bearer ${opts.token ?? token}` };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const res = await fetch(api + path, {
    method,
    headers,
    body: body === undefined ? undefined : typeof body === "string" ? body : JSON.stringify(body),
  });
  const text = await res.text();
  let json;
  try { json = JSON.parse(text); } catch { json = { unparsed: text }; }
  return { status: res.status, body: json };
}

const out = {};
out.one = await call("POST", "/jobs", {
  user: "alice", key: `${tag}-otp-1`,
  request: { path: "/v2/sms", headers: { "X-Tenant": "acme" } },
  payload: { to: "+15550100", text: "your code is 123456" },
});
out.batch = await call("POST", "/jobs", {
  jobs: [
    { key: `${tag}-b-1`, payload: { to: "+15550101" } },
    { key: `${tag}-otp-1`, payload: { to: "+15550100" } },
    { key: `${tag}-b-3`, payload: { to: "+15550103" } },
  ],
});
const cancelID = out.batch.body.jobs?.[2]?.id ?? "missing";
out.located = await call("GET", `/jobs/${encodeURIComponent(cancelID)}`);
out.cancelled = await call("DELETE", `/jobs/${encodeURIComponent(cancelID)}`);
out.gone = await call("GET", `/jobs/${encodeURIComponent(cancelID)}`);
out.status = await call("GET", "");
out.wrongToken = await call("POST", "/jobs", { payload: 1 }, { token: "not-the-token-0123456789" });
out.oversize = await call("POST", "/jobs", { payload: "x".repeat(80000) });
out.malformed = await call("POST", "/jobs", '{"payload": {"to": }');
out.refused = await call("POST", "/jobs", {
  jobs: [
    { payload: { to: "+15550104" } },
    { cost: 5000, payload: { to: "+15550105" } },
    { request: { url: "https://evil.example/steal" }, payload: { to: "+15550106" } },
  ],
});
out.statusAfter = await call("GET", "");
out.cancelID = cancelID;
console.log(JSON.stringify(out));
