import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type BrowserContext, chromium } from 'playwright-core';

/** Debian's chromium: the browser tests drive it, never a downloaded build. */
export const CHROMIUM = '/usr/bin/chromium';

/**
 * Headless Chromium with a fresh profile, nothing reaching out to the network on its own. Throws
 * (the test fails, it never skips) when chromium is not installed.
 *
 * @example
 * ```ts
 * const browser = await launchBrowser();
 * const page = await browser.context.newPage();
 * await browser.close();
 * ```
 */
export async function launchBrowser(): Promise<{
  context: BrowserContext;
  close(): Promise<void>;
}> {
  if (!existsSync(CHROMIUM)) {
    throw new Error(
      `${CHROMIUM} is missing: the browser tests need Debian's chromium (apt-get install -y chromium)`,
    );
  }
  const profile = await mkdtemp(join(tmpdir(), 'opstate-chromium-'));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
    viewport: { width: 1280, height: 900 },
  });
  return {
    context,
    async close() {
      await context.close();
      await rm(profile, { recursive: true, force: true });
    },
  };
}
