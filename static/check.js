// stocklock's model checker on a page: one cell's verdict from
// /api/check, its bounds, and its shortest counterexample drawn by
// timeline.js (the live timeline's drawing) with its steps as a list.
// Used by the lessons (each step) and the dashboard (a card's scenarios).
// The checker's own words (each step, the property, the model's and the
// claim's behaviour) come from the server in both languages: `text` and
// `text_zh`, `broken` and `broken_zh`, ...; a Chinese page shows the `_zh`.
//
//   StocklockCheck.show(element, variant, scenario) -> Promise (loads once, then draws)
//   StocklockCheck.redraw(element)                  -> draws again, in the page's language
//
// After a draw, `element` carries data-state ("loading", "done",
// "unmodelled" or "failed"), and when done data-model (the model's
// verdict), data-steps (the counterexample's length, 0 for none) and
// data-states (the states the checker visited).
'use strict';

const StocklockCheck = (() => {
  const I18N = {
    en: {
      title: 'The checker',
      loading: 'asking the checker…',
      shortest: 'The experiment showed it once; the checker shows the shortest way it happens: {n} steps.',
      none: 'No schedule within these bounds breaks it ({states} states).',
      witness: 'The verdict rests on a schedule the checker found: "{property}", in {n} steps.',
      vacuous: 'No schedule within these bounds shows any verdict: the cell is vacuous.',
      verdict: 'model: {model} · claim: {claim}',
      disagrees: 'the model disagrees with the claim',
      breaks: 'the property it breaks: "{property}"',
      bounds: 'bounds: {list}', bounds_sep: ', ',
      unmodelled: 'The checker has no model of this cell: the live experiment is the only evidence here.',
      failed: "the checker's verdict could not be loaded: {error}",
      no_timeline_js: 'the drawing is not available (timeline.js did not load)',
      tick: 'tick {at}',
      b_buyers: '{v} buyers', b_stock: 'stock {v}', b_lease: 'lease {v} ticks', b_work: 'work {v} ticks',
      b_horizon: 'up to tick {v}', b_one_process: 'one process', b_crashes: '{v} crash',
      b_pauses: '{v} freeze', b_vanishes: '{v} lock deleted', b_late_renewals: '{v} late renewals',
      b_slow_votes: '{v} slow node ticks', b_skew: 'a clock {v} ticks ahead',
      b_freeze: 'frozen {v} tick', b_nodes: '{v} Redlock nodes', b_nodes_down: '{v} down',
      b_restarts: 'up to {v} restarts', b_failovers: '{v} failover', b_wait_replicas: 'WAIT for a replica',
      b_one_request: 'every buyer retrying one request id', b_outages: '{v} Redis outage',
      b_cutoffs: '{v} calls cut off (told unknown, retried by id)',
      b_orders: 'orders through the stream, the worker and PostgreSQL',
      b_worker_crashes: '{v} worker death before its XACK', b_postgres_stops: '{v} PostgreSQL stop',
      b_reservations: 'reservations paid or expired', b_data_losses: '{v} Redis restart with nothing kept',
      b_db_crashes: '{v} PostgreSQL crash (retried by id)', b_lost_answers: "{v} commit's answer lost (retried by id)",
    },
    zh: {
      title: '模型检查',
      loading: '正在询问模型检查器…',
      shortest: '实验让它发生了一次;模型检查器给出它发生的最短路径:{n} 步。',
      none: '在这些边界内,没有任何调度顺序能破坏它(共 {states} 个状态)。',
      witness: '这个结论基于检查器找到的一个调度:“{property}”,共 {n} 步。',
      vacuous: '在这些边界内,没有任何调度能给出结论:这个格子是空的。',
      verdict: '模型:{model} · 预期:{claim}',
      disagrees: '模型与预期不一致',
      breaks: '被破坏的性质:“{property}”',
      bounds: '边界:{list}', bounds_sep: ',',
      unmodelled: '模型检查器没有这个格子的模型:这里只有实际实验这一份证据。',
      failed: '无法加载模型检查结果:{error}',
      no_timeline_js: '无法绘图(timeline.js 没有加载)',
      tick: '第 {at} 拍',
      b_buyers: '{v} 个买家', b_stock: '库存 {v}', b_lease: '租约 {v} 拍', b_work: '业务耗时 {v} 拍',
      b_horizon: '最多到第 {v} 拍', b_one_process: '同一个进程', b_crashes: '{v} 次崩溃',
      b_pauses: '{v} 次冻结', b_vanishes: '锁被删除 {v} 次', b_late_renewals: '续约迟到 {v} 次', b_slow_votes: '节点慢 {v} 拍', b_skew: '一个时钟快 {v} 拍',
      b_freeze: '冻结 {v} 拍', b_nodes: '{v} 个 Redlock 节点', b_nodes_down: '{v} 个宕机',
      b_restarts: '最多 {v} 次重启', b_failovers: '{v} 次故障转移', b_wait_replicas: 'WAIT 等待一个副本',
      b_one_request: '所有买家重试同一个请求 ID', b_outages: 'Redis 宕机 {v} 次',
      b_cutoffs: '{v} 次调用被切断(答复未知,按 ID 重试)',
      b_orders: '订单经过消息流、工作进程和 PostgreSQL',
      b_worker_crashes: '工作进程在 XACK 之前死亡 {v} 次', b_postgres_stops: 'PostgreSQL 停止 {v} 次',
      b_reservations: '预留被支付或过期', b_data_losses: 'Redis 丢失全部数据重启 {v} 次',
      b_db_crashes: 'PostgreSQL 崩溃 {v} 次(按 ID 重试)', b_lost_answers: '提交的答复丢失 {v} 次(按 ID 重试)',
    },
  };
  const t = (key, vars) => StocklockPage.translate(I18N, key, vars);
  // A field the server says in both languages (`key` and `key_zh`), in the
  // page's: English where the Chinese is missing.
  const said = (object, key) => {
    const zh = object[`${key}_zh`];
    return StocklockPage.lang() === 'zh' && zh ? zh : object[key];
  };
  const node = (tag, className, text) => {
    const el = document.createElement(tag);
    if (className) el.className = className;
    if (text !== undefined) el.textContent = text;
    return el;
  };

  // The bounds that matter (not zero, not false, not null), in words;
  // the order pipeline's faults are an object of their own.
  function bounds(b) {
    const order = ['buyers', 'stock', 'lease', 'work', 'horizon', 'one_process', 'crashes', 'pauses',
      'freeze', 'vanishes', 'late_renewals', 'slow_votes', 'skew', 'nodes', 'nodes_down', 'restarts', 'failovers', 'wait_replicas',
      'one_request', 'outages', 'cutoffs', 'db_crashes', 'lost_answers', 'orders', 'worker_crashes',
      'postgres_stops', 'reservations', 'data_losses'];
    const flat = Object.assign({}, b, b.orders ? b.orders : {});
    return order.filter((k) => flat[k]).map((k) => t(`b_${k}`, { v: flat[k] })).join(t('bounds_sep'));
  }

  function draw(element) {
    const got = element.__stocklockCheck;
    const previous = element.querySelector('.check-timeline');
    if (previous && previous.__stocklockTimeline) previous.__stocklockTimeline.destroy();
    element.classList.add('check');
    const title = node('h3', 'check-title', t('title'));
    if (!got || got.loading) {
      element.dataset.state = 'loading';
      element.replaceChildren(title, node('p', 'check-line', t('loading')));
      return;
    }
    if (got.error) {
      element.dataset.state = 'failed';
      element.replaceChildren(title, node('p', 'check-line error', t('failed', { error: got.error })));
      return;
    }
    if (!got.answer) {
      element.dataset.state = 'unmodelled';
      element.replaceChildren(title, node('p', 'check-line', t('unmodelled')));
      return;
    }
    const v = got.answer.verdict;
    const steps = v.trace || [];
    const witness = v.witness || [];
    // The steps drawn: the counterexample, or the witness the verdict rests on.
    const shown = steps.length ? steps : witness;
    const parts = [title];
    parts.push(node('p', 'check-line', steps.length
      ? t('shortest', { n: steps.length })
      : t('none', { states: v.states })));
    if (!steps.length) {
      parts.push(node('p', 'check-line', witness.length
        ? t('witness', { property: said(v, 'witnessed'), n: witness.length })
        : t('vacuous')));
    }
    const verdict = node('p', 'check-verdict', t('verdict', { model: said(v, 'model'), claim: said(v, 'claim') }));
    if (!v.agrees) verdict.append(' · ', node('b', 'bad', t('disagrees')));
    if (v.broken) verdict.append(' · ', t('breaks', { property: said(v, 'broken') }));
    parts.push(verdict, node('p', 'check-bounds', t('bounds', { list: bounds(v.bounds) })));
    if (shown.length) {
      const drawing = node('div', 'check-timeline timeline');
      const list = node('ol', 'check-steps');
      // The model's clock, as the drawing's axis counts it: named where
      // it moves, not on every step.
      let clock = null;
      for (const step of shown) {
        const li = node('li', null, said(step, 'text'));
        if (step.at !== clock) li.prepend(node('small', 'check-tick', `${t('tick', { at: step.at })} · `));
        clock = step.at;
        list.append(li);
      }
      parts.push(drawing, list);
      element.replaceChildren(...parts);
      if (got.answer.timeline && window.StocklockTimeline) {
        try {
          window.StocklockTimeline.mount(drawing, got.answer.timeline, { lang: StocklockPage.lang() });
        } catch (err) {
          drawing.textContent = t('failed', { error: err && err.message ? err.message : String(err) });
        }
      } else {
        drawing.textContent = t('no_timeline_js');
      }
    } else {
      element.replaceChildren(...parts);
    }
    element.dataset.state = 'done';
    element.dataset.model = v.model;
    element.dataset.steps = String(steps.length);
    element.dataset.states = String(v.states);
  }

  async function show(element, variant, scenario) {
    // Loaded once; a failure is tried again on the next show.
    if (element.__stocklockCheck && !element.__stocklockCheck.error) return;
    element.__stocklockCheck = { loading: true };
    draw(element);
    const query = `variant=${encodeURIComponent(variant)}&scenario=${encodeURIComponent(scenario)}`;
    let got;
    try {
      const response = await fetch(`/api/check?${query}`);
      const answer = await response.json().catch(() => ({}));
      if (response.ok) got = { answer };
      else if (response.status === 404) got = { answer: null };
      else got = { error: answer.detail || answer.error || `${response.status}` };
    } catch (err) {
      got = { error: err && err.message ? err.message : String(err) };
    }
    element.__stocklockCheck = got;
    draw(element);
  }

  return { show, redraw: draw };
})();
