// Usage: node check-page.mjs PAGE.html OUT.png [--no-charts]
// (run through tools/check-report, which installs puppeteer-core and sets
// SF_BROWSER_PREFIX to the folder holding its node_modules).
//
// Opens a report page in Debian's headless Chromium and checks it as a reader
// would see it:
// - no console error, page error or failed load, from opening to the end;
// - the charts (unless --no-charts): at least 5 svg.chart and 7 curves, every
//   <text> of a chart inside its svg's box, no two of one chart overlapping;
// - the attention explorer: hovering, focusing and arrow keys on the query
//   tokens highlight exactly the keys the #attention-data weights say (those
//   with at least half the row's largest weight), per head and for the mean of
//   the heads, recomputed here from the base64 independently of the page;
// then saves a full-page screenshot to OUT.png and prints one summary line.
import { createRequire } from 'node:module';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { launchChromium, recordPageErrors } from './chromium.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const prefix = process.env.SF_BROWSER_PREFIX ?? path.resolve(here, '../../build/browser');
const args = process.argv.slice(2);
const noCharts = args.includes('--no-charts');
const [pagePath, pngPath] = args.filter((a) => a !== '--no-charts');
if (!pagePath || !pngPath) {
  console.error('usage: node check-page.mjs PAGE.html OUT.png [--no-charts]');
  process.exit(2);
}

fs.rmSync(pngPath, { force: true });  // never leave an earlier run's screenshot behind
let browser = null;
function fail(message) {
  console.error(`check-report: ${pagePath}: ${message}`);
  browser?.process()?.kill('SIGKILL');
  process.exit(1);
}
// A hung browser or page must not hold `make test`: the whole check gets 55 s.
setTimeout(() => fail('timed out after 55 s'), 55_000).unref();

// node_modules live under build/, not beside this file, so resolve from there.
let puppeteer;
try {
  puppeteer = createRequire(path.join(prefix, 'package.json'))('puppeteer-core');
} catch (error) {
  fail(`puppeteer-core is not installed under ${prefix} (run tools/check-report --install): ${error.message}`);
}

// ---- What the page should show, computed from its data alone ----

const BLOCKS = ['encoder_self', 'decoder_self', 'cross'];

function tokensOf(sentence, block) {
  return {
    queries: block === 'encoder_self' ? sentence.source : sentence.target,
    keys: block === 'decoder_self' ? sentence.target : sentence.source,
  };
}

// Row `q` of one head (or 'mean': the mean over the heads) of one layer, as
// float64 weights byte/255.
function expectedRow(data, s, block, layer, head, q) {
  const sentence = data.sentences[s];
  const { queries, keys } = tokensOf(sentence, block);
  const bytes = Buffer.from(sentence.blocks[block][layer], 'base64');
  const size = sentence.heads * queries.length * keys.length;
  if (bytes.length !== size)
    fail(`#attention-data: sentence ${s} ${block} layer ${layer} holds ${bytes.length} bytes, ` +
         `not heads × queries × keys = ${sentence.heads} × ${queries.length} × ${keys.length}`);
  const heads = head === 'mean' ? [...Array(sentence.heads).keys()] : [Number(head)];
  return keys.map((_, k) => {
    let sum = 0;
    for (const h of heads) sum += bytes[(h * queries.length + q) * keys.length + k] / 255;
    return sum / heads.length;
  });
}

// The highlight rule: keys with weight >= half the row's largest. Keys within
// 1e-6 of the threshold are left out of the comparison (the page may round
// differently, in float32 say); argmax is the largest weight's key.
function strongSet(row) {
  const max = Math.max(...row);
  const threshold = 0.5 * max;
  return {
    strong: row.flatMap((w, k) => (w >= threshold && Math.abs(w - threshold) > 1e-6 ? [k] : [])),
    ties: row.flatMap((w, k) => (Math.abs(w - threshold) <= 1e-6 ? [k] : [])),
    argmax: row.indexOf(max),
  };
}

// ---- Browser ----

const errors = [];
browser = await launchChromium(puppeteer, { width: 1400, height: 1000 }, 30_000, fail);
const page = await browser.newPage();
recordPageErrors(page, errors);
async function saveScreenshot() {
  try {
    fs.mkdirSync(path.dirname(path.resolve(pngPath)), { recursive: true });
    await page.screenshot({ path: pngPath, fullPage: true });
  } catch (error) {
    fail(`could not save the screenshot ${pngPath}: ${error.message}`);
  }
  if (!(fs.statSync(pngPath, { throwIfNoEntry: false })?.size > 0)) fail(`the screenshot ${pngPath} is empty`);
}
const checkErrors = () => { if (errors.length) fail(`the page reported errors:\n  ${errors.join('\n  ')}`); };

const url = pathToFileURL(path.resolve(pagePath)).href;
try {
  await page.goto(url, { waitUntil: 'load', timeout: 20_000 });
} catch (error) {
  fail(`could not open ${url}: ${error.message}`);
}
checkErrors();
// A first screenshot as loaded, so a failing check still leaves one to look at.
await saveScreenshot();

// ---- Charts ----

let chartCount = 0, curveCount = 0;
if (!noCharts) {
  const charts = await page.$$eval('svg.chart', (svgs) => svgs.map((svg) => {
    const box = (e) => { const r = e.getBoundingClientRect(); return { l: r.left, t: r.top, r: r.right, b: r.bottom }; };
    return { svg: box(svg), texts: [...svg.querySelectorAll('text')].map((t) => ({ text: t.textContent, ...box(t) })) };
  }));
  chartCount = charts.length;
  curveCount = await page.$$eval('polyline.series', (p) => p.length);
  if (chartCount < 5 || curveCount < 7)
    fail(`expected at least 5 charts (svg.chart) and 7 curves (polyline.series), found ${chartCount} and ${curveCount}`);
  const problems = [];
  const fmt = (t) => `"${t.text}" [${t.l.toFixed(1)},${t.t.toFixed(1)} – ${t.r.toFixed(1)},${t.b.toFixed(1)}]`;
  charts.forEach((chart, c) => {
    const title = chart.texts[0]?.text ?? '';
    const s = chart.svg;
    for (const t of chart.texts)
      if (t.l < s.l - 0.5 || t.t < s.t - 0.5 || t.r > s.r + 0.5 || t.b > s.b + 0.5)
        problems.push(`chart ${c} ("${title}"): ${fmt(t)} is clipped by its svg [${s.l.toFixed(1)},${s.t.toFixed(1)} – ${s.r.toFixed(1)},${s.b.toFixed(1)}]`);
    for (let i = 0; i < chart.texts.length; ++i)
      for (let j = i + 1; j < chart.texts.length; ++j) {
        const a = chart.texts[i], b = chart.texts[j];
        const area = Math.max(0, Math.min(a.r, b.r) - Math.max(a.l, b.l)) * Math.max(0, Math.min(a.b, b.b) - Math.max(a.t, b.t));
        if (area > 1) problems.push(`chart ${c} ("${title}"): ${fmt(a)} overlaps ${fmt(b)} (${area.toFixed(1)} px²)`);
      }
  });
  if (problems.length) fail(`chart texts clipped or overlapping:\n  ${problems.join('\n  ')}`);
}

// ---- Attention explorer ----

const json = await page.$eval('#explorer script#attention-data', (e) => e.textContent).catch(() => null);
if (json === null) fail('no attention explorer: <section id="explorer"> holds no <script id="attention-data">');
let data;
try {
  data = JSON.parse(json);
} catch (error) {
  fail(`#attention-data is not JSON: ${error.message}`);
}
if (!Array.isArray(data.sentences) || data.sentences.length === 0) fail('#attention-data has no sentences');
for (const [i, s] of data.sentences.entries())
  for (const b of BLOCKS)
    if (!Array.isArray(s.blocks?.[b]) || s.blocks[b].length !== s.layers)
      fail(`#attention-data: sentence ${i} has no ${s.layers} layers of "${b}"`);

const range = (n) => [...Array(n).keys()].map(String);
async function checkOptions(id, expected) {
  const values = await page.$$eval(`#${id} option`, (o) => o.map((e) => e.value)).catch(() => []);
  const missing = expected.filter((v) => !values.includes(v));
  if (missing.length) fail(`<select id="${id}"> lacks the options ${JSON.stringify(missing)} (it has ${JSON.stringify(values)})`);
}

// Each token's index, the text of its word (the whole of it, as drawn) and tabindex.
const tokenTexts = (sel) => page.$$eval(sel, (e) => e.map((t) => ({ index: t.dataset.index, text: t.querySelector('.word')?.textContent ?? null, tabindex: t.getAttribute('tabindex') })));
const strongNow = () => page.$$eval('#keys .token.strong', (e) => e.map((t) => Number(t.dataset.index)).sort((a, b) => a - b));
const statusNow = () => page.$eval('#explorer-status', (e) => e.textContent.trim()).catch(() => null);

// Checks the keys now highlighted are those of row q of the selection.
async function checkRow(state, q) {
  const { s, block, layer, head } = state;
  const what = `sentence ${s}, ${block} layer ${layer} head ${head}, query ${q}`;
  const { queries, keys } = tokensOf(data.sentences[s], block);
  const row = expectedRow(data, s, block, layer, head, q);
  const { strong, ties, argmax } = strongSet(row);
  // The page redraws in its event handlers; wait briefly for it rather than race it.
  const matches = (expected, ties) => {
    const got = [...document.querySelectorAll('#keys .token.strong')].map((t) => Number(t.dataset.index))
      .filter((k) => !ties.includes(k)).sort((a, b) => a - b);
    return JSON.stringify(got) === JSON.stringify(expected);
  };
  const ok = await page.waitForFunction(matches, { timeout: 2_000 }, strong, ties).then(() => true, () => false);
  const got = await strongNow();
  if (!ok)
    fail(`${what}: highlighted keys ${JSON.stringify(got)}, but the data's weights ` +
         `[${row.map((w) => w.toFixed(3)).join(', ')}] make them ${JSON.stringify(strong)}`);
  if (!got.includes(argmax)) fail(`${what}: the most attended key ${argmax} is not highlighted (${JSON.stringify(got)})`);
  const shown = await tokenTexts('#keys .token');
  if (shown.length !== keys.length) fail(`${what}: ${shown.length} key tokens shown, the data has ${keys.length}`);
  const qShown = await tokenTexts('#queries .token');
  if (qShown.length !== queries.length) fail(`${what}: ${qShown.length} query tokens shown, the data has ${queries.length}`);
  const weights = await page.$$eval('#keys .token', (e) => e.map((t) => [Number(t.dataset.index), t.dataset.weight]));
  for (const [k, w] of weights)
    if (!(Math.abs(Number(w) - row[k]) <= 0.0006))
      fail(`${what}: key ${k} has data-weight="${w}", the data says ${row[k].toFixed(3)}`);
  for (const t of qShown)
    if (t.tabindex !== '0') fail(`${what}: query token ${t.index} is not focusable in order (tabindex="${t.tabindex}", not "0")`);
  for (const [list, tokens, name] of [[shown, keys, 'key'], [qShown, queries, 'query']])
    for (const t of list)
      if (typeof tokens[t.index] !== 'string' || t.text !== tokens[t.index])
        fail(`${what}: ${name} token ${t.index} shows ${JSON.stringify(t.text)}, the data says ${JSON.stringify(tokens[t.index])}`);
  return { what, strong: got, argmax, keys, queries };
}

async function selectView(state) {
  for (const [id, value] of [['sentence', state.s], ['block', state.block], ['layer', state.layer], ['head', state.head]]) {
    const chosen = await page.select(`#${id}`, String(value)).catch((e) => fail(`<select id="${id}">: ${e.message}`));
    if (!chosen?.includes(String(value))) fail(`<select id="${id}"> has no option "${value}"`);
  }
}

const queryToken = (q) => `#queries .token[data-index="${q}"]`;
async function hover(q) {
  if (!(await page.$(queryToken(q)))) fail(`no query token with data-index="${q}"`);
  await page.hover(queryToken(q));
}

const s = data.sentences.length - 1;
const sentence = data.sentences[s];
await checkOptions('sentence', range(data.sentences.length));
await checkOptions('block', BLOCKS);
await page.select('#sentence', String(s));
await checkOptions('layer', range(sentence.layers));
await checkOptions('head', [...range(sentence.heads), 'mean']);

// Cross-attention, last layer, head 1: hover a query token.
const cross = { s, block: 'cross', layer: sentence.layers - 1, head: sentence.heads > 1 ? 1 : 0 };
await selectView(cross);
const nQueries = tokensOf(sentence, 'cross').queries.length;
const q = nQueries > 1 ? 1 : 0;
await hover(q);
const shown = await checkRow(cross, q);
const status = await statusNow();
if (!status) fail('#explorer-status is missing or empty');

// The mean of the heads, for the same query.
const mean = { ...cross, head: 'mean' };
await page.select('#head', 'mean');
await checkRow(mean, q);
const meanStatus = await statusNow();
if (meanStatus === status) fail(`#explorer-status still says "${status}" after choosing the mean of the heads`);

// Keyboard: focus selects; the arrow keys move focus and selection along the queries.
await page.mouse.move(0, 0);  // a pointer left over a token could re-select it
await page.focus(queryToken(q));
await checkRow(mean, q);
// (A one-token target has nowhere to go.)
for (const [key, to] of nQueries > q + 1 ? [['ArrowRight', q + 1], ['ArrowLeft', q]] : []) {
  await page.keyboard.press(key);
  const active = await page.evaluate(() => {
    const e = document.activeElement;
    return e?.matches('#queries .token') ? e.dataset.index : `${e?.tagName} ${e?.id ?? ''}`.trim();
  });
  if (active !== String(to)) fail(`${key} on query token ${to === q ? q + 1 : q} should focus query token ${to}, focus is on ${active}`);
  await checkRow(mean, to);
}

// Encoder self-attention, first layer and head; decoder self-attention, the
// last layer and head, at the last query (which sees every key before it).
const encoder = { s, block: 'encoder_self', layer: 0, head: 0 };
await selectView(encoder);
const qe = tokensOf(sentence, 'encoder_self').queries.length > 1 ? 1 : 0;
await hover(qe);
await checkRow(encoder, qe);
const decoder = { s, block: 'decoder_self', layer: sentence.layers - 1, head: sentence.heads - 1 };
await selectView(decoder);
const qd = tokensOf(sentence, 'decoder_self').queries.length - 1;
await hover(qd);
await checkRow(decoder, qd);

// Back to the view the summary names, for the screenshot.
await selectView(cross);
await hover(q);
await checkRow(cross, q);
checkErrors();

await saveScreenshot();
checkErrors();
await browser.close();

const quote = (tokens, i) => `${i} "${tokens[i]}"`;
console.log(`rendered ${pagePath}: ${noCharts ? 'no charts asked for' : `${chartCount} charts, ${curveCount} curves`}, ` +
  `explorer: sentence ${s}, cross layer ${cross.layer} head ${cross.head}, query ${quote(shown.queries, q)} -> keys ` +
  `[${shown.strong.map((k) => quote(shown.keys, k)).join(', ')}]; screenshot ${pngPath}`);
