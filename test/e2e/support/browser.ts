import { mkdirSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { type Browser, chromium } from "playwright-core";

/**
 * Debian's Chromium (or CHROMIUM_PATH), headless, driven through playwright-core. Its flags keep
 * it off the network except for what a page asks: no background updates or component fetches,
 * so the browser tests reach nothing but the loopback gateway.
 */
export function launchChromium(): Promise<Browser> {
  return chromium.launch({
    executablePath: process.env.CHROMIUM_PATH ?? "/usr/bin/chromium",
    args: [
      "--headless",
      "--no-sandbox",
      "--disable-gpu",
      "--disable-background-networking",
      "--disable-component-update",
    ],
  });
}

const DOCS_IMAGES = join(dirname(fileURLToPath(import.meta.url)), "../../../docs/images");

/**
 * Where a test's screenshot goes: the README's picture in docs/images when
 * `UPDATE_SCREENSHOTS=1` (to refresh it after a change to the page, then look at it and commit
 * it), else a temporary directory, so that a test run leaves the checkout as it was.
 */
export function screenshotPath(name: string): string {
  const dir =
    process.env.UPDATE_SCREENSHOTS === "1" ? DOCS_IMAGES : join(tmpdir(), "rowbase-screenshots");
  mkdirSync(dir, { recursive: true });
  return join(dir, name);
}
