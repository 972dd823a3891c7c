// stocklock's classroom page (the teacher's): opens and closes the
// classroom, and shows every seat, polled each second: the cell it is on,
// its steps, whether it broke it, whether it is stuck, the cells it broke.
'use strict';

const I18N = {
  en: {
    title: 'classroom', subtitle: 'a class on one stack',
    nav_dashboard: 'dashboard', nav_lessons: 'lessons', nav_step: 'step mode',
    join_title: 'Seat the class', open: 'Open the classroom', close: 'Close the classroom',
    is_open: 'open: students can join', is_closed: 'closed: nobody can join or use a seat',
    seats: 'Seats', col_seat: 'seat', col_now: 'now', col_solved: 'cells broken', col_seen: 'last seen',
    none_yet: 'nobody has joined yet', idle: 'no run yet',
    running: '{cell}: {steps} steps', broke: '{cell}: broke it in {steps} steps', safe_end: '{cell}: over, nothing broke',
    stuck: 'stuck on {cell} ({steps} steps, no move for {minutes} min)',
    ago: '{n} s ago', served_by: 'page served by instance',
    ask_token: 'Admin token (printed by stocklock up):', need_token: 'The classroom page needs the admin token.',
    refused: 'refused: {detail}',
  },
  zh: {
    title: '教室', subtitle: '一套环境上的一个班',
    nav_dashboard: '仪表盘', nav_lessons: '课程', nav_step: '单步模式',
    join_title: '给学员安排座位', open: '打开教室', close: '关闭教室',
    is_open: '已打开:学员可以加入', is_closed: '已关闭:没人能加入或使用座位',
    seats: '座位', col_seat: '座位', col_now: '当前', col_solved: '已弄坏的格子', col_seen: '最近活动',
    none_yet: '还没有人加入', idle: '还没开始',
    running: '{cell}:{steps} 步', broke: '{cell}:用 {steps} 步弄坏了', safe_end: '{cell}:结束了,没有出错',
    stuck: '卡在 {cell}({steps} 步,{minutes} 分钟没有动)',
    ago: '{n} 秒前', served_by: '本页面由实例提供:',
    ask_token: '管理令牌(stocklock up 启动时打印):', need_token: '教室页面需要管理令牌。',
    refused: '被拒绝:{detail}',
  },
};

const t = (key, vars) => StocklockPage.translate(I18N, key, vars);
let last = null;

async function call(method, body) {
  const token = StocklockPage.adminToken(t('ask_token'));
  if (!token) {
    document.getElementById('message').textContent = t('need_token');
    return null;
  }
  const response = await fetch('/api/admin/classroom', {
    method,
    headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${token}` },
    body: body === undefined ? undefined : JSON.stringify(body),
    cache: 'no-store',
  }).catch(() => null);
  if (!response) return null;
  if (response.status === 401) StocklockPage.forgetToken();
  const json = await response.json().catch(() => ({}));
  document.getElementById('message').textContent = response.ok ? '' : t('refused', { detail: json.detail || response.status });
  return response.ok ? json : null;
}

function cellOf(seat) {
  const cell = (seat.cell || '').replace('/', ' · ');
  if (!seat.run) return t('idle');
  if (seat.stuck) {
    const minutes = Math.floor((Date.now() - seat.seen_ms) / 60000);
    return t('stuck', { cell, steps: seat.steps, minutes: Math.max(minutes, 3) });
  }
  if (seat.over) return t(seat.violation ? 'broke' : 'safe_end', { cell, steps: seat.steps });
  return t('running', { cell, steps: seat.steps });
}

function draw(board) {
  last = board;
  const main = document.getElementById('classroom');
  main.dataset.open = String(board.open);
  document.getElementById('switch').textContent = t(board.open ? 'close' : 'open');
  document.getElementById('state').textContent = t(board.open ? 'is_open' : 'is_closed');
  document.getElementById('count').textContent = `(${board.seats.length})`;
  const body = document.getElementById('seats');
  if (!board.seats.length) {
    const row = document.createElement('tr');
    const cell = document.createElement('td');
    cell.colSpan = 4;
    cell.textContent = t('none_yet');
    row.append(cell);
    body.replaceChildren(row);
    return;
  }
  body.replaceChildren(...board.seats.map((seat) => {
    const row = document.createElement('tr');
    row.dataset.seat = seat.id;
    row.dataset.stuck = String(seat.stuck);
    row.dataset.solved = String(seat.solved.length);
    const td = (text, className) => {
      const cell = document.createElement('td');
      cell.textContent = text;
      if (className) cell.className = className;
      return cell;
    };
    const now = td(cellOf(seat), seat.stuck ? 'stuck' : seat.violation ? 'broke' : '');
    now.dataset.field = 'now';
    const solved = document.createElement('td');
    solved.dataset.field = 'solved';
    for (const cell of seat.solved) {
      const code = document.createElement('code');
      code.textContent = cell.replace('/', ' · ');
      solved.append(code, ' ');
    }
    const seen = td(t('ago', { n: Math.max(0, Math.round((Date.now() - seat.seen_ms) / 1000)) }));
    row.append(td(seat.name), now, solved, seen);
    return row;
  }));
}

async function poll() {
  const board = await call('GET');
  if (board) draw(board);
  setTimeout(poll, 1000);
}

document.addEventListener('DOMContentLoaded', () => {
  StocklockPage.applyLang(t);
  document.getElementById('switch').addEventListener('click', async () => {
    const open = !(last && last.open);
    const board = await call('POST', { open });
    if (board) draw(board);
  });
  document.getElementById('lang').addEventListener('click', () => {
    StocklockPage.toggleLang();
    StocklockPage.applyLang(t);
    if (last) draw(last);
  });
  poll();
});
