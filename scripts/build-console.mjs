// Builds the operator console into dist/console: src/console/main.ts bundled
// for the browser with esbuild (app.js, ESM), beside the page and its
// stylesheet (console.css with its @imports bundled into one file).
// platform "browser" makes a node:* import a build error.
import { build } from "esbuild";
import { copyFile, mkdir, rm } from "node:fs/promises";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

const root = fileURLToPath(new URL("..", import.meta.url));
const source = join(root, "src", "console");
const out = join(root, "dist", "console");

await rm(out, { recursive: true, force: true });
await mkdir(out, { recursive: true });
await build({
  entryPoints: [join(source, "main.ts")],
  outfile: join(out, "app.js"),
  bundle: true,
  format: "esm",
  platform: "browser",
  target: "es2022",
  minify: true,
  legalComments: "none",
  tsconfig: join(source, "tsconfig.json"),
  logLevel: "warning",
});
await build({
  entryPoints: [join(source, "console.css")],
  outfile: join(out, "console.css"),
  bundle: true,
  minify: true,
  legalComments: "none",
  logLevel: "warning",
});
await copyFile(join(source, "index.html"), join(out, "index.html"));
