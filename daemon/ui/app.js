// The status page: polls /v1/stats and /v1/jobs about once a second and redraws. In cluster
// mode (/v1/stats has "cluster") it also shows the cluster's nodes, each job's node, and the
// jobs claimed ahead (claimed by a node, not started yet) among the live ones.
// Every string from the daemon (kinds, reasons, errors come from clients) reaches the page as
// text (textContent or text nodes); nothing is ever parsed as HTML. A bearer token, when the
// daemon asks for one, lives in the variable `token` only: never in storage, never in a URL.
// Memory stays bounded: each poll replaces what it draws, and the chart's points come from the
// daemon's fixed five-minute series.
'use strict';

(() => {
  const POLL_MS = 1000;
  const RECENT_LIMIT = 100;
  const LIVE_LIMIT = 50;
  let token = null;        // the bearer token, in memory only
  let needToken = false;
  let detailId = null;     // the job shown in the detail panel
  let lastRecent = [];
  // Jobs that were live at the last poll and have ended since: shown first among the recent
  // outcomes (a long job ends long after newer ones were submitted). At most JUST_ENDED_MAX.
  const JUST_ENDED_MAX = 20;
  let justEnded = [];
  let liveIds = new Set();
  let timer = null;

  const $ = (id) => document.getElementById(id);

  // Makes an element; string children become text nodes, never HTML.
  function el(tag, props, ...children) {
    const e = document.createElement(tag);
    if (props) {
      for (const [k, v] of Object.entries(props)) {
        if (k === 'class') e.className = v;
        else if (k === 'dataset') Object.assign(e.dataset, v);
        else if (k === 'on') for (const [ev, fn] of Object.entries(v)) e.addEventListener(ev, fn);
        else e[k] = v;
      }
    }
    for (const c of children) {
      if (c === null || c === undefined) continue;
      e.append(c instanceof Node ? c : document.createTextNode(String(c)));
    }
    return e;
  }
  function svg(tag, attrs) {
    const e = document.createElementNS('http://www.w3.org/2000/svg', tag);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, String(v));
    return e;
  }
  const setText = (id, v) => { $(id).textContent = String(v); };

  class HttpError extends Error {
    constructor(status, body) {
      super(body && body.error ? `${status}: ${body.error}` : `HTTP ${status}`);
      this.status = status;
    }
  }

  async function api(path, method) {
    const headers = { Accept: 'application/json' };
    if (token !== null) headers.Authorization = 'Bearer ' + token;
    const r = await fetch(path, { method: method || 'GET', headers, cache: 'no-store' });
    let body = null;
    try { body = await r.json(); } catch (_) { body = null; }
    if (r.status === 401) {
      needToken = true;
      throw new HttpError(401, body);
    }
    if (!r.ok && !(method === 'DELETE' && body && body.id !== undefined)) throw new HttpError(r.status, body);
    return body;
  }

  // ---- tiles -------------------------------------------------------------------------------
  function drawTiles(s) {
    const m = s.last_minute;
    setText('tile-throughput', m.completed.total);
    setText('tile-throughput-rate', `${m.throughput_per_s.toFixed(2)}/s completed in the last 60 s`);
    setText('tile-goodput', m.completed.on_time);
    setText('tile-goodput-rate',
      `${m.goodput_per_s.toFixed(2)}/s on time; ${m.completed.late} late, ${m.failed.total} failed`);
    setText('tile-refused', m.refused.total);
    $('tile-refused-reasons').replaceChildren(...Object.entries(m.refused.by_reason)
      .map(([reason, n]) => el('li', { dataset: { reason } }, reason + ' ', el('b', null, n))));
    setText('tile-expired', m.expired.total);
    setText('tile-cancelled', m.cancelled.total);
    $('tile-cancel-causes').replaceChildren(
      ...Object.entries(m.expired.by_reason).map(([r, n]) => el('li', null, r + ' ', el('b', null, n))),
      ...Object.entries(m.cancelled.by_cause).map(([c, n]) => el('li', null, 'by ' + c + ' ', el('b', null, n))));
    setText('tile-queue', `${s.queue.depth} / ${s.capacity.queue}`);
    $('tile-queue-classes').replaceChildren(...Object.entries(s.queue.by_class).map(([cls, n]) => {
      const fill = el('span');
      fill.style.width = `${Math.min(100, (100 * n) / Math.max(1, s.capacity.queue))}%`;
      return el('li', { dataset: { class: cls } }, el('span', null, cls), el('span', { class: 'meter' }, fill),
        el('span', { class: 'n' }, n));
    }));
    // The standing-queue rule and the measured margin (admission adds it to every predicted finish).
    const a = s.admission;
    setText('tile-admission', (a.standing_queue ? `standing queue: admits only jobs that start within ${a.queue_delay_target_ms} ms`
      : `no standing queue (target ${a.queue_delay_target_ms} ms)`) +
      `; margin ${a.margin_ms} ms (late starts ${a.start_error_tail_ms} ms, long runs ${a.run_error_tail_ms} ms)`);
    $('tile-admission').dataset.standing = String(a.standing_queue);
    setText('tile-running', `${s.running.total} / ${s.capacity.workers}`);
    $('tile-running-kinds').replaceChildren(...Object.entries(s.running.by_kind)
      .map(([kind, n]) => el('li', null, kind + ' ', el('b', null, n))));
  }

  // ---- chart -------------------------------------------------------------------------------
  const SERIES = ['on_time', 'refused', 'expired', 'cancelled'];
  function drawChart(s) {
    const chart = $('chart');
    // One user unit per CSS pixel, so that text and lines keep their shape at any width.
    const W = Math.max(200, Math.round(chart.getBoundingClientRect().width) || 600);
    const H = 180, top = 8, bottom = 18, left = 30;
    chart.setAttribute('viewBox', `0 0 ${W} ${H}`);
    const n = s.series.on_time.length;
    let max = 1;
    for (const k of SERIES) for (const v of s.series[k]) max = Math.max(max, v);
    const nice = max <= 5 ? 5 : Math.pow(10, Math.floor(Math.log10(max))) * Math.ceil(max / Math.pow(10, Math.floor(Math.log10(max))));
    const x = (i) => left + ((W - left - 4) * i) / Math.max(1, n - 1);
    const y = (v) => H - bottom - ((H - top - bottom) * v) / nice;
    const parts = [];
    for (const f of [0, 0.5, 1]) {
      parts.push(svg('line', { class: 'grid', x1: left, x2: W, y1: y(nice * f), y2: y(nice * f) }));
      const t = svg('text', { x: 2, y: y(nice * f) + 3 });
      t.textContent = String(Math.round(nice * f));
      parts.push(t);
    }
    for (const [i, label] of [[0, '-5 min'], [Math.floor((n - 1) / 2), '-2.5 min'], [n - 1, 'now']]) {
      const t = svg('text', { x: Math.min(x(i), W - 24), y: H - 4 });
      t.textContent = label;
      parts.push(t);
    }
    for (const k of SERIES) {
      const pts = s.series[k].map((v, i) => `${x(i).toFixed(1)},${y(v).toFixed(1)}`).join(' ');
      parts.push(svg('polyline', { class: 's-' + k, points: pts }));
    }
    chart.replaceChildren(...parts);
  }

  // ---- budget bars -------------------------------------------------------------------------
  // queue, run and left of a job's budget as one bar; past the deadline the bar turns red.
  function budgetBar(t) {
    const queue = Math.max(0, t.queue_ms), run = Math.max(0, t.run_ms);
    const left = t.remaining_ms;
    const over = left < 0;
    const whole = Math.max(t.budget_ms, queue + run, 1);
    const seg = (cls, ms) => {
      const s = el('span', { class: cls });
      s.style.width = `${(100 * ms) / whole}%`;
      return s;
    };
    const bar = el('div', { class: 'bar' + (over ? ' overrun' : '') },
      seg('queue', queue), seg(over ? 'over' : 'run', run), seg('left', Math.max(0, left)));
    bar.title = `budget ${t.budget_ms} ms: queued ${queue} ms, running ${run} ms, ` +
      (over ? `${-left} ms past the deadline` : `${left} ms left`);
    const label = el('div', { class: 'bar-label' + (over ? ' overrun' : '') },
      `${queue} ms queued · ${run} ms running · ` + (over ? `${-left} ms past the deadline` : `${left} ms left`) +
      ` of ${t.budget_ms} ms`);
    return el('div', { class: 'bar-wrap' }, bar, label);
  }

  async function cancelJob(id, button) {
    if (button) button.disabled = true;
    try {
      await api(`/v1/jobs/${encodeURIComponent(id)}`, 'DELETE');
    } catch (e) {
      showProblem(e);
    }
    schedule(0);
  }

  function drawLive(jobs) {
    $('live-empty').hidden = jobs.length > 0;
    $('live').replaceChildren(...jobs.map((j) => {
      const cancel = el('button', { type: 'button', class: 'cancel', dataset: { id: String(j.id) } }, 'Cancel');
      cancel.addEventListener('click', () => cancelJob(j.id, cancel));
      if (j.cause) { cancel.disabled = true; cancel.textContent = 'cancelling'; }
      const where = j.node ? ` on ${j.node}` : (j.state === 'running' ? ` on worker ${j.worker}` : '');
      const who = el('div', { class: 'who' }, el('b', null, `#${j.id} `), el('span', { class: 'kind' }, j.kind),
        el('small', null, j.state + where));
      who.addEventListener('click', () => showDetail(j.id));
      return el('li', { dataset: { id: String(j.id), state: j.state } }, who, budgetBar(j.timings), cancel);
    }));
  }

  const isLive = (j) => j.state === 'queued' || j.state === 'running' || j.state === 'claimed';

  // ---- recent outcomes ---------------------------------------------------------------------
  function drawRecent() {
    const q = $('filter-text').value.trim().toLowerCase();
    const state = $('filter-state').value;
    const listed = new Set(lastRecent.map((j) => j.id));
    const pinned = justEnded.filter((j) => !listed.has(j.id) && (!state || j.state === state));
    const rows = [...pinned, ...lastRecent].filter((j) => !q ||
      [j.kind, j.state, j.reason, j.cause, j.error].some((v) => typeof v === 'string' && v.toLowerCase().includes(q)));
    $('recent').replaceChildren(...rows.map((j) => {
      const t = j.timings;
      const tr = el('tr', { dataset: { id: String(j.id), state: j.state } },
        el('td', { class: 'n' }, j.id),
        el('td', { class: 'kind' }, j.kind),
        el('td', { class: 'state st-' + j.state }, j.state),
        el('td', { class: 'reason' }, j.reason === null ? '' : j.reason),
        el('td', { class: 'cause' }, j.cause || ''),
        el('td', { class: 'node cluster-only' }, j.node || ''),
        el('td', { class: 'n' }, t.budget_ms),
        el('td', { class: 'n' }, t.queue_ms),
        el('td', { class: 'n' }, t.run_ms),
        el('td', { class: 'n' + (t.remaining_ms < 0 ? ' late' : '') }, t.remaining_ms),
        el('td', { class: 'err' }, j.error || ''));
      tr.addEventListener('click', () => showDetail(j.id));
      return tr;
    }));
  }

  // Fetches the records of jobs that were live at the last poll and are not now.
  async function noteEnded(live) {
    const now = new Set(live.map((j) => j.id));
    const gone = [...liveIds].filter((id) => !now.has(id)).slice(0, JUST_ENDED_MAX);
    liveIds = now;
    const records = await Promise.all(gone.map((id) => api(`/v1/jobs/${id}`).catch(() => null)));
    const ended = records.filter((j) => j && !isLive(j));
    if (ended.length === 0) return;
    const ids = new Set(ended.map((j) => j.id));
    justEnded = [...ended, ...justEnded.filter((j) => !ids.has(j.id))].slice(0, JUST_ENDED_MAX);
  }

  // ---- detail ------------------------------------------------------------------------------
  async function showDetail(id) {
    detailId = id;
    await refreshDetail();
    $('detail').hidden = false;
    $('detail').scrollIntoView({ block: 'nearest' });
  }
  async function refreshDetail() {
    if (detailId === null) return;
    let j;
    try {
      j = await api(`/v1/jobs/${encodeURIComponent(detailId)}`);
    } catch (e) {
      if (e.status === 404) { setText('detail-id', `${detailId} (forgotten)`); return; }
      throw e;
    }
    setText('detail-id', `#${j.id}`);
    const t = j.timings;
    const fields = [
      ['kind', j.kind], ['state', j.state], ['reason', j.reason], ['cause', j.cause],
      ['budget at admission', `${t.budget_ms} ms`], ['queued', `${t.queue_ms} ms`], ['running', `${t.run_ms} ms`],
      [isLive(j) ? 'left now' : 'left at the end',
        t.remaining_ms < 0 ? `${-t.remaining_ms} ms past the deadline` : `${t.remaining_ms} ms`],
      ['node', j.node], ['attempt', j.attempt],
      ['worker', j.worker], ['waiting clients', j.waiters], ['error', j.error],
      ['result', j.result === undefined ? undefined : JSON.stringify(j.result).slice(0, 2000)],
    ];
    $('detail-fields').replaceChildren(...fields.filter(([, v]) => v !== undefined && v !== null)
      .flatMap(([k, v]) => [el('dt', null, k), el('dd', { dataset: { field: k } }, v)]));
    $('detail-bar').replaceChildren(budgetBar(t));
    const live = isLive(j);
    const b = $('detail-cancel');
    b.hidden = !live;
    b.disabled = !!j.cause;
  }

  function drawKinds(s) {
    // One row per kind and per estimate key: running jobs and bulkheads go by kind, the
    // runtime's estimates by key, which is the kind itself unless the kind names a finer one
    // (exec:<command>, sql:<query>, forward:<upstream>); such a key's row has no kind figures.
    const rows = new Set([...Object.keys(s.estimates), ...Object.keys(s.bulkheads), ...Object.keys(s.running.by_kind)]);
    $('kinds').replaceChildren(...[...rows].sort().map((k) => {
      const e = s.estimates[k] || {}, b = s.bulkheads[k];
      const isKind = e.kind === undefined || e.kind === k;
      return el('tr', { dataset: { row: k } }, el('td', null, k),
        el('td', { class: 'n' }, isKind ? s.running.by_kind[k] || 0 : ''),
        el('td', { class: 'n' }, isKind ? (b ? `${b.running} / ${b.limit}` : 'none') : ''),
        el('td', { class: 'n' }, e.mean_ms ?? ''), el('td', { class: 'n' }, e.tail_ms ?? ''),
        el('td', { class: 'n' }, e.samples ?? 0));
    }));
    $('breakers').replaceChildren(...Object.entries(s.breakers)
      .map(([up, st]) => el('li', null, `upstream ${up}: breaker `, el('b', null, st))));
    $('pools').replaceChildren(...Object.entries(s.sql_pools)
      .map(([db, p]) => el('li', null, `database ${db}: `, el('b', null, `${p.in_use ?? 0} in use`),
        ` of ${p.connections ?? 0} open, pool size ${p.size ?? 0}`)));
  }

  // ---- the cluster -------------------------------------------------------------------------
  // Its nodes (each incarnation, lost ones red) and its live jobs per state and class, when
  // /v1/stats has them (cluster mode).
  function drawCluster(s) {
    const c = s.cluster;
    document.body.classList.toggle('cluster', !!c);
    $('cluster').hidden = !c;
    if (!c) return;
    if (!c.nodes) {
      setText('cluster-me', `the cluster database cannot be reached: ${c.error || 'no answer'}`);
      return;
    }
    setText('cluster-me', `this node: ${c.node}`);
    $('nodes').replaceChildren(...c.nodes.map((n) => el('tr', { class: n.lost ? 'lost' : '', dataset: { node: n.name } },
      el('td', { class: 'name' }, n.name),
      el('td', { class: 'incarnation' }, n.incarnation),
      el('td', { class: 'n lease-age' }, n.lease_age_ms),
      el('td', { class: 'n workers' }, n.workers),
      el('td', { class: 'n busy' }, n.busy),
      el('td', { class: 'n ahead' }, n.claimed_ahead),
      // The standing-queue target its last beat reported; none while it sees no standing queue.
      el('td', { class: 'n standing' }, n.standing_queue_target_ms ? n.standing_queue_target_ms : '—'),
      el('td', { class: 'lease' }, n.lost ? (n.swept ? 'lost (taken back)' : 'lost') : `held (${n.lease_ms} ms)`))));
    $('cluster-jobs').replaceChildren(...Object.entries(c.jobs).map(([state, by]) =>
      el('li', { dataset: { state } }, state + ' ', el('b', null, by.total),
        ' (' + Object.entries(by).filter(([k]) => k !== 'total').map(([k, n]) => `${k} ${n}`).join(', ') + ')')));
  }

  // ---- polling and trouble -----------------------------------------------------------------
  function showProblem(e) {
    const banner = $('banner');
    if (e && e.status === 401) {
      $('token-form').hidden = false;
      banner.textContent = token === null ? 'The daemon requires a bearer token: enter it below.'
        : 'The daemon did not accept this token: enter it again.';
    } else if (e instanceof HttpError) {
      banner.textContent = `The daemon answered ${e.message}; retrying every second.`;
    } else {
      banner.textContent = `Cannot reach sandglassd at ${location.host}: is it running? ` +
        `Retrying every second; the figures below are from ${$('updated').textContent}.`;
    }
    banner.hidden = false;
    $('conn').textContent = 'unreachable';
    $('conn').className = 'conn down';
    document.querySelector('main').classList.add('stale');
  }

  async function poll() {
    timer = null;
    if (needToken && token === null) { schedule(POLL_MS); return; }
    try {
      const state = $('filter-state').value;
      const [stats, running, queued, recent] = await Promise.all([
        api('/v1/stats'),
        api(`/v1/jobs?state=running&limit=${LIVE_LIMIT}`),
        api(`/v1/jobs?state=queued&limit=${LIVE_LIMIT}`),
        api(`/v1/jobs?limit=${RECENT_LIMIT}` + (state ? `&state=${encodeURIComponent(state)}` : '')),
      ]);
      // Jobs claimed ahead exist only in a cluster.
      const claimed = stats.cluster ? await api(`/v1/jobs?state=claimed&limit=${LIVE_LIMIT}`) : { jobs: [] };
      drawTiles(stats);
      drawChart(stats);
      drawKinds(stats);
      drawCluster(stats);
      const live = [...running.jobs, ...claimed.jobs, ...queued.jobs];
      drawLive(live);
      await noteEnded(live);
      lastRecent = recent.jobs.filter((j) => !isLive(j));
      drawRecent();
      await refreshDetail();
      $('banner').hidden = true;
      $('token-form').hidden = true;
      needToken = false;
      document.querySelector('main').classList.remove('stale');
      $('conn').textContent = stats.draining ? 'connected (draining)' : 'connected';
      $('conn').className = 'conn ok';
      setText('updated', new Date().toLocaleTimeString());
      document.body.dataset.polls = String(Number(document.body.dataset.polls || 0) + 1);
    } catch (e) {
      showProblem(e);
    }
    schedule(POLL_MS);
  }
  function schedule(ms) {
    if (timer !== null) clearTimeout(timer);
    timer = setTimeout(poll, ms);
  }

  $('token-form').addEventListener('submit', (ev) => {
    ev.preventDefault();
    token = $('token').value;
    $('token').value = '';
    needToken = false;
    schedule(0);
  });
  $('filter-state').addEventListener('change', () => schedule(0));
  $('filter-text').addEventListener('input', drawRecent);
  $('detail-close').addEventListener('click', () => { detailId = null; $('detail').hidden = true; });
  $('detail-cancel').addEventListener('click', () => { if (detailId !== null) cancelJob(detailId, $('detail-cancel')); });
  schedule(0);
})();
