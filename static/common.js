// What every page of stocklock shares: the language (kept across pages and
// visits) and the admin token (taken from the URL fragment #token=..., kept
// for this tab, asked for once when missing).
'use strict';

const StocklockPage = (() => {
  let lang = localStorage.getItem('stocklock.lang') === 'zh' ? 'zh' : 'en';

  // The token leaves the address bar at once: it is not to be bookmarked or shared.
  const match = location.hash.match(/token=([^&]+)/);
  if (match) {
    sessionStorage.setItem('stocklock.token', decodeURIComponent(match[1]));
    history.replaceState(null, '', location.pathname + location.search);
  }

  // A hint opens on a tap as on a click (a hover tooltip never shows on a
  // touch screen): its button shows or hides the text it controls.
  document.addEventListener('click', (event) => {
    const button = event.target.closest && event.target.closest('button.hint[aria-controls]');
    if (!button) return;
    event.preventDefault();
    const text = document.getElementById(button.getAttribute('aria-controls'));
    if (!text) return;
    text.hidden = !text.hidden;
    button.setAttribute('aria-expanded', String(!text.hidden));
  });

  return {
    lang: () => lang,

    /// Switches to the other language, for every page from now on.
    toggleLang() {
      lang = lang === 'en' ? 'zh' : 'en';
      localStorage.setItem('stocklock.lang', lang);
      return lang;
    },

    /// `key` of `dictionary` in the page's language (English when missing),
    /// its `{name}`s replaced by `vars`.
    translate(dictionary, key, vars) {
      let text = (dictionary[lang] && dictionary[lang][key]) || dictionary.en[key] || key;
      for (const [name, value] of Object.entries(vars || {})) text = text.replace(`{${name}}`, value);
      return text;
    },

    /// Sets the page's language: its `lang`, every `data-i18n` text and
    /// placeholder through `t`, and the language button.
    applyLang(t) {
      document.documentElement.lang = lang;
      for (const el of document.querySelectorAll('[data-i18n]')) StocklockPage.setText(el, t(el.dataset.i18n));
      for (const el of document.querySelectorAll('[data-i18n-placeholder]')) el.placeholder = t(el.dataset.i18nPlaceholder);
      for (const el of document.querySelectorAll('[data-i18n-label]')) el.setAttribute('aria-label', t(el.dataset.i18nLabel));
      document.getElementById('lang').textContent = lang === 'en' ? '中文' : 'English';
    },

    /// `obj[key]` in the page's language: its `key_zh` sibling on a Chinese
    /// page (the server says its sentences in both), else `key`.
    said(obj, key) {
      const zh = obj && obj[`${key}_zh`];
      return lang === 'zh' && zh ? zh : obj && obj[key];
    },

    /// Sets `el`'s text, what stands between backticks (a command, a key)
    /// as `<code>`: identifiers stay Latin in the Chinese and say so.
    setText(el, text) {
      if (!String(text).includes('`')) {
        el.textContent = text;
        return;
      }
      el.replaceChildren(...String(text).split('`').map((part, n) => {
        if (n % 2 === 0) return document.createTextNode(part);
        const code = document.createElement('code');
        code.textContent = part;
        return code;
      }));
    },

    /// The classroom seat the page is shown to (its name, from the page;
    /// '' for the teacher), and what its SKUs start with.
    seat() {
      return document.body.dataset.seat || '';
    },
    skuPrefix() {
      return document.body.dataset.skuPrefix || '';
    },

    /// The headers of a POST by whoever uses the page: a seat's cookie
    /// speaks for it; the teacher sends the admin token (asked for with
    /// `question`), and without one gets `null`.
    postHeaders(question) {
      const headers = { 'Content-Type': 'application/json' };
      if (StocklockPage.seat()) return headers;
      const token = StocklockPage.adminToken(question);
      if (!token) return null;
      headers.Authorization = `Bearer ${token}`;
      return headers;
    },

    /// The admin token, asked for (with `question`) when this tab has none.
    adminToken(question) {
      let token = sessionStorage.getItem('stocklock.token');
      if (!token) {
        token = (window.prompt(question) || '').trim();
        if (token) sessionStorage.setItem('stocklock.token', token);
      }
      return token;
    },

    /// Forgets a token the server refused: the next action asks again.
    forgetToken() {
      sessionStorage.removeItem('stocklock.token');
    },
  };
})();
