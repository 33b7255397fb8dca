// agentbench view: the pages poll the viewer's JSON and build the DOM from it. Every value from a
// run goes into the page through textContent or an encoded query string, never as markup.
(function () {
  'use strict';
  var POLL_MS = 1500;
  var main = document.getElementById('main');
  var params = new URLSearchParams(window.location.search);

  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) { e.className = cls; }
    if (text !== undefined && text !== null) { e.textContent = String(text); }
    return e;
  }
  function link(href, text, cls) { var a = el('a', cls, text); a.href = href; return a; }
  function q(obj) {
    var u = new URLSearchParams();
    Object.keys(obj).forEach(function (k) {
      [].concat(obj[k]).forEach(function (v) { if (v !== null && v !== undefined) { u.append(k, v); } });
    });
    return u.toString();
  }
  function runHref(name) { return '/_view/run?' + q({run: name}); }
  function reportHref(name) { return '/' + encodeURIComponent(name) + '/report.html'; }
  function sideHref(a, b, task, ai, bi) { return '/_view/side?' + q({a: a, b: b, task: task, ai: ai, bi: bi}); }
  function pct(x) { return x === null || x === undefined ? '—' : (x * 100).toFixed(1) + '%'; }
  function usd(x, d) { return x === null || x === undefined ? '—' : '$' + x.toFixed(d || 4); }
  function secs(x) { return x === null || x === undefined ? '—' : x.toFixed(1) + ' s'; }
  function table(headers, rows, id) {
    var t = el('table'); if (id) { t.id = id; }
    var h = el('tr'); headers.forEach(function (x) { h.appendChild(el('th', 'nowrap', x)); });
    var head = el('thead'); head.appendChild(h); t.appendChild(head);
    var body = el('tbody');
    rows.forEach(function (r) {
      var tr = el('tr', r.cls || null);
      r.cells.forEach(function (v) {
        var td = el('td');
        if (v instanceof Node) { td.appendChild(v); } else { td.textContent = v === null || v === undefined ? '' : String(v); }
        tr.appendChild(td);
      });
      body.appendChild(tr);
    });
    t.appendChild(body);
    return t;
  }
  function getJSON(url, done) {
    fetch(url, {credentials: 'same-origin'}).then(function (r) {
      return r.json().then(function (j) { return {ok: r.ok, body: j}; });
    }).then(function (r) { done(r.ok ? r.body : null, r.ok ? null : (r.body.error || 'error')); },
      function (e) { done(null, String(e)); });
  }
  // poll `url` and call render(json) each time the answer changed
  function poll(url, render) {
    var last = null;
    function tick() {
      getJSON(url, function (j, err) {
        var text = JSON.stringify(err ? {error: err} : j);
        if (text !== last) { last = text; render(j, err); }
        window.setTimeout(tick, POLL_MS);
      });
    }
    tick();
  }
  function box(id) {
    var d = document.getElementById(id);
    if (!d) { d = el('div'); d.id = id; main.appendChild(d); }
    d.textContent = '';
    return d;
  }
  function result(row) {
    var s = el('span', row.passed ? 'pass' : (row.category === 'scored' ? 'fail' : 'muted'),
      row.passed ? 'passed' : (row.failure_reason || 'failed'));
    return s;
  }
  function runningTable(running) {
    return table(['task', 'attempt', 'phase', 'step', 'tool', 'worker', 'started', 'events'],
      running.map(function (a) {
        var phase = a.finished ? 'recording' : (a.phase || 'starting') + (a.failed_phase ? ' (' + a.failed_phase + ' failed)' : '');
        return {cls: 'running', cells: [a.task_id, a.index === null ? '?' : a.index, phase,
          a.step === null ? '—' : a.step, a.tool || '—', a.worker, a.started, a.events]};
      }), null);
  }
  function status(r) {
    if (!r.live) { return el('span', 'badge', 'finished'); }
    if (r.idle_sec !== null && r.idle_sec > 600) { return el('span', 'badge stale', 'no end written (idle ' + Math.round(r.idle_sec) + ' s)'); }
    return el('span', 'badge live', 'running');
  }

  // ------------------------------------------------------------------ the runs index
  function pageIndex() {
    var chosen = {};
    main.appendChild(el('h1', null, 'Runs'));
    var actions = el('div', 'actions');
    var hint = el('span', 'muted', '');
    var btnPaired = el('button', null, 'Paired page (2 runs)'); btnPaired.id = 'go-paired';
    var btnCompare = el('button', null, 'Compare (2+ runs)'); btnCompare.id = 'go-compare';
    var btnSide = el('button', null, 'Side by side (2 runs)'); btnSide.id = 'go-side';
    [btnPaired, btnCompare, btnSide, hint].forEach(function (b) { actions.appendChild(b); });
    main.appendChild(actions);
    function picked() { return Object.keys(chosen).filter(function (k) { return chosen[k]; }).sort(); }
    function sync() {
      var n = picked().length;
      btnPaired.disabled = n !== 2; btnSide.disabled = n !== 2; btnCompare.disabled = n < 2;
      hint.textContent = n + ' run(s) picked (first picked by name is A / the baseline)';
    }
    btnPaired.addEventListener('click', function () { var p = picked(); window.location.href = '/_view/paired?' + q({a: p[0], b: p[1]}); });
    btnCompare.addEventListener('click', function () { window.location.href = '/_view/compare?' + q({run: picked()}); });
    btnSide.addEventListener('click', function () { var p = picked(); window.location.href = sideHref(p[0], p[1]); });
    sync();
    poll('/_api/runs', function (d, err) {
      var live = box('live'); var runs = box('runs'); var probs = box('problems');
      if (err) { runs.appendChild(el('p', 'err', err)); return; }
      var going = d.runs.filter(function (r) { return r.live; });
      if (going.length) {
        live.appendChild(el('h2', null, 'In progress'));
        going.forEach(function (r) {
          var h = el('h3'); h.appendChild(link(runHref(r.name), r.name)); h.appendChild(document.createTextNode(' '));
          h.appendChild(status(r)); live.appendChild(h);
          live.appendChild(r.running.length ? runningTable(r.running) : el('p', 'note', 'No attempt running right now.'));
        });
      }
      runs.appendChild(el('h2', null, 'All runs (newest first)'));
      runs.appendChild(table(['', 'run', 'status', 'variant', 'started', 'tasks', 'attempts', 'pass rate', 'Wilson 95%', 'cost', 'per pass', 'page'],
        d.runs.map(function (r) {
          var cb = el('input'); cb.type = 'checkbox'; cb.checked = !!chosen[r.name];
          cb.addEventListener('change', function () { chosen[r.name] = cb.checked; sync(); });
          var f = r.figures || {};
          var ci = f.ci_low === null || f.ci_low === undefined ? '—' : '[' + pct(f.ci_low) + ', ' + pct(f.ci_high) + ']';
          return {cls: 'run', cells: [cb, link(runHref(r.name), r.name), status(r), r.variant || '—', r.started || '—',
            r.figures ? f.tasks : '—', r.figures ? f.attempts : '0', pct(f.rate), ci,
            f.cost === null || f.cost === undefined ? '—' : usd(f.cost, 2), usd(f.per_pass), link(reportHref(r.name), 'report')]};
        }), 'runs-table'));
      if (!d.runs.length) { runs.appendChild(el('p', 'note', 'No run under ' + d.root + ' yet.')); }
      d.problems.forEach(function (p) { probs.appendChild(el('p', 'err', p)); });
    });
  }

  // ------------------------------------------------------------------ one run, live
  function pageRun() {
    var name = params.get('run') || '';
    var h = el('h1', null, 'Run ' + name); main.appendChild(h);
    var nav = el('p', 'crumbs'); nav.appendChild(link(reportHref(name), 'full run page (charts, drill-down)'));
    main.appendChild(nav);
    poll('/_api/run?' + q({run: name}), function (d, err) {
      var info = box('info'); var live = box('live'); var list = box('attempts');
      if (err) { info.appendChild(el('p', 'err', err)); return; }
      if (d.error) { info.appendChild(el('p', 'err', d.error)); return; }
      var p = el('p'); p.appendChild(status(d));
      p.appendChild(document.createTextNode(' variant ' + (d.variant || '—') + ' · started ' + (d.started_at || '—') +
        ' · harness ' + (d.harness_version || '—') + ' · ' + d.attempts.length + ' attempt(s) recorded'));
      info.appendChild(p);
      if (d.live) {
        live.appendChild(el('h2', null, 'Running attempts'));
        live.appendChild(d.running.length ? runningTable(d.running) : el('p', 'note', 'No attempt running right now.'));
      }
      list.appendChild(el('h2', null, 'Attempts (in the order they finished)'));
      list.appendChild(table(['task', 'attempt', 'result', 'category', 'duration', 'steps', 'tokens', 'cost', 'summary', ''],
        d.attempts.map(function (a) {
          return {cls: 'attempt', cells: [a.task_id, a.attempt_index, result(a), a.category, secs(a.duration_sec), a.steps,
            a.total_tokens, usd(a.cost_usd), a.summary, link(sideHref(name, null, a.task_id, a.attempt_index), 'trajectory')]};
        }), 'attempts-table'));
    });
  }

  // ------------------------------------------------------------------ one task in two runs
  function diffPre(text) {
    var p = el('pre', 'diff');
    text.split('\n').forEach(function (line) {
      var c = line.indexOf('+') === 0 && line.indexOf('+++') !== 0 ? 'add' :
        line.indexOf('-') === 0 && line.indexOf('---') !== 0 ? 'del' : line.indexOf('@@') === 0 ? 'hunk' : null;
      p.appendChild(el('span', c, line + '\n'));
    });
    return p;
  }
  function items(list, open, asDiff) {
    var d = el('div');
    if (!list.length) { d.appendChild(el('p', 'note', 'none')); }
    list.forEach(function (it, i) {
      var det = el('details'); det.appendChild(el('summary', null, it.title));
      det.appendChild(asDiff ? diffPre(it.text) : el('pre', null, it.text));
      det.open = open(i, list.length); d.appendChild(det);
    });
    return d;
  }
  var SECTIONS = [
    ['Tool calls', function (a) { return items(a.tool_calls, function () { return false; }); }],
    ['Diffs', function (a) { return items(a.diffs, function (i, n) { return i === n - 1; }, true); }],
    ['Conversation', function (a) { return items(a.conversation, function () { return false; }); }],
    ['Events', function (a) {
      return a.events.length ? table(['seq', 'ms', 'type', 'actor', 'detail'], a.events.map(function (e) { return {cells: e}; }))
        : el('p', 'note', 'none');
    }],
    ['Logs', function (a) { return items(a.logs, function () { return false; }); }]
  ];
  function pageSide() {
    var runA = params.get('a') || '', runB = params.get('b');
    var task = params.get('task'), ai = params.get('ai') || '0', bi = params.get('bi') || '0';
    main.appendChild(el('h1', null, runB ? 'Side by side: ' + (task || 'pick a task') : 'Trajectory: ' + (task || '')));
    var controls = el('div', 'actions'); main.appendChild(controls);
    var grid = el('div', runB ? 'side' : 'side one'); grid.id = 'side'; main.appendChild(grid);
    var sides = runB ? [[runA, ai, 'A'], [runB, bi, 'B']] : [[runA, ai, '']];
    var got = [];
    function render() {
      if (got.length < sides.length) { return; }
      grid.textContent = '';
      got.forEach(function (g, i) {
        var head = el('div'); var s = sides[i];
        var h = el('h3'); h.appendChild(document.createTextNode((s[2] ? s[2] + ': ' : '')));
        h.appendChild(link(runHref(s[0]), s[0])); head.appendChild(h);
        if (g.err) { head.appendChild(el('p', 'err', g.err)); } else {
          var a = g.d.attempt;
          head.appendChild(el('p', a.passed ? 'pass' : 'fail', (a.passed ? 'passed' : (a.reason || 'failed')) +
            ' · attempt ' + a.index + ' · ' + a.steps + ' steps · ' + secs(a.duration) + ' · ' + a.tokens + ' tokens'));
          if (a.summary) { head.appendChild(el('p', 'muted', a.summary)); }
          a.missing.forEach(function (m) { head.appendChild(el('p', 'note', m)); });
        }
        grid.appendChild(head);
      });
      SECTIONS.forEach(function (sec) {
        grid.appendChild(el('div', 'section-title', sec[0]));
        got.forEach(function (g) { var c = el('div'); c.dataset.section = sec[0]; if (!g.err) { c.appendChild(sec[1](g.d.attempt)); } grid.appendChild(c); });
      });
    }
    function picker(tasks) {
      if (controls.childNodes.length) { return; }
      var sel = el('select'); sel.id = 'task-pick';
      sel.appendChild(el('option', null, 'pick a task'));
      tasks.forEach(function (t) { var o = el('option', null, t); o.value = t; o.selected = t === task; sel.appendChild(o); });
      sel.addEventListener('change', function () { window.location.href = sideHref(runA, runB, sel.value, ai, bi); });
      controls.appendChild(el('span', null, 'task')); controls.appendChild(sel);
    }
    if (!task) {
      var all = {}, left = sides.length;
      sides.forEach(function (s) {
        getJSON('/_api/run?' + q({run: s[0]}), function (d, err) {
          if (err) { main.appendChild(el('p', 'err', err)); }
          (d && d.attempts || []).forEach(function (a) { all[a.task_id] = (all[a.task_id] || 0) + 1; });
          left -= 1;
          if (!left) { picker(Object.keys(all).filter(function (t) { return all[t] >= 1; }).sort()); }
        });
      });
      return;
    }
    sides.forEach(function (s, i) {
      getJSON('/_api/attempt?' + q({run: s[0], task: task, index: s[1]}), function (d, err) {
        got[i] = {d: d, err: err};
        if (d) { picker(d.tasks); }
        if (got.filter(function (x) { return x; }).length === sides.length) { render(); }
      });
    });
  }

  // ------------------------------------------------------------------ search
  function pageSearch() {
    main.appendChild(el('h1', null, 'Search across runs'));
    var form = el('form', 'search'); form.method = 'get'; form.action = '/_view/search';
    var input = el('input'); input.name = 'q'; input.id = 'q'; input.value = params.get('q') || '';
    input.placeholder = 'task id, failure reason, signature line or command';
    var sel = el('select'); sel.name = 'in';
    ['all', 'task', 'reason', 'signature', 'command'].forEach(function (f) {
      var o = el('option', null, f); o.value = f; o.selected = f === (params.get('in') || 'all'); sel.appendChild(o);
    });
    var go = el('button', null, 'Search'); go.type = 'submit';
    [input, sel, go].forEach(function (x) { form.appendChild(x); });
    main.appendChild(form);
    if (!params.get('q')) { return; }
    getJSON('/_api/search?' + q({q: params.get('q'), in: params.get('in') || 'all'}), function (d, err) {
      var out = box('hits');
      if (err) { out.appendChild(el('p', 'err', err)); return; }
      out.appendChild(el('p', 'muted', d.hits.length + (d.more ? '+' : '') + ' hit(s) in ' + d.runs_searched + ' run(s)'));
      out.appendChild(table(['run', 'task', 'attempt', 'result', 'field', 'match'], d.hits.map(function (h) {
        return {cls: 'hit', cells: [link(runHref(h.run), h.run), link(sideHref(h.run, null, h.task_id, h.attempt_index), h.task_id),
          h.attempt_index, h.passed ? 'passed' : (h.reason || 'failed'), h.field, h.text]};
      }), 'hits-table'));
    });
  }

  var pages = {index: pageIndex, run: pageRun, side: pageSide, search: pageSearch};
  (pages[document.body.dataset.page] || pageIndex)();
}());
