
(function () {
  'use strict';
  var data = JSON.parse(document.getElementById('ab-data').textContent);
  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) { e.className = cls; }
    if (text !== undefined && text !== null) { e.textContent = String(text); }
    return e;
  }
  function lazy(title, open, build) {
    var d = el('details'); var built = false;
    d.appendChild(el('summary', null, title));
    function fill() { if (d.open && !built) { built = true; build(d); } }
    d.addEventListener('toggle', fill);
    if (open) { d.open = true; fill(); }
    return d;
  }
  function note(parent, text) { parent.appendChild(el('p', 'note', text)); }
  function pre(text, cls) { return el('pre', cls, text); }
  function kv(a) {
    var t = el('table'); var rows = [
      ['outcome', a.passed ? 'passed' : (a.reason || 'failed')], ['category', a.category],
      ['duration (s)', a.duration], ['steps', a.steps], ['tokens', a.tokens],
      ['cost (USD)', a.cost], ['summary', a.summary], ['signature', a.signature],
      ['artifacts', a.task_dir], ['engine', a.engine], ['earlier tries', a.retried]];
    rows.forEach(function (r) {
      if (r[1] === null || r[1] === undefined || r[1] === '') { return; }
      var tr = el('tr'); tr.appendChild(el('th', null, r[0])); tr.appendChild(el('td', null, r[1]));
      t.appendChild(tr);
    });
    return t;
  }
  var SVGNS = 'http://www.w3.org/2000/svg';
  function svgEl(tag, attrs, text) {
    var e = document.createElementNS(SVGNS, tag);
    Object.keys(attrs).forEach(function (k) { e.setAttribute(k, String(attrs[k])); });
    if (text !== undefined) { e.textContent = String(text); }
    return e;
  }
  var KIND_COLOR = {phase: '#8250df', turn: '#9a6700', tool: '#0969da', llm: '#1a7f37',
    delegation: '#bf3989'};
  function secs(ms, digits) {
    return (ms / 1000).toFixed(digits === undefined ? (ms >= 10000 ? 0 : 1) : digits) + ' s';
  }
  function bars(d, spans) {
    var left = 190, width = 560, rowH = 16, top = 6;
    var end = 0; spans.forEach(function (s) { end = Math.max(end, s[3]); });
    if (end <= 0) { end = 1; }
    var height = top + spans.length * rowH + 28;
    var svg = svgEl('svg', {width: left + width + 20, height: height, role: 'img',
      'class': 'timeline', 'aria-label': 'timeline of the attempt'});
    var raw = end / 5 / 1000; var mag = Math.pow(10, Math.floor(Math.log10(raw)));
    var step = [1, 2, 5, 10].map(function (m) { return m * mag; })
      .filter(function (v) { return v >= raw; })[0] * 1000;
    for (var t = 0; t <= end + 1e-9; t += step) {
      var x = left + t / end * width;
      svg.appendChild(svgEl('line', {x1: x, y1: top, x2: x, y2: height - 22, stroke: '#eee'}));
      svg.appendChild(svgEl('text', {x: x, y: height - 8, 'font-size': 10,
        'text-anchor': 'middle'}, secs(t, step >= 1000 ? 0 : (step >= 100 ? 1 : 2))));
    }
    spans.forEach(function (s, i) {
      var y = top + i * rowH;
      var x = left + s[2] / end * width;
      var w = Math.max((s[3] - s[2]) / end * width, 1.5);
      svg.appendChild(svgEl('text', {x: left - 6, y: y + 11, 'font-size': 11,
        'text-anchor': 'end'}, s[0].length > 28 ? s[0].slice(0, 27) + '…' : s[0]));
      var bar = svgEl('rect', {x: x, y: y + 2, width: w, height: rowH - 4,
        fill: s[4] === false ? '#cf222e' : (KIND_COLOR[s[1]] || '#8c959f'),
        'class': 'span span-' + s[1]});
      bar.appendChild(svgEl('title', {}, s[0] + ': ' + secs(s[2]) + ' → ' + secs(s[3]) +
        ' (' + secs(s[3] - s[2]) + ')' + (s[4] === false ? ', failed' : '')));
      svg.appendChild(bar);
    });
    d.appendChild(svg);
    d.appendChild(el('p', 'muted', 'Bars from the first event (seconds): phases, agent turns, ' +
      'tool calls, model requests; red: failed. Hover a bar for its times.'));
  }
  function timeline(d, a) {
    var events = a.events;
    if (!events.length) { note(d, 'No events recorded for this attempt.'); return; }
    if (a.spans && a.spans.length) { bars(d, a.spans); }
    else { note(d, 'No timed phases or steps to draw; the events are listed below.'); }
    d.appendChild(lazy('Events (' + events.length + ')', !(a.spans && a.spans.length),
      function (x) {
        var t = el('table', 'tl'); var h = el('tr');
        ['seq', 't (s)', 'type', 'actor', 'detail'].forEach(function (c) {
          h.appendChild(el('th', null, c));
        });
        t.appendChild(h);
        var t0 = null;
        events.forEach(function (e) {
          if (typeof e[1] === 'number' && (t0 === null || e[1] < t0)) { t0 = e[1]; }
        });
        events.forEach(function (e) {
          var tr = el('tr');
          e.forEach(function (v, i) {
            if (i === 1 && typeof v === 'number') { v = ((v - t0) / 1000).toFixed(3); }
            tr.appendChild(el('td', null, v));
          });
          t.appendChild(tr);
        });
        x.appendChild(t);
      }));
  }
  function entries(d, items, kind) {
    if (!items.length) { note(d, 'No ' + kind + ' recorded.'); return; }
    items.forEach(function (it) {
      d.appendChild(lazy(it.title, false, function (x) { x.appendChild(pre(it.text)); }));
    });
  }
  function diff(text) {
    var p = el('pre', 'diff');
    text.split('\n').forEach(function (line) {
      var cls = null;
      if (line.indexOf('@@') === 0) { cls = 'hunk'; }
      else if (line.charAt(0) === '+' && line.indexOf('+++') !== 0) { cls = 'add'; }
      else if (line.charAt(0) === '-' && line.indexOf('---') !== 0) { cls = 'del'; }
      p.appendChild(el('span', cls, line + '\n'));
    });
    return p;
  }
  function diffs(d, items) {
    if (!items.length) { note(d, 'No diffs recorded.'); return; }
    items.forEach(function (it, i) {
      d.appendChild(lazy(it.title, i === items.length - 1, function (x) {
        if (it.text.trim()) { x.appendChild(diff(it.text)); }
        else { x.appendChild(el('p', 'muted no-change',
          'no change: the patch is empty (the repository was left as it was)')); }
      }));
    });
  }
  function grid(headers, rows, rowClass) {
    var t = el('table'); var h = el('tr');
    headers.forEach(function (x) { h.appendChild(el('th', null, x)); });
    t.appendChild(h);
    rows.forEach(function (r) {
      var tr = el('tr', rowClass ? rowClass(r) : null);
      r.forEach(function (v) { tr.appendChild(el('td', null, v)); });
      t.appendChild(tr);
    });
    return t;
  }
  function context(d, c) {
    if (c.error) { note(d, c.error); return; }
    note(d, 'Agent ' + (c.agent || '?') + ' · budget ' + (c.budget === null ? '?' : c.budget) +
      ' tokens · ' + (c.chars_per_token === null ? '?' : c.chars_per_token) +
      ' characters a token (estimated)');
    if (!c.packs.length) { note(d, 'No pack recorded.'); }
    c.packs.forEach(function (p) {
      d.appendChild(el('p', 'pack', 'Step ' + (p.step === null ? '?' : p.step) + ': used ' +
        (p.used === null ? '?' : p.used) + ' of ' + (c.budget === null ? '?' : c.budget) +
        ' tokens, ' + p.items.length + ' item(s)'));
      d.appendChild(grid(['path', 'lines', 'included', 'reason', 'tokens'], p.items,
        function (r) { return r[2] === 'included' ? 'included' : 'excluded'; }));
      if (p.more) { note(d, p.more + ' more item(s) not shown'); }
    });
  }
  function delegation(d, g) {
    if (g.error) { note(d, g.error); return; }
    d.appendChild(el('p', 'muted', 'Calls and tokens per role (agent ' + (g.agent || '?') + ')'));
    d.appendChild(grid(['role', 'nodes', 'calls', 'prompt tokens', 'completion tokens',
      'tokens'], g.roles));
    d.appendChild(el('p', 'muted', 'Delegation graph (parent → child)'));
    var root = el('ul', 'dgraph'); var stack = [root];  // root, then the li of each depth
    g.tree.forEach(function (n) {
      var depth = Math.min(n[0], stack.length - 1);
      while (stack.length > depth + 1) { stack.pop(); }
      var parent = stack[stack.length - 1];
      if (parent.tagName === 'LI') {  // its list of children, made with the first child
        var kids = parent.lastChild;
        if (!kids || kids.tagName !== 'UL') { kids = el('ul', 'dgraph'); parent.appendChild(kids); }
        parent = kids;
      }
      var li = el('li', 'dnode');
      li.appendChild(el('span', 'role', n[1]));
      var st = n[4] || '';
      li.appendChild(el('span', null, ' · calls ' + (n[2] === null ? '?' : n[2]) + ' · tokens ' +
        (n[3] === null ? '?' : n[3]) + ' · '));
      li.appendChild(el('span', st === 'ok' ? 'st-ok' : 'st-bad', st || '?'));
      if (n[5]) { li.appendChild(el('span', 'muted', ' — ' + n[5])); }
      li.setAttribute('data-node', n[6]);
      parent.appendChild(li); stack.push(li);
    });
    d.appendChild(root);
    if (g.more) { note(d, g.more + ' more node(s) not shown'); }
  }
  function attempt(a) {
    var box = el('div', 'attempt');
    box.appendChild(kv(a));
    a.missing.forEach(function (m) { note(box, m); });
    function part(title, items, open, build) {
      box.appendChild(lazy(title + ' (' + items.length + ')', open, build));
    }
    part('Event timeline', a.events, true, function (d) { timeline(d, a); });
    part('Tool calls', a.tool_calls, true, function (d) {
      entries(d, a.tool_calls, 'tool calls');
    });
    part('Diffs', a.diffs, true, function (d) { diffs(d, a.diffs); });
    part('Conversation', a.conversation, false, function (d) {
      entries(d, a.conversation, 'messages');
    });
    part('Logs', a.logs, false, function (d) { entries(d, a.logs, 'logs'); });
    if (a.context) {
      box.appendChild(lazy('Context manifest' + (a.context.error ? ' (unreadable)' :
        ' (' + a.context.packs.length + ')'), false, function (d) { context(d, a.context); }));
    }
    if (a.delegation) {
      box.appendChild(lazy('Delegation' + (a.delegation.error ? ' (unreadable)' :
        ' (' + a.delegation.tree.length + ')'), false,
        function (d) { delegation(d, a.delegation); }));
    }
    return box;
  }
  function render(body, task) {
    if (task.attempts.length === 1) { body.appendChild(attempt(task.attempts[0])); return; }
    task.attempts.forEach(function (a, i) {
      var title = 'Attempt ' + a.index + ': ' + (a.passed ? 'passed' : (a.reason || 'failed'));
      body.appendChild(lazy(title, i === 0, function (d) { d.appendChild(attempt(a)); }));
    });
  }
  function toggle(row, show) {
    var btn = row.querySelector('button.open'); var drill = row.nextElementSibling;
    if (show && !row.built) {
      row.built = true;
      render(drill.querySelector('.drill-body'), data.tasks[Number(row.getAttribute('data-i'))]);
    }
    drill.hidden = !show;
    btn.setAttribute('aria-expanded', String(show));
    btn.textContent = show ? 'close' : 'open';
  }
  document.querySelectorAll('tr.task').forEach(function (row) {
    row.querySelector('button.open').addEventListener('click', function () {
      toggle(row, row.nextElementSibling.hidden);
    });
  });
  function openFromHash() {  // report.html#task-<id>: open that task's drill-down
    var id; try { id = decodeURIComponent(location.hash.slice(1)); } catch (e) { return; }
    var row = id ? document.getElementById(id) : null;
    var missing = document.getElementById('missing-task');
    if (missing) { missing.remove(); }
    if (id.indexOf('task-') === 0 && (!row || !row.classList.contains('task'))) {
      missing = el('p', 'note', 'Task ' + id.slice(5) + ' is not on this page' +
        (document.getElementById('more-tasks') ? ' (only the first tasks are shown).' : '.'));
      missing.id = 'missing-task';
      document.getElementById('tasks').before(missing);
      return;
    }
    if (!row) { return; }
    row.hidden = false; toggle(row, true);
    document.querySelectorAll('tr.task.target').forEach(function (r) {
      r.classList.remove('target');
    });
    row.classList.add('target'); row.scrollIntoView({block: 'start'});
  }
  window.addEventListener('hashchange', openFromHash); openFromHash();
  var filter = document.getElementById('task-filter');
  var status = document.getElementById('task-status');
  function apply() {
    var q = filter.value.toLowerCase(); var s = status.value;
    document.querySelectorAll('tr.task').forEach(function (row) {
      var ok = row.getAttribute('data-search').indexOf(q) >= 0 &&
        (s === 'all' || row.getAttribute('data-status') === s);
      row.hidden = !ok;
      if (!ok) {
        row.nextElementSibling.hidden = true;
        var b = row.querySelector('button.open');
        b.textContent = 'open'; b.setAttribute('aria-expanded', 'false');
      }
    });
  }
  filter.addEventListener('input', apply); status.addEventListener('change', apply);
})();
