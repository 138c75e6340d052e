// Decodes the edge's error answer at argv[2] with the official openai npm
// SDK and prints what the SDK surfaced, as JSON.
const OpenAI = require('openai');
(async () => {
  const client = new OpenAI({ apiKey: 'sk-test', baseURL: process.argv[2], maxRetries: 0 });
  try {
    await client.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'hi' }] });
    console.log(JSON.stringify({ ok: true }));
  } catch (e) {
    console.log(JSON.stringify({
      apiError: e instanceof OpenAI.APIError,
      status: e.status,
      code: e.code,
      type: e.type,
      message: e.error ? e.error.message : undefined,
      param: e.param,
      retryAfter: e.headers ? e.headers['retry-after'] : undefined,
    }));
  }
})();
