// What the console's browser tests share: Debian's Chromium found (or one
// clear line saying it is missing), launched headless; a page per browser
// context (its own IndexedDB, so its own identity) that records every script
// error, failed load and CSP violation; screenshots saved under
// test-artifacts/console/ (gitignored) for a person to look at.
import { chromium, type Browser, type BrowserContext, type Page } from "playwright-core";
import { accessSync, constants } from "node:fs";
import { mkdir } from "node:fs/promises";
import { delimiter, join } from "node:path";

const CHROMIUM_ARGS = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
];

export const ARTIFACTS = join(process.cwd(), "test-artifacts", "console");

function executable(path: string): boolean {
  try {
    accessSync(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/** CHROMIUM_PATH, or chromium (or chromium-browser) on the PATH. */
export function findChromium(): string | undefined {
  if (process.env.CHROMIUM_PATH) return executable(process.env.CHROMIUM_PATH) ? process.env.CHROMIUM_PATH : undefined;
  for (const dir of (process.env.PATH ?? "").split(delimiter)) {
    for (const name of ["chromium", "chromium-browser"]) {
      if (dir && executable(join(dir, name))) return join(dir, name);
    }
  }
  return undefined;
}

/** Chromium, headless; without it the suite fails with one line saying what to install. */
export async function launchChromium(): Promise<Browser> {
  const path = findChromium();
  if (path === undefined) {
    const line = `Chromium not found (set CHROMIUM_PATH or install Debian's chromium: apt-get install chromium): the console's browser tests cannot run`;
    process.stderr.write(`${line}\n`);
    throw new Error(line);
  }
  // launch() gives every browser a fresh temporary profile and removes it on close.
  return chromium.launch({ executablePath: path, args: CHROMIUM_ARGS });
}

export interface ConsolePage {
  context: BrowserContext;
  page: Page;
  /** Script errors, console errors, failed loads and CSP violations, in order. */
  errors: string[];
}

/** A fresh browser context (a new identity) on the console at `url`, ready; `initScript` runs in every page before the console's. */
export async function openConsole(browser: Browser, url: string, hash = "", initScript?: string): Promise<ConsolePage> {
  const context = await browser.newContext({ viewport: { width: 1400, height: 1000 } });
  if (initScript !== undefined) await context.addInitScript(initScript);
  const page = await context.newPage();
  const errors: string[] = [];
  page.on("pageerror", (error) => errors.push(`pageerror: ${error.message}`));
  page.on("console", (message) => {
    if (message.type() === "error" || message.type() === "warning") errors.push(`console.${message.type()}: ${message.text()}`);
  });
  page.on("requestfailed", (request) => {
    // A stream the page itself closes (it leaves a task) is aborted on purpose.
    if (request.failure()?.errorText !== "net::ERR_ABORTED") errors.push(`requestfailed: ${request.url()} ${request.failure()?.errorText ?? ""}`);
  });
  const response = await page.goto(`${url}/console${hash}`);
  if (response?.status() !== 200) throw new Error(`/console answered ${response?.status()}`);
  await waitReady(page);
  return { context, page, errors };
}

export async function waitReady(page: Page): Promise<void> {
  await page.locator('[data-testid="status"][data-ready="true"]').waitFor({ timeout: 20_000 });
}

/** A full-page screenshot in test-artifacts/console/NAME.png. */
export async function screenshot(page: Page, name: string): Promise<void> {
  await mkdir(ARTIFACTS, { recursive: true });
  await page.screenshot({ path: join(ARTIFACTS, `${name}.png`), fullPage: true });
}
