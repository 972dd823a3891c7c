// k6 flash sale: one scenario per variant, each a zero-ramp burst of VUS
// virtual users sharing ITERATIONS requests, one variant after the other.
//
//   k6 run -e BASE=http://127.0.0.1:8080 -e TOKEN=<admin token> loadtest/k6/flash-sale.js
//
// With TOKEN set, setup() resets every variant's own SKU to STOCK first.
// 200 (sold), 409 (sold out) and 429 (busy) are answers, not failures; the
// error-rate threshold counts everything else (5xx, 400, 404, timeouts).
// teardown() prints the ledger's verdict per variant (from /api/state), the
// end-of-test summary what the client counted (sold / sold_out / busy).
import http from 'k6/http';
import { check } from 'k6';
import { Counter } from 'k6/metrics';

const BASE = __ENV.BASE || 'http://127.0.0.1:8080';
const TOKEN = __ENV.TOKEN || '';
const STOCK = parseInt(__ENV.STOCK || '50', 10);
const VUS = parseInt(__ENV.VUS || '64', 10);
const ITERATIONS = parseInt(__ENV.ITERATIONS || '400', 10);
const WORK_MS = parseInt(__ENV.WORK_MS || '2', 10);
const VARIANTS = (__ENV.VARIANTS || 'none,local-mutex,setnx,setnx-expiry,token,watchdog,fenced,redlock,lua,lua-sharded').split(',');
// Each burst gets this long before the next one starts.
const SLOT_S = parseInt(__ENV.SLOT_S || '15', 10);

const sold = new Counter('sold');
const soldOut = new Counter('sold_out');
const busy = new Counter('busy');

http.setResponseCallback(http.expectedStatuses(200, 409, 429));

const scenarios = {};
VARIANTS.forEach((variant, i) => {
  scenarios[variant] = {
    executor: 'shared-iterations', // every VU starts at once: no ramp-up
    vus: VUS,
    iterations: ITERATIONS,
    startTime: `${i * SLOT_S}s`,
    maxDuration: `${SLOT_S}s`,
    exec: 'deduct',
    env: { VARIANT: variant },
    tags: { variant },
  };
});

export const options = {
  scenarios,
  thresholds: {
    http_req_failed: ['rate<0.01'],
  },
};

export function setup() {
  if (!TOKEN) {
    console.warn('TOKEN not set: selling whatever stock the SKUs have');
    return;
  }
  for (const variant of VARIANTS) {
    const res = http.post(`${BASE}/api/admin/reset`, JSON.stringify({ sku: variant, stock: STOCK, buckets: variant === 'lua-sharded' ? 8 : 0 }), {
      headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${TOKEN}` },
    });
    check(res, { 'reset accepted': (r) => r.status === 200 });
  }
}

export function deduct() {
  const variant = __ENV.VARIANT;
  const res = http.get(`${BASE}/deductStock/${variant}?sku=${variant}&work_ms=${WORK_MS}`);
  const tags = { variant };
  if (res.status === 200) sold.add(1, tags);
  else if (res.status === 409) soldOut.add(1, tags);
  else if (res.status === 429) busy.add(1, tags);
  check(res, { 'an answer, not an error': (r) => [200, 409, 429].includes(r.status) });
}

// The ledger's verdict, read once every burst is over.
export function teardown() {
  for (const variant of VARIANTS) {
    const state = JSON.parse(http.get(`${BASE}/api/state?sku=${variant}`).body);
    const verdict = state.oversold > 0 ? `OVERSOLD ${state.oversold}` : state.duplicates > 0 ? `DUPLICATES ${state.duplicates}` : 'SAFE';
    console.log(`${variant}: remaining ${state.remaining} oversold ${state.oversold} duplicates ${state.duplicates} -> ${verdict}`);
  }
}

// What the client counted, per variant.
export function handleSummary(data) {
  const lines = ['variant       sold  sold_out  busy'];
  for (const variant of VARIANTS) {
    const count = (name) => {
      const m = data.metrics[`${name}{variant:${variant}}`];
      return m ? m.values.count : 0;
    };
    lines.push(
      `${variant.padEnd(12)} ${String(count('sold')).padStart(5)} ${String(count('sold_out')).padStart(9)} ` +
        `${String(count('busy')).padStart(5)}`,
    );
  }
  return { stdout: lines.join('\n') + '\n' };
}

// Per-variant counters need sub-metrics to appear in the summary data.
for (const variant of VARIANTS) {
  for (const name of ['sold', 'sold_out', 'busy']) {
    options.thresholds[`${name}{variant:${variant}}`] = ['count>=0'];
  }
}
