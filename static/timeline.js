// stocklock timeline: every critical section of one SKU on one clock, drawn
// on a canvas. No framework, no fetches, no other file: the same script is
// served at /static/timeline.js and inlined into the self-contained export.
//
//   StocklockTimeline.mount(element, data, { lang }) -> { redraw(data), setLang(lang), reset(), zoom(f), destroy() }
//   StocklockTimeline.parse(text)                    -> /api/timeline's data, times exact (see parse)
//   StocklockTimeline.overlaps(sections)             -> [[a, b], ...] (the server's witness rule)
//   StocklockTimeline.summary(sections)              -> { pairs, count, cross }
//
// After every draw, `element` carries data-sections, data-overlaps,
// data-cross-overlaps, data-drawn="true" (and data-server-overlaps /
// data-overlaps-agree when the data carried the server's own pairs: its
// first ones, and overlap_count, how many in all).
(function (root) {
  'use strict';

  const I18N = {
    en: {
      instance: 'instance {name}', tick_n: 'tick {n}',
      sold: 'sold', sold_out: 'sold out', fenced: 'refused by a fence', lock_lost: 'lock lost',
      busy: 'busy (other)', unknown: 'unknown outcome',
      overlap: 'overlap: two holders at once', ran_out: 'lease ran out here', expiry: 'lease expiry',
      renewal: 'watchdog renewal', release: 'held until release', event: 'chaos event',
      summary: '{n} sections · {m} overlapping pairs ({k} across instances)',
      empty: 'no critical sections recorded yet',
      truncated: 'older sections were left out',
      late: 'an instance had not handed in its sections yet: some may be missing',
      server_disagrees: 'the server counted {m} pairs',
      zoom_in: 'Zoom in', zoom_out: 'Zoom out', reset: 'Reset view',
      hint: 'wheel: zoom · drag: pan · double-click: reset',
      aria: 'Timeline of critical sections',
      t_request: 'request', t_unit: 'unit', t_instance: 'instance', t_holder: 'holder', t_outcome: 'outcome',
      t_duration: 'duration', t_lease: 'lease', t_entered: 'entered', t_released: 'released',
      t_renewals: 'renewals', t_overlaps: 'overlaps with', t_sections: '{n} other section(s)',
      t_script: 'Lua script inside Redis (no lock)', t_ran_out: 'lease ran out {ms} before the section ended',
      t_expires: 'expires at {at}', t_event: 'event', t_detail: 'detail', t_at: 'at', t_all: 'whole stack',
      t_after_exit: '{ms} after the write',
    },
    zh: {
      instance: '实例 {name}', tick_n: '第 {n} 拍',
      sold: '已售', sold_out: '售罄', fenced: '被 fencing token 拒绝', lock_lost: '丢锁',
      busy: '忙(其他)', unknown: '结果未知',
      overlap: '重叠:两个持有者同时在临界区', ran_out: '租约在此已过期', expiry: '租约到期',
      renewal: '看门狗续期', release: '持锁直到释放', event: '混沌事件',
      summary: '{n} 个临界区 · {m} 对重叠(跨实例 {k} 对)',
      empty: '还没有记录到临界区',
      truncated: '较早的临界区未显示',
      late: '有实例还没有交来它的临界区:可能缺少一部分',
      server_disagrees: '服务器统计为 {m} 对',
      zoom_in: '放大', zoom_out: '缩小', reset: '重置视图',
      hint: '滚轮:缩放 · 拖动:平移 · 双击:重置',
      aria: '临界区时间线',
      t_request: '请求', t_unit: '单元', t_instance: '实例', t_holder: '持有者', t_outcome: '结果',
      t_duration: '耗时', t_lease: '租约', t_entered: '进入', t_released: '释放',
      t_renewals: '续期', t_overlaps: '重叠', t_sections: '与其他 {n} 个临界区',
      t_script: 'Redis 内的 Lua 脚本(无锁)', t_ran_out: '临界区结束前 {ms} 租约已过期',
      t_expires: '到期于 {at}', t_event: '事件', t_detail: '详情', t_at: '时间', t_all: '整个环境',
      t_after_exit: '写入后 {ms}',
    },
  };

  const COLORS = {
    sold: '#3ddc84', sold_out: '#8a94a3', fenced: '#b57bff', lock_lost: '#ff8c1a',
    busy: '#d5dbe3', unknown: '#ffe14d',
    overlap: '#ff4d4f', overlapShade: 'rgba(255, 77, 79, 0.18)', expiry: '#ff6bd6', event: '#4dd8ff',
    text: '#f2f4f7', muted: '#a7b0bd', line: '#2c333d', bg: '#0e1116', laneAlt: 'rgba(255, 255, 255, 0.035)',
    grid: 'rgba(255, 255, 255, 0.06)', hover: '#ffffff',
  };
  const CATEGORIES = ['sold', 'sold_out', 'fenced', 'lock_lost', 'busy', 'unknown'];
  const MIN_SPAN_NS = 1000; // deepest zoom: 1 µs across the plot

  // ---- pure functions (tested under node by scripts/timeline_test.js) ----

  function num(x) {
    if (x === null || x === undefined || x === '') return NaN;
    return typeof x === 'number' ? x : Number(x);
  }

  function langOf(value) {
    return String(value || '').toLowerCase().startsWith('zh') ? 'zh' : 'en';
  }

  function fill(text, vars) {
    for (const name of Object.keys(vars || {})) text = text.split('{' + name + '}').join(String(vars[name]));
    return text;
  }

  function translate(lang, key, vars) {
    const text = (I18N[lang] && I18N[lang][key]) || I18N.en[key] || key;
    return fill(text, vars);
  }

  // The colour class of a section.
  function category(s) {
    switch (s && s.outcome) {
      case 'sold': return 'sold';
      case 'sold_out': return 'sold_out';
      case 'busy':
        if (s.reason === 'stale_token') return 'fenced';
        if (s.reason === 'lock_lost') return 'lock_lost';
        return 'busy';
      default: return 'unknown';
    }
  }

  // /api/timeline's JSON, read without losing a nanosecond. Times are
  // nanoseconds since the epoch, past 2^53: a double keeps them to 256 ns
  // only, and a pair of sections the server counted (one entered a few ns
  // before the other left) would tie and be lost. Every integer of 16
  // digits or more outside a string is kept as text, then each `*_ns`
  // (and each item of a `*_ns` list) becomes nanoseconds after the earliest
  // of them, exact as BigInt and small enough for a double. `origin_ns`
  // (a string; null without times) is that earliest one.
  const NUMBER = /-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?/y;
  function parse(text) {
    const src = String(text);
    let out = '';
    let from = 0;
    for (let i = 0; i < src.length; i++) {
      const c = src[i];
      if (c === '"') {
        // skip the string, escapes and all
        for (i++; i < src.length && src[i] !== '"'; i++) if (src[i] === '\\') i++;
      } else if (c === '-' || (c >= '0' && c <= '9')) {
        NUMBER.lastIndex = i;
        const m = NUMBER.exec(src);
        if (!m) continue;
        const token = m[0];
        if (/^-?\d{16,}$/.test(token)) {
          out += src.slice(from, i) + '"' + token + '"';
          from = i + token.length;
        }
        i += token.length - 1;
      }
    }
    const data = JSON.parse(out + src.slice(from));
    const times = [];
    (function visit(node) {
      if (!node || typeof node !== 'object') return;
      for (const key of Object.keys(node)) {
        const value = node[key];
        if (/_ns$/.test(key) && !Array.isArray(node)) {
          if (Array.isArray(value)) value.forEach((_, i) => times.push([value, i]));
          else if (value !== null && value !== undefined) times.push([node, key]);
        } else {
          visit(value);
        }
      }
    })(data);
    const exact = (v) => (typeof v === 'number' && Number.isInteger(v)) || (typeof v === 'string' && /^-?\d+$/.test(v));
    const kept = times.filter(([holder, key]) => exact(holder[key]));
    let origin = null;
    for (const [holder, key] of kept) {
      const at = BigInt(holder[key]);
      holder[key] = at;
      if (origin === null || at < origin) origin = at;
    }
    for (const [holder, key] of kept) holder[key] = Number(holder[key] - origin);
    if (data && typeof data === 'object' && !Array.isArray(data)) data.origin_ns = origin === null ? null : String(origin);
    return data;
  }

  // Pairs of sections that overlapped, exactly as the server's witness:
  // indices sorted by enter_ns (ties keep input order); for each a, each
  // later b until b.enter_ns >= a.exit_ns is a pair [a, b].
  function overlaps(sections) {
    const list = Array.isArray(sections) ? sections : [];
    const n = list.length;
    const enter = new Float64Array(n);
    const exit = new Float64Array(n);
    for (let i = 0; i < n; i++) {
      enter[i] = num(list[i].enter_ns) || 0;
      exit[i] = num(list[i].exit_ns) || 0;
    }
    const order = new Array(n);
    for (let i = 0; i < n; i++) order[i] = i;
    order.sort((a, b) => (enter[a] - enter[b]) || (a - b));
    const pairs = [];
    for (let k = 0; k < n; k++) {
      const a = order[k];
      for (let m = k + 1; m < n; m++) {
        const b = order[m];
        if (enter[b] >= exit[a]) break;
        pairs.push([a, b]);
      }
    }
    return pairs;
  }

  // Pairs whose two sections ran on different instances.
  function crossCount(sections, pairs) {
    let cross = 0;
    for (const [a, b] of pairs) if (String(sections[a].instance) !== String(sections[b].instance)) cross++;
    return cross;
  }

  function summary(sections) {
    const list = Array.isArray(sections) ? sections : [];
    const pairs = overlaps(list);
    return { pairs, count: pairs.length, cross: crossCount(list, pairs) };
  }

  // Where a section's bar ends (its release tail included).
  function endOf(s) {
    const exit = num(s.exit_ns) || 0;
    const release = num(s.release_ns);
    return release > exit ? release : exit;
  }

  function compareNames(a, b) {
    return a.localeCompare(b, undefined, { numeric: true });
  }

  // One lane group per instance (names in natural order); inside it the
  // sections, by entry, each in the first row whose previous bar ended at
  // or before it entered. Returns global rows:
  //   { lanes: [{ instance, firstRow, rows }], row: Int32Array (per section),
  //     rowCount, rowLane: Int32Array (per row: lane index), rowItems: [[i, ...] per row, by entry] }
  function pack(sections) {
    const list = Array.isArray(sections) ? sections : [];
    const n = list.length;
    const byInstance = new Map();
    for (let i = 0; i < n; i++) {
      const name = list[i].instance === null || list[i].instance === undefined ? '?' : String(list[i].instance);
      if (!byInstance.has(name)) byInstance.set(name, []);
      byInstance.get(name).push(i);
    }
    const names = Array.from(byInstance.keys()).sort(compareNames);
    const row = new Int32Array(n);
    const lanes = [];
    const rowItems = [];
    const rowLaneList = [];
    let next = 0;
    names.forEach((name, laneIndex) => {
      const members = byInstance.get(name);
      const enter = (i) => num(list[i].enter_ns) || 0;
      members.sort((a, b) => (enter(a) - enter(b)) || (a - b));
      const ends = [];
      for (const i of members) {
        const at = enter(i);
        let r = 0;
        while (r < ends.length && ends[r] > at) r++;
        ends[r] = Math.max(endOf(list[i]), at);
        row[i] = next + r;
        if (!rowItems[next + r]) rowItems[next + r] = [];
        rowItems[next + r].push(i);
      }
      const rows = Math.max(1, ends.length);
      for (let r = 0; r < rows; r++) {
        if (!rowItems[next + r]) rowItems[next + r] = [];
        rowLaneList.push(laneIndex);
      }
      lanes.push({ instance: name, firstRow: next, rows });
      next += rows;
    });
    return { lanes, row, rowCount: next, rowLane: Int32Array.from(rowLaneList), rowItems };
  }

  // The time spans where two or more sections were inside at once (the
  // union of every pair's intersection), merged, in the sections' own units.
  // A zero-width section (a script) inside another gives a point span.
  function spans(sections, pairs) {
    const list = Array.isArray(sections) ? sections : [];
    const points = [];
    for (let i = 0; i < list.length; i++) {
      const enter = num(list[i].enter_ns) || 0;
      const exit = num(list[i].exit_ns) || 0;
      if (exit > enter) {
        points.push([enter, 1]);
        points.push([exit, -1]);
      }
    }
    points.sort((p, q) => (p[0] - q[0]) || (p[1] - q[1])); // at one instant, leaving before entering
    const out = [];
    let depth = 0;
    let start = 0;
    for (const [at, step] of points) {
      const before = depth;
      depth += step;
      if (before < 2 && depth >= 2) start = at;
      if (before >= 2 && depth < 2 && at > start) out.push([start, at]);
    }
    for (const [a, b] of pairs || []) {
      for (const i of [a, b]) {
        const enter = num(list[i].enter_ns) || 0;
        const exit = num(list[i].exit_ns) || 0;
        if (exit <= enter) out.push([enter, enter]);
      }
    }
    out.sort((p, q) => p[0] - q[0]);
    const merged = [];
    for (const span of out) {
      const last = merged[merged.length - 1];
      if (last && span[0] <= last[1]) last[1] = Math.max(last[1], span[1]);
      else merged.push([span[0], span[1]]);
    }
    return merged;
  }

  // When a section's lease ran out: the last of enter + lease and every
  // renewal + lease. NaN when it had no lease.
  function expiry(s) {
    const lease = num(s.lease_ms);
    if (!(lease >= 0)) return NaN;
    let base = num(s.enter_ns) || 0;
    for (const r of s.renewals_ns || []) {
      const at = num(r);
      if (at > base) base = at;
    }
    return base + lease * 1e6;
  }

  // A nice tick step (1, 2 or 5 × 10^k ns) for about `target` ticks.
  function niceStep(spanNs, target) {
    const raw = Math.max(spanNs, 1) / Math.max(target || 8, 1);
    const pow = Math.pow(10, Math.floor(Math.log10(raw)));
    for (const m of [1, 2, 5, 10]) if (m * pow >= raw * (1 - 1e-9)) return m * pow;
    return 10 * pow;
  }

  // A time relative to from_ns, labelled in the unit of the tick step.
  function formatTick(ns, step) {
    const units = [[1e9, 's'], [1e6, 'ms'], [1e3, 'µs'], [1, 'ns']];
    let unit = units[units.length - 1];
    for (const u of units) if (step >= u[0]) { unit = u; break; }
    const decimals = Math.max(0, -Math.floor(Math.log10(step / unit[0]) + 1e-9));
    let value = (ns / unit[0]).toFixed(decimals);
    if (/^-0(\.0*)?$/.test(value)) value = value.slice(1);
    return value + ' ' + unit[1];
  }

  // The axis of a drawing spanning `span` ns with about `target` marks:
  // the step between marks and each mark's label. A model's drawing
  // (`tickNs`, one tick of its clock) counts ticks, not real time.
  function axis(span, target, tickNs, lang) {
    if (tickNs > 0) {
      const step = tickNs * Math.max(1, niceStep(span / tickNs, target));
      return { step, label: (v) => translate(lang, 'tick_n', { n: Math.round(v / tickNs) }) };
    }
    const step = niceStep(span, target);
    return { step, label: (v) => formatTick(Math.abs(v) < step / 1e6 ? 0 : v, step) };
  }

  function formatMs(ns) {
    return (ns / 1e6).toFixed(3) + ' ms';
  }

  function formatAt(ns) {
    return (ns >= 0 ? '+' : '') + formatMs(ns);
  }

  // Everything the drawing needs, relative to from_ns.
  function prepare(data) {
    data = data || {};
    const sections = Array.isArray(data.sections) ? data.sections : [];
    const events = Array.isArray(data.events) ? data.events : [];
    const n = sections.length;
    let lo = Infinity;
    let hi = -Infinity;
    for (const s of sections) {
      lo = Math.min(lo, num(s.enter_ns) || 0);
      hi = Math.max(hi, endOf(s));
    }
    let from = num(data.from_ns);
    let to = num(data.to_ns);
    if (!isFinite(from)) from = isFinite(lo) ? lo : 0;
    if (!isFinite(to) || to <= from) to = Math.max(isFinite(hi) ? hi : from, from + 1e6);
    const enter = new Float64Array(n);
    const exit = new Float64Array(n);
    const release = new Float64Array(n);
    const expires = new Float64Array(n);
    const cat = new Array(n);
    for (let i = 0; i < n; i++) {
      const s = sections[i];
      enter[i] = (num(s.enter_ns) || 0) - from;
      exit[i] = Math.max((num(s.exit_ns) || 0) - from, enter[i]);
      const r = num(s.release_ns);
      release[i] = isFinite(r) ? r - from : NaN;
      const e = expiry(s);
      expires[i] = isFinite(e) ? e - from : NaN;
      cat[i] = category(s);
    }
    const pairs = overlaps(sections);
    const partners = new Uint32Array(n);
    for (const [a, b] of pairs) { partners[a]++; partners[b]++; }
    const cross = crossCount(sections, pairs);
    const shade = spans(sections, pairs).map(([a, b]) => [a - from, b - from]);
    let server = null;
    if (Array.isArray(data.overlaps)) {
      // The server lists its first pairs only (overlap_count has them all):
      // the counts must match and every pair it listed must be one of ours.
      const count = typeof data.overlap_count === 'number' ? data.overlap_count : data.overlaps.length;
      const key = (p) => Math.min(p[0], p[1]) + ':' + Math.max(p[0], p[1]);
      const mine = new Set(pairs.map(key));
      let agree = mine.size === count;
      if (agree) for (const p of data.overlaps) if (!mine.has(key(p))) { agree = false; break; }
      server = { count, agree };
    }
    const evs = events.map((e) => ({
      at: (num(e.at_ns) || 0) - from,
      kind: String(e.kind || 'event'),
      instance: e.instance === null || e.instance === undefined ? null : String(e.instance),
      detail: e.detail === null || e.detail === undefined ? '' : String(e.detail),
      // The checker's drawings say each event in Chinese too.
      detailZh: e.detail_zh ? String(e.detail_zh) : '',
    })).sort((a, b) => a.at - b.at);
    let extentLo = 0;
    let extentHi = to - from;
    if (n) {
      extentLo = Math.min(extentLo, lo - from);
      extentHi = Math.max(extentHi, hi - from);
    }
    return {
      data, sections, from, span: to - from, n, enter, exit, release, expires, cat, pairs, partners, cross,
      shade, server, events: evs, packing: pack(sections), extentLo, extentHi,
    };
  }

  // ---- drawing (browser only) ----

  function el(tag, className, text) {
    const node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined) node.textContent = text;
    return node;
  }

  function hatchPattern(ctx) {
    const tile = document.createElement('canvas');
    tile.width = 6;
    tile.height = 6;
    const t = tile.getContext('2d');
    t.strokeStyle = 'rgba(14, 17, 22, 0.75)';
    t.lineWidth = 2;
    t.beginPath();
    t.moveTo(-1, 7); t.lineTo(7, -1);
    t.moveTo(5, 7); t.lineTo(7, 5);
    t.moveTo(-1, 1); t.lineTo(1, -1);
    t.stroke();
    return ctx.createPattern(tile, 'repeat');
  }

  function mount(element, data, options) {
    if (!element) throw new Error('StocklockTimeline.mount: no element');
    options = options || {};
    if (element.__stocklockTimeline) element.__stocklockTimeline.destroy();
    let lang = langOf(options.lang || (document.documentElement && document.documentElement.lang));
    const t = (key, vars) => translate(lang, key, vars);

    element.textContent = '';
    element.classList.add('stocklock-timeline');

    const toolbar = el('div', 'tl-toolbar');
    const zoomIn = el('button', 'tl-zoom-in', '+');
    const zoomOut = el('button', 'tl-zoom-out', '−');
    const resetButton = el('button', 'tl-reset');
    for (const b of [zoomIn, zoomOut, resetButton]) { b.type = 'button'; toolbar.appendChild(b); }
    const hint = el('span', 'tl-hint');
    toolbar.appendChild(hint);

    const stage = el('div', 'tl-stage');
    stage.tabIndex = 0;
    const canvas = el('canvas', 'tl-canvas');
    canvas.setAttribute('role', 'img');
    const tooltip = el('div', 'tl-tooltip');
    tooltip.setAttribute('role', 'tooltip');
    tooltip.hidden = true;
    stage.appendChild(canvas);
    stage.appendChild(tooltip);

    const legend = el('div', 'tl-legend');
    const items = el('ul', 'tl-legend-items');
    const summaryLine = el('p', 'tl-summary');
    legend.appendChild(items);
    legend.appendChild(summaryLine);

    element.appendChild(toolbar);
    element.appendChild(stage);
    element.appendChild(legend);

    const ctx = canvas.getContext('2d');
    let hatch = null;
    let model = prepare(data);
    let view = { t0: 0, t1: model.span };
    let layout = null;
    let hover = null; // { type: 'section', i } | { type: 'event', k }
    let hoverPartners = null;
    let frame = 0;
    let drag = null;
    let lastWidth = 0;
    let destroyed = false;

    function homeView() {
      view = { t0: 0, t1: Math.max(model.span, MIN_SPAN_NS) };
    }
    homeView();

    function texts() {
      zoomIn.title = t('zoom_in');
      zoomIn.setAttribute('aria-label', t('zoom_in'));
      zoomOut.title = t('zoom_out');
      zoomOut.setAttribute('aria-label', t('zoom_out'));
      resetButton.textContent = t('reset');
      hint.textContent = t('hint');
      stage.setAttribute('aria-label', t('aria'));
      canvas.setAttribute('aria-label', t('aria'));
      items.textContent = '';
      const swatch = (kind, style, label) => {
        const li = el('li');
        const mark = el('span', 'tl-swatch tl-swatch-' + kind);
        Object.assign(mark.style, style);
        li.appendChild(mark);
        li.appendChild(document.createTextNode(label));
        items.appendChild(li);
      };
      for (const c of CATEGORIES) swatch('bar', { background: COLORS[c] }, t(c));
      swatch('release', { background: COLORS.sold }, t('release'));
      swatch('overlap', { borderColor: COLORS.overlap, background: COLORS.overlapShade }, t('overlap'));
      swatch('ran-out', { backgroundColor: COLORS.sold }, t('ran_out'));
      swatch('expiry', { background: COLORS.expiry }, t('expiry'));
      swatch('renewal', { background: '#ffffff' }, t('renewal'));
      swatch('event', { borderColor: COLORS.event }, t('event'));
      let line;
      if (!model.n) line = t('empty');
      else line = t('summary', { n: model.n, m: model.pairs.length, k: model.cross });
      if (model.server && !model.server.agree) line += ' · ' + t('server_disagrees', { m: model.server.count });
      if (model.data && model.data.truncated) line += ' · ' + t('truncated');
      if (model.data && model.data.counted_in === false) line += ' · ' + t('late');
      summaryLine.textContent = line;
      summaryLine.classList.toggle('tl-bad', model.pairs.length > 0);
      summaryLine.classList.toggle('tl-empty', !model.n);
    }

    function attributes() {
      element.dataset.sections = String(model.n);
      element.dataset.overlaps = String(model.pairs.length);
      element.dataset.crossOverlaps = String(model.cross);
      if (model.server) {
        element.dataset.serverOverlaps = String(model.server.count);
        element.dataset.overlapsAgree = String(model.server.agree);
      } else {
        delete element.dataset.serverOverlaps;
        delete element.dataset.overlapsAgree;
      }
      // Whether every instance had handed in its sections when the data was read.
      element.dataset.countedIn = String(!(model.data && model.data.counted_in === false));
      element.dataset.drawn = 'true';
    }

    function computeLayout(width) {
      const p = model.packing;
      const rows = p.rowCount;
      const rowH = rows <= 30 ? 18 : Math.max(5, Math.min(18, Math.floor(540 / rows)));
      const barH = Math.max(3, rowH - (rowH >= 12 ? 6 : 2));
      const laneGap = p.lanes.length > 1 ? 8 : 0;
      const top = 22;
      const axisH = 28;
      const rowTop = new Float64Array(rows + 1);
      let y = top;
      for (let r = 0; r < rows; r++) {
        if (r > 0 && p.rowLane[r] !== p.rowLane[r - 1]) y += laneGap;
        rowTop[r] = y;
        y += rowH;
      }
      rowTop[rows] = y;
      const lanesBottom = rows ? y : top + 70;
      ctx.font = '12px system-ui, sans-serif';
      let labelW = 70;
      for (const lane of p.lanes) labelW = Math.max(labelW, ctx.measureText(t('instance', { name: lane.instance })).width + 16);
      labelW = Math.min(labelW, 160);
      const plotX = labelW;
      const plotW = Math.max(40, width - labelW - 12);
      return { width, height: lanesBottom + 6 + axisH, rowH, barH, top, rowTop, lanesBottom, plotX, plotW };
    }

    function xOf(ns) {
      return layout.plotX + ((ns - view.t0) / (view.t1 - view.t0)) * layout.plotW;
    }

    function tOf(x) {
      return view.t0 + ((x - layout.plotX) / layout.plotW) * (view.t1 - view.t0);
    }

    function laneRange(instance) {
      const lane = model.packing.lanes.find((l) => l.instance === instance);
      if (!lane) return null;
      return [layout.rowTop[lane.firstRow], layout.rowTop[lane.firstRow + lane.rows - 1] + layout.rowH];
    }

    function draw() {
      frame = 0;
      if (destroyed) return;
      const width = Math.max(240, Math.floor(stage.clientWidth || element.clientWidth || 800));
      lastWidth = width;
      layout = computeLayout(width);
      const dpr = (typeof window !== 'undefined' && window.devicePixelRatio) || 1;
      const pw = Math.round(width * dpr);
      const ph = Math.round(layout.height * dpr);
      if (canvas.width !== pw || canvas.height !== ph) {
        canvas.width = pw;
        canvas.height = ph;
        canvas.style.width = width + 'px';
        canvas.style.height = layout.height + 'px';
      }
      ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
      ctx.fillStyle = COLORS.bg;
      ctx.fillRect(0, 0, width, layout.height);
      if (!hatch) hatch = hatchPattern(ctx);

      const L = layout;
      const p = model.packing;
      const span = view.t1 - view.t0;
      const { step, label } = axis(span, Math.max(2, Math.floor(L.plotW / 90)), num(model.data.tick_ns), lang);

      // lanes and their labels
      ctx.font = '12px system-ui, sans-serif';
      ctx.textBaseline = 'middle';
      p.lanes.forEach((lane, index) => {
        const y0 = L.rowTop[lane.firstRow];
        const y1 = L.rowTop[lane.firstRow + lane.rows - 1] + L.rowH;
        if (index % 2 === 0) {
          ctx.fillStyle = COLORS.laneAlt;
          ctx.fillRect(0, y0, width, y1 - y0);
        }
        ctx.fillStyle = COLORS.muted;
        ctx.textAlign = 'left';
        ctx.fillText(t('instance', { name: lane.instance }), 6, Math.min(y0 + 10, (y0 + y1) / 2), L.plotX - 10);
      });

      ctx.save();
      ctx.beginPath();
      ctx.rect(L.plotX, 0, L.plotW, L.height);
      ctx.clip();

      // grid
      const first = Math.ceil(view.t0 / step) * step;
      ctx.fillStyle = COLORS.grid;
      for (let v = first; v <= view.t1; v += step) ctx.fillRect(Math.round(xOf(v)), L.top, 1, L.lanesBottom - L.top);

      // overlapped time, shaded behind the lanes
      ctx.fillStyle = COLORS.overlapShade;
      for (const [a, b] of model.shade) {
        if (b < view.t0 || a > view.t1) continue;
        const x0 = xOf(a);
        const w = Math.max(2, xOf(b) - x0);
        ctx.fillRect(x0, L.top - 4, w, L.lanesBottom - L.top + 8);
      }

      // bars, batched into one path per colour and mark (5000 sections stay fluid)
      const n = model.n;
      const { enter, exit, release, expires, cat, partners } = model;
      const pxPerNs = L.plotW / span;
      const bars = {};
      const tails = {};
      for (const c of CATEGORIES) { bars[c] = new Path2D(); tails[c] = new Path2D(); }
      const hatched = new Path2D();
      const ranOutEdge = new Path2D();
      const expiryStrong = new Path2D();
      const expiryFaint = new Path2D();
      const renewalTicks = new Path2D();
      const outlines = new Path2D();
      const mark = (path, mx, top) => {
        path.rect(mx - 1, top, 2, L.rowH - 2);
        path.moveTo(mx - 3.5, top);
        path.lineTo(mx + 3.5, top);
        path.lineTo(mx, top + 4);
        path.closePath();
      };
      let hovered = null;
      const partnerBoxes = [];
      for (let i = 0; i < n; i++) {
        const tail = release[i] > exit[i] ? release[i] : exit[i];
        const ex = expires[i];
        const last = ex > tail && ex - tail < span ? ex : tail;
        if (last < view.t0 || enter[i] > view.t1) continue;
        const y = L.rowTop[p.row[i]] + (L.rowH - L.barH) / 2;
        const x0 = xOf(enter[i]);
        const w = Math.max(2, (exit[i] - enter[i]) * pxPerNs);
        if (release[i] > exit[i]) {
          const th = Math.max(2, Math.round(L.barH * 0.4));
          tails[cat[i]].rect(x0 + w, y + (L.barH - th) / 2, Math.max(1, (release[i] - exit[i]) * pxPerNs), th);
        }
        bars[cat[i]].rect(x0, y, w, L.barH);
        const ranOut = ex === ex && exit[i] > ex;
        if (ranOut) {
          const hx = xOf(Math.max(ex, enter[i]));
          const hw = x0 + w - hx;
          if (hw > 0) {
            hatched.rect(hx, y, hw, L.barH);
            ranOutEdge.rect(hx, y, hw, 1.5);
          }
        }
        if (ex === ex && ex >= view.t0 && ex <= view.t1) {
          const lateRelease = release[i] > ex || (release[i] !== release[i] && exit[i] > ex);
          if (ranOut || lateRelease) mark(expiryStrong, Math.round(xOf(ex)), L.rowTop[p.row[i]] + 1);
          else if (w >= 6) mark(expiryFaint, Math.round(xOf(ex)), L.rowTop[p.row[i]] + 1);
        }
        const renewals = model.sections[i].renewals_ns;
        if (renewals && renewals.length && L.barH >= 5) {
          for (const r of renewals) {
            const rt = num(r) - model.from;
            if (rt < view.t0 || rt > view.t1) continue;
            renewalTicks.rect(Math.round(xOf(rt)), y - 2, 1, Math.ceil(L.barH / 2) + 2);
          }
        }
        if (partners[i]) outlines.rect(x0 - 0.75, y - 0.75, w + 1.5, L.barH + 1.5);
        if (hoverPartners && hoverPartners.has(i)) partnerBoxes.push([x0 - 2.5, y - 2.5, w + 5, L.barH + 5]);
        if (hover && hover.type === 'section' && hover.i === i) hovered = [x0 - 2, y - 2, w + 4, L.barH + 4];
      }
      ctx.globalAlpha = 0.45;
      for (const c of CATEGORIES) { ctx.fillStyle = COLORS[c]; ctx.fill(tails[c]); }
      ctx.globalAlpha = 1;
      for (const c of CATEGORIES) { ctx.fillStyle = COLORS[c]; ctx.fill(bars[c]); }
      ctx.fillStyle = hatch;
      ctx.fill(hatched);
      ctx.fillStyle = COLORS.expiry;
      ctx.fill(ranOutEdge);
      ctx.fill(expiryStrong);
      ctx.globalAlpha = 0.4;
      ctx.fill(expiryFaint);
      ctx.globalAlpha = 1;
      ctx.fillStyle = '#ffffff';
      ctx.fill(renewalTicks);
      ctx.strokeStyle = COLORS.overlap;
      ctx.lineWidth = 1.5;
      ctx.stroke(outlines);
      if (partnerBoxes.length) {
        ctx.strokeStyle = COLORS.hover;
        ctx.lineWidth = 1;
        ctx.setLineDash([3, 2]);
        for (const b of partnerBoxes) ctx.strokeRect(b[0], b[1], b[2], b[3]);
        ctx.setLineDash([]);
      }
      if (hovered) {
        ctx.strokeStyle = COLORS.hover;
        ctx.lineWidth = 2;
        ctx.strokeRect(hovered[0], hovered[1], hovered[2], hovered[3]);
      }

      // chaos events
      let labelRight = -Infinity;
      ctx.font = '11px system-ui, sans-serif';
      ctx.textAlign = 'left';
      model.events.forEach((e, k) => {
        if (e.at < view.t0 || e.at > view.t1) return;
        const x = Math.round(xOf(e.at)) + 0.5;
        const range = (e.instance !== null && laneRange(e.instance)) || [L.top, L.lanesBottom];
        const active = hover && hover.type === 'event' && hover.k === k;
        ctx.strokeStyle = COLORS.event;
        ctx.lineWidth = active ? 2.5 : 1.5;
        ctx.setLineDash([5, 4]);
        ctx.beginPath();
        ctx.moveTo(x, range[0] - 4);
        ctx.lineTo(x, range[1] + 2);
        ctx.stroke();
        ctx.setLineDash([]);
        const label = e.instance !== null ? e.kind + ' (' + e.instance + ')' : e.kind;
        const lw = ctx.measureText(label).width;
        if (x + 3 > labelRight) {
          ctx.fillStyle = COLORS.event;
          ctx.fillText(label, x + 3, 9);
          labelRight = x + 3 + lw + 6;
        }
      });
      ctx.restore();

      // axis
      const axisY = L.lanesBottom + 6;
      ctx.fillStyle = COLORS.line;
      ctx.fillRect(L.plotX, axisY, L.plotW, 1);
      ctx.fillStyle = COLORS.muted;
      ctx.font = '11px system-ui, sans-serif';
      ctx.textAlign = 'center';
      ctx.textBaseline = 'top';
      for (let v = first; v <= view.t1; v += step) {
        const x = Math.round(xOf(v));
        ctx.fillRect(x, axisY, 1, 5);
        ctx.fillText(label(v), Math.min(Math.max(x, L.plotX + 20), L.plotX + L.plotW - 20), axisY + 8);
      }

      if (!model.n) {
        ctx.fillStyle = COLORS.muted;
        ctx.font = '15px system-ui, sans-serif';
        ctx.textAlign = 'center';
        ctx.textBaseline = 'middle';
        ctx.fillText(t('empty'), L.plotX + L.plotW / 2, L.top + 35);
      }
      attributes();
    }

    function schedule() {
      if (frame || destroyed) return;
      if (typeof requestAnimationFrame === 'function') frame = requestAnimationFrame(draw);
      else frame = setTimeout(draw, 16);
    }

    // ---- interaction ----

    function clampView(t0, t1) {
      const maxSpan = Math.max(model.extentHi - model.extentLo, MIN_SPAN_NS) * 4;
      let span = Math.min(Math.max(t1 - t0, MIN_SPAN_NS), maxSpan);
      const centre = Math.min(Math.max((t0 + t1) / 2, model.extentLo), model.extentHi);
      view = { t0: centre - span / 2, t1: centre + span / 2 };
    }

    function zoomAt(anchor, factor) {
      clampView(anchor - (anchor - view.t0) * factor, anchor + (view.t1 - anchor) * factor);
      schedule();
    }

    function zoom(factor) {
      zoomAt((view.t0 + view.t1) / 2, factor);
    }

    function pan(fraction) {
      const d = (view.t1 - view.t0) * fraction;
      clampView(view.t0 + d, view.t1 + d);
      schedule();
    }

    function reset() {
      homeView();
      schedule();
    }

    function local(event) {
      const rect = canvas.getBoundingClientRect();
      return { x: event.clientX - rect.left, y: event.clientY - rect.top };
    }

    function hitTest(x, y) {
      if (!layout) return null;
      const L = layout;
      if (x >= L.plotX && y >= L.top && y < L.lanesBottom) {
        const rows = model.packing.rowCount;
        let lo = 0;
        let hi = rows - 1;
        let row = -1;
        while (lo <= hi) {
          const mid = (lo + hi) >> 1;
          if (L.rowTop[mid] > y) hi = mid - 1;
          else if (L.rowTop[mid] + L.rowH <= y) lo = mid + 1;
          else { row = mid; break; }
        }
        if (row >= 0) {
          const pxPerNs = L.plotW / (view.t1 - view.t0);
          let best = null;
          let bestDistance = Infinity;
          for (const i of model.packing.rowItems[row]) {
            const x0 = xOf(model.enter[i]);
            if (x0 > x + 3) break;
            const end = model.release[i] > model.exit[i] ? model.release[i] : model.exit[i];
            const x1 = Math.max(x0 + 2, xOf(end), x0 + (model.exit[i] - model.enter[i]) * pxPerNs);
            if (x >= x0 - 3 && x <= x1 + 3) {
              const distance = x < x0 ? x0 - x : x > x1 ? x - x1 : 0;
              if (distance <= bestDistance) { best = i; bestDistance = distance; }
            }
          }
          if (best !== null) return { type: 'section', i: best };
        }
      }
      let event = null;
      let eventDistance = 5;
      model.events.forEach((e, k) => {
        const d = Math.abs(xOf(e.at) - x);
        if (d < eventDistance) { event = k; eventDistance = d; }
      });
      if (event !== null && y <= L.lanesBottom + 4) return { type: 'event', k: event };
      return null;
    }

    function row(label, value) {
      const line = el('div', 'tl-row');
      line.appendChild(el('b', null, label));
      line.appendChild(el('span', null, value));
      tooltip.appendChild(line);
    }

    function showTooltip(found, x, y) {
      tooltip.textContent = '';
      if (found.type === 'section') {
        const i = found.i;
        const s = model.sections[i];
        const dash = '–';
        if (s.atomic) tooltip.appendChild(el('div', 'tl-note', t('t_script')));
        row(t('t_request'), s.request_id || dash);
        row(t('t_unit'), s.unit === null || s.unit === undefined ? dash : String(s.unit));
        row(t('t_instance'), String(s.instance));
        row(t('t_holder'), s.holder || dash);
        let outcome = t(model.cat[i]) + ' (' + (s.outcome || '?') + (s.reason ? ': ' + s.reason : '') + ')';
        row(t('t_outcome'), outcome);
        row(t('t_duration'), formatMs(model.exit[i] - model.enter[i]));
        row(t('t_entered'), formatAt(model.enter[i]));
        if (isFinite(model.release[i])) {
          row(t('t_released'), formatAt(model.release[i]) + ' · ' + t('t_after_exit', { ms: formatMs(model.release[i] - model.exit[i]) }));
        }
        if (s.lease_ms !== null && s.lease_ms !== undefined) {
          row(t('t_lease'), s.lease_ms + ' ms · ' + t('t_expires', { at: formatAt(model.expires[i]) }));
        }
        if (s.renewals_ns && s.renewals_ns.length) row(t('t_renewals'), String(s.renewals_ns.length));
        if (model.partners[i]) {
          const line = el('div', 'tl-row tl-bad');
          line.appendChild(el('b', null, t('t_overlaps')));
          line.appendChild(el('span', null, t('t_sections', { n: model.partners[i] })));
          tooltip.appendChild(line);
        }
        if (isFinite(model.expires[i]) && model.exit[i] > model.expires[i]) {
          tooltip.appendChild(el('div', 'tl-note tl-warn', t('t_ran_out', { ms: formatMs(model.exit[i] - model.expires[i]) })));
        }
      } else {
        const e = model.events[found.k];
        row(t('t_event'), e.kind);
        row(t('t_instance'), e.instance === null ? t('t_all') : e.instance);
        const detail = lang === 'zh' && e.detailZh ? e.detailZh : e.detail;
        if (detail) row(t('t_detail'), detail);
        row(t('t_at'), formatAt(e.at));
      }
      tooltip.hidden = false;
      const stageWidth = stage.clientWidth || layout.width;
      const tw = tooltip.offsetWidth || 260;
      const th = tooltip.offsetHeight || 120;
      let left = x + 14;
      if (left + tw > stageWidth - 4) left = Math.max(4, x - tw - 14);
      let top = y + 14;
      if (top + th > layout.height + 40) top = Math.max(4, y - th - 10);
      tooltip.style.left = left + 'px';
      tooltip.style.top = top + 'px';
    }

    function partnersOf(i) {
      const set = new Set();
      for (const [a, b] of model.pairs) {
        if (a === i) set.add(b);
        else if (b === i) set.add(a);
      }
      return set;
    }

    function setHover(found, x, y) {
      const same = (found === null && hover === null) ||
        (found && hover && found.type === hover.type && found.i === hover.i && found.k === hover.k);
      if (found) showTooltip(found, x, y);
      else tooltip.hidden = true;
      if (same) return;
      hover = found;
      hoverPartners = found && found.type === 'section' && model.partners[found.i] ? partnersOf(found.i) : null;
      schedule();
    }

    function onPointerDown(event) {
      if (event.button !== undefined && event.button !== 0) return;
      const at = local(event);
      drag = { x: at.x, t0: view.t0, t1: view.t1, moved: false, id: event.pointerId };
      if (canvas.setPointerCapture && event.pointerId !== undefined) {
        try { canvas.setPointerCapture(event.pointerId); } catch (_) { /* not capturable */ }
      }
    }

    function onPointerMove(event) {
      const at = local(event);
      if (drag) {
        const dx = at.x - drag.x;
        if (Math.abs(dx) > 2) drag.moved = true;
        if (drag.moved) {
          const d = (dx / layout.plotW) * (drag.t1 - drag.t0);
          clampView(drag.t0 - d, drag.t1 - d);
          canvas.classList.add('tl-dragging');
          tooltip.hidden = true;
          schedule();
          return;
        }
      }
      setHover(hitTest(at.x, at.y), at.x, at.y);
    }

    function onPointerUp() {
      drag = null;
      canvas.classList.remove('tl-dragging');
    }

    function onLeave() {
      if (!drag) setHover(null);
    }

    function onWheel(event) {
      if (!layout) return;
      event.preventDefault();
      const scale = event.deltaMode === 1 ? 0.05 : event.deltaMode === 2 ? 1 : 0.0015;
      if (Math.abs(event.deltaX) > Math.abs(event.deltaY)) {
        pan((event.deltaX * scale) / 2);
        return;
      }
      const at = local(event);
      const anchor = tOf(Math.min(Math.max(at.x, layout.plotX), layout.plotX + layout.plotW));
      zoomAt(anchor, Math.exp(event.deltaY * scale));
      tooltip.hidden = true;
    }

    function onKey(event) {
      const keys = {
        '+': () => zoom(0.5), '=': () => zoom(0.5), '-': () => zoom(2), '_': () => zoom(2), '0': reset,
        ArrowLeft: () => pan(-0.1), ArrowRight: () => pan(0.1), Escape: () => setHover(null),
      };
      const action = keys[event.key];
      if (action && !event.ctrlKey && !event.metaKey && !event.altKey) {
        event.preventDefault();
        action();
      }
    }

    canvas.addEventListener('pointerdown', onPointerDown);
    canvas.addEventListener('pointermove', onPointerMove);
    canvas.addEventListener('pointerup', onPointerUp);
    canvas.addEventListener('pointercancel', onPointerUp);
    canvas.addEventListener('pointerleave', onLeave);
    canvas.addEventListener('wheel', onWheel, { passive: false });
    canvas.addEventListener('dblclick', reset);
    stage.addEventListener('keydown', onKey);
    zoomIn.addEventListener('click', () => zoom(0.5));
    zoomOut.addEventListener('click', () => zoom(2));
    resetButton.addEventListener('click', reset);

    let observer = null;
    const onResize = () => {
      const width = Math.floor(stage.clientWidth || element.clientWidth || 800);
      if (width !== lastWidth) schedule();
    };
    if (typeof ResizeObserver === 'function') {
      observer = new ResizeObserver(onResize);
      observer.observe(stage);
    } else if (typeof window !== 'undefined') {
      window.addEventListener('resize', onResize);
    }

    const api = {
      element,
      redraw(next) {
        model = prepare(next);
        hover = null;
        hoverPartners = null;
        tooltip.hidden = true;
        homeView();
        texts();
        if (frame) {
          if (typeof cancelAnimationFrame === 'function') cancelAnimationFrame(frame);
          clearTimeout(frame);
          frame = 0;
        }
        draw();
        return api;
      },
      setLang(next) {
        lang = langOf(next);
        texts();
        if (!tooltip.hidden) tooltip.hidden = true;
        draw();
        return api;
      },
      reset() { reset(); return api; },
      zoom(factor) { zoom(factor); return api; },
      stats() {
        return { sections: model.n, overlaps: model.pairs.length, cross: model.cross, pairs: model.pairs.slice() };
      },
      destroy() {
        destroyed = true;
        if (observer) observer.disconnect();
        else if (typeof window !== 'undefined') window.removeEventListener('resize', onResize);
        if (frame && typeof cancelAnimationFrame === 'function') cancelAnimationFrame(frame);
        delete element.__stocklockTimeline;
      },
    };
    element.__stocklockTimeline = api;
    texts();
    draw();
    return api;
  }

  const StocklockTimeline = {
    mount,
    parse,
    overlaps,
    summary,
    crossCount,
    I18N,
    COLORS,
    _pack: pack,
    _spans: spans,
    _expiry: expiry,
    _category: category,
    _niceStep: niceStep,
    _formatTick: formatTick,
    _axis: axis,
    _prepare: prepare,
  };

  if (typeof module !== 'undefined' && module.exports) module.exports = StocklockTimeline;
  else root.StocklockTimeline = StocklockTimeline;
})(typeof globalThis !== 'undefined' ? globalThis : this);
