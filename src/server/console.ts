// Serves the operator console: GET (or HEAD) /console is the page,
// /console/app.js its bundle and /console/console.css its stylesheet, read
// from dist/console (`npm run build`); anything else under /console is 404,
// and every other path keeps the plain 404 of non-RPC paths. The page may
// run only its own script and talk only to its own origin.
import { readFile } from "node:fs/promises";
import { fileURLToPath } from "node:url";
import type { RequestHandler } from "./listener.js";

export const CONSOLE_PATH = "/console";

/** Same-origin script, style and fetch (gRPC-web) only; no inline code, no framing. */
export const CONSOLE_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "connect-src 'self'",
  "style-src 'self'",
  // data: only for the page's empty icon, which spares the browser a 404 for /favicon.ico.
  "img-src 'self' data:",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join("; ");

const FILES = new Map<string, { file: string; contentType: string }>([
  [CONSOLE_PATH, { file: "index.html", contentType: "text/html; charset=utf-8" }],
  [`${CONSOLE_PATH}/`, { file: "index.html", contentType: "text/html; charset=utf-8" }],
  [`${CONSOLE_PATH}/app.js`, { file: "app.js", contentType: "text/javascript; charset=utf-8" }],
  [`${CONSOLE_PATH}/console.css`, { file: "console.css", contentType: "text/css; charset=utf-8" }],
]);

/**
 * Where the built console may be: beside dist/src/server/console.js it is
 * ../../console (dist/console); run from source (src/server/console.ts, as
 * the tests do) it is ../../dist/console.
 */
const DEFAULT_DIRS = [new URL("../../console/", import.meta.url), new URL("../../dist/console/", import.meta.url)].map((url) => fileURLToPath(url));

export interface ConsoleOptions {
  /** Directories to look for the built console in, first match wins. */
  dirs?: readonly string[];
}

type Response = Parameters<RequestHandler>[1];

function answer(res: Response, status: number, headers: Record<string, string>, body?: string | Buffer): void {
  res.writeHead(status, headers);
  if (body === undefined) res.end();
  else res.end(body);
}

async function readFirst(dirs: readonly string[], file: string): Promise<Buffer | undefined> {
  for (const dir of dirs) {
    try {
      return await readFile(`${dir.replace(/\/+$/, "")}/${file}`);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "ENOENT") throw error;
    }
  }
  return undefined;
}

/** The request handler's fallback: the console under /console, 404 elsewhere. */
export function consoleHandler(options: ConsoleOptions = {}): RequestHandler {
  const dirs = options.dirs ?? DEFAULT_DIRS;
  return (req, res) => {
    const path = (req.url ?? "").split("?", 1)[0] ?? "";
    if (path !== CONSOLE_PATH && !path.startsWith(`${CONSOLE_PATH}/`)) {
      answer(res, 404, {});
      return;
    }
    const entry = FILES.get(path);
    if (entry === undefined) {
      answer(res, 404, { "Content-Type": "text/plain; charset=utf-8" }, "not found\n");
      return;
    }
    if (req.method !== "GET" && req.method !== "HEAD") {
      answer(res, 405, { Allow: "GET, HEAD", "Content-Type": "text/plain; charset=utf-8" }, "method not allowed\n");
      return;
    }
    // Read on every request (the files are small) so a rebuild shows without a restart.
    readFirst(dirs, entry.file)
      .then((body) => {
        if (body === undefined) {
          const text = "The operator console is not built: run `npm run build`.\n";
          answer(res, 503, { "Content-Type": "text/plain; charset=utf-8" }, req.method === "HEAD" ? undefined : text);
          return;
        }
        answer(
          res,
          200,
          {
            "Content-Type": entry.contentType,
            "Content-Length": String(body.byteLength),
            "Content-Security-Policy": CONSOLE_CSP,
            "X-Content-Type-Options": "nosniff",
            "Referrer-Policy": "no-referrer",
            "Cache-Control": "no-cache",
          },
          req.method === "HEAD" ? undefined : body,
        );
      })
      .catch(() => answer(res, 500, { "Content-Type": "text/plain; charset=utf-8" }, "cannot read the operator console\n"));
  };
}
