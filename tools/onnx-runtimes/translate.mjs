// Usage (through tools/onnx-run): translate DIR SENTENCES.txt OUT.txt
//
// Translates each line of SENTENCES.txt with transformers.js's translation
// pipeline on the exported folder DIR (`scratchformer export --format onnx`),
// from local files only, greedy (num_beams 1), in batches, and writes per
// sentence one line: the source ids its tokenizer made, the ids it generated
// (without the start token and [EOS]), and the text it decoded, TAB-separated.
//
// The ids are generate()'s up to the first [EOS]; the text is the pipeline's
// own, which in a batch may carry words written after a sentence's [EOS]
// (transformers.js 4.3.2 goes on appending to a sentence that has ended until
// every sentence of the batch has).
//
// (transformers.js 4.3.2's generate() keeps one sequence per input even with
// num_beams > 1: it takes the best token of each step, which is greedy
// decoding, with no length penalty; our beam search has no counterpart there.)
import { createRequire } from 'node:module';
import fs from 'node:fs';
import path from 'node:path';

const [dir, sentencesFile, outFile] = process.argv.slice(2);
const require = createRequire(path.join(process.env.SF_ONNX_PREFIX, 'node_modules', 'index.js'));
const { pipeline, env } = require('@huggingface/transformers');

// The model is the folder itself: nothing is fetched.
env.allowRemoteModels = false;
env.localModelPath = path.dirname(path.resolve(dir)) + path.sep;
const translator = await pipeline('translation', path.basename(path.resolve(dir)), { dtype: 'fp32' });

const text = fs.readFileSync(sentencesFile, 'utf8');
const sentences = text.endsWith('\n') ? text.slice(0, -1).split('\n') : text.split('\n');
const eos = translator.model.generation_config.eos_token_id;
// The pipeline's default of 256 new tokens would run past the positions the
// model has (seq_len, generation_config.json's max_length): as translate, at
// most max_length positions with the start token.
const options = { num_beams: 1, do_sample: false, max_new_tokens: translator.model.generation_config.max_length - 1 };
const lines = [];
for (let begin = 0; begin < sentences.length; begin += 32) {
  const batch = sentences.slice(begin, begin + 32);
  const inputs = await translator.tokenizer(batch, { padding: true });
  const generated = (await translator.model.generate({ ...inputs, ...options })).tolist();
  const texts = await translator(batch, options);
  batch.forEach((_, b) => {
    const source = inputs.input_ids[b].tolist().filter((id, j) => inputs.attention_mask[b].data[j] === 1n);
    // After the start token, up to [EOS] (a batch pads the rows that ended first).
    const ids = generated[b].map(Number).slice(1);
    if (ids.includes(eos)) ids.length = ids.indexOf(eos);
    lines.push([source.join(' '), ids.join(' '), texts[b].translation_text].join('\t'));
  });
}
fs.writeFileSync(outFile, lines.join('\n') + '\n');
