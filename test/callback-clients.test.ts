// The clients of callback endpoints are bounded: a URL per task must not
// keep a client (and its connections) per task served. The most recently
// used stay open for the next task; one a delivery still pushes through is
// never closed under it.
import { describe, expect, it } from "vitest";
import { CallbackClients } from "../src/agent/callback-clients.js";

function clients(keep: number) {
  const closed: string[] = [];
  const made: string[] = [];
  const cache = new CallbackClients((url) => {
    made.push(url);
    return { url, close: () => closed.push(url) };
  }, keep);
  return { cache, closed, made };
}

const none = () => new Set<string>();

describe("callback clients", () => {
  it("keeps one client per URL, reused", () => {
    const { cache, made } = clients(2);
    const first = cache.get("http://a/cb", none);
    expect(cache.get("http://a/cb", none)).toBe(first);
    expect(made).toEqual(["http://a/cb"]);
  });

  it("closes the least recently used beyond the bound, whatever the number of URLs", () => {
    const { cache, closed } = clients(2);
    for (let task = 1; task <= 50; task++) cache.get(`http://a/cb/${task}`, none);
    expect(cache.size).toBe(2);
    expect(closed).toHaveLength(48);
    expect(closed.slice(0, 2)).toEqual(["http://a/cb/1", "http://a/cb/2"]);
  });

  it("keeps a recently used one open and never closes one in use", () => {
    const { cache, closed } = clients(2);
    cache.get("http://a/A", none);
    cache.get("http://a/B", none);
    cache.get("http://a/A", none);
    cache.get("http://a/C", none);
    expect(closed).toEqual(["http://a/B"]);
    // A is the oldest now, but a delivery still pushes through it.
    cache.get("http://a/D", () => new Set(["http://a/A"]));
    expect(closed).toEqual(["http://a/B", "http://a/C"]);
    cache.closeAll();
    expect(closed).toEqual(["http://a/B", "http://a/C", "http://a/A", "http://a/D"]);
  });
});
