// A worker's HTTP client as a user runs it on Node 24: proxy and CA come
// only from the environment (NODE_USE_ENV_PROXY=1, HTTPS_PROXY,
// NODE_EXTRA_CA_CERTS).
//
// Usage: node client.mjs fetch|http write|sse|hold URL
// Prints one JSON object like client.py.
const [lib, mode, url] = process.argv.slice(2);
const method = mode === 'sse' ? 'GET' : 'POST';
const body = { write: 'amount=5', hold: 'go' }[mode];
const out = {};
const t0 = performance.now();
const ms = () => performance.now() - t0;
try {
  if (lib === 'fetch') {
    const r = await fetch(url, { method, body });
    out.status = r.status;
    out.ctype = r.headers.get('content-type');
    out.retry = r.headers.get('x-should-retry');
    const dec = new TextDecoder();
    let text = '';
    for await (const chunk of r.body) {
      if (out.first_ms === undefined) out.first_ms = ms();
      text += dec.decode(chunk, { stream: true });
    }
    out.body = text;
  } else if (lib === 'http') {
    const mod = url.startsWith('https:') ? await import('node:https') : await import('node:http');
    await new Promise((resolve, reject) => {
      const req = mod.request(url, { method }, (res) => {
        out.status = res.statusCode;
        out.ctype = res.headers['content-type'];
        out.retry = res.headers['x-should-retry'];
        let text = '';
        res.on('data', (d) => {
          if (out.first_ms === undefined) out.first_ms = ms();
          text += d;
        });
        res.on('end', () => {
          if (!res.complete) return reject(new Error('response cut short'));
          out.body = text;
          resolve();
        });
        res.on('error', reject);
        res.on('aborted', () => reject(new Error('aborted')));
      });
      req.on('error', reject);
      req.end(body);
    });
  } else {
    throw new Error('unknown client ' + lib);
  }
} catch (e) {
  out.error = String(e && e.cause ? `${e} (${e.cause})` : e);
}
out.total_ms = ms();
console.log(JSON.stringify(out));
