// k6 flash sale: every variant the stack serves (its /api/variants), one
// after the other, each a zero-ramp burst of VUS virtual users sharing
// ITERATIONS requests, one burst every SLOT_S seconds.
//
//   k6 run -e BASE=http://127.0.0.1:8080 -e TOKEN=<admin token> loadtest/k6/flash-sale.js
//
// VARIANTS=lua,token runs only those. With TOKEN set, setup() resets every
// variant's own SKU to STOCK first. 200 (sold), 409 (sold out) and 429
// (busy) are answers, not failures; the error-rate threshold counts
// everything else (5xx, 400, 404, timeouts). teardown() prints the ledger's
// verdict per variant (from /api/state), the end-of-test summary what the
// client counted (sold / sold_out / busy).
import http from 'k6/http';
import exec from 'k6/execution';
import { check, fail, sleep } from 'k6';
import { Counter } from 'k6/metrics';

const BASE = __ENV.BASE || 'http://127.0.0.1:8080';
const TOKEN = __ENV.TOKEN || '';
const STOCK = parseInt(__ENV.STOCK || '50', 10);
const VUS = parseInt(__ENV.VUS || '64', 10);
const ITERATIONS = parseInt(__ENV.ITERATIONS || '400', 10);
const WORK_MS = parseInt(__ENV.WORK_MS || '2', 10);
// Each burst starts this long after the one before.
const SLOT_S = parseInt(__ENV.SLOT_S || '15', 10);
// k6 fixes its options before setup() can ask the stack for its variants,
// so the bursts are slots of one scenario, and the client's counts per
// burst are sub-metrics by slot, declared for up to this many variants.
const MAX_SLOTS = 32;

const sold = new Counter('sold');
const soldOut = new Counter('sold_out');
const busy = new Counter('busy');

http.setResponseCallback(http.expectedStatuses(200, 409, 429));

export const options = {
  scenarios: {
    'flash-sale': {
      executor: 'per-vu-iterations', // every VU starts at once: no ramp-up
      vus: VUS,
      iterations: 1, // one iteration plays every burst
      maxDuration: `${MAX_SLOTS * SLOT_S}s`,
    },
  },
  thresholds: {
    http_req_failed: ['rate<0.01'],
  },
};

// Per-burst counters need sub-metrics to appear in the summary data.
for (let slot = 0; slot < MAX_SLOTS; slot++) {
  for (const name of ['sold', 'sold_out', 'busy']) {
    options.thresholds[`${name}{slot:${slot}}`] = ['count>=0'];
  }
}

// The variants to run: the stack's own list, or VARIANTS (checked against it).
function variantsOfTheStack() {
  const url = `${BASE}/api/variants`;
  const res = http.get(url);
  if (res.status !== 200) fail(`GET ${url} answered ${res.status}: is the stack up?`);
  const known = res.json().map((v) => v.name);
  const asked = __ENV.VARIANTS ? __ENV.VARIANTS.split(',') : known;
  for (const variant of asked) {
    if (!known.includes(variant)) fail(`no variant ${variant}; valid: ${known.join(', ')}`);
  }
  if (asked.length > MAX_SLOTS) fail(`${asked.length} variants: at most ${MAX_SLOTS} per run`);
  return asked;
}

export function setup() {
  const variants = variantsOfTheStack();
  if (!TOKEN) {
    console.warn('TOKEN not set: selling whatever stock the SKUs have');
  } else {
    for (const variant of variants) {
      // lua-sharded's SKU is split as `up` splits it.
      const res = http.post(`${BASE}/api/admin/reset`, JSON.stringify({ sku: variant, stock: STOCK, buckets: variant === 'lua-sharded' ? 8 : 0 }), {
        headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${TOKEN}` },
      });
      check(res, { 'reset accepted': (r) => r.status === 200 });
    }
  }
  return { variants, start: Date.now() };
}

// Every VU plays every burst: burst n starts n * SLOT_S after setup, and
// VU k sends requests k, k + VUS, ... of its ITERATIONS. A burst that
// outlasts its slot delays that VU's next one.
export default function (data) {
  const vu = exec.vu.idInTest - 1;
  data.variants.forEach((variant, slot) => {
    const wait = data.start + slot * SLOT_S * 1000 - Date.now();
    if (wait > 0) sleep(wait / 1000);
    for (let i = vu; i < ITERATIONS; i += VUS) deduct(variant, slot);
  });
}

function deduct(variant, slot) {
  const tags = { variant, slot: String(slot) };
  const res = http.get(`${BASE}/deductStock/${variant}?sku=${variant}&work_ms=${WORK_MS}`, { tags });
  if (res.status === 200) sold.add(1, tags);
  else if (res.status === 409) soldOut.add(1, tags);
  else if (res.status === 429) busy.add(1, tags);
  check(res, { 'an answer, not an error': (r) => [200, 409, 429].includes(r.status) });
}

// The ledger's verdict, read once every burst is over.
export function teardown(data) {
  for (const variant of data.variants) {
    const state = JSON.parse(http.get(`${BASE}/api/state?sku=${variant}`).body);
    const verdict = state.oversold > 0 ? `OVERSOLD ${state.oversold}` : state.duplicates > 0 ? `DUPLICATES ${state.duplicates}` : 'SAFE';
    console.log(`${variant}: remaining ${state.remaining} oversold ${state.oversold} duplicates ${state.duplicates} -> ${verdict}`);
  }
}

// What the client counted, per variant.
export function handleSummary(data) {
  const lines = ['variant       sold  sold_out  busy'];
  const variants = (data.setup_data && data.setup_data.variants) || [];
  variants.forEach((variant, slot) => {
    const count = (name) => {
      const m = data.metrics[`${name}{slot:${slot}}`];
      return m ? m.values.count : 0;
    };
    lines.push(
      `${variant.padEnd(12)} ${String(count('sold')).padStart(5)} ${String(count('sold_out')).padStart(9)} ` +
        `${String(count('busy')).padStart(5)}`,
    );
  });
  return { stdout: lines.join('\n') + '\n' };
}
