// The /timeline page: picks a SKU (and optionally only the last N seconds),
// fetches /api/timeline and hands it to StocklockTimeline (timeline.js).
'use strict';
(function () {
  const I18N = {
    en: {
      subtitle: 'timeline of critical sections', nav_dashboard: 'dashboard', nav_lessons: 'lessons',
      controls: 'Controls', sku: 'SKU', choose: 'choose…', last_seconds: 'last N seconds',
      since_reset: 'since reset', refresh: 'Refresh', export: 'Export',
      initial: 'initial', sold: 'sold', remaining: 'remaining', oversold: 'oversold',
      duplicates: 'duplicates', busy: 'busy', verdict: 'verdict',
      choose_sku: 'Choose a SKU to see its critical sections.', loading: 'loading…',
      failed: 'the timeline could not be read: {error}',
    },
    zh: {
      subtitle: '临界区时间线', nav_dashboard: '仪表盘', nav_lessons: '课程',
      controls: '控制', sku: 'SKU', choose: '请选择…', last_seconds: '最近 N 秒',
      since_reset: '自上次重置', refresh: '刷新', export: '导出',
      initial: '初始', sold: '已售', remaining: '剩余', oversold: '超卖',
      duplicates: '重复', busy: '忙', verdict: '结论',
      choose_sku: '请选择一个 SKU 查看它的临界区。', loading: '加载中…',
      failed: '无法读取时间线:{error}',
    },
  };

  let chart = null;
  let pending = null;

  const form = document.getElementById('timeline-form');
  const select = document.getElementById('sku');
  const seconds = document.getElementById('seconds');
  const refresh = document.getElementById('refresh');
  const exportLink = document.getElementById('export');
  const jsonLink = document.getElementById('json-link');
  const message = document.getElementById('message');
  const target = document.getElementById('timeline');

  function t(key, vars) {
    return StocklockPage.translate(I18N, key, vars);
  }

  function applyLang() {
    StocklockPage.applyLang(t);
    if (chart) chart.setLang(StocklockPage.lang());
    if (!select.value) message.textContent = t('choose_sku');
  }

  // sku=S[&seconds=N]; seconds only when it is a whole number from 1.
  function query() {
    let q = 'sku=' + encodeURIComponent(select.value);
    const n = Number(seconds.value);
    if (seconds.value !== '' && Number.isInteger(n) && n >= 1) q += '&seconds=' + n;
    return q;
  }

  function updateLinks() {
    const q = query();
    const none = !select.value;
    exportLink.href = '/api/timeline/export?' + q;
    exportLink.setAttribute('aria-disabled', String(none));
    if (jsonLink) jsonLink.href = '/api/timeline?' + q;
    target.dataset.sku = select.value;
    if (!none && window.history && history.replaceState) history.replaceState(null, '', '/timeline?' + q);
  }

  function field(name) {
    return document.querySelector(`#ledger [data-field="${name}"]`);
  }

  function ledger(data) {
    const state = data.state || {};
    for (const name of ['initial', 'sold', 'remaining', 'oversold', 'duplicates', 'busy']) {
      const el = field(name);
      if (!el) continue;
      const value = state[name];
      el.textContent = value === undefined || value === null ? '–' : String(value);
      el.classList.toggle('bad', (name === 'oversold' || name === 'duplicates') && Number(value) !== 0 && value !== undefined && value !== null);
    }
    const verdict = field('verdict');
    const text = data.verdict || '';
    verdict.textContent = text || '–';
    const safe = text.startsWith('SAFE');
    verdict.className = 'verdict ' + (text ? (safe ? 'safe' : 'bad') : '');
  }

  async function errorOf(response) {
    const body = await response.text().catch(() => '');
    try {
      const json = JSON.parse(body);
      return json.error || json.message || body;
    } catch (_) {
      return body || `${response.status} ${response.statusText}`;
    }
  }

  async function load() {
    updateLinks();
    if (!select.value) {
      message.textContent = t('choose_sku');
      return;
    }
    if (pending) pending.abort();
    const controller = typeof AbortController === 'function' ? new AbortController() : null;
    pending = controller;
    refresh.disabled = true;
    target.dataset.state = 'loading';
    message.textContent = t('loading');
    try {
      const response = await fetch('/api/timeline?' + query(), {
        headers: { accept: 'application/json' },
        signal: controller ? controller.signal : undefined,
      });
      if (!response.ok) throw new Error(await errorOf(response));
      const data = window.StocklockTimeline.parse(await response.text());
      if (pending !== controller) return;
      if (chart) chart.redraw(data);
      else chart = window.StocklockTimeline.mount(target, data, { lang: StocklockPage.lang() });
      ledger(data);
      message.textContent = '';
      target.dataset.state = 'ready';
    } catch (err) {
      if (err && err.name === 'AbortError') return;
      message.textContent = t('failed', { error: err && err.message ? err.message : String(err) });
      target.dataset.state = 'error';
    } finally {
      if (pending === controller) {
        pending = null;
        refresh.disabled = false;
      }
    }
  }

  form.addEventListener('submit', (event) => {
    event.preventDefault();
    load();
  });
  select.addEventListener('change', load);
  seconds.addEventListener('change', updateLinks);
  document.getElementById('lang').addEventListener('click', () => {
    StocklockPage.toggleLang();
    applyLang();
  });

  applyLang();
  load();
})();
