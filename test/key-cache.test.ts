// KeyCache (src/crypto/key-cache.ts): each key is made once while it stays
// cached, the least recently used goes first, and the most recent one is
// answered without reordering the cache.
import { describe, expect, it, vi } from "vitest";
import { KeyCache } from "../src/crypto/key-cache.js";

describe("KeyCache", () => {
  it("makes a key once, answers the most recent one again, and evicts the least recently used", () => {
    const made: string[] = [];
    const cache = new KeyCache<string>(2);
    const get = (key: string) => cache.get(key, () => (made.push(key), `value of ${key}`));
    expect(get("a")).toBe("value of a");
    expect(get("a")).toBe("value of a");
    get("b");
    get("b");
    get("a"); // a is now more recent than b
    get("c"); // evicts b
    get("a");
    get("c");
    expect(made).toEqual(["a", "b", "c"]);
    get("b"); // made again; evicts a, the least recently used of a and c
    get("c");
    get("a");
    expect(made).toEqual(["a", "b", "c", "b", "a"]);
  });

  it("answers the most recent key without reordering its Map (a server signs with one key)", () => {
    const cache = new KeyCache<number>(4);
    cache.get("only", () => 1);
    const reorder = vi.spyOn(Map.prototype, "delete");
    try {
      for (let i = 0; i < 100; i++) expect(cache.get("only", () => 2)).toBe(1);
      expect(reorder).not.toHaveBeenCalled();
    } finally {
      reorder.mockRestore();
    }
  });
});
