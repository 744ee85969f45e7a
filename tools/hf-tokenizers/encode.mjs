// Encodes each line of SENTENCES with the tokenizer file TOKENIZER.json as the
// Hugging Face tokenizers library does, writing one line of space-separated ids
// per sentence (no special tokens added: we frame sentences ourselves).
// Run by tools/hf-encode, which installs the library under build/hf-tokenizers.
import { createRequire } from 'node:module';
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';

const [tokenizerFile, sentencesFile, outFile] = process.argv.slice(2);
const require = createRequire(path.join(process.env.SF_HF_PREFIX, 'node_modules', 'index.js'));
const { Tokenizer } = require('tokenizers');

const tokenizer = Tokenizer.fromFile(tokenizerFile);
const text = readFileSync(sentencesFile, 'utf8');
const sentences = text.endsWith('\n') ? text.slice(0, -1).split('\n') : text.split('\n');
const lines = [];
// Batches of 10,000 keep the library's threads busy without holding every encoding.
for (let begin = 0; begin < sentences.length; begin += 10000) {
  const encodings = await tokenizer.encodeBatch(sentences.slice(begin, begin + 10000), false);
  for (const encoding of encodings) lines.push(encoding.getIds().join(' '));
}
writeFileSync(outFile, lines.join('\n') + '\n');
