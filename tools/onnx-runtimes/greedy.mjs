// Usage (through tools/onnx-run): greedy DIR INPUT.json OUT.json
//
// Greedy decoding of an exported model (DIR, `scratchformer export --format
// onnx`) in ONNX Runtime (2 intra-op threads, its default graph
// optimisations), as infer/decoding.cpp's greedy_decode does it: per batch,
// the encoder once, then the merged decoder one position per step with its
// key/value cache (the first step without one), every row fed its argmax
// until every row has written [EOS] or the decoder input holds max_len tokens.
// INPUT.json: {"sources": [[framed source ids], ...], "max_len", "pad", "sos",
//              "eos", "batch" (sentences per batch; default all),
//              "check_uncached" (default false)}.
// OUT.json:   {"sentences": [{"tokens": [...], "logits": [[V floats] per step]}],
//              "seconds": the decoding's time, after one warm-up batch,
//              "uncached_difference" (with check_uncached): the largest
//              difference between those logits and the decoder's without a
//              cache over each batch's whole prefix at once}.
// Tokens exclude [SOS] and [EOS]; a sentence's logits are its steps up to its [EOS].
import { createRequire } from 'node:module';
import fs from 'node:fs';
import path from 'node:path';

const [dir, inputFile, outFile] = process.argv.slice(2);
const require = createRequire(path.join(process.env.SF_ONNX_PREFIX, 'node_modules', 'index.js'));
const ort = require('onnxruntime-node');

const input = JSON.parse(fs.readFileSync(inputFile, 'utf8'));
const config = JSON.parse(fs.readFileSync(path.join(dir, 'config.json'), 'utf8'));
const heads = config.decoder_attention_heads, dK = config.d_model / heads, layers = config.decoder_layers;
const vocab = config.vocab_size;
const options = { intraOpNumThreads: 2, interOpNumThreads: 1 };
const encoder = await ort.InferenceSession.create(path.join(dir, 'onnx', 'encoder_model.onnx'), options);
const decoder = await ort.InferenceSession.create(path.join(dir, 'onnx', 'decoder_model_merged.onnx'), options);

const int64 = (rows, dims) => new ort.Tensor('int64', BigInt64Array.from(rows.flat(), BigInt), dims);
const cacheNames = [];
for (let i = 0; i < layers; ++i)
  for (const side of ['decoder', 'encoder']) for (const kind of ['key', 'value']) cacheNames.push(`${i}.${side}.${kind}`);
const argmax = (row) => row.reduce((best, v, j) => (v > row[best] ? j : best), 0);

// One batch of framed sources: its sentences, and what the check needs.
async function greedy(sources) {
  // Padded with [PAD] to the longest, with masks (1 = token).
  const batch = sources.length, width = Math.max(...sources.map((s) => s.length));
  const padded = sources.map((s) => [...s, ...Array(width - s.length).fill(input.pad)]);
  const mask = int64(sources.map((s) => padded[0].map((_, j) => (j < s.length ? 1 : 0))), [batch, width]);
  const { last_hidden_state: memory } = await encoder.run({ input_ids: int64(padded, [batch, width]), attention_mask: mask });
  const decode = (ids, past) => {
    const feeds = { input_ids: int64(ids, [batch, ids[0].length]), encoder_attention_mask: mask,
                    encoder_hidden_states: memory, use_cache_branch: new ort.Tensor('bool', [past !== null], [1]) };
    for (const name of cacheNames)
      feeds[`past_key_values.${name}`] = past?.[`present.${name}`] ??
          new ort.Tensor('float32', new Float32Array(0), [batch, heads, 0, dK]);
    return decoder.run(feeds);
  };

  const sentences = sources.map(() => ({ tokens: [], logits: [] }));
  const done = Array(batch).fill(false);
  const fed = sources.map(() => [input.sos]);  // every row's decoder inputs, as fed
  const stepLogits = [];                        // [step][row] -> logits
  let past = null;
  for (let length = 1; length < input.max_len; ++length) {
    past = await decode(fed.map((f) => [f[f.length - 1]]), past);
    const rows = [...Array(batch).keys()].map((b) => past.logits.data.subarray(b * vocab, (b + 1) * vocab));
    stepLogits.push(rows);
    let active = 0;
    rows.forEach((row, b) => {
      const token = argmax(row);
      fed[b].push(token);
      if (done[b]) return;
      if (input.check_uncached) sentences[b].logits.push(Array.from(row));
      if (token === input.eos) done[b] = true;
      else sentences[b].tokens.push(token), ++active;
    });
    if (active === 0) break;
  }
  return { sentences, uncachedDifference: async () => {
    // The same positions at once, without a cache: input_ids [batch, steps].
    const steps = stepLogits.length;
    const whole = await decode(fed.map((f) => f.slice(0, steps)), null);
    let largest = 0;
    for (let t = 0; t < steps; ++t)
      for (let b = 0; b < batch; ++b)
        for (let v = 0; v < vocab; ++v)
          largest = Math.max(largest, Math.abs(whole.logits.data[(b * steps + t) * vocab + v] - stepLogits[t][b][v]));
    return largest;
  } };
}

const size = input.batch ?? input.sources.length, batches = [];
for (let begin = 0; begin < input.sources.length; begin += size) batches.push(input.sources.slice(begin, begin + size));
await greedy(batches[0]);  // a warm-up: ONNX Runtime plans and allocates on its first runs
const start = performance.now();
const results = [];
for (const batch of batches) results.push(await greedy(batch));
const out = { sentences: results.flatMap((r) => r.sentences), seconds: (performance.now() - start) / 1000 };
if (input.check_uncached) {
  out.uncached_difference = 0;
  for (const r of results) out.uncached_difference = Math.max(out.uncached_difference, await r.uncachedDifference());
}
fs.writeFileSync(outFile, JSON.stringify(out));
