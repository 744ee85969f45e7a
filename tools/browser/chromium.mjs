// Debian's headless Chromium for the page checks (check-page.mjs,
// check-translate-page.mjs): started with the flags a container needs (no
// sandbox, no GPU, no /dev/shm) and none of its background traffic, so that
// every request the page makes is the page's own.

export async function launchChromium(puppeteer, viewport, protocolTimeout, fail) {
  try {
    return await puppeteer.launch({
      executablePath: '/usr/bin/chromium',
      headless: true,
      args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', '--disable-quic', '--no-first-run',
             '--disable-background-networking', '--disable-component-update', '--disable-sync'],
      defaultViewport: viewport,
      timeout: 30_000,
      protocolTimeout,
    });
  } catch (error) {
    fail(`could not start /usr/bin/chromium: ${error.message}`);
  }
}

// Appends to `errors` each console error, uncaught exception and failed load of `page`.
export function recordPageErrors(page, errors) {
  page.on('console', (m) => { if (m.type() === 'error') errors.push(`console error: ${m.text()}`); });
  page.on('pageerror', (e) => errors.push(`page error: ${e.message ?? e}`));
  page.on('requestfailed', (r) => errors.push(`failed to load ${r.url()}: ${r.failure()?.errorText}`));
}
