// Step mode as a game: every playable cell is a level. A cell whose claim
// is a failure is a "break it" level, won when the stores show the
// failure; the others are "show it can't break" levels. Progress is kept in
// this browser (localStorage), each cell with the fewest steps that broke
// it. Any run has a permalink: the cell and its moves, which replays the
// same run, step by step, on any stack.
'use strict';

const StepLevels = (() => {
  const KEY = 'stocklock.levels';
  const I18N = {
    en: {
      levels: 'Levels broken in this browser: {n} of {of}.',
      permalink: 'Link to this run', replay: 'Replay the linked run (r)',
      replaying: 'replaying the linked run: move {k} of {of}',
      replayed: 'The linked run was replayed: {of} moves.',
      astray: 'The linked run cannot go on here: move {k} is not offered now.',
      bad_link: 'This link\'s moves cannot be read.',
    },
    zh: {
      levels: '本浏览器里已弄坏的关卡:{n} / {of}。',
      permalink: '这一轮的链接', replay: '重放链接里的这一轮 (r)',
      replaying: '正在重放链接里的这一轮:第 {k} / {of} 步',
      replayed: '链接里的这一轮重放完了:共 {of} 步。',
      astray: '链接里的这一轮在这里走不下去:第 {k} 步此刻没有提供。',
      bad_link: '读不懂这个链接里的步骤。',
    },
  };
  const tr = (key, vars) => StocklockPage.translate(I18N, key, vars);

  function progress() {
    try {
      return JSON.parse(localStorage.getItem(KEY) || '{}') || {};
    } catch (_) {
      return {};
    }
  }

  // The moves of a run, for a URL: its steps as JSON, in base64url.
  function encode(steps) {
    const bytes = new TextEncoder().encode(JSON.stringify(steps));
    let text = '';
    for (const b of bytes) text += String.fromCharCode(b);
    return btoa(text).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
  }

  function decode(moves) {
    const text = atob(moves.replace(/-/g, '+').replace(/_/g, '/'));
    const bytes = Uint8Array.from(text, (c) => c.charCodeAt(0));
    const steps = JSON.parse(new TextDecoder().decode(bytes));
    if (!Array.isArray(steps)) throw new Error('not a list of moves');
    return steps;
  }

  // The picker's options marked with the levels won, and the count (and
  // the replay button's words, in the page's language).
  function mark() {
    const replayButton = document.getElementById('replay');
    if (!replayButton.hidden) replayButton.textContent = tr('replay');
    const won = progress();
    const options = [...document.querySelectorAll('#cell option')].filter((o) => !o.disabled && o.dataset.level === 'break');
    for (const option of document.querySelectorAll('#cell option')) {
      const name = option.dataset.name || option.textContent;
      option.dataset.name = name;
      option.dataset.won = String(Boolean(won[option.value]));
      option.textContent = won[option.value] ? `✓ ${name}` : name;
    }
    const line = document.getElementById('levels');
    line.dataset.won = String(options.filter((o) => won[o.value]).length);
    line.textContent = tr('levels', { n: line.dataset.won, of: options.length });
  }

  // After each view: a broken cell is a level won (by the learner, not the
  // checker), and the run's permalink is kept current.
  function after(view) {
    const link = document.getElementById('permalink');
    if (!view || !view.steps.length) {
      link.hidden = true;
    } else {
      const query = new URLSearchParams({ variant: view.variant, scenario: view.scenario, moves: encode(view.steps) });
      link.href = `/step?${query}`;
      link.textContent = tr('permalink');
      link.hidden = false;
    }
    if (view && view.over && view.verdict && view.verdict.violation && !view.by_checker) {
      const won = progress();
      const cell = `${view.variant}/${view.scenario}`;
      const best = won[cell] && won[cell].best;
      won[cell] = { best: best ? Math.min(best, view.steps.length) : view.steps.length };
      localStorage.setItem(KEY, JSON.stringify(won));
    }
    mark();
  }

  // Replays the linked moves from a fresh run, each the same choice as
  // offered now, at the chosen speed.
  async function replay() {
    let moves;
    try {
      moves = decode(new URLSearchParams(location.search).get('moves') || '');
    } catch (_) {
      say(tr('bad_link'));
      return;
    }
    await start();
    if (!view) return;
    const line = document.getElementById('shortest-progress');
    for (const [k, move] of moves.entries()) {
      const wanted = JSON.stringify(move);
      const offered = [...view.releases, ...view.faults].find((c) => JSON.stringify(c) === wanted);
      if (!offered || view.over) {
        say(tr('astray', { k: k + 1 }));
        return;
      }
      line.textContent = tr('replaying', { k: k + 1, of: moves.length });
      if (!(await send({ take: offered }))) return;
      await sleep(Number(document.getElementById('speed').value) / 4);
    }
    line.textContent = tr('replayed', { of: moves.length });
    document.getElementById('step').dataset.replayed = String(moves.length);
  }

  document.addEventListener('DOMContentLoaded', () => {
    const button = document.getElementById('replay');
    if (new URLSearchParams(location.search).get('moves')) {
      button.hidden = false;
      button.textContent = tr('replay');
      button.addEventListener('click', replay);
      document.addEventListener('keydown', (event) => {
        if (event.key !== 'r' || event.ctrlKey || event.metaKey || event.altKey) return;
        if (event.target && ['SELECT', 'INPUT', 'TEXTAREA'].includes(event.target.tagName)) return;
        event.preventDefault();
        replay();
      });
    }
    mark();
  });

  return { after, mark, encode, decode };
})();
