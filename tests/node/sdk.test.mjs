// The official `openai` Node SDK against the real `groundproxy serve` process (and the fake
// upstream process), as a Node application uses it. Driven by tests/e2e/test_node_sdk.py, which
// starts both processes and passes GP_BASE_URL, GP_KEYS (tenant -> key) and GP_WEATHER_ARGS.
// Tenants: acme (buffer), sentence (sentence mode), loose (guard off: streams are relayed).
import assert from 'node:assert/strict';
import { test } from 'node:test';

import OpenAI from 'openai';
import { zodResponseFormat } from 'openai/helpers/zod';
import { z } from 'zod';

const BASE_URL = process.env.GP_BASE_URL;
const KEYS = JSON.parse(process.env.GP_KEYS ?? '{}');
const WEATHER_ARGS = process.env.GP_WEATHER_ARGS;
assert.ok(BASE_URL && KEYS.acme && WEATHER_ARGS, 'GP_BASE_URL, GP_KEYS, GP_WEATHER_ARGS');

const TENANTS = ['acme', 'sentence', 'loose'];
const QUESTION = 'How long is the warranty?';
const ask = (content) => [{ role: 'user', content }];
const TOOLS = ['get_weather', 'get_time'].map((name) => ({
  type: 'function',
  function: { name, parameters: { type: 'object' } },
}));
const EXPECTED_CALLS = [
  ['get_weather', WEATHER_ARGS],
  ['get_time', '{"tz": "Europe/Paris"}'],
];
const Warranty = z.object({ product: z.string(), warranty: z.string(), months: z.number().int() });

const client = (tenant = 'acme', options = {}) =>
  new OpenAI({ baseURL: BASE_URL, apiKey: KEYS[tenant], maxRetries: 0, timeout: 60_000, ...options });
const calls = (message) => (message.tool_calls ?? []).map((c) => [c.function.name, c.function.arguments]);
const collect = async (stream) => {
  const chunks = [];
  for await (const chunk of stream) chunks.push(chunk);
  return chunks;
};
const deltaText = (chunks) => chunks.map((c) => c.choices[0]?.delta?.content ?? '').join('');
const wrongClaim = (gp) => gp.claims.find((c) => c.text.includes('24 months'));

// --- guarded chat ------------------------------------------------------------------------

test('guarded chat: wrong fact corrected and cited, x-groundproxy-* headers via withResponse', async () => {
  const { data, response } = await client()
    .chat.completions.create(
      { model: 'gpt-4o-mini', messages: ask(QUESTION) },
      { headers: { 'x-request-id': 'req-node-1' } },
    )
    .withResponse();
  assert.equal(response.headers.get('x-groundproxy-action'), 'rewrite');
  assert.equal(response.headers.get('x-request-id'), 'req-node-1');
  assert.match(response.headers.get('x-groundproxy-step-id'), /^st_/);
  assert.match(response.headers.get('x-groundproxy-policy'), /^acme@/);
  assert.match(response.headers.get('x-groundproxy-citations'), /handbook\.md/);
  const trust = Number(response.headers.get('x-groundproxy-trust'));
  assert.ok(Math.abs(trust - data.groundproxy.trust) <= 0.01);
  assert.match(response.headers.get('x-groundproxy-claims'), new RegExp(`^total=${data.groundproxy.claims.length};`));
  const content = data.choices[0].message.content;
  assert.ok(content.includes('12 months') && !content.includes('24 months'), content);
  assert.ok(content.includes('[1]') && content.includes('handbook.md'), content);
  const wrong = wrongClaim(data.groundproxy);
  assert.equal(wrong.verdict, 'contradicted');
  assert.equal(wrong.action, 'corrected');
  assert.equal(wrong.citations[0].doc, 'handbook.md');
  assert.equal(data.system_fingerprint, 'fp_fake');
});

test('streamed text, buffer mode: corrected answer, verdict on the last chunk only', async () => {
  const { data: stream, response } = await client()
    .chat.completions.create({ model: 'gpt-4o-mini', messages: ask(QUESTION), stream: true })
    .withResponse();
  assert.equal(response.headers.get('x-groundproxy-action'), 'rewrite');
  const chunks = await collect(stream);
  const text = deltaText(chunks);
  assert.ok(text.includes('12 months') && !text.includes('24 months'), text);
  assert.equal(wrongClaim(chunks.at(-1).groundproxy).verdict, 'contradicted');
  assert.ok(chunks.slice(0, -1).every((c) => !('groundproxy' in c)));
});

test('streamed text, sentence mode: corrected sentence by sentence with Sources', async () => {
  const { data: stream, response } = await client('sentence')
    .chat.completions.create({ model: 'gpt-4o-mini', messages: ask(QUESTION), stream: true })
    .withResponse();
  assert.match(response.headers.get('x-groundproxy-policy'), /^sentence@/);
  const chunks = await collect(stream);
  const text = deltaText(chunks);
  assert.ok(text.includes('12 months') && !text.includes('24 months'), text);
  assert.ok(text.includes('Sources:') && text.includes('handbook.md'), text);
  assert.ok(chunks.filter((c) => c.choices[0]?.delta?.content).length >= 2);
  const wrong = wrongClaim(chunks.at(-1).groundproxy);
  assert.equal(wrong.verdict, 'contradicted');
  assert.ok(wrong.correction.includes('12 months'));
});

test('streamed text, guard off: relayed as the upstream sent it', async () => {
  const { data: stream, response } = await client('loose')
    .chat.completions.create({ model: 'gpt-4o-mini', messages: ask(QUESTION), stream: true })
    .withResponse();
  assert.equal(response.headers.get('x-groundproxy-stream'), 'relay');
  assert.equal(response.headers.get('x-groundproxy-action'), 'unverified');
  const text = deltaText(await collect(stream));
  assert.equal(text, 'The warranty lasts 24 months. It covers the battery.');
});

// --- tool calls: every tenant, streamed and not ------------------------------------------

for (const tenant of TENANTS) {
  test(`tool calls, not streamed (${tenant})`, async () => {
    const done = await client(tenant).chat.completions.create({
      model: 'gpt-4o-mini',
      messages: ask('What is the weather in Paris?'),
      tools: TOOLS,
    });
    const choice = done.choices[0];
    assert.equal(choice.finish_reason, 'tool_calls');
    assert.deepEqual(calls(choice.message), EXPECTED_CALLS);
    assert.ok(choice.message.tool_calls.every((c) => c.type === 'function' && c.id));
    assert.ok(choice.message.content.startsWith('Let me look that up'), choice.message.content);
    assert.equal(done.system_fingerprint, 'fp_fake');
  });

  test(`tool calls, streamed: raw deltas and the .stream() helper (${tenant})`, async () => {
    const c = client(tenant);
    const body = { model: 'gpt-4o-mini', messages: ask('What is the weather in Paris?'), tools: TOOLS };
    const chunks = await collect(await c.chat.completions.create({ ...body, stream: true }));
    const indices = chunks.flatMap((ch) => (ch.choices[0]?.delta?.tool_calls ?? []).map((t) => t.index));
    assert.deepEqual([...new Set(indices)], [0, 1]);
    assert.deepEqual(indices, [...indices].sort((a, b) => a - b));
    assert.equal(chunks.findLast((ch) => ch.choices[0]?.finish_reason)?.choices[0].finish_reason, 'tool_calls');
    const stream = c.chat.completions.stream(body);
    const argsDone = [];
    stream.on('tool_calls.function.arguments.done', (e) => argsDone.push([e.name, e.arguments]));
    const final = await stream.finalChatCompletion();
    assert.deepEqual(calls(final.choices[0].message), EXPECTED_CALLS);
    assert.deepEqual(argsDone, EXPECTED_CALLS);
    assert.equal(final.choices[0].finish_reason, 'tool_calls');
    assert.ok(final.choices[0].message.content.startsWith('Let me look that up'));
  });
}

// --- structured output: json_schema via .parse() and json_object ------------------------

for (const tenant of TENANTS) {
  test(`json_schema through .parse() and .stream(), json_object mode (${tenant})`, async () => {
    const c = client(tenant);
    const request = {
      model: 'gpt-4o-mini',
      messages: ask('Answer as json: the warranty?'),
      response_format: zodResponseFormat(Warranty, 'warranty'),
    };
    const parsed = await c.chat.completions.parse(request);
    const got = parsed.choices[0].message.parsed;
    const months = tenant === 'loose' ? 24 : 12; // the number is a claim too, corrected in place
    assert.equal(got.months, months);
    assert.equal(got.product, 'Acme vacuum robot');
    if (tenant !== 'loose') {
      assert.ok(!got.warranty.includes('24 months'), got.warranty); // corrected in place
      assert.ok(parsed.groundproxy.claims.some((cl) => cl.verdict === 'contradicted'));
    }
    const final = await c.chat.completions.stream(request).finalChatCompletion();
    assert.deepEqual(final.choices[0].message.parsed, got);
    const plain = await c.chat.completions.create({
      model: 'gpt-4o-mini',
      messages: ask('Answer as json: the warranty?'),
      response_format: { type: 'json_object' },
    });
    assert.equal(JSON.parse(plain.choices[0].message.content).months, months);
  });
}

// --- include_usage and logprobs ----------------------------------------------------------

for (const tenant of TENANTS) {
  test(`stream_options.include_usage and logprobs (${tenant})`, async () => {
    const c = client(tenant);
    const chunks = await collect(
      await c.chat.completions.create({
        model: 'gpt-4o-mini',
        messages: ask(QUESTION),
        stream: true,
        stream_options: { include_usage: true },
        logprobs: true,
      }),
    );
    const last = chunks.at(-1);
    assert.deepEqual(last.choices, []);
    assert.ok(last.usage.total_tokens > 0);
    assert.ok(chunks.slice(0, -1).every((ch) => ch.usage == null));
    const done = await c.chat.completions.create({ model: 'gpt-4o-mini', messages: ask(QUESTION), logprobs: true });
    const { logprobs, message } = done.choices[0];
    if (tenant === 'loose') {
      const text = logprobs.content.map((t) => t.token).join('');
      assert.equal(text, message.content);
      const streamed = chunks.flatMap((ch) => ch.choices[0]?.logprobs?.content ?? []).map((t) => t.token);
      assert.equal(streamed.join(''), text);
    } else {
      assert.equal(logprobs, null); // they described tokens a rewrite replaced
      assert.ok(done.groundproxy.notes.length > 0);
    }
  });
}

// --- the other endpoints -----------------------------------------------------------------

test('Responses API, not streamed: guarded output_text', async () => {
  const { data, response } = await client()
    .responses.create({ model: 'gpt-4o-mini', input: QUESTION, instructions: 'Answer briefly.' })
    .withResponse();
  assert.equal(response.headers.get('x-groundproxy-action'), 'rewrite');
  assert.equal(data.object, 'response');
  assert.equal(data.status, 'completed');
  assert.ok(data.output_text.includes('12 months') && !data.output_text.includes('24 months'));
  assert.equal(wrongClaim(data.groundproxy).verdict, 'contradicted');
  assert.ok(data.usage.total_tokens > 0);
});

test('Responses API, streamed events', async () => {
  for (const tenant of ['acme', 'sentence']) {
    const events = await collect(await client(tenant).responses.create({ model: 'gpt-4o-mini', input: QUESTION, stream: true }));
    const kinds = events.map((e) => e.type);
    assert.equal(kinds[0], 'response.created');
    assert.equal(kinds.at(-1), 'response.completed');
    assert.deepEqual(events.map((e) => e.sequence_number), [...events.keys()]);
    const text = events.filter((e) => e.type === 'response.output_text.delta').map((e) => e.delta).join('');
    assert.ok(text.includes('12 months') && !text.includes('24 months'), `${tenant}: ${text}`);
    const final = events.at(-1).response; // output_text is added to non-streamed responses only
    const outputText = final.output.flatMap((item) => item.content ?? []).map((part) => part.text ?? '').join('');
    assert.equal(outputText, text);
    assert.equal(final.groundproxy.action, 'rewrite');
  }
});

test('legacy completions, streamed and not: guarded', async () => {
  const c = client();
  const { data, response } = await c.completions
    .create({ model: 'gpt-3.5-turbo-instruct', prompt: QUESTION, max_tokens: 50 })
    .withResponse();
  assert.equal(response.headers.get('x-groundproxy-action'), 'rewrite');
  assert.equal(data.object, 'text_completion');
  const text = data.choices[0].text;
  assert.ok(text.includes('12 months') && !text.includes('24 months'), text);
  const chunks = await collect(await c.completions.create({ model: 'gpt-3.5-turbo-instruct', prompt: QUESTION, stream: true }));
  assert.equal(chunks.map((ch) => ch.choices[0]?.text ?? '').join(''), text);
  assert.equal(chunks.at(-1).groundproxy.action, 'rewrite');
});

test('embeddings pass through (the SDK asks for base64 and decodes it)', async () => {
  const c = client();
  const floats = await c.embeddings.create({ model: 'text-embedding-3-small', input: ['a b', 'c'], encoding_format: 'float' });
  assert.deepEqual(floats.data.map((d) => d.index), [0, 1]);
  assert.ok(floats.data.every((d) => d.embedding.length === 8));
  assert.equal(floats.model, 'text-embedding-3-small');
  const decoded = await c.embeddings.create({ model: 'text-embedding-3-small', input: ['a b', 'c'] });
  decoded.data.forEach((d, i) => {
    assert.equal(d.embedding.length, 8);
    d.embedding.forEach((v, k) => assert.ok(Math.abs(v - floats.data[i].embedding[k]) < 1e-6, `${v}`));
  });
});

test('models: list and retrieve', async () => {
  const c = client();
  const model = await c.models.retrieve('gpt-4o-mini');
  assert.equal(model.id, 'gpt-4o-mini');
  assert.equal(model.object, 'model');
  const ids = [];
  for await (const m of c.models.list()) ids.push(m.id);
  assert.ok(ids.includes('gpt-4o-mini'), ids.join(','));
});

// --- errors as the SDK's error classes ---------------------------------------------------

test('errors: AuthenticationError 401, NotFoundError 404', async () => {
  const bad = new OpenAI({ baseURL: BASE_URL, apiKey: 'sk-wrong', maxRetries: 0 });
  await assert.rejects(bad.chat.completions.create({ model: 'gpt-4o-mini', messages: ask('hi') }), (err) => {
    assert.ok(err instanceof OpenAI.AuthenticationError, String(err));
    assert.equal(err.status, 401);
    return true;
  });
  await assert.rejects(client().models.retrieve('no-such-model'), (err) => {
    assert.ok(err instanceof OpenAI.NotFoundError, String(err));
    assert.equal(err.status, 404);
    assert.equal(err.code, 'model_not_found');
    return true;
  });
});

test('errors: RateLimitError 429 and 503 keep retry-after; upstream 500 is a clean 502', async () => {
  await assert.rejects(client().chat.completions.create({ model: 'fail-429', messages: ask('hi') }), (err) => {
    assert.ok(err instanceof OpenAI.RateLimitError, String(err));
    assert.equal(err.status, 429);
    assert.equal(err.headers.get('retry-after'), '7');
    assert.equal(err.code, 'rate_limited');
    assert.equal(err.error.message, 'The upstream model provider is rate limiting: upstream says rate_limit_exceeded.');
    return true;
  });
  const stream = client('sentence').chat.completions.create({ model: 'fail-503', messages: ask('hi'), stream: true });
  await assert.rejects(stream, (err) => {
    assert.ok(err instanceof OpenAI.InternalServerError, String(err));
    assert.equal(err.status, 503);
    assert.equal(err.code, 'upstream_unavailable');
    assert.equal(err.headers.get('retry-after'), '7');
    return true;
  });
  await assert.rejects(client().responses.create({ model: 'fail-500', input: 'hi' }), (err) => {
    assert.ok(err instanceof OpenAI.InternalServerError, String(err));
    assert.equal(err.status, 502);
    assert.equal(err.code, 'upstream_error');
    assert.equal(err.error.message, 'The upstream model provider returned HTTP 500: upstream exploded.');
    return true;
  });
});

test('the SDK waits out retry-after before it retries a 429 (the proxy never retries)', async () => {
  // maxRetries 1: one retry after the 7 s the upstream asked for, then still a RateLimitError.
  // The proxy passes each 429 on at once (it used to retry embeddings twice itself: 14 s more).
  const started = Date.now();
  await assert.rejects(
    client('acme', { maxRetries: 1 }).embeddings.create({ model: 'fail-429', input: 'x' }),
    (err) => {
      assert.ok(err instanceof OpenAI.RateLimitError, String(err));
      assert.equal(err.error.message, 'The upstream model provider is rate limiting: upstream says rate_limit_exceeded.');
      return true;
    },
  );
  const waited = Date.now() - started;
  assert.ok(waited >= 6_500 && waited < 12_000, `${waited} ms`);
});
