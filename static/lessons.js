// stocklock lessons: article 001's story as a path of experiments. Each Run
// button asks the stack to play one (variant, scenario) pair of the lab,
// polls /api/lessons until it is over, then shows the lab's cell, the
// SKU's ledger and its timeline. Beside it, the model checker's verdict on
// the same cell (check.js). No framework, no build step.
'use strict';

const I18N = {
  en: {
    subtitle: 'article 001, in {n} experiments',
    nav_dashboard: 'dashboard', nav_timeline: 'timeline',
    variant: 'variant', scenario: 'scenario',
    run: 'Run this experiment', by_hand: 'try it by hand',
    observed: 'observed', expected: 'expected', as_predicted: 'as predicted?',
    initial: 'initial', sold: 'sold', remaining: 'remaining', oversold: 'oversold',
    open: 'open', export: 'export', look: 'What to look at:',
    served_by: 'page served by instance',
    progress: '{done} of {total} done',
    pass_yes: 'as the articles say',
    pass_no: 'unexpected!',
    pass_inconclusive: 'inconclusive: the fault did not land',
    status_running: 'running on this stack…',
    status_waiting: 'waiting for the other experiment to finish…',
    status_done: 'done',
    status_failed: 'failed',
    failed: 'the experiment failed: {error}',
    refused: 'not started: {detail}',
    ask_token: 'Admin token (printed by stocklock up):',
    need_token: 'Running an experiment needs the admin token.',
    teachers: 'The teacher runs this one: it strikes the whole stack. Try it by hand.',
    bad_token: 'The admin token was refused; it will be asked again.',
    unreachable: 'the stack does not answer: {error}',
    no_timeline: 'the timeline could not be loaded: {error}',
    no_timeline_js: 'the timeline view is not available (timeline.js did not load)',
    too_long: 'no result after {minutes} minutes; reload the page to look again',
  },
  zh: {
    subtitle: '文章 001,拆成 {n} 个实验',
    nav_dashboard: '仪表盘', nav_timeline: '时间线',
    variant: '变体', scenario: '场景',
    run: '运行这个实验', by_hand: '亲手试一试',
    observed: '实际结果', expected: '预期', as_predicted: '是否符合预期?',
    initial: '初始', sold: '已售', remaining: '剩余', oversold: '超卖',
    open: '打开', export: '导出', look: '看哪里:',
    served_by: '本页面由实例提供:',
    progress: '已完成 {done} / {total}',
    pass_yes: '与文章所说一致',
    pass_no: '出乎意料!',
    pass_inconclusive: '无法判断:故障没有生效',
    status_running: '正在当前环境上运行…',
    status_waiting: '等待另一个实验结束…',
    status_done: '已完成',
    status_failed: '失败',
    failed: '实验失败:{error}',
    refused: '未能开始:{detail}',
    ask_token: '管理令牌(stocklock up 启动时打印):',
    need_token: '运行实验需要管理令牌。',
    teachers: '这个实验由老师来运行:它会波及整套环境。你可以手动单步试试。',
    bad_token: '管理令牌被拒绝,下次操作时会重新询问。',
    unreachable: '环境没有响应:{error}',
    no_timeline: '无法加载时间线:{error}',
    no_timeline_js: '时间线视图不可用(timeline.js 没有加载)',
    too_long: '{minutes} 分钟后仍没有结果;请刷新页面再看',
  },
};

const POLL_MS = 400;
const POLL_LIMIT_MS = 10 * 60 * 1000;

// What each rendered step showed, to redraw it in the other language:
// id -> { cell, timeline }.
const shown = {};
// The step this page is waiting for (one at a time), or null.
let active = null;

function t(key, vars) {
  return StocklockPage.translate(I18N, key, vars);
}

function say(text) {
  document.getElementById('message').textContent = text || '';
}

function sections() {
  return [...document.querySelectorAll('section.step')];
}

function sectionOf(id) {
  return document.querySelector(`section.step[data-step="${CSS.escape(id)}"]`);
}

function field(section, name) {
  return section.querySelector(`[data-field="${name}"]`);
}

// ---- language
function applyLang() {
  StocklockPage.applyLang(t);
  // The path's length, counted by the server: the words never drift from it.
  const subtitle = document.querySelector('[data-i18n=subtitle]');
  subtitle.textContent = t('subtitle', { n: subtitle.dataset.count });
  for (const section of sections()) {
    const status = field(section, 'status');
    if (status.dataset.key) status.textContent = t(status.dataset.key, JSON.parse(status.dataset.vars || '{}'));
    const seen = shown[section.dataset.step];
    if (seen && seen.cell) fillCell(section, seen.cell);
    if (seen && seen.timeline) mountTimeline(section, seen.timeline);
    const model = field(section, 'model');
    if (model.dataset.state && typeof StocklockCheck !== 'undefined') StocklockCheck.redraw(model);
  }
  updateProgress();
}

document.getElementById('lang').addEventListener('click', () => {
  StocklockPage.toggleLang();
  applyLang();
});

// ---- status line of a step (kept as a key, so the language can change)
function setStatus(section, key, vars) {
  const status = field(section, 'status');
  if (!key) {
    delete status.dataset.key;
    delete status.dataset.vars;
    status.textContent = '';
    return;
  }
  status.dataset.key = key;
  status.dataset.vars = JSON.stringify(vars || {});
  status.textContent = t(key, vars);
}

function updateProgress() {
  const all = sections();
  const done = all.filter((s) => s.dataset.state === 'done').length;
  const progress = document.getElementById('progress');
  progress.dataset.done = String(done);
  progress.dataset.total = String(all.length);
  progress.textContent = t('progress', { done, total: all.length });
}

// A classroom seat (its cookie; the page names it) runs the steps that
// touch nothing but their SKU on SKUs of its own; the others stay the
// teacher's (their button is disabled and says why).
const seat = StocklockPage.seat();
const skuPrefix = StocklockPage.skuPrefix();

function setButtons() {
  for (const section of sections()) {
    const theirs = seat && section.dataset.seats !== 'true';
    section.querySelector('[data-action="run"]').disabled = active !== null || Boolean(theirs);
  }
}

// ---- rendering a result
function fillPass(section, cell) {
  const pass = field(section, 'pass');
  const inconclusive = !cell.pass && cell.observed === 'inconclusive';
  pass.dataset.pass = cell.pass ? 'true' : inconclusive ? 'inconclusive' : 'false';
  pass.textContent = cell.pass ? t('pass_yes') : inconclusive ? t('pass_inconclusive') : t('pass_no');
  section.dataset.pass = pass.dataset.pass;
}

function fillCell(section, cell) {
  field(section, 'result').hidden = false;
  const verdict = field(section, 'verdict');
  // The server says each in both languages (`observed_zh`, ...).
  const said = (key) => StocklockPage.said(cell, key);
  verdict.textContent = said('observed');
  verdict.dataset.observed = cell.observed;
  StocklockPage.setText(field(section, 'expected'), said('expected'));
  field(section, 'evidence').textContent = said('evidence');
  field(section, 'evidence').classList.remove('error');
  fillPass(section, cell);
}

function number(value) {
  return typeof value === 'number' && Number.isFinite(value) ? String(value) : '–';
}

function fillLedger(section, state) {
  const s = state || {};
  field(section, 'initial').textContent = number(s.initial);
  field(section, 'sold').textContent = number(s.sold);
  const remaining = field(section, 'remaining');
  remaining.textContent = number(s.remaining);
  remaining.classList.toggle('bad', typeof s.remaining === 'number' && s.remaining < 0);
  const oversold = field(section, 'oversold');
  oversold.textContent = number(s.oversold);
  oversold.classList.toggle('bad', typeof s.oversold === 'number' && s.oversold !== 0);
}

function mountTimeline(section, data) {
  const el = field(section, 'timeline');
  if (!window.StocklockTimeline || typeof window.StocklockTimeline.mount !== 'function') {
    el.textContent = t('no_timeline_js');
    return;
  }
  el.replaceChildren();
  try {
    window.StocklockTimeline.mount(el, data, { lang: StocklockPage.lang() });
  } catch (err) {
    el.textContent = t('no_timeline', { error: err && err.message ? err.message : String(err) });
  }
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// How long a step waits for every instance to hand in its sections.
const LATE_LIMIT_MS = 30 * 1000;

// The SKU's timeline once every instance has handed in its sections: a
// read that an instance did not answer in time (frozen, or slow under
// load) says so (counted_in false) and is made again, for LATE_LIMIT_MS at
// most; after that the last one is shown, and its summary says what may
// be missing. Three failed reads in a row give up.
async function fetchTimeline(sku) {
  let last = null;
  const started = Date.now();
  for (let failures = 0; failures < 3;) {
    try {
      const response = await fetch(`/api/timeline?sku=${encodeURIComponent(sku)}`, { cache: 'no-store' });
      if (response.ok) {
        const data = window.StocklockTimeline.parse(await response.text());
        if (data.counted_in !== false || Date.now() - started > LATE_LIMIT_MS) return { data };
        await sleep(300);
        continue;
      }
      const answer = await response.json().catch(() => ({}));
      last = answer.detail || answer.error || `${response.status}`;
    } catch (err) {
      last = err && err.message ? err.message : String(err);
    }
    failures += 1;
    await sleep(300);
  }
  return { error: last };
}

// Fills every field of a finished step, then (and only then) marks it done.
async function renderDone(section, status) {
  const id = section.dataset.step;
  const cell = status.cell || {
    observed: 'error', expected: '', pass: false, evidence: status.error || '',
  };
  fillCell(section, cell);
  shown[id] = { cell, timeline: null };
  const timeline = await fetchTimeline(`${skuPrefix}${section.dataset.variant}`);
  if (timeline.data) {
    fillLedger(section, timeline.data.state);
    shown[id].timeline = timeline.data;
    mountTimeline(section, timeline.data);
  } else {
    fillLedger(section, null);
    field(section, 'timeline').textContent = t('no_timeline', { error: timeline.error || '?' });
  }
  setStatus(section, 'status_done');
  section.dataset.state = 'done';
  updateProgress();
}

function renderFailed(section, status) {
  field(section, 'result').hidden = false;
  const evidence = field(section, 'evidence');
  evidence.textContent = t('failed', { error: (status && status.error) || '?' });
  evidence.classList.add('error');
  setStatus(section, 'status_failed');
  section.dataset.state = 'failed';
  updateProgress();
}

// ---- the server's view of every step
async function lessons() {
  const response = await fetch('/api/lessons', { cache: 'no-store' });
  if (!response.ok) {
    const answer = await response.json().catch(() => ({}));
    throw new Error(answer.detail || answer.error || `${response.status}`);
  }
  const answer = await response.json();
  return (answer && answer.steps) || {};
}

// Polls until step `id` is done or failed, then renders it.
async function follow(id) {
  const section = sectionOf(id);
  if (!section) return;
  active = id;
  setButtons();
  section.dataset.state = 'running';
  setStatus(section, 'status_running');
  const started = Date.now();
  try {
    for (;;) {
      await sleep(POLL_MS);
      let status;
      try {
        status = (await lessons())[id];
      } catch (err) {
        // A restarting instance, a hiccup: nginx sends the next poll elsewhere.
        say(t('unreachable', { error: err.message }));
        if (Date.now() - started > POLL_LIMIT_MS) throw err;
        continue;
      }
      say('');
      const state = status ? status.state : 'idle';
      if (state === 'done') {
        await renderDone(section, status);
        return;
      }
      if (state === 'failed') {
        renderFailed(section, status);
        return;
      }
      if (Date.now() - started > POLL_LIMIT_MS) {
        renderFailed(section, { error: t('too_long', { minutes: POLL_LIMIT_MS / 60000 }) });
        return;
      }
    }
  } catch (err) {
    renderFailed(section, { error: err && err.message ? err.message : String(err) });
  } finally {
    active = null;
    setButtons();
  }
}

// ---- running a step
async function run(section) {
  if (active !== null) return;
  const id = section.dataset.step;
  const headers = StocklockPage.postHeaders(t('ask_token'));
  if (!headers) {
    say(t('need_token'));
    return;
  }
  const before = section.dataset.state;
  // Running from the click on: a result shown before is not this run's.
  active = id;
  setButtons();
  section.dataset.state = 'running';
  setStatus(section, 'status_running');
  say('');
  const refused = (text) => {
    section.dataset.state = before === 'running' ? 'idle' : before;
    setStatus(section, 'refused', { detail: text });
    say(t('refused', { detail: text }));
    active = null;
    setButtons();
  };
  let response;
  try {
    const path = seat ? '/api/lessons/' : '/api/admin/lessons/';
    response = await fetch(`${path}${encodeURIComponent(id)}`, { method: 'POST', headers, body: '{}' });
  } catch (err) {
    refused(t('unreachable', { error: err && err.message ? err.message : String(err) }));
    return;
  }
  const answer = await response.json().catch(() => ({}));
  if (response.status === 401) {
    if (!seat) StocklockPage.forgetToken();
    refused(t('bad_token'));
    return;
  }
  if (!response.ok) {
    // 409: another lesson experiment runs; 503: e.g. chaos mode off.
    refused(answer.detail || answer.error || `${response.status}`);
    return;
  }
  if (answer.state === 'done') {
    active = null;
    await renderDone(section, answer);
    setButtons();
    return;
  }
  if (answer.state === 'failed') {
    active = null;
    renderFailed(section, answer);
    setButtons();
    return;
  }
  await follow(id);
}

for (const section of sections()) {
  section.querySelector('[data-action="run"]').addEventListener('click', () => run(section));
}
setButtons();

// ---- the checker's verdict on a step's cell, asked for once the step
// comes near the screen (not for all thirteen at page load).
function showModel(section) {
  if (typeof StocklockCheck === 'undefined') return;
  StocklockCheck.show(field(section, 'model'), section.dataset.variant, section.dataset.scenario);
}
if ('IntersectionObserver' in window) {
  const near = new IntersectionObserver((entries) => {
    for (const entry of entries) {
      if (!entry.isIntersecting) continue;
      near.unobserve(entry.target);
      showModel(entry.target);
    }
  }, { rootMargin: '200px 0px' });
  for (const section of sections()) near.observe(section);
} else {
  for (const section of sections()) showModel(section);
}

// ---- on load: what this stack already ran
async function start() {
  applyLang();
  let steps;
  try {
    steps = await lessons();
  } catch (err) {
    say(t('unreachable', { error: err.message }));
    return;
  }
  let running = null;
  const renders = [];
  for (const section of sections()) {
    const status = steps[section.dataset.step];
    if (!status) continue;
    if (status.state === 'done') renders.push(renderDone(section, status));
    else if (status.state === 'failed') renderFailed(section, status);
    else if (status.state === 'running') running = section.dataset.step;
  }
  // One started elsewhere (another tab, before a reload): follow it too.
  if (running !== null && active === null) {
    renders.push(follow(running));
  }
  await Promise.all(renders);
  updateProgress();
}

start();
