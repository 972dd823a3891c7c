// stocklock soak: follows a running `stocklock soak` (random faults under
// load) by polling /api/soak every second: its progress, figures, faults by
// kind and violations by variant; "no soak running" on a 404. No framework.
'use strict';

const I18N = {
  en: {
    title: 'soak', subtitle: 'random faults under load',
    nav_dashboard: 'dashboard', nav_lessons: 'lessons', nav_timeline: 'timeline',
    none: 'No soak is running on this stack. Start one:',
    phase: 'phase', seed: 'seed', requests: 'requests', sold: 'sold',
    unknowns: 'unknowns', last_fault: 'last fault',
    faults: 'Faults by kind', violations: 'Violations by variant',
    kind: 'kind', count: 'count', variant: 'variant',
    no_faults: 'no fault struck yet', no_violations: '0 violations',
    served_by: 'page served by instance',
    phase_faults: 'faults', phase_recovering: 'recovering', phase_judging: 'judging', phase_done: 'done',
    progress_faults: '{elapsed} s of {total} s of faults',
    progress_after: 'faults over ({elapsed} s): {phase}',
    resolved: '{unknowns} ({resolved} resolved)',
    unavailable: 'the stack answers {status}: {detail}', unreachable: 'the stack does not answer: {error}',
  },
  zh: {
    title: '浸泡测试', subtitle: '压测中随机注入故障',
    nav_dashboard: '仪表盘', nav_lessons: '课程', nav_timeline: '时间线',
    none: '当前环境上没有正在运行的浸泡测试。这样启动一个:',
    phase: '阶段', seed: '种子', requests: '请求数', sold: '已售',
    unknowns: '结果未知', last_fault: '最近的故障',
    faults: '按类型统计的故障', violations: '按变体统计的违规',
    kind: '类型', count: '次数', variant: '变体',
    no_faults: '还没有注入故障', no_violations: '0 个违规',
    served_by: '本页面由实例提供:',
    phase_faults: '注入故障', phase_recovering: '恢复中', phase_judging: '评判中', phase_done: '已完成',
    progress_faults: '故障阶段 {elapsed} / {total} 秒',
    progress_after: '故障已停止({elapsed} 秒):{phase}',
    resolved: '{unknowns}(已查明 {resolved})',
    unavailable: '环境应答 {status}:{detail}', unreachable: '环境没有响应:{error}',
  },
};

const EVERY_MS = 1000;
let status = null;

function t(key, vars) {
  return StocklockPage.translate(I18N, key, vars);
}

function show(state) {
  document.getElementById('soak').dataset.state = state;
  document.getElementById('none').hidden = state !== 'none';
  document.getElementById('live').hidden = state !== 'running';
}

function field(name, text) {
  document.querySelector(`#live [data-field="${name}"]`).textContent = text;
}

// One row per entry of `counts` ({name: n}); the note instead when empty.
function table(id, empty, counts) {
  const rows = Object.entries(counts || {}).filter(([, n]) => n > 0);
  const body = document.querySelector(`#${id} tbody`);
  body.replaceChildren(...rows.map(([name, n]) => {
    const row = document.createElement('tr');
    for (const text of [name, String(n)]) {
      const cell = document.createElement('td');
      cell.textContent = text;
      row.append(cell);
    }
    return row;
  }));
  document.getElementById(id).hidden = rows.length === 0;
  document.getElementById(empty).hidden = rows.length > 0;
}

function render() {
  if (!status) return;
  const s = status;
  const total = s.minutes * 60;
  const faulting = s.phase === 'faults';
  const phase = I18N.en[`phase_${s.phase}`] ? t(`phase_${s.phase}`) : s.phase;
  const progress = document.getElementById('progress');
  progress.value = faulting && total > 0 ? Math.min(s.elapsed_s / total, 1) : 1;
  document.getElementById('progress-text').textContent = faulting
    ? t('progress_faults', { elapsed: s.elapsed_s.toFixed(0), total: total.toFixed(0) })
    : t('progress_after', { elapsed: s.elapsed_s.toFixed(0), phase });
  field('phase', phase);
  field('seed', String(s.seed));
  field('requests', String(s.requests));
  field('sold', String(s.sold));
  field('unknowns', t('resolved', { unknowns: s.unknowns, resolved: s.unknowns_resolved }));
  field('last_fault', s.last_fault || '–');
  table('faults', 'no-faults', s.faults);
  table('violations', 'no-violations', s.violations);
}

async function poll() {
  const message = document.getElementById('message');
  try {
    const response = await fetch('/api/soak', { cache: 'no-store' });
    const body = await response.json().catch(() => ({}));
    if (response.status === 204) {
      // No soak is running.
      status = null;
      message.textContent = '';
      show('none');
    } else if (response.ok) {
      status = body;
      message.textContent = '';
      show('running');
      render();
    } else {
      message.textContent = t('unavailable', { status: response.status, detail: body.detail || '' });
    }
  } catch (error) {
    message.textContent = t('unreachable', { error: error.message });
  }
  setTimeout(poll, EVERY_MS);
}

document.addEventListener('DOMContentLoaded', () => {
  StocklockPage.applyLang(t);
  document.getElementById('lang').addEventListener('click', () => {
    StocklockPage.toggleLang();
    StocklockPage.applyLang(t);
    render();
  });
  poll();
});
