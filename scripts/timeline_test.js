#!/usr/bin/env node
// Tests the pure parts of static/timeline.js (no DOM): the overlap witness
// (it must agree with src/timeline/mod.rs `overlaps`), lane packing, the
// shaded spans, lease expiry and the axis steps. Run: node scripts/timeline_test.js
'use strict';

const assert = require('assert');
const path = require('path');
const T = require(path.join(__dirname, '..', 'static', 'timeline.js'));

let failed = 0;
let passed = 0;
function test(name, body) {
  try {
    body();
    passed++;
    console.log('ok   ' + name);
  } catch (err) {
    failed++;
    console.log('FAIL ' + name + '\n     ' + (err && err.stack ? err.stack.split('\n').slice(0, 3).join('\n     ') : err));
  }
}

const at = (instance, enter, exit, extra) => Object.assign({ instance, enter_ns: enter, exit_ns: exit, outcome: 'sold' }, extra || {});

// The reference: the server's rule, written again plainly.
function reference(sections) {
  const order = sections.map((_, i) => i);
  order.sort((a, b) => (sections[a].enter_ns - sections[b].enter_ns) || (a - b));
  const pairs = [];
  for (let k = 0; k < order.length; k++) {
    for (let m = k + 1; m < order.length; m++) {
      if (sections[order[m]].enter_ns >= sections[order[k]].exit_ns) break;
      pairs.push([order[k], order[m]]);
    }
  }
  return pairs;
}

test('module exposes the API', () => {
  for (const name of ['mount', 'overlaps', 'summary', '_pack', '_spans', '_expiry', '_niceStep', '_formatTick', '_axis', '_prepare']) {
    assert.strictEqual(typeof T[name], 'function', name);
  }
});

test('the same cases as the Rust unit test', () => {
  assert.deepStrictEqual(T.overlaps([at('a', 10, 20), at('b', 15, 30), at('a', 30, 40), at('b', 0, 5)]), [[0, 1]]);
  assert.deepStrictEqual(T.overlaps([at('a', 7, 7), at('b', 7, 7), at('a', 7, 8)]), []);
  assert.deepStrictEqual(T.overlaps([at('a', 0, 100), at('b', 10, 20), at('b', 30, 40)]), [[0, 1], [0, 2]]);
});

test('pairs are [earlier entry, later entry], ties keep input order', () => {
  assert.deepStrictEqual(T.overlaps([at('a', 50, 60), at('b', 10, 55)]), [[1, 0]]);
  assert.deepStrictEqual(T.overlaps([at('a', 5, 9), at('b', 5, 9), at('c', 5, 6)]), [[0, 1], [0, 2], [1, 2]]);
  // a zero-width section (a script) strictly inside another overlaps it
  assert.deepStrictEqual(T.overlaps([at('a', 0, 100), at('b', 50, 50)]), [[0, 1]]);
  // break, not continue: a later short one after a non-overlapping one is not seen from a
  assert.deepStrictEqual(T.overlaps([at('a', 0, 10), at('b', 10, 11), at('c', 12, 13)]), []);
  assert.deepStrictEqual(T.overlaps([]), []);
  assert.deepStrictEqual(T.overlaps(undefined), []);
});

test('random sections agree with the reference rule', () => {
  let seed = 42;
  const rand = (n) => { seed = (seed * 1103515245 + 12345) % 2147483648; return seed % n; };
  for (let round = 0; round < 200; round++) {
    const sections = [];
    const count = rand(40);
    for (let i = 0; i < count; i++) {
      const enter = rand(1000);
      sections.push(at('abc'[rand(3)], enter, enter + rand(60)));
    }
    assert.deepStrictEqual(T.overlaps(sections), reference(sections));
  }
});

test('epoch-sized numbers (beyond 2^53) still work', () => {
  const base = 1796135266741593000;
  const s = [at('a', base, base + 5e6), at('b', base + 1e6, base + 2e6), at('a', base + 6e6, base + 7e6)];
  assert.deepStrictEqual(T.overlaps(s), [[0, 1]]);
  const prepared = T._prepare({ from_ns: base, to_ns: base + 1e9, sections: s, overlaps: [[0, 1]] });
  assert.ok(Math.abs(prepared.enter[1] - 1e6) <= 512, "relative to from_ns, within a few hundred ns");
  assert.strictEqual(prepared.server.agree, true);
  assert.strictEqual(T._prepare({ from_ns: base, to_ns: base + 1e9, sections: s, overlaps: [] }).server.agree, false);
  // The server lists its first pairs only; overlap_count is the whole.
  const crowd = [at('a', 0, 100), at('b', 10, 100), at('c', 20, 100)];
  const first = T._prepare({ from_ns: 0, to_ns: 100, sections: crowd, overlaps: [[0, 1]], overlap_count: 3 }).server;
  assert.deepStrictEqual(first, { count: 3, agree: true });
  assert.strictEqual(T._prepare({ from_ns: 0, to_ns: 100, sections: crowd, overlaps: [[0, 1]], overlap_count: 4 }).server.agree, false);
  assert.strictEqual(T._prepare({ from_ns: 0, to_ns: 100, sections: crowd, overlaps: [[1, 2]], overlap_count: 3 }).server.agree, true);
});

test('parse keeps epoch nanoseconds exact: a pair 1 ns deep is a pair, as the server counts it', () => {
  // 1796135266741593001 and ...593000 are one double: read by JSON.parse,
  // b's entry ties a's exit and the pair the server counted is lost.
  const text = '{"from_ns":1796135266741590000,"to_ns":1796135266741600000,"sections":[' +
    '{"instance":"a","enter_ns":1796135266741592000,"exit_ns":1796135266741593001,"renewals_ns":[1796135266741592500],"outcome":"sold"},' +
    '{"instance":"b","enter_ns":1796135266741593000,"exit_ns":1796135266741594000,"outcome":"sold","detail":"x_ns\\":1796135266741593000"}],' +
    '"events":[{"at_ns":1796135266741591000,"kind":"pause"}],"overlaps":[[0,1]],"overlap_count":1}';
  assert.deepStrictEqual(T.overlaps(JSON.parse(text).sections), [], 'what a double makes of it');
  const data = T.parse(text);
  assert.deepStrictEqual(T.overlaps(data.sections), [[0, 1]]);
  assert.strictEqual(data.origin_ns, '1796135266741590000');
  assert.strictEqual(data.from_ns, 0);
  assert.strictEqual(data.to_ns, 10000);
  assert.strictEqual(data.sections[0].exit_ns, 3001);
  assert.deepStrictEqual(data.sections[0].renewals_ns, [2500]);
  assert.strictEqual(data.events[0].at_ns, 1000);
  // strings are left as they were, whatever they hold
  assert.strictEqual(data.sections[1].detail, 'x_ns":1796135266741593000');
  assert.strictEqual(T._prepare(data).server.agree, true);
  // small numbers, no _ns fields, and bad text
  assert.deepStrictEqual(T.parse('{"sections":[],"overlap_count":0}'), { sections: [], overlap_count: 0, origin_ns: null });
  assert.throws(() => T.parse('{"sections":'));
  // a time that is not an integer is left as it came
  assert.deepStrictEqual(T.parse('{"from_ns":1.5,"to_ns":"soon","at_ns":null}'), { from_ns: 1.5, to_ns: 'soon', at_ns: null, origin_ns: null });
});

test('summary counts cross-instance pairs', () => {
  const s = [at('a', 0, 100), at('a', 10, 20), at('b', 15, 30), at('c', 200, 300)];
  const sum = T.summary(s);
  assert.deepStrictEqual(sum.pairs, [[0, 1], [0, 2], [1, 2]]);
  assert.strictEqual(sum.count, 3);
  assert.strictEqual(sum.cross, 2);
});

test('packing: one lane per instance, concurrent sections in separate rows', () => {
  const s = [
    at('b', 0, 10),
    at('a', 0, 10),
    at('a', 5, 15),
    at('a', 10, 20), // fits row 0 of a again (half-open)
    at('a', 12, 30), // row 0 busy until 20, row 1 until 15 -> row 2
    at('a2', 0, 1),
    at('a10', 0, 1),
  ];
  const p = T._pack(s);
  assert.deepStrictEqual(p.lanes.map((l) => l.instance), ['a', 'a2', 'a10', 'b']);
  assert.deepStrictEqual(p.lanes.map((l) => [l.firstRow, l.rows]), [[0, 3], [3, 1], [4, 1], [5, 1]]);
  assert.deepStrictEqual(Array.from(p.row), [5, 0, 1, 0, 2, 3, 4]);
  assert.strictEqual(p.rowCount, 6);
  assert.deepStrictEqual(Array.from(p.rowLane), [0, 0, 0, 1, 2, 3]);
  assert.deepStrictEqual(p.rowItems[0], [1, 3]);
  assert.deepStrictEqual(p.rowItems[2], [4]);
});

test('packing keeps the release tail clear of the next bar in its row', () => {
  const s = [at('a', 0, 10, { release_ns: 30 }), at('a', 20, 40), at('a', 30, 50)];
  const p = T._pack(s);
  assert.deepStrictEqual(Array.from(p.row), [0, 1, 0]);
});

test('packing input order does not matter, rows are first-fit by entry', () => {
  const s = [at('a', 20, 30), at('a', 0, 25), at('a', 26, 40)];
  assert.deepStrictEqual(Array.from(T._pack(s).row), [1, 0, 0]);
});

test('no two sections in one row overlap (5000 random sections)', () => {
  let seed = 7;
  const rand = (n) => { seed = (seed * 1103515245 + 12345) % 2147483648; return seed % n; };
  const s = [];
  for (let i = 0; i < 5000; i++) {
    const enter = rand(1e6);
    s.push(at('abc'[rand(3)], enter, enter + rand(2000), rand(2) ? { release_ns: enter + 2500 } : {}));
  }
  const started = Date.now();
  const p = T._pack(s);
  const pairs = T.overlaps(s);
  assert.ok(Date.now() - started < 2000, 'fast enough');
  for (const items of p.rowItems) {
    for (let k = 1; k < items.length; k++) {
      const prev = s[items[k - 1]];
      const end = Math.max(prev.exit_ns, prev.release_ns || 0);
      assert.ok(s[items[k]].enter_ns >= end, 'row overlap');
      assert.strictEqual(s[items[k]].instance, prev.instance);
    }
  }
  assert.deepStrictEqual(pairs, reference(s));
});

test('shaded spans are the union of the pairwise intersections', () => {
  const s = [at('a', 0, 100), at('b', 10, 20), at('b', 30, 40), at('c', 35, 60), at('a', 200, 210), at('b', 210, 220)];
  assert.deepStrictEqual(T._spans(s, T.overlaps(s)), [[10, 20], [30, 60]]);
  const scripts = [at('a', 0, 100), at('b', 50, 50)];
  assert.deepStrictEqual(T._spans(scripts, T.overlaps(scripts)), [[50, 50]]);
  assert.deepStrictEqual(T._spans([], []), []);
});

test('lease expiry: enter + lease, pushed out by renewals', () => {
  assert.strictEqual(T._expiry(at('a', 1000, 2000, { lease_ms: 300 })), 1000 + 300e6);
  assert.strictEqual(T._expiry(at('a', 0, 2000, { lease_ms: 300, renewals_ns: [100e6, 200e6] })), 500e6);
  assert.ok(Number.isNaN(T._expiry(at('a', 0, 1))));
  assert.ok(Number.isNaN(T._expiry(at('a', 0, 1, { lease_ms: null }))));
});

test('categories', () => {
  assert.strictEqual(T._category({ outcome: 'sold' }), 'sold');
  assert.strictEqual(T._category({ outcome: 'sold_out' }), 'sold_out');
  assert.strictEqual(T._category({ outcome: 'busy', reason: 'stale_token' }), 'fenced');
  assert.strictEqual(T._category({ outcome: 'busy', reason: 'lock_lost' }), 'lock_lost');
  assert.strictEqual(T._category({ outcome: 'busy', reason: 'reset' }), 'busy');
  assert.strictEqual(T._category({ outcome: 'unknown' }), 'unknown');
});

test('nice axis steps and labels', () => {
  assert.strictEqual(T._niceStep(1e9, 10), 1e8); // 1 s over 10 ticks: 100 ms
  assert.strictEqual(T._niceStep(1.3e9, 10), 2e8);
  assert.strictEqual(T._niceStep(4e6, 10), 5e5); // 500 µs
  assert.strictEqual(T._formatTick(2e8, 1e8), '200 ms');
  assert.strictEqual(T._formatTick(5e5, 5e5), '500 µs');
  assert.strictEqual(T._formatTick(1.5e6, 5e5), '1500 µs');
  assert.strictEqual(T._formatTick(3e9, 1e9), '3 s');
  assert.strictEqual(T._formatTick(2.5e9, 5e8), '2500 ms');
  assert.strictEqual(T._formatTick(0, 1e6), '0 ms');
  // A model's drawing counts its clock's ticks: marks on whole ticks.
  const ticks = T._axis(10 * 60e6, 5, 60e6, 'en');
  assert.strictEqual(ticks.step, 2 * 60e6);
  assert.strictEqual(ticks.label(4 * 60e6), 'tick 4');
  assert.strictEqual(T._axis(60e6, 8, 60e6, 'zh').label(60e6), '第 1 拍');
  assert.strictEqual(T._axis(60e6, 8, 60e6, 'en').step, 60e6); // never between two ticks
  assert.strictEqual(T._axis(1e9, 10, undefined, 'en').label(2e8), '200 ms');
});

test('both languages have the same keys', () => {
  assert.deepStrictEqual(Object.keys(T.I18N.zh).sort(), Object.keys(T.I18N.en).sort());
  assert.strictEqual(T.I18N.zh.summary, '{n} 个临界区 · {m} 对重叠(跨实例 {k} 对)');
});

console.log(`\n${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
