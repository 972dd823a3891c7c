// stocklock step mode: the learner is the scheduler. The page starts a run
// of one cell (POST /api/step: the admin token, or a classroom seat's cookie), shows each buyer's lane (the gate it
// waits at and what it does next), and sends the step the learner picks:
// a buyer let go (a click, or its number key) or a fault struck (a click,
// or its letter). After every step it shows what the stores hold, the
// steps so far, the critical sections' timeline and, once the run is
// over, the ledger's verdict beside the checker's. No framework.
'use strict';

const I18N = {
  en: {
    title: 'step mode', subtitle: 'you are the scheduler',
    nav_dashboard: 'dashboard', nav_lessons: 'lessons', nav_timeline: 'timeline',
    cell: 'variant and scenario', buyers: 'buyers', start: 'Start (n)', again: 'Again from the start (n)',
    faults: 'Faults, now', stores: 'What the stores hold', steps_taken: 'Steps taken',
    timeline: 'Critical sections', served_by: 'page served by instance',
    remaining: 'remaining', sold: 'sold', oversold: 'oversold', holder: 'lock holder', ttl: 'lock TTL', fence: 'fence',
    none: 'none', no_ttl: 'no TTL: it never expires', ms: '{n} ms',
    waiting: 'waits at {gate}', on_its_way: 'on its way', waits_for_lock: 'waits for the lock', frozen: 'frozen at {gate}',
    crashed: 'crashed: it never goes on', answered: 'answered {status} {reason}',
    through: 'through instance {instance}', read: 'read the stock: {n}',
    got_unit: 'got unit {unit}: a sale (200)', got_sold_out: 'told sold out (409)',
    got_busy: 'turned away: {why} (429)', got_unknown: 'told "unknown": it may or may not have sold (503)',
    got_nothing: 'no answer: its connection died', got_other: 'answered {status} {reason}',
    why_lock_held: 'the lock was held', why_wait_timed_out: 'it waited too long for the lock',
    why_lock_lost: 'its lock was gone before its write', why_stale_token: 'a newer fencing token was seen',
    why_in_progress: 'its request id was being served', why_reset: 'the SKU was reset under it',
    why_version_conflict: 'the stock changed under it every time', why_not_replicated: 'no replica confirmed its lock',
    why_no_quorum: 'too few Redlock nodes granted the lock', why_other: '{reason}',
    steps_one: '{n} step', steps_many: '{n} steps',
    next: 'next: {what}', went: '{buyer} went on from {gate}', go: 'let {buyer} go ({key})', retry: '{buyer} asks again ({key})',
    goal: 'Goal: {goal}',
    shortest: 'Show me the shortest way (s)', auto: 'play it by itself', speed: 'speed',
    slow: 'slow', normal: 'normal', fast: 'fast', anyway: 'Is there any way? (a)',
    shortest_progress: 'the checker\'s shortest way: step {played} of {of}',
    anyway_running: 'exploring up to {n} schedules of this cell on this stack…',
    anyway_found: 'Yes: schedule {n} of the exploration broke it ({ledger}), in {steps}.',
    anyway_none: 'No schedule of {n} explored broke it.',
    anyway_failed: 'the exploration failed: {error}',
    starting: 'starting a run on this stack…', moving: 'taking the step…',
    over: 'The run is over.',
    violation: 'You broke it: {ledger}.', safe: 'Nothing broke: {ledger}.',
    checker_breaks: 'The checker breaks "{property}" in {steps} of its model; your run took {taken} on this stack.',
    checker_played: 'The checker breaks "{property}" in {steps} of its model; its way, played on this stack, took {taken}.',
    checker_safe: 'The checker finds no schedule that breaks this cell: it explored all {states} states of its model. "Is there any way?" tries schedules on this stack.',
    par_set: 'Par for this cell on this stack: {par}.',
    par_at: 'You broke it at par: {taken}, as the checker\'s way.',
    par_over: 'You broke it in {taken}: {n} over par ({par}, the checker\'s way on this stack).',
    par_under: 'You broke it in {taken}: {n} under par ({par})!',
    par_unknown: 'You broke it in {taken}. Par is not known on this stack yet: the checker\'s way (s), played to its end, sets it.',
    history: 'The history checker, from what the buyers were told alone: {verdict}.',
    disagreement: 'The two judges disagree: {why}.',
    refused: 'refused: {detail}', failed: 'the run failed: {error}',
    ask_token: 'Admin token (printed by stocklock up):',
    need_token: 'Step mode needs the admin token that stocklock up prints, or a seat: in a class, ask the teacher for the join link.',
    seat_gone: 'Your seat is gone (the classroom was closed, or it sat idle): follow the join link again.',
    slow_down: 'Too many steps at once: wait a moment and press again.',
    bad_token: 'The admin token was refused; it will be asked again.',
    unreachable: 'the stack does not answer: {error}',
    fault_Vanish: 'delete the lock ({key})', fault_Expire: 'let the lease run out ({key})',
    fault_Crash: 'crash {buyer} ({key})', fault_Freeze: 'freeze {buyer} ({key})',
    fault_Late: '{buyer}\'s renewal comes late ({key})', fault_Restart: 'Redis restarts empty ({key})',
    fault_SlowVote: 'a slow node ({key})', fault_ClaimRunsOut: 'the request id\'s claim runs out ({key})',
    fault_other: '{name} ({key})',
    what_before_acquire: 'take the lock', what_after_setnx: 'EXPIRE the lock key (SETNX done)',
    what_after_acquire: 'GET stock', what_after_read: 'do the business work',
    what_before_check: 'ask whether it still holds the lock', what_before_write: 'SET stock and record the sale',
    what_before_release: 'release the lock', what_after_release: 'answer the buyer',
    what_renewal: 'renew the lease', what_renewed: 'learn the renewal\'s outcome',
    what_after_grant: 'queue its key', what_queued: 'learn its turn', what_before_wait: 'WAIT for a replica',
    what_script: 'run the sale\'s one script (check, DECR, record)',
    what_no_lock: 'GET stock (there is no lock to take)',
    bad_body: 'the server could not read what the page sent; reload the page',
  },
  zh: {
    title: '单步模式', subtitle: '由你来调度',
    nav_dashboard: '仪表盘', nav_lessons: '课程', nav_timeline: '时间线',
    cell: '变体与场景', buyers: '买家数', start: '开始 (n)', again: '从头再来 (n)',
    faults: '此刻可注入的故障', stores: '存储里的状态', steps_taken: '已走的步骤',
    timeline: '临界区', served_by: '本页面由实例提供:',
    remaining: '剩余', sold: '已售', oversold: '超卖', holder: '锁持有者', ttl: '锁 TTL', fence: '栅栏令牌',
    none: '无', no_ttl: '没有 TTL:永不过期', ms: '{n} 毫秒',
    waiting: '停在 {gate}', on_its_way: '在路上', waits_for_lock: '等待锁', frozen: '冻结在 {gate}',
    crashed: '已崩溃:不会再继续', answered: '已应答 {status} {reason}',
    through: '经过实例 {instance}', read: '读到的库存:{n}',
    got_unit: '买到第 {unit} 件:成交 (200)', got_sold_out: '被告知售罄 (409)',
    got_busy: '被拒绝:{why} (429)', got_unknown: '被告知“未知”:可能卖出了,也可能没有 (503)',
    got_nothing: '没有应答:连接断了', got_other: '应答 {status} {reason}',
    why_lock_held: '锁被别人持有', why_wait_timed_out: '等锁等得太久',
    why_lock_lost: '写之前锁已经没了', why_stale_token: '看到了更新的 fencing token',
    why_in_progress: '同一个请求 id 正在处理', why_reset: '库存在它之下被重置',
    why_version_conflict: '库存每次都在它之下变了', why_not_replicated: '没有副本确认它的锁',
    why_no_quorum: '同意加锁的 Redlock 节点太少', why_other: '{reason}',
    steps_one: '{n} 步', steps_many: '{n} 步',
    next: '下一步:{what}', went: '{buyer} 从 {gate} 继续', go: '放 {buyer} 走 ({key})', retry: '{buyer} 重试 ({key})',
    goal: '目标:{goal}',
    shortest: '给我看最短的路 (s)', auto: '自动播放', speed: '速度',
    slow: '慢', normal: '中', fast: '快', anyway: '有没有办法弄坏它?(a)',
    shortest_progress: '模型检查器的最短路径:第 {played} / {of} 步',
    anyway_running: '正在当前环境上探索这个格子,最多 {n} 个调度…',
    anyway_found: '有:探索的第 {n} 个调度弄坏了它({ledger}),用了 {steps}。',
    anyway_none: '探索的 {n} 个调度都没有弄坏它。',
    anyway_failed: '探索失败:{error}',
    starting: '正在当前环境上开始…', moving: '正在执行这一步…',
    over: '这一轮结束了。',
    violation: '你把它弄坏了:{ledger}。', safe: '没有出错:{ledger}。',
    checker_breaks: '模型检查器在它的模型里用 {steps}打破了「{property}」;你在这套环境上用了 {taken}。',
    checker_played: '模型检查器在它的模型里用 {steps}打破了「{property}」;它的路径在这套环境上走了 {taken}。',
    checker_safe: '模型检查器找不到能打破这个格子的调度:它搜遍了模型的全部 {states} 个状态。“有没有办法弄坏它?”会在这套环境上尝试各种调度。',
    par_set: '这个格子在这套环境上的标准步数:{par}。',
    par_at: '你用标准步数弄坏了它:{taken},和模型检查器的路径一样。',
    par_over: '你用了 {taken}:比标准步数({par},检查器的路径在这套环境上)多 {n} 步。',
    par_under: '你用了 {taken}:比标准步数({par})少 {n} 步!',
    par_unknown: '你用了 {taken}。这套环境上还不知道标准步数:把检查器的路径(s)走完就能定下来。',
    history: '历史检查器只看买家得到的回答:{verdict}。',
    disagreement: '两个裁判的结论不一致:{why}。',
    refused: '被拒绝:{detail}', failed: '运行失败:{error}',
    ask_token: '管理令牌(stocklock up 启动时打印):',
    need_token: '单步模式需要 stocklock up 打印的管理令牌,或者一个座位:上课时请向老师要加入链接。',
    seat_gone: '你的座位已经没有了(教室被关闭,或者闲置太久):请重新打开加入链接。',
    slow_down: '操作太快了:稍等一下再按。',
    bad_token: '管理令牌被拒绝,下次操作时会重新询问。',
    unreachable: '环境没有响应:{error}',
    fault_Vanish: '删除锁 ({key})', fault_Expire: '让租约到期 ({key})',
    fault_Crash: '让 {buyer} 崩溃 ({key})', fault_Freeze: '冻结 {buyer} ({key})',
    fault_Late: '{buyer} 的续期迟到 ({key})', fault_Restart: 'Redis 清空重启 ({key})',
    fault_SlowVote: '一个慢节点 ({key})', fault_ClaimRunsOut: '请求 id 的占用到期 ({key})',
    fault_other: '{name} ({key})',
    what_before_acquire: '加锁', what_after_setnx: '给锁设置 EXPIRE(SETNX 已完成)',
    what_after_acquire: 'GET 库存', what_after_read: '执行业务逻辑',
    what_before_check: '确认自己仍持有锁', what_before_write: 'SET 库存并记账',
    what_before_release: '释放锁', what_after_release: '返回应答',
    what_renewal: '续期租约', what_renewed: '得知续期结果',
    what_after_grant: '把自己的 key 排进队列', what_queued: '得知轮到自己', what_before_wait: 'WAIT 副本',
    what_script: '执行整个销售脚本(检查、DECR、记账)',
    what_no_lock: 'GET 库存(没有锁可拿)',
    bad_body: '服务器读不懂页面发送的内容;请重新加载页面',
  },
};

const FAULT_KEYS = 'qwertyuiop';
const SCRIPTED = ['lua', 'lua-batch', 'lua-sharded', 'lua-then-queue', 'lua-stream'];
// The variants whose buyers take no lock: their first gate is before the read.
const UNLOCKED = ['none'];

let view = null;
let busy = false;

function t(key, vars) {
  return StocklockPage.translate(I18N, key, vars);
}

function say(text) {
  document.getElementById('message').textContent = text || '';
}

// "1 step", "3 steps".
function stepCount(n) {
  return t(n === 1 ? 'steps_one' : 'steps_many', { n });
}

// Why the server refused, in the page's words: a body it could not read
// is the page's fault, not the learner's (its text goes to the console).
function refusal(json, status) {
  if (json.error === 'invalid_input' && String(json.detail || '').startsWith('body:')) {
    console.info('step mode: the server could not read the body:', json.detail);
    return t('bad_body');
  }
  return t('refused', { detail: json.detail || status });
}

function el(tag, attrs, text) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs || {})) node.setAttribute(name, value);
  if (text !== undefined) node.textContent = text;
  return node;
}

// A classroom seat (its cookie) or the teacher (the admin token).
function seated() {
  return Boolean(document.getElementById('step').dataset.seat);
}

async function admin(method, path, body) {
  const token = seated() ? null : StocklockPage.adminToken(t('ask_token'));
  if (!token && !seated()) {
    say(t('need_token'));
    return null;
  }
  const headers = { 'Content-Type': 'application/json' };
  if (token) headers.Authorization = `Bearer ${token}`;
  let response;
  try {
    response = await fetch(path, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      cache: 'no-store',
    });
  } catch (err) {
    say(t('unreachable', { error: err.message }));
    return null;
  }
  if (response.status === 401) {
    if (seated()) {
      say(t('seat_gone'));
      return null;
    }
    StocklockPage.forgetToken();
    say(t('bad_token'));
    return null;
  }
  if (response.status === 429) {
    say(t('slow_down'));
    return null;
  }
  const json = await response.json().catch(() => ({}));
  if (!response.ok) {
    say(refusal(json, response.status));
    return null;
  }
  return json;
}

// What the buyer at `gate` does when it is let go.
function nextWhat(gate) {
  const cell = view ? view.variant : '';
  if (SCRIPTED.includes(cell) && gate === 'before_acquire') return t('what_script');
  if (UNLOCKED.includes(cell) && gate === 'before_acquire') return t('what_no_lock');
  const base = gate.split(':')[0];
  const key = `what_${base}`;
  const said = t(key);
  return said === key ? gate : said;
}

function choiceLabel(choice, key) {
  if (choice.Release) return t('go', { buyer: choice.Release.buyer, key });
  if (choice.Retry) return t('retry', { buyer: choice.Retry.buyer, key });
  const name = typeof choice === 'string' ? choice : Object.keys(choice)[0];
  const fields = typeof choice === 'string' ? {} : choice[name];
  const label = t(`fault_${name}`, { ...fields, key });
  return label === `fault_${name}` ? t('fault_other', { name, key }) : label;
}

// `text` as nodes, each `ident` in it (a gate's name) set as code: an
// identifier, the same in every language.
function codeIn(text, ident) {
  if (!ident || !text.includes(ident)) return [text];
  const nodes = [];
  text.split(ident).forEach((part, i) => {
    if (i > 0) nodes.push(el('code', {}, ident));
    if (part) nodes.push(part);
  });
  return nodes;
}

// A step taken, in words.
function stepLabel(choice) {
  if (choice.Release) return t('went', { buyer: choice.Release.buyer, gate: choice.Release.gate });
  return choiceLabel(choice, '').replace(/ \(\)$/, '');
}

// A buyer's key is its number (A is 1); its first offered step goes.
function buyerOf(choice) {
  return (choice.Release && choice.Release.buyer) || (choice.Retry && choice.Retry.buyer) || null;
}

// How the run compares with par (the checker's way, as played on this
// stack): for a run that broke the cell, or the checker's own.
function parLine(v) {
  if (!v.checker_breaks) return '';
  const taken = view.steps.length;
  if (view.by_checker) return v.par ? t('par_set', { par: stepCount(v.par) }) : '';
  if (!v.violation) return '';
  if (!v.par) return t('par_unknown', { taken: stepCount(taken) });
  if (taken === v.par) return t('par_at', { taken: stepCount(taken) });
  const n = Math.abs(taken - v.par);
  return t(taken > v.par ? 'par_over' : 'par_under', { taken: stepCount(taken), n, par: stepCount(v.par) });
}

// A buyer's answer in words: what it got, and why not.
function answerWords(lane) {
  if (lane.status === 200 && lane.unit !== undefined) return t('got_unit', { unit: lane.unit });
  if (lane.status === 409) return t('got_sold_out');
  if (lane.status === 429) {
    const said = t(`why_${lane.reason}`);
    return t('got_busy', { why: said === `why_${lane.reason}` ? t('why_other', { reason: lane.reason || '?' }) : said });
  }
  if (lane.status === 503 && lane.reason === 'unknown') return t('got_unknown');
  if (!lane.status) return t('got_nothing');
  return t('got_other', { status: lane.status, reason: lane.reason || '' });
}

// What a buyer's answer was: `sold`, `refused` (sold out, busy) or `other`.
function answerKind(lane) {
  if (lane.status === 200) return 'sold';
  if (lane.status === 409 || lane.status === 429) return 'refused';
  return 'other';
}

// Clears what the page shows of a run: nothing of an earlier cell stays
// on screen under a new one.
function clearRun() {
  const main = document.getElementById('step');
  for (const key of ['run', 'sku', 'version', 'over', 'steps']) delete main.dataset[key];
  for (const field of document.querySelectorAll('#state [data-field]')) field.textContent = '–';
  document.getElementById('steps').replaceChildren();
  const verdict = document.getElementById('verdict');
  verdict.hidden = true;
  verdict.replaceChildren();
  delete verdict.dataset.violation;
  const timeline = document.getElementById('timeline');
  if (timeline.__stocklockTimeline) timeline.__stocklockTimeline.destroy();
  timeline.replaceChildren();
  const anyway = document.getElementById('anyway-result');
  anyway.textContent = '';
  delete anyway.dataset.state;
  delete anyway.dataset.found;
  document.getElementById('shortest-progress').textContent = '';
}

function render() {
  const main = document.getElementById('step');
  const lanes = document.getElementById('lanes');
  lanes.replaceChildren();
  const faults = document.getElementById('faults');
  faults.replaceChildren();
  document.getElementById('start').textContent = t(view ? 'again' : 'start');
  if (!view) {
    clearRun();
    if (typeof StepLevels !== 'undefined') StepLevels.after(null);
    return;
  }
  main.dataset.run = view.id;
  main.dataset.sku = view.sku;
  main.dataset.version = String(view.version);
  main.dataset.over = String(view.over);
  main.dataset.steps = String(view.steps.length);
  for (const [i, lane] of view.lanes.entries()) {
    const box = el('article', { class: 'lane', 'data-buyer': lane.buyer, 'data-state': lane.state, 'data-gate': lane.gate || '' });
    if (lane.state === 'answered') box.dataset.answer = answerKind(lane);
    box.append(el('h3', {}, lane.buyer));
    if (lane.instance) box.append(el('p', { class: 'lane-via', 'data-field': 'instance' }, t('through', { instance: lane.instance })));
    if (lane.read !== undefined) box.append(el('p', { class: 'lane-read', 'data-field': 'read' }, t('read', { n: lane.read })));
    const said = lane.state === 'answered' ? answerWords(lane) : t(lane.state, { gate: lane.gate || '' });
    const where = el('p', { class: 'lane-state', 'data-field': 'said' });
    where.append(...codeIn(said, lane.state === 'answered' ? '' : lane.gate));
    box.append(where);
    if (lane.gate && lane.state === 'waiting') box.append(el('p', { class: 'lane-next' }, t('next', { what: nextWhat(lane.gate) })));
    const mine = view.releases.filter((c) => buyerOf(c) === lane.buyer);
    for (const choice of mine.slice(0, 1)) {
      const button = el('button', { type: 'button', class: 'primary', 'data-key': String(i + 1) }, choiceLabel(choice, i + 1));
      button.addEventListener('click', () => take(choice));
      box.append(button);
    }
    lanes.append(box);
  }
  for (const [i, choice] of view.faults.entries()) {
    const key = FAULT_KEYS[i] || '';
    const kind = typeof choice === 'string' ? choice : Object.keys(choice)[0];
    const on = typeof choice === 'string' ? {} : choice[kind];
    const button = el('button', { type: 'button', 'data-key': key, 'data-fault': kind, 'data-buyer': on.buyer || '' }, choiceLabel(choice, key));
    button.addEventListener('click', () => take(choice));
    faults.append(button);
  }
  const state = view.state || {};
  const lock = state.lock || {};
  const field = (name, value) => { document.querySelector(`#state [data-field="${name}"]`).textContent = value; };
  field('remaining', state.remaining ?? '–');
  field('sold', state.sold ?? '–');
  field('oversold', state.oversold ?? '–');
  field('holder', lock.held ? (lock.holder || '?') : t('none'));
  field('ttl', !lock.held ? '–' : lock.no_ttl ? t('no_ttl') : t('ms', { n: lock.ttl_ms }));
  field('fence', view.fence ?? '–');
  const steps = document.getElementById('steps');
  steps.replaceChildren(...view.steps.map((s) => {
    const li = el('li');
    li.append(...codeIn(stepLabel(s), s.Release && s.Release.gate));
    return li;
  }));
  const verdict = document.getElementById('verdict');
  verdict.hidden = !view.over;
  verdict.replaceChildren();
  if (view.over) {
    verdict.append(el('p', {}, t('over')));
    if (view.error) verdict.append(el('p', { class: 'bad' }, t('failed', { error: view.error })));
    const v = view.verdict;
    if (v) {
      verdict.dataset.violation = String(v.violation);
      verdict.append(el('p', { class: v.violation ? 'bad' : 'good' }, t(v.violation ? 'violation' : 'safe', { ledger: StocklockPage.said(v, 'ledger') })));
      const compared = view.by_checker ? 'checker_played' : 'checker_breaks';
      // The property in the page's language (the server says it in both).
      const breaks = StocklockPage.lang() === 'zh' && v.checker_breaks_zh ? v.checker_breaks_zh : v.checker_breaks;
      verdict.append(el('p', { 'data-field': 'checker' }, v.checker_breaks
        ? t(compared, { property: breaks, steps: stepCount(v.checker_steps), taken: stepCount(view.steps.length) })
        : t('checker_safe', { states: v.checker_states })));
      const par = parLine(v);
      if (par) verdict.append(el('p', { 'data-field': 'par', class: 'par' }, par));
      verdict.append(el('p', { 'data-field': 'history' }, t('history', { verdict: StocklockPage.said(v, 'history') })));
      if (v.disagreement) verdict.append(el('p', { class: 'bad' }, t('disagreement', { why: StocklockPage.said(v, 'disagreement') })));
    }
  }
  document.getElementById('shortest-progress').textContent = view.shortest
    ? t('shortest_progress', { played: view.shortest[0], of: view.shortest[1] }) : '';
  drawTimeline();
  if (typeof StepLevels !== 'undefined') StepLevels.after(view);
}

async function drawTimeline() {
  const box = document.getElementById('timeline');
  if (!view || !window.StocklockTimeline) return;
  try {
    const response = await fetch(`/api/timeline?sku=${encodeURIComponent(view.sku)}`, { cache: 'no-store' });
    if (!response.ok) return;
    const data = window.StocklockTimeline.parse(await response.text());
    window.StocklockTimeline.mount(box, data, { lang: StocklockPage.lang() });
  } catch (_) {
    // The timeline is a picture of the run: the run goes on without it.
  }
}

async function start() {
  if (busy) return;
  busy = true;
  say(t('starting'));
  const [variant, scenario] = document.getElementById('cell').value.split('/');
  if (view && !view.over) await admin('POST', `/api/step/${view.id}`, 'end');
  const buyers = Number(document.getElementById('buyers').value);
  const started = await admin('POST', '/api/step', { variant, scenario, buyers });
  busy = false;
  if (!started) return;
  view = started;
  say('');
  render();
}

async function take(choice) {
  await send({ take: choice });
}

// Sends one command to the run: the view after it, or null.
async function send(command) {
  if (busy || !view || view.over) return null;
  busy = true;
  say(t('moving'));
  const next = await admin('POST', `/api/step/${view.id}`, command);
  busy = false;
  if (!next) return null;
  view = next;
  say('');
  render();
  return next;
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// The checker's shortest way, from a fresh run: one step per press, or
// every step by itself at the chosen speed.
async function shortest() {
  if (busy) return;
  if (!view || view.over || (view.steps.length > 0 && !view.shortest)) {
    await start();
    if (!view) return;
  }
  for (;;) {
    if (!(await send('shortest'))) return;
    if (view.over || !document.getElementById('auto').checked) return;
    await sleep(Number(document.getElementById('speed').value));
  }
}

// An exploration of the cell on this stack, until it says what it found.
async function anyWay() {
  const picked = document.getElementById('cell').value;
  const [variant, scenario] = picked.split('/');
  // The run on screen, of another cell, is not this cell's.
  if (view && `${view.variant}/${view.scenario}` !== picked) {
    view = null;
    say('');
    render();
  }
  const line = document.getElementById('anyway-result');
  let way = await admin('POST', '/api/admin/step/anyway', { variant, scenario });
  while (way && way.state === 'running') {
    line.textContent = t('anyway_running', { n: way.schedules });
    await sleep(500);
    way = await admin('GET', `/api/admin/step/anyway?variant=${encodeURIComponent(variant)}&scenario=${encodeURIComponent(scenario)}`);
  }
  if (!way) return;
  line.dataset.state = way.state;
  line.dataset.found = String(way.found);
  line.textContent = way.state === 'failed' ? t('anyway_failed', { error: way.error })
    : way.found ? t('anyway_found', { n: way.schedules, ledger: StocklockPage.said(way, 'ledger'), steps: stepCount(way.steps) })
      : t('anyway_none', { n: way.schedules });
}

function showGoal() {
  const main = document.getElementById('step');
  const goal = StocklockPage.lang() === 'zh' ? main.dataset.goalZh : main.dataset.goal;
  const line = document.getElementById('goal');
  line.hidden = !goal;
  line.textContent = goal ? t('goal', { goal }) : '';
}

document.addEventListener('DOMContentLoaded', () => {
  StocklockPage.applyLang(t);
  showGoal();
  document.getElementById('pick').addEventListener('submit', (event) => {
    event.preventDefault();
    start();
  });
  // A new pick ends the run on screen: it was of the cell picked before.
  for (const id of ['cell', 'buyers']) {
    document.getElementById(id).addEventListener('change', () => {
      if (view && !view.over) admin('POST', `/api/step/${view.id}`, 'end');
      view = null;
      say('');
      render();
    });
  }
  document.getElementById('shortest').addEventListener('click', shortest);
  const anyway = document.getElementById('anyway');
  if (anyway) anyway.addEventListener('click', anyWay);
  document.getElementById('lang').addEventListener('click', () => {
    StocklockPage.toggleLang();
    StocklockPage.applyLang(t);
    showGoal();
    render();
    if (typeof StepLevels !== 'undefined') StepLevels.mark();
  });
  document.addEventListener('keydown', (event) => {
    if (event.ctrlKey || event.metaKey || event.altKey) return;
    if (event.target && ['SELECT', 'INPUT', 'TEXTAREA'].includes(event.target.tagName)) return;
    const keys = { n: start, s: shortest };
    if (!seated()) keys.a = anyWay;
    if (keys[event.key]) {
      event.preventDefault();
      keys[event.key]();
      return;
    }
    const button = document.querySelector(`main button[data-key="${event.key}"]`);
    if (button) {
      event.preventDefault();
      button.click();
    }
  });
});
