// clients.mjs runs the official TypeScript SDKs, openai and
// @anthropic-ai/sdk, through the proxy, for internal/proxy/node_test.go.
//
//   node clients.mjs < steps.json
//
// Once the SDKs are loaded it prints "ready", then reads a JSON list of
// steps on stdin (not in its arguments, which any user on the machine may
// read), so a test can set the stage while node starts. A step is {"sdk": "openai"|"anthropic", "base": URL, "key": KEY,
// "model": M, "stream": bool, "retries": N}. Each step makes one call with
// only the base URL changed, and prints one JSON line: whether it worked,
// the text and tokens it got, the status of every HTTP answer the SDK saw
// (its retries included), and the error the SDK raised, if any.
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';

// seen wraps fetch to note each answer's status and whether the proxy gave
// it itself (X-Llmpacer-Refused), so a test sees the SDK's retries.
function seen(answers) {
  return async (url, init) => {
    const resp = await fetch(url, init);
    answers.push({
      status: resp.status,
      refused: resp.headers.get('x-llmpacer-refused') ?? '',
      retryAfter: resp.headers.get('retry-after') ?? '',
    });
    return resp;
  };
}

async function openaiCall(step, fetch) {
  const c = new OpenAI({ apiKey: step.key, baseURL: step.base, maxRetries: step.retries ?? 0, fetch });
  const params = { model: step.model ?? 'gpt-4o-mini', max_completion_tokens: 8, messages: [{ role: 'user', content: 'hello' }] };
  if (!step.stream) {
    const r = await c.chat.completions.create(params);
    return { text: r.choices[0]?.message?.content ?? '', tokens: r.usage?.total_tokens ?? 0 };
  }
  const s = await c.chat.completions.create({ ...params, stream: true });
  let text = '';
  let tokens = 0;
  for await (const chunk of s) {
    text += chunk.choices[0]?.delta?.content ?? '';
    if (chunk.usage) tokens = chunk.usage.total_tokens;
  }
  return { text, tokens };
}

async function anthropicCall(step, fetch) {
  const c = new Anthropic({ apiKey: step.key, baseURL: step.base, maxRetries: step.retries ?? 0, fetch });
  const params = { model: step.model ?? 'claude-sonnet-4-5', max_tokens: 8, messages: [{ role: 'user', content: 'hello' }] };
  if (!step.stream) {
    const m = await c.messages.create(params);
    return { text: m.content.map((b) => b.text ?? '').join(''), tokens: m.usage.input_tokens + m.usage.output_tokens };
  }
  const s = c.messages.stream(params);
  const m = await s.finalMessage();
  return { text: m.content.map((b) => b.text ?? '').join(''), tokens: m.usage.input_tokens + m.usage.output_tokens };
}

async function run(step) {
  const answers = [];
  const out = { ok: false, text: '', tokens: 0, answers, error: null };
  try {
    const call = step.sdk === 'anthropic' ? anthropicCall : openaiCall;
    Object.assign(out, await call(step, seen(answers)), { ok: true });
  } catch (e) {
    out.error = {
      class: e?.constructor?.name ?? typeof e,
      status: e?.status ?? 0,
      retryAfter: e?.headers?.get?.('retry-after') ?? '',
      type: e?.error?.type ?? e?.error?.error?.type ?? '',
      message: String(e?.message ?? e),
    };
  }
  return out;
}

console.log('ready');
let input = '';
for await (const chunk of process.stdin) input += chunk;
const steps = JSON.parse(input);
for (const step of steps) {
  console.log(JSON.stringify(await run(step)));
}
