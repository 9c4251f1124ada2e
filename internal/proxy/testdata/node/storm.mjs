// storm.mjs is the TypeScript worker of the storm's proxy scenario
// (storm/proxy.go): the official openai package with its default retries,
// WORKERS calls at a time, JOBS chat calls in all, through the proxy.
//
//   OPENAI_API_KEY=... node storm.mjs BASE_URL JOBS WORKERS
//
// It prints "ready", starts on a line on stdin, prints "done" after each
// call, and last {"ok": N, "failed": N}.
import OpenAI from 'openai';
import readline from 'node:readline';

const [base, jobs, workers] = [process.argv[2], Number(process.argv[3]), Number(process.argv[4])];
const client = new OpenAI({ baseURL: base });
console.log('ready');
const rl = readline.createInterface({ input: process.stdin });
await new Promise((resolve) => rl.once('line', resolve));
rl.close();

const res = { ok: 0, failed: 0 };
let next = 0;
async function worker() {
  while (next < jobs) {
    next++;
    try {
      await client.chat.completions.create({ model: 'gpt-4o-mini', max_tokens: 16, messages: [{ role: 'user', content: 'hello' }] });
      res.ok++;
    } catch {
      res.failed++;
    }
    console.log('done');
  }
}
await Promise.all(Array.from({ length: workers }, worker));
console.log(JSON.stringify(res));
