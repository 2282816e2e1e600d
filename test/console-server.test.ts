// The operator console's static handler, without a browser: which paths it
// serves, with which headers, and what it answers when the bundle is missing.
// Needs the built console (npm test builds it first).
import http from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CONSOLE_CSP, consoleHandler } from "../src/server/console.js";
import type { RunningServer } from "../src/server/server.js";
import { startTestServer, tempDir } from "./helpers/server.js";

describe("operator console: serving", () => {
  let server: RunningServer;
  beforeAll(async () => {
    server = await startTestServer();
  });
  afterAll(() => server.close());

  it("serves the page at /console with a strict Content-Security-Policy", async () => {
    const res = await fetch(`${server.url}/console`);
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("text/html; charset=utf-8");
    expect(res.headers.get("content-security-policy")).toBe(CONSOLE_CSP);
    expect(CONSOLE_CSP).toContain("script-src 'self'");
    expect(CONSOLE_CSP).toContain("connect-src 'self'");
    expect(CONSOLE_CSP).not.toContain("unsafe");
    expect(res.headers.get("x-content-type-options")).toBe("nosniff");
    const html = await res.text();
    expect(html).toContain('<script type="module" src="/console/app.js"></script>');
  });

  it("serves the bundle and the stylesheet with their content types", async () => {
    const js = await fetch(`${server.url}/console/app.js`);
    expect(js.status).toBe(200);
    expect(js.headers.get("content-type")).toBe("text/javascript; charset=utf-8");
    const bundle = await js.text();
    // Bundled for the browser: no Node built-ins left to import.
    expect(bundle).not.toMatch(/from\s*["']node:/);
    const css = await fetch(`${server.url}/console/console.css?v=1`);
    expect(css.status).toBe(200);
    expect(css.headers.get("content-type")).toBe("text/css; charset=utf-8");
  });

  it("answers 404 for anything else under /console and keeps 404 elsewhere", async () => {
    for (const path of ["/console/nope.js", "/console/../package.json", "/console/index.html", "/consoles", "/", "/favicon.ico"]) {
      const res = await fetch(`${server.url}${path}`);
      expect(res.status, path).toBe(404);
      await res.arrayBuffer();
    }
  });

  it("answers 405 for methods other than GET and HEAD, and HEAD without a body", async () => {
    const post = await fetch(`${server.url}/console`, { method: "POST", body: "x" });
    expect(post.status).toBe(405);
    expect(post.headers.get("allow")).toBe("GET, HEAD");
    const head = await fetch(`${server.url}/console/app.js`, { method: "HEAD" });
    expect(head.status).toBe(200);
    expect(Number(head.headers.get("content-length"))).toBeGreaterThan(0);
    expect((await head.arrayBuffer()).byteLength).toBe(0);
  });

  it("answers 503 with what to run when the console is not built", async () => {
    const empty = await tempDir("synapse-console-");
    const plain = http.createServer(consoleHandler({ dirs: [empty] }));
    await new Promise<void>((resolve) => plain.listen(0, "127.0.0.1", resolve));
    try {
      const { port } = plain.address() as AddressInfo;
      const res = await fetch(`http://127.0.0.1:${port}/console`);
      expect(res.status).toBe(503);
      expect(await res.text()).toContain("npm run build");
    } finally {
      await new Promise((resolve) => plain.close(resolve));
    }
  });
});
