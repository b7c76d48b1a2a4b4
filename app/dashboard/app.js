// actor-worker dashboard: a single page over /api/... (app/dashboard.hpp).
//
// Rules this file keeps:
// - Everything from a job (kind, queue, args, errors, tags, ...) becomes a
//   text node (el() and createTextNode): no markup is ever parsed from
//   data, so a value holding <script> shows as text.
// - The token lives in sessionStorage and goes out only as an
//   Authorization: Bearer header, never in a URL or a cookie.
// - Actions are POSTs with a JSON body; bulk ones ask for the count first.
// - With several databases ([databases.NAME]) the header offers a choice;
//   it lives in the page's query string (?database=NAME, so a reload or a
//   bookmark keeps it, and every #/... link keeps it too) and every API
//   call carries it as database=NAME.
'use strict';

(function () {
  const TOKEN_KEY = 'actor-worker.token';
  const REFRESH_MS = 5000;
  const STATES = ['scheduled', 'available', 'running', 'waiting_external',
                  'completed', 'cancelled'];

  const app = {
    session: null,
    route: null,
    timer: null,
    chart: null,
    knownQueues: [],
    generation: 0,
    lastResult: null,
    // The database every API call names (database=), or null: the
    // server's default, with a single database.
    database: null,
    // Why the address's database is not the one shown, or null.
    databaseNote: null,
  };

  // Content-Security-Policy violations, for the browser test (there
  // should be none).
  window.__awCspViolations = [];
  document.addEventListener('securitypolicyviolation', function (e) {
    window.__awCspViolations.push(e.violatedDirective + ' ' + e.blockedURI);
  });

  // -- DOM helpers -----------------------------------------------------------

  // el('td', {class: 'num'}, 'text', node, [more]): strings become text
  // nodes. Attributes go through setAttribute; on* keys are listeners;
  // href must be an in-page link.
  function el(tag, attrs) {
    const node = document.createElement(tag);
    if (attrs) {
      for (const key of Object.keys(attrs)) {
        const value = attrs[key];
        if (value === undefined || value === null || value === false) continue;
        if (key.startsWith('on') && typeof value === 'function') {
          node.addEventListener(key.slice(2), value);
        } else if (key === 'href') {
          if (!String(value).startsWith('#')) throw new Error('external link');
          node.setAttribute('href', value);
        } else if (key === 'value') {
          node.value = value;
        } else if (key === 'checked' || key === 'disabled' || key === 'selected') {
          node[key] = true;
        } else {
          node.setAttribute(key, String(value));
        }
      }
    }
    for (let i = 2; i < arguments.length; i++) append(node, arguments[i]);
    return node;
  }

  function append(node, child) {
    if (child === undefined || child === null || child === false) return;
    if (Array.isArray(child)) {
      for (const c of child) append(node, c);
    } else if (child instanceof Node) {
      node.appendChild(child);
    } else {
      node.appendChild(document.createTextNode(String(child)));
    }
  }

  function replace(node, ...children) {
    while (node.firstChild) node.removeChild(node.firstChild);
    for (const c of children) append(node, c);
  }

  function link(hash, ...children) {
    return el('a', {href: hash}, ...children);
  }

  function hashOf(page, params) {
    const q = new URLSearchParams();
    for (const key of Object.keys(params || {})) {
      const v = params[key];
      if (v !== undefined && v !== null && v !== '') q.set(key, String(v));
    }
    const s = q.toString();
    return '#/' + page + (s ? '?' + s : '');
  }

  // -- formatting -------------------------------------------------------------

  function num(n) {
    if (n === null || n === undefined) return '';
    return Number(n).toLocaleString('en-US');
  }

  function pad(n) { return String(n).padStart(2, '0'); }

  // A timestamp (ISO text or unix seconds) as "YYYY-MM-DD HH:MM:SS" UTC.
  function when(t) {
    if (t === null || t === undefined || t === '') return '';
    const d = typeof t === 'number' ? new Date(t * 1000) : new Date(t);
    if (isNaN(d.getTime())) return String(t);
    return d.getUTCFullYear() + '-' + pad(d.getUTCMonth() + 1) + '-' +
      pad(d.getUTCDate()) + ' ' + pad(d.getUTCHours()) + ':' +
      pad(d.getUTCMinutes()) + ':' + pad(d.getUTCSeconds());
  }

  function age(seconds) {
    if (!seconds || seconds <= 0) return '–';
    const s = Math.floor(seconds);
    if (s < 60) return s + 's';
    if (s < 3600) return Math.floor(s / 60) + 'm ' + (s % 60) + 's';
    if (s < 86400) return Math.floor(s / 3600) + 'h ' + Math.floor((s % 3600) / 60) + 'm';
    return Math.floor(s / 86400) + 'd ' + Math.floor((s % 86400) / 3600) + 'h';
  }

  function badge(state) {
    return el('span', {class: 'badge state-' + String(state).replace(/[^a-z_]/g, '')}, state);
  }

  function pretty(value) {
    return JSON.stringify(value, null, 2);
  }

  // -- the token and the API ------------------------------------------------

  function token() {
    return sessionStorage.getItem(TOKEN_KEY) || '';
  }

  function headers(extra) {
    const h = Object.assign({}, extra || {});
    const t = token();
    if (t) h['Authorization'] = 'Bearer ' + t;
    return h;
  }

  class ApiError extends Error {
    constructor(status, message, body) {
      super(message);
      this.status = status;
      this.body = body;
    }
  }

  // `path` naming the chosen database (database=NAME), if there is one.
  function scoped(path) {
    if (!app.database) return path;
    const at = path.indexOf('?');
    const q = new URLSearchParams(at < 0 ? '' : path.slice(at + 1));
    q.set('database', app.database);
    return (at < 0 ? path : path.slice(0, at)) + '?' + q.toString();
  }

  async function api(path) {
    const res = await fetch(scoped(path), {headers: headers(), cache: 'no-store'});
    const body = await res.json().catch(() => ({}));
    if (!res.ok) throw new ApiError(res.status, body.error || res.statusText, body);
    return body;
  }

  async function post(path, body) {
    const res = await fetch(scoped(path), {
      method: 'POST',
      headers: headers({'Content-Type': 'application/json'}),
      body: JSON.stringify(body || {}),
      cache: 'no-store',
    });
    const answer = await res.json().catch(() => ({}));
    return {ok: res.ok, status: res.status, body: answer};
  }

  function notice(message, bad) {
    const n = document.getElementById('notice');
    if (!message) {
      n.hidden = true;
      replace(n);
      return;
    }
    n.hidden = false;
    n.className = bad ? 'bad' : '';
    replace(n, message);
  }

  // The token box in the header.
  function renderSession() {
    const box = document.getElementById('session');
    const s = app.session || {};
    const parts = [];
    if (s.read_only) parts.push(el('span', {class: 'badge', title: '[http] read_only = true'}, 'read-only'));
    else if (!s.token_configured) parts.push(el('span', {class: 'badge', title: 'no [http] token is configured'}, 'actions off'));
    if (token()) {
      parts.push(el('span', {class: 'muted', id: 'token-state'}, s.token_valid ? 'token set' : 'token set (not accepted)'));
      parts.push(el('button', {id: 'token-forget', type: 'button', onclick: function () {
        sessionStorage.removeItem(TOKEN_KEY);
        start();
      }}, 'Forget token'));
    } else if (s.token_configured) {
      const input = el('input', {id: 'token-input', type: 'password', placeholder: 'token', autocomplete: 'off'});
      const form = el('form', {id: 'token-form', onsubmit: function (e) {
        e.preventDefault();
        if (input.value) sessionStorage.setItem(TOKEN_KEY, input.value.trim());
        start();
      }}, input, el('button', {type: 'submit', id: 'token-save'}, 'Use token'));
      parts.push(form);
    }
    replace(box, parts);
    replace(document.getElementById('version'), s.version ? 'actor-worker ' + s.version : '');
  }

  // -- the database ------------------------------------------------------------

  function databaseInUrl() {
    return new URLSearchParams(location.search).get('database') || '';
  }

  // The database to show: the address's, else the default one when there
  // are several (every call then names it), else none (the server's
  // default). A name the server does not list falls back to the default.
  function pickDatabase() {
    const s = app.session || {};
    const names = s.databases || [];
    const wanted = databaseInUrl();
    if (wanted && names.includes(wanted)) return wanted;
    // Kept on screen until another database is chosen (render() shows it).
    app.databaseNote = wanted && names.length ? 'No database named \u201c' + wanted +
      '\u201d is configured; showing \u201c' + (s.default_database || names[0]) + '\u201d.' : null;
    if (names.length > 1) return s.default_database || names[0];
    return wanted && !names.length ? wanted : null;
  }

  // The selector in the header, shown only with several databases.
  function renderDatabases() {
    const box = document.getElementById('database');
    const names = (app.session && app.session.databases) || [];
    if (names.length < 2) {
      box.hidden = true;
      replace(box);
      return;
    }
    const select = el('select', {id: 'database-select', name: 'database', onchange: function () {
      this.blur();
      chooseDatabase(this.value);
    }}, names.map(n => el('option', {value: n, selected: n === app.database}, n)));
    replace(box, el('label', {title: 'The database this page shows and acts on'}, 'database', select));
    box.hidden = false;
    document.title = 'actor-worker \u00b7 ' + app.database;
  }

  // Switches to database `name`: the address keeps it; ids belong to one
  // database, so a job's or dead letter's page goes back to its list, and
  // the list filters start afresh.
  function chooseDatabase(name) {
    const q = new URLSearchParams(location.search);
    q.set('database', name);
    const route = parseRoute();
    const page = route.page === 'job' ? 'jobs' : route.page === 'dead-letter' ? 'dead-letters' : route.page;
    history.pushState(null, '', '?' + q.toString() + hashOf(page, {}));
    app.database = name;
    app.databaseNote = null;
    app.knownQueues = [];
    app.confirming = false;
    renderDatabases();
    render(false);
  }

  // An action button: disabled (with the reason) when actions are off.
  function actionButton(label, attrs, fn) {
    const s = app.session || {};
    const reason = s.read_only ? 'read-only dashboard ([http] read_only = true)'
      : !s.token_configured ? 'actions are off: no [http] token is configured' : null;
    const a = Object.assign({}, attrs);
    const off = !!reason || !!a.disabled;
    delete a.disabled;
    return el('button', Object.assign({type: 'button', disabled: off, title: reason || undefined,
      onclick: fn}, a), label);
  }

  // Shows the outcome of an action in `box`.
  function showResult(box, r, okText) {
    const ok = r.ok;
    const message = ok ? okText(r.body) : ('refused (' + r.status + '): ' + (r.body.error || 'error'));
    app.lastResult = {ok: ok, status: r.status, message: message};
    replace(box, el('div', {class: 'result ' + (ok ? 'ok' : 'bad'), 'data-status': r.status}, message));
  }

  // A confirmation panel in `box`: the text, then Confirm / Cancel.
  function confirmIn(box, text, confirmLabel, fn) {
    app.confirming = true;
    const done = () => { app.confirming = false; };
    replace(box, el('div', {class: 'confirm'},
      el('p', null, text),
      el('div', {class: 'actions'},
        el('button', {type: 'button', class: 'primary', id: 'confirm-yes', onclick: async function () {
          this.disabled = true;
          done();
          await fn();
        }}, confirmLabel),
        el('button', {type: 'button', id: 'confirm-no', onclick: function () {
          done();
          replace(box);
        }}, 'Cancel'))));
  }

  // -- pages -------------------------------------------------------------------

  function filterText(f) {
    const parts = [];
    for (const k of ['queue', 'kind', 'fingerprint']) if (f[k]) parts.push(k + ' = ' + f[k]);
    return parts.length ? parts.join(', ') : 'every dead letter';
  }

  function throughputTotals(tp, queue, outcome, buckets) {
    const q = tp.queues[queue];
    if (!q || !q[outcome]) return 0;
    const arr = q[outcome];
    let n = 0;
    for (let i = Math.max(0, arr.length - buckets); i < arr.length; i++) n += arr[i];
    return n;
  }

  function drawChart(canvas, tp) {
    if (app.chart) {
      app.chart.destroy();
      app.chart = null;
    }
    if (typeof window.Chart === 'undefined') return false;
    const n = Math.round(600 / tp.bucket_seconds);
    const labels = [];
    for (let i = 0; i < n; i++) {
      const t = tp.end - (n - i) * tp.bucket_seconds;
      const d = new Date(t * 1000);
      labels.push(pad(d.getUTCHours()) + ':' + pad(d.getUTCMinutes()) + ':' + pad(d.getUTCSeconds()));
    }
    const series = [
      ['completed', '#2f9e5a'], ['retried', '#d69e2e'], ['dead_lettered', '#c53030'],
      ['cancelled', '#8a94a6'], ['snoozed', '#6b8fd6'], ['parked', '#9f7aea'],
    ];
    const datasets = series.map(function (s) {
      const data = new Array(n).fill(0);
      for (const q of Object.keys(tp.queues)) {
        const arr = tp.queues[q][s[0]] || [];
        const offset = arr.length - n;
        for (let i = 0; i < n; i++) data[i] += arr[i + offset] || 0;
      }
      return {label: s[0].replace('_', ' '), data: data, backgroundColor: s[1], borderWidth: 0};
    }).filter(d => d.data.some(v => v > 0) || d.label === 'completed');
    app.chart = new window.Chart(canvas, {
      type: 'bar',
      data: {labels: labels, datasets: datasets},
      options: {
        animation: false,
        responsive: true,
        maintainAspectRatio: false,
        plugins: {legend: {position: 'bottom'}},
        scales: {
          x: {stacked: true, ticks: {maxTicksLimit: 10, maxRotation: 0}},
          y: {stacked: true, beginAtZero: true, title: {display: true, text: 'jobs per ' + tp.bucket_seconds + ' s'}},
        },
      },
    });
    return true;
  }

  async function pageQueues() {
    const data = await api('/api/overview');
    app.knownQueues = data.queues.map(q => q.queue);
    const tp = data.throughput;
    const totals = {available: 0, scheduled: 0, running: 0, waiting_external: 0, dead_lettered: 0};
    for (const q of data.queues) for (const k of Object.keys(totals)) totals[k] += q[k];
    let doneMinute = 0;
    for (const q of Object.keys(tp.queues)) doneMinute += throughputTotals(tp, q, 'completed', 60 / tp.bucket_seconds);
    const taken = data.sample.taken_at;
    const sampleNote = taken
      ? 'Counts as of ' + when(taken) + ' UTC (sampled every ' + data.sample.interval_seconds + ' s, cluster-wide). Throughput: outcomes recorded by this node.'
      : 'No sample of the queues yet ([metrics] queue_stats_interval).';
    const tile = (n, label, id) => el('div', {class: 'tile', id: id}, el('div', {class: 'n', 'data-value': n}, num(n)), el('div', {class: 'l'}, label));
    const canvas = el('canvas', {id: 'throughput-chart'});
    const result = el('div', {id: 'action-result'});
    const limits = (q) => [q.global_concurrency ? 'at most ' + q.global_concurrency + ' at once' : null,
      q.rate_limit ? q.rate_limit : null].filter(x => x).join(', ') || '–';
    const rows = data.queues.map(function (q) {
      const cell = (state) => el('td', {class: 'num c-' + state, 'data-value': q[state]},
        q[state] > 0 ? link(state === 'dead_lettered' ? hashOf('dead-letters', {queue: q.queue})
          : hashOf('jobs', {queue: q.queue, state: state}), num(q[state])) : '0');
      // Jobs of kinds no live worker runs here wait forever: say so on the row.
      const unserved = q.unserved > 0
        ? [' ', el('span', {class: 'badge state-dead_lettered unserved', 'data-value': q.unserved,
          title: 'due jobs of kinds no live worker runs in this queue: start a worker for them, or delete them'},
          num(q.unserved) + ' unserved')]
        : [];
      return el('tr', {'data-queue': q.queue},
        el('td', null, link(hashOf('jobs', {queue: q.queue}), q.queue), ...unserved),
        cell('available'), cell('scheduled'), cell('running'), cell('waiting_external'), cell('dead_lettered'),
        el('td', {class: 'num c-age'}, age(q.oldest_available_age_seconds)),
        el('td', {class: 'num c-done'}, num(throughputTotals(tp, q.queue, 'completed', 60 / tp.bucket_seconds))),
        el('td', {class: 'num c-failed'}, num(throughputTotals(tp, q.queue, 'retried', 600 / tp.bucket_seconds) +
          throughputTotals(tp, q.queue, 'dead_lettered', 600 / tp.bucket_seconds))),
        el('td', {class: 'c-here'}, q.here ? q.here.running + ' / ' + q.here.concurrency : '–'),
        el('td', {class: 'c-paused', title: q.paused_at ? 'paused since ' + q.paused_at : undefined}, q.paused ? 'yes' : 'no'),
        el('td', {class: 'c-limits'}, limits(q)),
        el('td', {class: 'c-actions'}, q.paused
          ? actionButton('Resume', {class: 'queue-resume', 'data-queue': q.queue}, async function () {
            const r = await post('/api/queues/resume', {queue: q.queue});
            showResult(result, r, () => 'Queue ' + q.queue + ' resumed.');
            setTimeout(refresh, 300);
          })
          : actionButton('Pause', {class: 'queue-pause danger', 'data-queue': q.queue}, function () {
            confirmIn(result, 'Pause queue ' + q.queue + ' on every node? No new job of it starts; running jobs finish.', 'Pause', async function () {
              const r = await post('/api/queues/pause', {queue: q.queue});
              showResult(result, r, () => 'Queue ' + q.queue + ' paused.');
              setTimeout(refresh, 300);
            });
          })));
    });
    const content = [
      el('h1', null, 'Queues'),
      el('div', {class: 'tiles'},
        tile(totals.available, 'available (due)', 'tile-available'),
        tile(totals.running, 'running', 'tile-running'),
        tile(totals.scheduled, 'scheduled', 'tile-scheduled'),
        tile(totals.waiting_external, 'waiting for a callback', 'tile-waiting'),
        tile(totals.dead_lettered, 'dead letters', 'tile-dead'),
        tile(doneMinute, 'completed in the last minute (this node)', 'tile-done')),
      el('div', {class: 'card'},
        el('h2', null, 'Throughput, last 10 minutes'),
        el('div', {class: 'chart-box'}, canvas),
        el('p', {class: 'muted', id: 'chart-note'})),
      el('table', {id: 'queues'},
        el('thead', null, el('tr', null,
          el('th', null, 'queue'), el('th', {class: 'num'}, 'available'), el('th', {class: 'num'}, 'scheduled'),
          el('th', {class: 'num'}, 'running'), el('th', {class: 'num'}, 'waiting'), el('th', {class: 'num'}, 'dead letters'),
          el('th', {class: 'num'}, 'oldest available'), el('th', {class: 'num'}, 'done / last min'),
          el('th', {class: 'num'}, 'failed / 10 min'), el('th', null, 'running here'), el('th', null, 'paused'),
          el('th', null, 'cluster limits'), el('th', null, ''))),
        el('tbody', null, rows.length ? rows : el('tr', null, el('td', {colspan: 13, class: 'empty'}, 'No queues yet.')))),
      result,
      el('p', {class: 'muted', id: 'sample-note'}, sampleNote),
      el('p', {class: 'muted'}, 'Completed and cancelled jobs are not counted here (no count over the finished rows): list them on the Jobs page.'),
    ];
    return {content: content, after: function () {
      if (!drawChart(canvas, tp))
        replace(document.getElementById('chart-note'), 'No chart: Chart.js was not available when this binary was built (Debian package libjs-chart.js).');
    }};
  }

  // A filtered list whose page came back short because the server's scan
  // budget ran out ("partial") asks for the next stretch itself, up to ten
  // requests (each bounded on the server), until the page is full.
  const PAGE = 50;
  async function fetchList(path, keys, params, key) {
    const query = (before) => {
      const q = new URLSearchParams();
      for (const k of keys) if (params[k]) q.set(k, params[k]);
      if (before) q.set('before', before);
      return path + '?' + q.toString();
    };
    let data = await api(query(params.before));
    let rows = data[key];
    for (let i = 0; i < 9 && data.partial && data.next_before && rows.length < PAGE; i++) {
      data = await api(query(data.next_before));
      rows = rows.concat(data[key]);
    }
    let next = data.next_before;
    let partial = data.partial && rows.length < PAGE;
    if (rows.length > PAGE) {
      rows = rows.slice(0, PAGE);
      next = rows[rows.length - 1].id;
      partial = false;
    }
    const out = {next_before: next, partial: partial};
    out[key] = rows;
    return out;
  }

  function pager(page, params, data, what) {
    const items = [];
    if (params.before) items.push(link(hashOf(page, Object.assign({}, params, {before: ''})), '« newest'));
    if (data.next_before) {
      items.push(link(hashOf(page, Object.assign({}, params, {before: data.next_before})), data.partial ? 'keep searching »' : 'older »'));
    }
    if (data.partial) {
      items.push(el('span', {class: 'muted', id: 'partial-note'},
        'Searched ' + what + ' down to id ' + num(data.next_before) + ' for this page; older ones may match.'));
    }
    return el('div', {class: 'pager'}, items);
  }

  function filterForm(page, params, fields) {
    const inputs = {};
    const controls = fields.map(function (f) {
      let input;
      if (f === 'state') {
        input = el('select', {name: 'state', id: 'filter-state'},
          el('option', {value: ''}, 'any state'),
          STATES.map(s => el('option', {value: s, selected: params.state === s}, s)));
      } else {
        input = el('input', {name: f, id: 'filter-' + f, value: params[f] || '', placeholder: 'any', list: f === 'queue' ? 'known-queues' : undefined});
      }
      inputs[f] = input;
      return el('label', null, f, input);
    });
    const form = el('form', {class: 'filters', id: 'filters', onsubmit: function (e) {
      e.preventDefault();
      const next = {};
      for (const f of fields) next[f] = inputs[f].value.trim();
      location.hash = hashOf(page, next);
    }}, controls,
      el('button', {type: 'submit', id: 'filter-apply'}, 'Filter'),
      el('a', {href: hashOf(page, {})}, 'clear'),
      el('datalist', {id: 'known-queues'}, app.knownQueues.map(q => el('option', {value: q}))));
    return form;
  }

  async function pageJobs(params) {
    const data = await fetchList('/api/jobs', ['state', 'queue', 'kind'], params, 'jobs');
    const rows = data.jobs.map(j => el('tr', {'data-id': j.id},
      el('td', {class: 'num'}, link('#/job/' + j.id, String(j.id))),
      el('td', {class: 'c-state'}, badge(j.state)),
      el('td', {class: 'c-queue'}, j.queue),
      el('td', {class: 'c-kind mono'}, j.kind),
      el('td', {class: 'num'}, j.attempt + (j.max_attempts ? ' / ' + j.max_attempts : '')),
      el('td', null, when(j.run_at)),
      el('td', null, when(j.finalized_at)),
      el('td', {class: 'err c-error'}, j.last_error_message || '')));
    return {content: [
      el('h1', null, 'Jobs'),
      filterForm('jobs', params, ['state', 'queue', 'kind']),
      el('table', {id: 'jobs'},
        el('thead', null, el('tr', null, el('th', {class: 'num'}, 'id'), el('th', null, 'state'), el('th', null, 'queue'),
          el('th', null, 'kind'), el('th', {class: 'num'}, 'attempt'), el('th', null, 'run at (UTC)'),
          el('th', null, 'finished (UTC)'), el('th', null, 'last error'))),
        el('tbody', null, rows.length ? rows : el('tr', null, el('td', {colspan: 8, class: 'empty'}, 'No jobs match.')))),
      pager('jobs', params, data, 'jobs'),
      el('p', {class: 'muted'}, 'Newest first, a page at a time; nothing is counted. Completed jobs are kept for [worker] completed_retention.'),
    ]};
  }

  function fields(pairs) {
    return el('dl', {class: 'fields'}, pairs.filter(p => p[1] !== null && p[1] !== undefined && p[1] !== '')
      .map(p => [el('dt', null, p[0]), el('dd', {'data-field': p[0]}, p[1])]));
  }

  async function pageJob(params, id) {
    const data = await api('/api/jobs/' + encodeURIComponent(id));
    const result = el('div', {id: 'action-result'});
    if (!data.job && data.dead_letter) {
      const d = data.dead_letter;
      return {content: [
        el('h1', null, 'Job ' + id + ' ', badge('dead_lettered')),
        el('p', null, 'This job was moved to the dead letter queue: ', link('#/dead-letter/' + d.id, 'dead letter ' + d.id), '.'),
        el('h2', null, 'Last error'), el('pre', {class: 'error', id: 'job-error'}, d.last_error_message || ''),
      ]};
    }
    const j = data.job;
    const retryable = ['scheduled', 'available', 'completed', 'cancelled'].includes(j.state);
    const cancellable = ['scheduled', 'available', 'waiting_external', 'running'].includes(j.state);
    const act = async function (what) {
      const r = await post('/api/jobs/' + j.id + '/' + what, {});
      showResult(result, r, b => what === 'retry' ? 'Job ' + j.id + ' will run again (was ' + b.was + ').'
        : b.cancel_requested ? 'Cancel requested: job ' + j.id + ' runs on ' + b.locked_by + '.' : 'Job ' + j.id + ' cancelled.');
      if (r.ok) setTimeout(refresh, 300);
    };
    const timeline = [
      ['created', j.created_at], ['due (run at)', j.run_at], ['locked (started or last heartbeat)', j.locked_at],
      ['last failed', j.last_failed_at], ['finished', j.finalized_at],
    ].filter(e => e[1]).sort((a, b) => new Date(a[1]) - new Date(b[1]));
    return {content: [
      el('h1', null, 'Job ' + j.id + ' ', badge(j.state)),
      el('div', {class: 'actions'},
        actionButton('Retry now', {id: 'job-retry', disabled: !retryable || undefined}, () => act('retry')),
        actionButton('Cancel', {id: 'job-cancel', class: 'danger', disabled: !cancellable || undefined}, () => act('cancel'))),
      result,
      el('div', {class: 'card'}, fields([
        ['kind', j.kind], ['queue', j.queue], ['state', j.state], ['priority', j.priority],
        ['attempt', j.attempt + (j.max_attempts ? ' of at most ' + j.max_attempts : '')],
        ['errors', j.error_count], ['locked by', j.locked_by], ['deadline', j.deadline_at ? when(j.deadline_at) + ' UTC' : null],
        ['deadline (ms per run)', j.deadline_ms], ['callback id', j.callback_id],
        ['callback timeout', j.callback_timeout_at ? when(j.callback_timeout_at) + ' UTC' : null],
        ['ordering key', j.ordering_key], ['unique key', j.unique_key],
        ['tags', j.tags && j.tags.length ? j.tags.join(', ') : null],
      ])),
      el('h2', null, 'Timeline (UTC)'),
      el('ul', {class: 'timeline card'}, timeline.map(e => el('li', null, el('span', {class: 't'}, when(e[1])), e[0]))),
      j.last_error_message ? [el('h2', null, 'Last error'), el('pre', {class: 'error', id: 'job-error'}, j.last_error_message)] : null,
      el('h2', null, 'Args'), el('pre', {id: 'job-args'}, pretty(j.args)),
      el('h2', null, 'Metadata'), el('pre', {id: 'job-metadata'}, pretty(j.metadata)),
      j.callback_result !== null && j.callback_result !== undefined ? [el('h2', null, 'Callback result'), el('pre', null, pretty(j.callback_result))] : null,
      el('p', {class: 'muted'}, 'A job keeps its latest error only; each attempt is counted, not stored.'),
    ]};
  }

  async function pageDeadLetter(params, id) {
    const data = await api('/api/dead-letters/' + encodeURIComponent(id));
    const d = data.dead_letter;
    const result = el('div', {id: 'action-result'});
    return {content: [
      el('h1', null, 'Dead letter ' + d.id + ' ', badge('dead_lettered')),
      el('div', {class: 'actions'},
        actionButton('Retry', {id: 'dl-retry'}, async function () {
          const r = await post('/api/dead-letters/' + d.id + '/retry', {});
          showResult(result, r, b => 'Moved back as job ' + (b.jobs && b.jobs[0] ? b.jobs[0].job_id : '?') + '.');
        }),
        actionButton('Purge', {id: 'dl-purge', class: 'danger'}, function () {
          confirmIn(result, 'Delete dead letter ' + d.id + ' for good?', 'Purge', async function () {
            const r = await post('/api/dead-letters/' + d.id + '/purge', {});
            showResult(result, r, () => 'Purged.');
          });
        })),
      result,
      el('div', {class: 'card'}, fields([
        ['original job', link('#/job/' + d.original_job_id, String(d.original_job_id))],
        ['kind', d.kind], ['queue', d.queue], ['priority', d.priority],
        ['attempt', d.attempt + (d.max_attempts ? ' of at most ' + d.max_attempts : '')], ['errors', d.error_count],
        ['created', when(d.created_at) + ' UTC'], ['failed', when(d.failed_at) + ' UTC'],
        ['fingerprint', el('span', {class: 'fingerprint'}, d.fingerprint)],
        ['tags', d.tags && d.tags.length ? d.tags.join(', ') : null],
      ])),
      el('h2', null, 'Error'), el('pre', {class: 'error', id: 'dl-error'}, d.last_error_message || ''),
      el('h2', null, 'Args'), el('pre', {id: 'dl-args'}, pretty(d.args)),
      el('h2', null, 'Metadata'), el('pre', null, pretty(d.metadata)),
    ]};
  }

  // "Retry all matching…" / "Purge all matching…": count, confirm, act.
  function bulk(box, action, filter, after) {
    return async function () {
      const q = new URLSearchParams();
      for (const k of ['queue', 'kind', 'fingerprint']) if (filter[k]) q.set(k, filter[k]);
      let count;
      try {
        count = (await api('/api/dead-letters/count?' + q.toString())).count;
      } catch (e) {
        replace(box, el('div', {class: 'result bad'}, 'Could not count: ' + e.message));
        return;
      }
      if (count === 0) {
        replace(box, el('div', {class: 'result ok'}, 'Nothing matches ' + filterText(filter) + '.'));
        return;
      }
      const verb = action === 'retry' ? 'Retry' : 'Purge';
      confirmIn(box, verb + ' ' + num(count) + ' dead letter(s) matching ' + filterText(filter) + '?' +
        (action === 'retry' ? ' Each goes back into its queue as a new job, due now.' : ' They are deleted for good.'),
        verb + ' ' + num(count), async function () {
          const body = Object.assign({}, filter);
          if (!filter.queue && !filter.kind && !filter.fingerprint) body.all = true;
          const r = await post('/api/dead-letters/' + action, body);
          showResult(box, r, b => action === 'retry' ? 'Retried ' + num(b.retried) + ' dead letter(s).' : 'Purged ' + num(b.purged) + ' dead letter(s).');
          if (after) after(r);
        });
    };
  }

  async function pageDeadLetters(params) {
    const data = await fetchList('/api/dead-letters', ['queue', 'kind', 'fingerprint'], params, 'dead_letters');
    const result = el('div', {id: 'action-result'});
    const filter = {queue: params.queue || '', kind: params.kind || '', fingerprint: params.fingerprint || ''};
    const rows = data.dead_letters.map(function (d) {
      const rowResult = el('div');
      return el('tr', {'data-id': d.id},
        el('td', {class: 'num'}, link('#/dead-letter/' + d.id, String(d.id))),
        el('td', null, link('#/job/' + d.original_job_id, String(d.original_job_id))),
        el('td', {class: 'c-queue'}, d.queue),
        el('td', {class: 'c-kind mono'}, d.kind),
        el('td', {class: 'num'}, d.attempt),
        el('td', null, when(d.failed_at)),
        el('td', {class: 'err c-error'}, d.last_error_message || ''),
        el('td', null, el('div', {class: 'actions'},
          actionButton('Retry', {class: 'dl-retry', 'data-id': d.id}, async function () {
            const r = await post('/api/dead-letters/' + d.id + '/retry', {});
            showResult(rowResult, r, b => 'job ' + (b.jobs && b.jobs[0] ? b.jobs[0].job_id : '?'));
          }),
          actionButton('Purge', {class: 'dl-purge danger', 'data-id': d.id}, function () {
            confirmIn(rowResult, 'Purge dead letter ' + d.id + '?', 'Purge', async function () {
              const r = await post('/api/dead-letters/' + d.id + '/purge', {});
              showResult(rowResult, r, () => 'purged');
            });
          })), rowResult));
    });
    return {content: [
      el('h1', null, 'Dead letters'),
      filterForm('dead-letters', params, ['queue', 'kind', 'fingerprint']),
      el('div', {class: 'actions'},
        actionButton('Retry all matching…', {id: 'bulk-retry'}, bulk(result, 'retry', filter)),
        actionButton('Purge all matching…', {id: 'bulk-purge', class: 'danger'}, bulk(result, 'purge', filter)),
        el('span', {class: 'muted'}, 'acts on ' + filterText(filter) + ', after showing how many')),
      result,
      el('table', {id: 'dead-letters'},
        el('thead', null, el('tr', null, el('th', {class: 'num'}, 'id'), el('th', null, 'job'), el('th', null, 'queue'),
          el('th', null, 'kind'), el('th', {class: 'num'}, 'attempts'), el('th', null, 'failed (UTC)'),
          el('th', null, 'error'), el('th', null, ''))),
        el('tbody', null, rows.length ? rows : el('tr', null, el('td', {colspan: 8, class: 'empty'}, 'No dead letters match.')))),
      pager('dead-letters', params, data, 'dead letters'),
    ]};
  }

  async function pageFailures() {
    const data = await api('/api/failures');
    const result = el('div', {id: 'action-result'});
    const rows = data.groups.map(function (g, i) {
      const filter = {kind: g.kind, fingerprint: g.fingerprint};
      return el('tr', {'data-kind': g.kind, 'data-index': i},
        el('td', {class: 'num c-count', 'data-value': g.count}, num(g.count)),
        el('td', {class: 'c-kind mono'}, g.kind),
        el('td', {class: 'fingerprint c-fingerprint'}, g.fingerprint),
        el('td', null, when(g.first_seen)),
        el('td', null, when(g.last_seen)),
        el('td', {class: 'err c-example'}, g.example || '', el('div', {class: 'muted'}, 'queue ' + g.example_queue)),
        el('td', null, el('div', {class: 'actions'},
          link(hashOf('dead-letters', filter), 'show'),
          actionButton('Retry this group…', {class: 'group-retry', 'data-index': i},
            bulk(result, 'retry', filter, () => setTimeout(refresh, 300))))));
    });
    return {content: [
      el('h1', null, 'Failures'),
      el('p', {class: 'muted'}, 'Dead letters grouped by kind and error fingerprint: the message with quoted values, ' +
        'UUIDs, timestamps, hex and numbers replaced by <str>, <uuid>, <time>, <hex> and <n>. Largest groups first.'),
      result,
      el('table', {id: 'failures'},
        el('thead', null, el('tr', null, el('th', {class: 'num'}, 'dead letters'), el('th', null, 'kind'),
          el('th', null, 'fingerprint'), el('th', null, 'first seen (UTC)'), el('th', null, 'last seen (UTC)'),
          el('th', null, 'latest message'), el('th', null, ''))),
        el('tbody', null, rows.length ? rows : el('tr', null, el('td', {colspan: 7, class: 'empty'}, 'No dead letters: nothing has failed for good.')))),
    ]};
  }

  async function pageNodes() {
    const data = await api('/api/nodes');
    const cards = data.nodes.map(n => el('div', {class: 'card node', 'data-worker': n.worker_id},
      el('h2', null, n.node + ' ', n.this_node ? el('span', {class: 'badge'}, 'this node') : null,
        ' ', el('span', {class: 'badge ' + (n.ready ? 'state-completed' : 'state-dead_lettered')}, n.ready ? 'ready' : 'not ready')),
      fields([['worker id', el('span', {class: 'mono', id: 'node-worker-id'}, n.worker_id)], ['version', n.version],
        ['started', when(n.started_at) + ' UTC'], ['uptime', age(n.uptime_seconds)],
        ['not ready because', n.reasons.length ? n.reasons.join('; ') : null],
        ['kinds', n.kinds.join(', ')]]),
      el('table', {class: 'node-queues'},
        el('thead', null, el('tr', null, el('th', null, 'queue'), el('th', {class: 'num'}, 'concurrency'),
          el('th', {class: 'num'}, 'running'), el('th', {class: 'num'}, 'free'))),
        el('tbody', null, n.queues.map(q => el('tr', {'data-queue': q.queue}, el('td', null, q.queue),
          el('td', {class: 'num'}, num(q.concurrency)), el('td', {class: 'num'}, num(q.running)), el('td', {class: 'num'}, num(q.free))))))));
    const cluster = (data.cluster || []).map(n => el('tr', {'data-worker': n.worker_id},
      el('td', null, n.node, n.leader ? ' ' : null, n.leader ? el('span', {class: 'badge leader'}, 'leader') : null),
      el('td', {class: 'mono'}, n.worker_id),
      el('td', null, n.host + ' (pid ' + n.pid + ')'),
      el('td', null, n.version),
      el('td', null, when(n.started_at)),
      el('td', null, when(n.last_seen_at)),
      el('td', null, (n.queues || []).join(', ')),
      el('td', {class: 'num'}, num(n.running)),
      el('td', {class: 'c-alive'}, el('span', {class: 'badge ' + (n.alive ? 'state-completed' : 'state-dead_lettered')}, n.alive ? 'alive' : 'dead'))));
    return {content: [
      el('h1', null, 'Nodes'), cards,
      el('h2', null, 'Every worker process'),
      el('p', {id: 'leader'}, data.leader ? ['Leader: ', el('span', {class: 'mono'}, data.leader)] : 'No process leads the cluster right now.'),
      el('table', {id: 'cluster'},
        el('thead', null, el('tr', null, el('th', null, 'node'), el('th', null, 'worker id'), el('th', null, 'host'),
          el('th', null, 'version'), el('th', null, 'started (UTC)'), el('th', null, 'last seen (UTC)'),
          el('th', null, 'queues'), el('th', {class: 'num'}, 'jobs held'), el('th', null, ''))),
        el('tbody', null, cluster.length ? cluster : el('tr', null, el('td', {colspan: 9, class: 'empty'}, 'No process has registered.')))),
      el('p', {class: 'muted'}, data.note)]};
  }

  async function pageSchedules() {
    const data = await api('/api/schedules');
    const tick = t => t ? t.replace('T', ' ').replace('Z', '') : null;
    const rows = data.schedules.map(s => el('tr', {'data-name': s.name},
      el('td', {class: 'c-name mono'}, s.name),
      el('td', {class: 'c-cron mono'}, s.cron),
      el('td', {class: 'c-timezone'}, s.timezone || ''),
      el('td', {class: 'c-kind mono'}, s.kind || ''),
      el('td', {class: 'c-queue'}, s.queue || ''),
      el('td', {class: 'num'}, s.priority === null ? '' : num(s.priority)),
      el('td', {class: 'c-catch-up'}, s.catch_up || ''),
      el('td', {class: 'c-last'}, tick(s.last_tick) || 'never',
        s.changed ? el('div', {class: 'muted'}, 'before the schedule changed') : null),
      el('td', {class: 'c-job'}, s.last_job_id ? link('#/job/' + s.last_job_id, String(s.last_job_id)) : ''),
      el('td', {class: 'c-next'}, s.configured ? (tick(s.next_tick) || 'none')
        : el('span', {class: 'badge state-dead_lettered'}, 'not configured'))));
    return {content: [el('h1', null, 'Periodic schedules'),
      rows.length ? el('table', {id: 'schedules'},
        el('thead', null, el('tr', null, el('th', null, 'name'), el('th', null, 'cron'), el('th', null, 'time zone'),
          el('th', null, 'kind'), el('th', null, 'queue'), el('th', {class: 'num'}, 'priority'), el('th', null, 'catch up'),
          el('th', null, 'last tick (UTC)'), el('th', null, 'job'), el('th', null, 'next tick (UTC)'))),
        el('tbody', null, rows))
        : el('div', {class: 'card empty', id: 'schedules-empty'}, 'No periodic schedules: add [periodic.NAME] sections to the configuration.'),
      el('p', {class: 'muted'}, data.note)]};
  }

  async function pageAudit(params) {
    const q = new URLSearchParams();
    if (params.before) q.set('before', params.before);
    const data = await api('/api/audit?' + q.toString());
    const rows = data.entries.map(a => el('tr', {'data-id': a.id},
      el('td', null, when(a.at)),
      el('td', {class: 'mono c-action'}, a.action),
      el('td', {class: 'mono c-target'}, JSON.stringify(a.target)),
      el('td', {class: 'num c-affected'}, num(a.affected)),
      el('td', null, a.job_ids.map((id, i) => [i ? ', ' : '', link('#/job/' + id, String(id))])),
      el('td', {class: 'c-outcome'}, a.outcome),
      el('td', {class: 'mono'}, a.remote_addr),
      el('td', {class: 'muted'}, a.user_agent)));
    return {content: [
      el('h1', null, 'Audit log'),
      el('p', {class: 'muted'}, 'Every action taken through this dashboard, written in the same transaction as the action.'),
      el('table', {id: 'audit'},
        el('thead', null, el('tr', null, el('th', null, 'at (UTC)'), el('th', null, 'action'), el('th', null, 'target'),
          el('th', {class: 'num'}, 'affected'), el('th', null, 'jobs'), el('th', null, 'outcome'),
          el('th', null, 'from'), el('th', null, 'user agent'))),
        el('tbody', null, rows.length ? rows : el('tr', null, el('td', {colspan: 8, class: 'empty'}, 'No actions yet.')))),
      pager('audit', params, data, 'entries'),
    ]};
  }

  const pages = {
    'queues': pageQueues,
    'jobs': pageJobs,
    'job': pageJob,
    'dead-letters': pageDeadLetters,
    'dead-letter': pageDeadLetter,
    'failures': pageFailures,
    'nodes': pageNodes,
    'schedules': pageSchedules,
    'audit': pageAudit,
  };

  function parseRoute() {
    const hash = location.hash.replace(/^#\/?/, '');
    const [path, query] = hash.split('?');
    const parts = path.split('/').filter(Boolean);
    const params = {};
    new URLSearchParams(query || '').forEach((v, k) => { params[k] = v; });
    const page = pages[parts[0]] ? parts[0] : 'queues';
    return {page: page, id: parts[1], params: params};
  }

  // Renders the current route; a refresh keeps the page when nothing is
  // being typed or confirmed.
  async function render(isRefresh) {
    const route = parseRoute();
    const generation = ++app.generation;
    for (const a of document.querySelectorAll('#nav a'))
      a.classList.toggle('active', a.dataset.page === route.page ||
        (route.page === 'job' && a.dataset.page === 'jobs') ||
        (route.page === 'dead-letter' && a.dataset.page === 'dead-letters'));
    const main = document.getElementById('main');
    try {
      const out = await pages[route.page](route.params, route.id);
      if (generation !== app.generation) return;
      const keep = isRefresh ? main.querySelector('#action-result') : null;
      replace(main, out.content);
      // A refresh keeps the outcome of the last action on screen.
      if (keep && keep.firstChild) {
        const fresh = main.querySelector('#action-result');
        if (fresh) replace(fresh, Array.from(keep.childNodes));
      }
      if (out.after) out.after();
      notice(app.databaseNote, true);
      main.dataset.page = route.page;
      main.dataset.loaded = String(Date.now());
      const d = new Date();
      replace(document.getElementById('refreshed'), 'Refreshed ' + pad(d.getUTCHours()) + ':' + pad(d.getUTCMinutes()) + ':' + pad(d.getUTCSeconds()) + ' UTC');
    } catch (e) {
      if (generation !== app.generation) return;
      if (e.status === 401) {
        notice('This dashboard\'s data needs the token: enter it at the top right.', true);
        replace(main, el('div', {class: 'card empty', id: 'needs-token'}, 'Enter the token to see this page.'));
      } else if (e.status === 404) {
        replace(main, el('div', {class: 'card empty'}, e.message));
      } else {
        notice('Could not load this page: ' + e.message, true);
      }
    }
  }

  function busy() {
    const active = document.activeElement;
    return app.confirming || (active && (active.tagName === 'INPUT' || active.tagName === 'SELECT'));
  }

  function refresh() {
    if (document.hidden || busy()) return;
    render(true);
  }

  async function start() {
    try {
      app.session = await api('/api/session');
    } catch (e) {
      app.session = null;
      notice('Cannot reach the dashboard API: ' + e.message, true);
    }
    app.database = pickDatabase();
    renderSession();
    renderDatabases();
    await render(false);
  }

  window.addEventListener('hashchange', () => { app.confirming = false; render(false); });
  // Back and forward across a change of database.
  window.addEventListener('popstate', function () {
    const before = app.database;
    app.database = pickDatabase();
    if (app.database !== before) {
      app.knownQueues = [];
      renderDatabases();
      render(false);
    }
  });
  document.addEventListener('DOMContentLoaded', function () {
    const live = document.getElementById('live');
    app.timer = setInterval(() => { if (live.checked) refresh(); }, REFRESH_MS);
    start();
  });
})();
