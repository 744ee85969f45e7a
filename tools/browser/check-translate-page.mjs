// Usage: node check-translate-page.mjs DIR SENTENCE EXPECTED OUT.png
// (run through tools/check-translate-page, which installs puppeteer-core and
// transformers.js, copies the runtime's files into DIR and sets
// SF_BROWSER_PREFIX).
//
// Opens DIR/translate.html (`scratchformer export --format onnx`) in Debian's
// headless Chromium from a static server on 127.0.0.1 that serves DIR's
// parent folder, types SENTENCE, presses Translate, and checks:
// - the output is EXPECTED;
// - no console error, page error or failed load, and no request to any
//   other origin (the page fetches nothing from elsewhere);
// then saves a screenshot to OUT.png and prints one summary line.
import { createRequire } from 'node:module';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { launchChromium, recordPageErrors } from './chromium.mjs';

const [dir, sentence, expected, pngPath] = process.argv.slice(2);
if (!pngPath) {
  console.error('usage: node check-translate-page.mjs DIR SENTENCE EXPECTED OUT.png');
  process.exit(2);
}
let browser = null;
const missing = [];  // what the page asked for that the folder does not hold
function fail(message) {
  console.error(`check-translate-page: ${dir}/translate.html: ${message}` +
                (missing.length ? ` (absent files it asked for: ${missing.join(', ')})` : ''));
  browser?.process()?.kill('SIGKILL');
  process.exit(1);
}
setTimeout(() => fail('timed out after 90 s'), 90_000).unref();
const puppeteer = createRequire(path.join(process.env.SF_BROWSER_PREFIX, 'package.json'))('puppeteer-core');

// ---- The static server: DIR's parent, read-only, nothing above it ----

const root = path.dirname(path.resolve(dir));
const types = { '.html': 'text/html', '.js': 'text/javascript', '.mjs': 'text/javascript', '.json': 'application/json',
                '.wasm': 'application/wasm', '.onnx': 'application/octet-stream' };
const server = http.createServer((request, response) => {
  const file = path.join(root, decodeURIComponent(new URL(request.url, 'http://x').pathname));
  if (!file.startsWith(root + path.sep) || !fs.statSync(file, { throwIfNoEntry: false })?.isFile()) {
    missing.push(request.url);
    response.writeHead(404).end();
    return;
  }
  response.writeHead(200, { 'Content-Type': types[path.extname(file)] ?? 'application/octet-stream' });
  fs.createReadStream(file).pipe(response);
});
await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
const origin = `http://127.0.0.1:${server.address().port}`;
const url = `${origin}/${encodeURIComponent(path.basename(path.resolve(dir)))}/translate.html`;

// ---- Browser ----

const errors = [];
browser = await launchChromium(puppeteer, { width: 900, height: 600 }, 60_000, fail);
const page = await browser.newPage();
recordPageErrors(page, errors);
page.on('request', (r) => {
  if (!r.url().startsWith(origin + '/') && !r.url().startsWith('blob:') && !r.url().startsWith('data:'))
    errors.push(`a request to another origin: ${r.url()}`);
});
const checkErrors = () => { if (errors.length) fail(`the page reported errors:\n  ${errors.join('\n  ')}`); };

await page.goto(url, { waitUntil: 'load', timeout: 20_000 }).catch((error) => fail(`could not open ${url}: ${error.message}`));
// Waits until the status line says `text`, or that the model could not be loaded.
async function awaitStatus(text) {
  const status = () => page.$eval('#status', (e) => e.textContent);
  await page.waitForFunction((t) => ['The model could not', t].some((s) => document.getElementById('status')
                                        ?.textContent.startsWith(s)), { timeout: 60_000 }, text)
    .catch(() => {});
  const now = await status();
  if (now !== text) fail(`the status line says "${now}", not "${text}"; ${errors.join('; ')}`);
}
await awaitStatus('Ready.');
await page.type('#source', sentence);
await page.click('#translate');
await awaitStatus('Done.');
const got = await page.$eval('#target', (e) => e.textContent);
await page.screenshot({ path: pngPath, fullPage: true });
checkErrors();
if (got !== expected) fail(`"${sentence}" came out as "${got}", not "${expected}"`);
console.log(`check-translate-page: "${sentence}" -> "${got}" in Chromium, from ${origin} alone` +
            (missing.length ? ` (absent files it asked for: ${missing.join(', ')})` : ''));
await browser.close();
server.close();
