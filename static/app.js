// stocklock dashboard. No framework, no build step: it listens to the board
// on /api/events (server-sent events; the browser reconnects by itself) and
// redraws the cards; admin actions send the token kept for this tab.
'use strict';

const I18N = {
  en: {
    subtitle: 'flash-sale stock protection lab',
    lost_update: 'The lost update: {sold} buyers were told "sold", but the stock dropped by only {dropped} (from {initial} to {remaining}). Two buyers read the same stock, say 40; each sells a unit and writes back 39: two sales, one unit gone. {oversold} sales were written over another buyer\'s.',
    hint_label: 'what this means',
    hint_work_ms: 'work_ms: how long each buyer works between reading the stock and writing it (the business logic). The longer, the wider the window in which another buyer reads the same stock.',
    hint_lease_ms: 'lease_ms: how long a lock lasts before Redis lets it expire; empty keeps the variant\'s default. A lease shorter than the work lets a second buyer in while the first still works.',
    hint_wait_ms: 'wait_ms: how long a buyer waits for a held lock before it is told busy (429); empty keeps the variant\'s default, 0 fails at once.',
    legend: 'What the numbers on a card mean',
    legend_remaining: 'the stock the store still holds, of the stock it was reset to',
    legend_sold: 'buyers told "sold" (200), counted by the ledger, one record per sale',
    legend_oversold: 'sales no stock backs: those sold minus the units the stock went down by (and minus units given back); anything but 0 is the failure this lab is about',
    legend_duplicates: 'units the ledger records as sold to two buyers',
    legend_busy: 'buyers turned away (429) because the lock was held, lost or too slow to get: nothing sold, nothing broken',
    nav_lessons: 'Lessons', nav_timeline: 'Timeline', nav_soak: 'Soak', timeline_link: 'timeline', step_link: 'step through',
    connecting: 'connecting…', live: 'live', reconnecting: 'reconnecting…',
    controls: 'Controls', stock: 'stock', requests: 'requests', concurrency: 'concurrency',
    default: 'default', race_all: 'Race all', reset_all: 'Reset all', instances: 'Instances',
    remaining: 'remaining', sold: 'sold', oversold: 'oversold', duplicates: 'duplicates', busy: 'busy',
    per_second: 'req/s', run: 'Run', reset: 'Reset', how: 'How it works, what breaks it',
    expected: "Expected (teaching matrix): what the lab's scenarios must show", undersells: 'Under-sells',
    served_by: 'page served by instance', lock_free: 'lock: free', lock_held: 'lock: held by {holder}, TTL {ttl}',
    lock_orphan: 'lock: HELD WITH NO TTL by {holder}: nobody will ever release it',
    renewals: 'renewals {n}', lost: 'lost leases {n}', fenced: 'stale tokens refused {n}',
    ask_token: 'Admin token (printed by stocklock up):', need_token: 'This needs the admin token.',
    bad_token: 'The admin token was refused; it will be asked again.',
    run_running: 'running {done}/{total} requests on {variants}',
    run_starting: 'starting the run…',
    run_done: 'done: {variants}', run_failed: 'run failed: {error}', requests_short: 'requests',
    history_short: 'history: {verdict}', history_linearizable: 'linearizable',
    history_not_linearizable: 'not linearizable', history_unsafe: 'unsafe', history_undecided: 'undecided',
    reset_done: 'reset {n} SKU(s) to {stock}',
    chaos: 'Chaos (needs `up --chaos`)', chaos_crash_acquire: 'Crash the next holder right after it acquires (SETNX: before EXPIRE)',
    chaos_crash_write: 'Crash the next holder right after its write',
    unsold: 'unsold {n} while {m} buyers were refused', unknown: '{n} answers of unknown outcome',
    mark_refusals: '{n} buyers refused by a sold-out mark (without Redis)',
    post_sale_failures: '{n} failures after a written sale (each answered sold)',
    broken: 'LEDGER BROKEN: oversold {n} (stock left without a recorded sale)',
    pause_ms: 'pause ms', chaos_pause: 'Freeze the next holder', chaos_crash: 'Crash an instance',
    clear_lock: 'Delete lock', chaos_done: 'chaos: {what}',
    chaos_pause_redis: 'Pause Redis', chaos_restart_redis: 'Restart Redis',
    scenarios: 'Scenarios', lab_running: 'running the failure scenarios on a stack of their own…',
    lab_failed: 'the scenarios could not run: {error}', expected_short: 'expected',
    as_predicted: 'as the teaching matrix predicts', not_predicted: 'not what the teaching matrix predicts',
    model: 'model: {verdict}', no_model: 'model: none (the lab alone)', model_trace: "the model's trace",
    orders_waiting: 'orders: –', orders_off: 'orders: off on this stack (`up --orders on`)',
    orders_line: 'orders: reserved {reserved} · paid {paid} · expired {expired} · returned {returned} · lag p50 {p50} / p99 {p99} ms',
    orders_clean: 'reconcile: clean', orders_wrong: 'reconcile: {verdict}',
  },
  zh: {
    subtitle: '秒杀库存保护实验室',
    lost_update: '丢失更新:{sold} 个买家被告知买到了,库存却只少了 {dropped}(从 {initial} 到 {remaining})。两个买家读到同一个库存,比如 40;各自卖出一件并写回 39:两笔销售,只少了一件。有 {oversold} 笔销售被别的买家的写覆盖了。',
    hint_label: '这是什么意思',
    hint_work_ms: 'work_ms:每个买家在读库存和写库存之间做业务的时间。越长,别的买家读到同一个库存的窗口就越宽。',
    hint_lease_ms: 'lease_ms:锁在 Redis 让它过期之前能持续多久;留空用变体的默认值。租约比业务短,第一个买家还在做事时第二个买家就能进来。',
    hint_wait_ms: 'wait_ms:买家等待被占用的锁多久,之后被告知忙 (429);留空用变体的默认值,0 表示立即失败。',
    legend: '卡片上的数字是什么意思',
    legend_remaining: '存储里还剩的库存,以及重置时的库存',
    legend_sold: '被告知“已售”(200)的买家,由账本计数,每笔销售一条记录',
    legend_oversold: '没有库存支撑的销售:已售减去库存实际减少的件数(以及退回的件数);不为 0 就是这个实验室要讲的故障',
    legend_duplicates: '账本记录为卖给了两个买家的单元',
    legend_busy: '因为锁被占用、丢失或拿得太慢而被拒绝 (429) 的买家:什么都没卖,什么都没坏',
    nav_lessons: '课程', nav_timeline: '时间线', nav_soak: '浸泡测试', timeline_link: '时间线', step_link: '单步调度',
    connecting: '连接中…', live: '实时', reconnecting: '重新连接中…',
    controls: '控制', stock: '库存', requests: '请求数', concurrency: '并发',
    default: '默认', race_all: '全部同时压测', reset_all: '全部重置', instances: '实例',
    remaining: '剩余', sold: '已售', oversold: '超卖', duplicates: '重复', busy: '忙',
    per_second: '请求/秒', run: '压测', reset: '重置', how: '原理与破绽',
    expected: '预期结论(教学矩阵):故障场景必须呈现的结果', undersells: '会少卖',
    served_by: '本页面由实例提供:', lock_free: '锁:空闲', lock_held: '锁:{holder} 持有,剩余 {ttl}',
    lock_orphan: '锁:{holder} 持有且没有过期时间!永远不会被释放',
    renewals: '续期 {n} 次', lost: '丢锁 {n} 次', fenced: '拒绝过期 token {n} 次',
    ask_token: '管理令牌(stocklock up 启动时打印):', need_token: '此操作需要管理令牌。',
    bad_token: '管理令牌被拒绝,下次操作时会重新询问。',
    run_running: '进行中:{done}/{total} 个请求,变体 {variants}',
    run_starting: '正在开始压测…',
    run_done: '完成:{variants}', run_failed: '压测失败:{error}', requests_short: '请求',
    history_short: '历史检查:{verdict}', history_linearizable: '可线性化',
    history_not_linearizable: '不可线性化', history_unsafe: '不安全', history_undecided: '未能判定',
    reset_done: '已将 {n} 个 SKU 重置为 {stock}',
    chaos: '混沌(需 `up --chaos`)', chaos_crash_acquire: '让下一个持有者加锁后立即崩溃(SETNX:在 EXPIRE 前)',
    chaos_crash_write: '让下一个持有者写入后立即崩溃',
    unsold: '仍有 {n} 件未售出,却拒绝了 {m} 个买家', unknown: '{n} 个结果未知的应答',
    mark_refusals: '{n} 个买家被售罄标记拒绝(未询问 Redis)',
    post_sale_failures: '售出写入后有 {n} 个步骤失败(每次都答复已售)',
    broken: '账本损坏:超卖 {n}(库存减少却没有售出记录)',
    pause_ms: '停顿毫秒', chaos_pause: '冻结下一个持有者', chaos_crash: '让一个实例崩溃',
    clear_lock: '删除锁', chaos_done: '混沌:{what}',
    chaos_pause_redis: '暂停 Redis', chaos_restart_redis: '重启 Redis',
    scenarios: '故障场景', lab_running: '正在独立的环境中运行故障场景…',
    lab_failed: '场景无法运行:{error}', expected_short: '预期',
    as_predicted: '与教学矩阵的预期一致', not_predicted: '与教学矩阵的预期不一致',
    model: '模型:{verdict}', no_model: '模型:无(只有实验)', model_trace: '模型的反例路径',
    orders_waiting: '订单:–', orders_off: '订单:本环境未开启(`up --orders on`)',
    orders_line: '订单:待付款 {reserved} · 已付款 {paid} · 已过期 {expired} · 已退回库存 {returned} · 延迟 p50 {p50} / p99 {p99} 毫秒',
    orders_clean: '对账:一致', orders_wrong: '对账:{verdict}',
  },
};

let lastBoard = null;

function t(key, vars) {
  return StocklockPage.translate(I18N, key, vars);
}

function applyLang() {
  StocklockPage.applyLang(t);
  if (lastBoard) render(lastBoard);
}

function say(text) {
  document.getElementById('message').textContent = text || '';
}

// A classroom seat (its cookie; the page names it) sees its own SKUs: its
// Run and Reset are the seat's routes, its board is polled.
const seat = StocklockPage.seat();
const skuPrefix = StocklockPage.skuPrefix();

async function admin(path, body) {
  const headers = StocklockPage.postHeaders(t('ask_token'));
  if (!headers) {
    say(t('need_token'));
    return null;
  }
  const response = await fetch(path, { method: 'POST', headers, body: JSON.stringify(body) });
  const answer = await response.json().catch(() => ({}));
  if (response.status === 401) {
    if (!seat) StocklockPage.forgetToken();
    say(t('bad_token'));
    return null;
  }
  if (!response.ok) {
    say(answer.detail || `${response.status}`);
    return null;
  }
  say('');
  return answer;
}

// ---- controls
function loadParams() {
  const form = document.getElementById('load-form');
  const number = (name) => (form.elements[name].value === '' ? null : Number(form.elements[name].value));
  return {
    stock: number('stock'),
    requests: number('requests'),
    concurrency: number('concurrency'),
    work_ms: number('work_ms'),
    lease_ms: number('lease_ms'),
    wait_ms: number('wait_ms'),
  };
}

async function startRun(variants) {
  // Pressed once: the button waits for this run to end (a second run is
  // refused while one is running), and the box says it started.
  const button = document.getElementById('race-all');
  button.disabled = true;
  document.getElementById('run-text').textContent = t('run_starting');
  const run = await admin(seat ? '/api/seat/run' : '/api/admin/run', { variants, ...loadParams() });
  if (run) {
    showRun(run);
  } else {
    button.disabled = false;
    document.getElementById('run-text').textContent = '';
  }
}

async function reset(variants) {
  const stock = loadParams().stock;
  let done = 0;
  for (const variant of variants) {
    const asked = seat
      ? admin('/api/seat/reset', { variant, stock })
      : admin('/api/admin/reset', { sku: variant, stock });
    if (await asked) done += 1;
    else return;
  }
  say(t('reset_done', { n: done, stock }));
}

function allVariants() {
  return [...document.querySelectorAll('.card')].map((card) => card.dataset.variant);
}

document.getElementById('load-form').addEventListener('submit', (event) => {
  event.preventDefault();
  startRun([]);
});
document.getElementById('reset-all').addEventListener('click', () => reset(allVariants()));
document.getElementById('lang').addEventListener('click', () => {
  StocklockPage.toggleLang();
  applyLang();
});
async function chaos(action) {
  const done = await admin('/api/admin/chaos', action);
  if (done) say(t('chaos_done', { what: JSON.stringify(done) }));
}
document.getElementById('chaos-crash-after-acquire').addEventListener('click', () => chaos({ action: 'crash_after_acquire' }));
document.getElementById('chaos-crash-after-write').addEventListener('click', () => chaos({ action: 'crash_after_write' }));
document.getElementById('chaos-pause').addEventListener('click', () =>
  chaos({ action: 'pause_holder', ms: Number(document.getElementById('chaos-pause-ms').value) }),
);
document.getElementById('chaos-crash').addEventListener('click', () => chaos({ action: 'crash' }));
document.getElementById('chaos-pause-redis').addEventListener('click', () =>
  chaos({ action: 'pause_redis', ms: Number(document.getElementById('chaos-pause-ms').value) }),
);
document.getElementById('chaos-restart-redis').addEventListener('click', () => chaos({ action: 'restart_redis' }));

for (const card of document.querySelectorAll('.card')) {
  const variant = card.dataset.variant;
  card.querySelector('[data-action="clear-lock"]').addEventListener('click', () =>
    chaos({ action: 'lock_vanishes', sku: variant }),
  );
  card.querySelector('[data-action="run"]').addEventListener('click', () => startRun([variant]));
  card.querySelector('[data-action="reset"]').addEventListener('click', () => reset([variant]));
  card.querySelector('[data-action="scenarios"]').addEventListener('click', async () => {
    const started = await admin('/api/admin/lab', { variant });
    if (started) renderLab(card, started);
  });
}

// ---- drawing
const served = {}; // variant -> answered requests, from the ledger
const samples = {}; // variant -> recent req/s, for the sparkline
const SAMPLES = 60;

function field(card, name) {
  return card.querySelector(`[data-field="${name}"]`);
}

function setNumber(card, name, value, bad) {
  const el = field(card, name);
  el.textContent = String(value);
  if (bad !== undefined) el.classList.toggle('bad', bad);
}

function formatTtl(ms) {
  return ms >= 1000 ? `${(ms / 1000).toFixed(1)} s` : `${ms} ms`;
}

function renderCard(state) {
  // A seat's SKU is its prefix and the variant's name.
  const variant = skuPrefix && state.sku.startsWith(skuPrefix) ? state.sku.slice(skuPrefix.length) : state.sku;
  const card = document.querySelector(`.card[data-variant="${CSS.escape(variant)}"]`);
  if (!card) return;
  setNumber(card, 'remaining', state.remaining, state.remaining < 0);
  setNumber(card, 'initial', state.initial);
  setNumber(card, 'sold', state.sold);
  setNumber(card, 'oversold', state.oversold, state.oversold !== 0);
  setNumber(card, 'duplicates', state.duplicates, state.duplicates > 0);
  setNumber(card, 'busy', state.busy);
  card.dataset.oversold = String(state.oversold > 0 || state.duplicates > 0);
  // What the ledger says beyond the numbers: a broken ledger (oversold < 0
  // can only mean stock left without a recorded sale), under-selling (stock
  // left while buyers were refused), answers whose outcome was unknown.
  field(card, 'broken').textContent = state.oversold < 0 ? t('broken', { n: state.oversold }) : '';
  // An oversell the lost update accounts for, explained with the card's
  // own numbers: every sale beyond the stock's drop was written over.
  const dropped = state.initial - state.remaining;
  const lost = field(card, 'lost-update');
  lost.hidden = !(state.oversold > 0 && state.sold - dropped === state.oversold);
  lost.textContent = lost.hidden ? '' : t('lost_update', {
    sold: state.sold, dropped, initial: state.initial, remaining: state.remaining, oversold: state.oversold,
  });
  field(card, 'unsold').textContent =
    state.remaining > 0 && state.busy > 0 ? t('unsold', { n: state.remaining, m: state.busy }) : '';
  field(card, 'unknown').textContent = state.unknown > 0 ? t('unknown', { n: state.unknown }) : '';
  // Refusals by a mark while stock was back (a reset or a give-back not yet
  // announced) are under-selling that no busy answer shows.
  field(card, 'mark_refusals').textContent =
    state.mark_refusals > 0 ? t('mark_refusals', { n: state.mark_refusals }) : '';
  field(card, 'post_sale_failures').textContent =
    state.post_sale_failures > 0 ? t('post_sale_failures', { n: state.post_sale_failures }) : '';

  const share = state.initial > 0 ? Math.max(0, Math.min(1, state.remaining / state.initial)) : 0;
  card.querySelector('.stockbar .fill').setAttribute('width', (share * 100).toFixed(1));

  const perInstance = Object.entries(state.per_instance);
  const total = perInstance.reduce((sum, [, n]) => sum + n, 0);
  served[variant] = total;
  field(card, 'share').textContent = perInstance
    .map(([name, n]) => `${name} ${total ? Math.round((100 * n) / total) : 0}%`)
    .join(' · ');

  const lock = field(card, 'lock');
  const holder = state.lock.holder ? state.lock.holder.split(':')[0] : '?';
  let text = t('lock_free');
  if (state.lock.no_ttl) text = t('lock_orphan', { holder });
  else if (state.lock.held) text = t('lock_held', { holder, ttl: formatTtl(state.lock.ttl_ms || 0) });
  const extras = [];
  if (state.renewals > 0) extras.push(t('renewals', { n: state.renewals }));
  if (state.lost_locks > 0) extras.push(t('lost', { n: state.lost_locks }));
  if (state.fenced_rejections > 0) extras.push(t('fenced', { n: state.fenced_rejections }));
  lock.textContent = extras.length ? `${text} · ${extras.join(' · ')}` : text;
  lock.classList.toggle('held', state.lock.held && !state.lock.no_ttl);
  lock.classList.toggle('orphan', state.lock.no_ttl);
}

function renderInstances(instances) {
  const list = document.getElementById('instance-list');
  list.replaceChildren(
    ...instances.map((instance) => {
      const item = document.createElement('li');
      item.dataset.instance = instance.name;
      item.dataset.healthy = String(instance.healthy);
      const name = document.createElement('b');
      name.textContent = instance.name;
      item.append(name, ` pid ${instance.pid} · ${instance.requests} ${t('requests_short')}`);
      return item;
    }),
  );
}

function showRun(run) {
  const box = document.getElementById('run');
  box.dataset.runState = run.state;
  document.getElementById('race-all').disabled = run.state === 'running';
  box.dataset.runId = run.id;
  const progress = document.getElementById('run-progress');
  progress.max = Math.max(1, run.total);
  progress.value = run.state === 'done' ? run.total : run.done;
  const variants = run.variants.join(', ');
  const text =
    run.state === 'running'
      ? t('run_running', { done: run.done, total: run.total, variants })
      : run.state === 'done'
        ? t('run_done', { variants })
        : t('run_failed', { error: run.error || '?' });
  document.getElementById('run-text').textContent = text;
  for (const card of document.querySelectorAll('.card')) {
    const report = run.state === 'done' ? run.reports.find((r) => r.variant === card.dataset.variant) : null;
    const verdict = field(card, 'verdict');
    // The ledger's word (SAFE, OVERSOLD n) is the same in both languages;
    // what under-sold is said in the page's.
    const head = report ? report.verdict.split(',')[0] : '';
    verdict.textContent = report && report.unsold
      ? `${head}, ${t('unsold', { n: report.unsold.left, m: report.unsold.refused })}` : head;
    const safe = report && report.verdict.startsWith('SAFE');
    verdict.className = `verdict ${report ? (safe ? (report.unsold ? 'safe undersold' : 'safe') : 'bad') : ''}`;
    // Under it, the history checker's verdict of what the run's buyers were
    // told (its reason on hover), red where it and the ledger disagree.
    const history = field(card, 'history');
    const judged = report && report.history;
    history.textContent = judged
      ? t('history_short', { verdict: t(`history_${judged.verdict}`) }) : '';
    history.title = judged ? judged.why : '';
    history.dataset.verdict = judged ? judged.verdict : '';
    history.className = `history ${judged && judged.disagreement ? 'bad' : ''}`;
  }
}

// The checker's drawings opened under a card's scenarios, by
// "variant/scenario": kept across redraws of the board.
const modelViews = {};

// The model checker's verdict beside a cell's live one, and a button that
// opens (or folds) its trace, drawn by check.js from /api/check.
function modelOf(variant, cell) {
  const line = document.createElement('span');
  line.className = 'cell-model';
  line.dataset.field = 'model';
  // The checker's verdict in the page's language (a record from before
  // the server said it in Chinese has only the English).
  const said = StocklockPage.said(cell, 'model');
  line.textContent = ` · ${cell.model ? t('model', { verdict: said }) : t('no_model')}`;
  if (!cell.model || typeof StocklockCheck === 'undefined') return [line];
  const key = `${variant}/${cell.scenario}`;
  const view = modelViews[key] || (modelViews[key] = { element: document.createElement('div'), open: false });
  view.element.dataset.field = 'model-view';
  view.element.hidden = !view.open;
  const button = document.createElement('button');
  button.type = 'button';
  button.className = 'link';
  button.dataset.action = 'model-trace';
  button.setAttribute('aria-expanded', String(view.open));
  button.textContent = t('model_trace');
  button.addEventListener('click', () => {
    view.open = !view.open;
    view.element.hidden = !view.open;
    button.setAttribute('aria-expanded', String(view.open));
    if (view.open) StocklockCheck.show(view.element, variant, cell.scenario);
  });
  if (view.open && view.element.dataset.state) StocklockCheck.redraw(view.element);
  line.append(' ', button);
  return [line, view.element];
}

// A card's failure scenarios: one line per cell, verdict and evidence.
function renderLab(card, lab) {
  const box = field(card, 'scenarios');
  // The board comes up to four times a second: redraw only what changed.
  const drawn = `${StocklockPage.lang()} ${JSON.stringify(lab)}`;
  if (box.drawnLab === drawn) return;
  box.drawnLab = drawn;
  box.dataset.state = lab.state;
  if (lab.state === 'running') {
    box.textContent = t('lab_running');
    return;
  }
  if (lab.state === 'failed') {
    box.textContent = t('lab_failed', { error: lab.error || '?' });
    return;
  }
  box.replaceChildren(
    ...lab.cells.map((cell) => {
      const line = document.createElement('p');
      // An inconclusive cell (the fault did not land) fails the run like a
      // contradiction, but says something else: it proved nothing.
      const inconclusive = cell.observed === 'inconclusive';
      line.className = cell.pass ? 'cell pass' : inconclusive ? 'cell inconclusive' : 'cell fail';
      line.dataset.scenario = cell.scenario;
      line.dataset.observed = cell.observed;
      // The mark says whether the prediction held; the colour of what was
      // observed says whether it was safe (an oversell is red even when it
      // was predicted).
      const mark = document.createElement('span');
      mark.className = 'mark';
      mark.textContent = `${cell.pass ? '✓' : inconclusive ? '?' : '✗'} `;
      mark.title = t(cell.pass ? 'as_predicted' : 'not_predicted');
      const head = document.createElement('b');
      head.className = `observed ${observedClass(cell.observed)}`;
      // The server says each in both languages (`observed_zh`, ...).
      const said = (key) => StocklockPage.said(cell, key);
      head.textContent = `${cell.scenario}: ${said('observed')}`;
      const rest = document.createElement('small');
      StocklockPage.setText(rest, ` (${t('expected_short')} ${said('expected')}) ${said('evidence')}`);
      const [model, view] = modelOf(card.dataset.variant, cell);
      line.dataset.model = cell.model || '';
      line.append(mark, head, model, rest);
      return view ? [line, view] : [line];
    }).flat(),
  );
}

// What a lab cell observed, as a colour: unsafe, a refusal, or safe.
function observedClass(observed) {
  if (['oversells', 'deadlock', 'loses units', 'stuck', 'duplicates'].some((bad) => String(observed).startsWith(bad))) return 'unsafe';
  if (observed === 'busy' || observed === 'inconclusive') return 'refusing';
  return 'safe';
}

function render(board) {
  lastBoard = board;
  for (const [variant, lab] of Object.entries(board.labs || {})) {
    const card = document.querySelector(`.card[data-variant="${CSS.escape(variant)}"]`);
    if (card) renderLab(card, lab);
  }
  for (const state of board.variants) renderCard(state);
  renderInstances(board.instances);
  if (board.run) showRun(board.run);
}

// The sparkline: answered requests per second, sampled twice a second.
let lastServed = null;
setInterval(() => {
  const now = { ...served };
  if (lastServed) {
    for (const card of document.querySelectorAll('.card')) {
      const variant = card.dataset.variant;
      const rate = Math.max(0, ((now[variant] || 0) - (lastServed[variant] || 0)) * 2);
      const series = (samples[variant] = samples[variant] || []);
      series.push(rate);
      if (series.length > SAMPLES) series.shift();
      field(card, 'rate').textContent = String(Math.round(rate));
      const peak = Math.max(1, ...series);
      const points = series.map((v, i) => `${(i * 120) / (SAMPLES - 1)},${(24 - (v / peak) * 22).toFixed(1)}`);
      card.querySelector('.spark polyline').setAttribute('points', points.join(' '));
    }
  }
  lastServed = now;
}, 500);

// The order panel of the order variants' cards: their orders in
// PostgreSQL and the reconciliation with the ledger, asked every second.
async function renderOrders() {
  for (const panel of document.querySelectorAll('[data-field="orders"]')) {
    const sku = `${skuPrefix}${panel.closest('.card').dataset.variant}`;
    try {
      const response = await fetch(`/api/orders?sku=${encodeURIComponent(sku)}`);
      if (!response.ok) {
        StocklockPage.setText(panel, t('orders_off'));
        panel.classList.remove('bad');
        continue;
      }
      const view = await response.json();
      const s = view.summary;
      const r = view.reconciliation;
      const ms = (v) => (v == null ? '–' : v.toFixed(1));
      const line = t('orders_line', {
        reserved: s.reserved, paid: s.paid, expired: s.expired, returned: r.returned,
        p50: ms(s.lag_p50_ms), p99: ms(s.lag_p99_ms),
      });
      const wrong = r.lost.length + r.phantom.length + r.ordered_twice.length +
        r.unreturned.length + r.returned_unexpired.length > 0 || r.stock_drift !== 0;
      panel.textContent = `${line} · ${wrong ? t('orders_wrong', { verdict: view.verdict }) : t('orders_clean')}`;
      panel.classList.toggle('bad', wrong);
    } catch (_) {
      // The next second tries again.
    }
  }
}
setInterval(renderOrders, 1000);

// ---- live board
function connect() {
  const live = document.getElementById('live');
  if (seat) {
    pollSeatBoard(live);
    return;
  }
  const events = new EventSource('/api/events');
  events.addEventListener('open', () => {
    live.dataset.live = 'true';
    live.dataset.i18n = 'live';
    live.textContent = t('live');
  });
  events.addEventListener('error', () => {
    live.dataset.live = 'false';
    live.dataset.i18n = 'reconnecting';
    live.textContent = t('reconnecting');
  });
  events.addEventListener('board', (event) => render(JSON.parse(event.data)));
}

// A seat's board (its own SKUs) is polled: the events carry the stack's.
async function pollSeatBoard(live) {
  for (;;) {
    let ok = false;
    try {
      const response = await fetch('/api/board', { cache: 'no-store' });
      if (response.ok) {
        render(await response.json());
        ok = true;
      }
    } catch (_) {
      // Said below; the next poll tries again.
    }
    live.dataset.live = String(ok);
    live.dataset.i18n = ok ? 'live' : 'reconnecting';
    live.textContent = t(live.dataset.i18n);
    await new Promise((resolve) => setTimeout(resolve, 1000));
  }
}

applyLang();
connect();
