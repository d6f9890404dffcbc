// Retries of a 429 or a 503, against a stand-in that answers them.
import assert from "node:assert/strict";
import { createServer, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { test } from "node:test";

import { Usersync, UsersyncError } from "../src/index.js";

type Answer = (res: ServerResponse) => void;

/** A server answering each request the next of answers (the last once they run out), and how many it got. */
async function answering(...answers: Answer[]): Promise<{ url: string; count: () => number; close: () => void }> {
  let n = 0;
  const srv = createServer((_req, res) => answers[Math.min(n++, answers.length - 1)](res));
  await new Promise<void>((r) => srv.listen(0, "127.0.0.1", r));
  const { port } = srv.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}`, count: () => n, close: () => srv.close() };
}

function refusal(status: number, code: string, retryAfter?: string): Answer {
  return (res) => {
    const headers: Record<string, string> = { "Content-Type": "application/json" };
    if (retryAfter !== undefined) headers["Retry-After"] = retryAfter;
    res.writeHead(status, headers).end(JSON.stringify({ error: { code, message: "try later", requestId: "req_1" } }));
  };
}

const user: Answer = (res) => {
  res.writeHead(200, { "Content-Type": "application/json" }).end(JSON.stringify({ userId: "user_1" }));
};

test("a 503 and a 429 are sent again after their Retry-After", async () => {
  const srv = await answering(refusal(503, "overloaded", "1"), refusal(429, "too_many_requests", "0"), user);
  try {
    const start = Date.now();
    assert.equal((await new Usersync(srv.url, "k").user("user_1")).userId, "user_1");
    assert.equal(srv.count(), 3);
    assert.ok(Date.now() - start >= 1000, "before the second the 503 asked for");
  } finally {
    srv.close();
  }
});

test("the last answer is thrown once retries run out, at once when its wait is too long, and never retried when not 429 or 503", async () => {
  for (const [what, answer, requests, status] of [
    ["retries run out", refusal(503, "unavailable", "0"), 3, 503],
    ["a wait too long", refusal(503, "overloaded", "120"), 1, 503],
    ["a 500", refusal(500, "internal"), 1, 500],
  ] as const) {
    const srv = await answering(answer);
    try {
      await assert.rejects(new Usersync(srv.url, "k", { retries: 2, maxWaitSeconds: 60 }).user("user_1"), (e) => {
        assert.ok(e instanceof UsersyncError, what);
        assert.equal(e.status, status, what);
        assert.equal(e.requestId, "req_1", what);
        return true;
      });
      assert.equal(srv.count(), requests, what);
    } finally {
      srv.close();
    }
  }
});
