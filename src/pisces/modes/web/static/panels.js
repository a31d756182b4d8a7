// pisces web UI: the header's selectors and figures, and the drawer (sessions, tree, more).
(function () {
  'use strict';
  var R = window.PiscesRender, P = window.Pisces;
  var el = R.el, add = R.add, isObj = R.isObj, str = R.str;
  var S = P.S, call = P.call, quietly = P.quietly, $ = P.$;
  function toast(text, error) { P.toast(text, error); }
  function refreshState() { P.refreshState(); }
  function refreshStats() { P.refreshStats(); }

  function fmtTokens(n) { return n >= 1000000 ? (n / 1e6).toFixed(1) + 'M' : n >= 1000 ? (n / 1000).toFixed(1) + 'k' : String(n || 0); }

  function renderStats(st) {
    var u = $('usage');
    u.textContent = '';
    var ctx = st.contextUsage;
    if (ctx && typeof ctx.percent === 'number') {
      var bar = el('span', 'bar');
      var fill = el('i');
      fill.style.width = Math.min(100, Math.max(0, ctx.percent)) + '%';
      add(bar, fill);
      add(u, bar, document.createTextNode(Math.round(ctx.percent) + '% of ' + fmtTokens(ctx.contextWindow) + ' '));
    }
    var t = st.tokens || {};
    add(u, document.createTextNode('↑' + fmtTokens(t.input) + ' ↓' + fmtTokens(t.output) + ' $' + Number(st.cost || 0).toFixed(3)));
    var dl = $('stats');
    dl.textContent = '';
    [['Messages', st.totalMessages], ['Tool calls', st.toolCalls], ['Input tokens', t.input], ['Output tokens', t.output],
     ['Cache read', t.cacheRead], ['Cache write', t.cacheWrite], ['Cost', '$' + Number(st.cost || 0).toFixed(4)],
     ['Context', ctx ? (ctx.tokens === null ? '?' : ctx.tokens) + ' / ' + ctx.contextWindow : 'n/a'],
     ['Session file', st.sessionFile || '(in memory)']].forEach(function (row) {
      add(dl, el('dt', null, row[0]), el('dd', null, row[1] === undefined ? '' : String(row[1])));
    });
  }

  // -- model and thinking -------------------------------------------------------------------------------
  var MODELS = [];
  var LEVELS = [];
  function loadModels() {
    call('get_available_models').then(function (d) { MODELS = d.models || []; renderSelectors(); }).catch(function () {});
  }
  function renderSelectors() {
    var st = S.state || {};
    var cur = isObj(st.model) ? st.model.provider + '/' + st.model.id : '';
    var sel = $('model-select');
    sel.textContent = '';
    var seen = false;
    MODELS.forEach(function (m) {
      var v = m.provider + '/' + m.id;
      var o = el('option', null, (m.name || m.id) + ' (' + m.provider + ')');
      o.value = v;
      if (v === cur) { o.selected = true; seen = true; }
      add(sel, o);
    });
    if (!seen && cur) { var o = el('option', null, cur); o.value = cur; o.selected = true; add(sel, o); }
    call('get_available_thinking_levels').then(function (d) {
      LEVELS = d.levels || [];
      var ts = $('thinking-select');
      ts.textContent = '';
      LEVELS.forEach(function (l) { var o = el('option', null, 'thinking: ' + l); o.value = l; if (l === st.thinkingLevel) o.selected = true; add(ts, o); });
      ts.disabled = LEVELS.length <= 1;
    }).catch(function () {});
  }
  $('model-select').addEventListener('change', function (ev) {
    var v = ev.target.value, cut = v.indexOf('/');
    quietly(call('set_model', { provider: v.slice(0, cut), modelId: v.slice(cut + 1) }).then(refreshState));
  });
  $('thinking-select').addEventListener('change', function (ev) {
    quietly(call('set_thinking_level', { level: ev.target.value }).then(refreshState));
  });

  // -- drawer: sessions, tree, more ------------------------------------------------------------------------
  $('menu-btn').addEventListener('click', function () {
    var open = document.body.classList.toggle('drawer-open');
    $('menu-btn').setAttribute('aria-expanded', open ? 'true' : 'false');
  });
  function closeDrawer() { document.body.classList.remove('drawer-open'); $('menu-btn').setAttribute('aria-expanded', 'false'); }
  $('messages').addEventListener('click', closeDrawer);
  $('drawer-close').addEventListener('click', closeDrawer);
  $('scrim').addEventListener('click', closeDrawer);
  document.addEventListener('keydown', function (ev) { if (ev.key === 'Escape') closeDrawer(); });
  Array.prototype.forEach.call(document.querySelectorAll('.tabs button'), function (b) {
    b.addEventListener('click', function () {
      Array.prototype.forEach.call(document.querySelectorAll('.tabs button'), function (x) { x.classList.toggle('active', x === b); });
      ['sessions', 'tree', 'more'].forEach(function (t) { $('tab-' + t).hidden = t !== b.getAttribute('data-tab'); });
      if (b.getAttribute('data-tab') === 'tree') loadTree();
      if (b.getAttribute('data-tab') === 'sessions') loadSessions();
      if (b.getAttribute('data-tab') === 'more') { refreshStats(); loadDevices(); P.loadMcp(); }
    });
  });

  var SESSIONS = [];
  function loadSessions() {
    if (S.state && !S.state.sessionFile) {  // --no-session: this session is not saved, and the others are not shown
      SESSIONS = [];
      var list = $('session-list');
      list.textContent = '';
      add(list, el('li', 'note unsaved', 'This session is not saved (--no-session), and saved sessions are not listed.'));
      return;
    }
    call('list_sessions', { scope: S.sessionsAll ? 'all' : 'cwd', includeSearchText: false }).then(function (d) {
      SESSIONS = d.sessions || [];
      renderSessions();
    }).catch(function () {});
  }
  function renderSessions() {
    var list = $('session-list');
    var filter = $('session-filter').value.toLowerCase();
    list.textContent = '';
    var current = S.state && S.state.sessionFile;
    SESSIONS.slice().sort(function (a, b) { return String(b.modified).localeCompare(String(a.modified)); }).forEach(function (s) {
      var title = s.name || s.firstMessage || '(empty)';
      if (filter && (title + ' ' + s.cwd).toLowerCase().indexOf(filter) < 0) return;
      var li = el('li', s.path === current ? 'current' : null);
      add(li, el('div', 'first', title),
        el('div', 'meta', String(s.modified).slice(0, 16).replace('T', ' ') + ' · ' + s.messageCount + ' messages' + (S.sessionsAll ? ' · ' + s.cwd : '')));
      li.addEventListener('click', function () {
        if (s.path === current) return;
        quietly(call('switch_session', { sessionPath: s.path }).then(function () { document.body.classList.remove('drawer-open'); }));
      });
      add(list, li);
    });
    if (!list.children.length) add(list, el('li', 'note unsaved', filter ? 'No session matches.' : 'No saved session in this directory yet.'));
  }
  $('session-filter').addEventListener('input', renderSessions);
  $('all-sessions').addEventListener('change', function (ev) { S.sessionsAll = ev.target.checked; loadSessions(); });
  $('new-session').addEventListener('click', function () {
    quietly(call('new_session').then(function (d) { if (d && d.cancelled) toast('Cancelled by an extension'); }));
  });

  function loadTree() {
    call('get_session_tree').then(renderTree).catch(function () {});
  }
  function renderTree(t) {
    var root = $('tree');
    root.textContent = '';
    var filter = $('tree-filter').value.toLowerCase();
    var active = {};
    var parents = {};
    (function walk(nodes) { nodes.forEach(function (n) { (n.children || []).forEach(function (c) { parents[c.entry.id] = n.entry.id; }); walk(n.children || []); }); })(t.nodes || []);
    for (var id = t.leafId; id; id = parents[id]) active[id] = true;
    // a chain of single children stays at one level; only a branch point indents (each branch in its own list)
    function build(nodes, ul) {
      if (nodes.length > 1) {
        nodes.forEach(function (n) { var sub = el('ul', 'branch'); add(ul, add(el('li'), sub)); chain(n, sub); });
      } else if (nodes.length === 1) {
        chain(nodes[0], ul);
      }
    }
    function chain(first, ul) {  // iterative along a chain: a long session does not recurse per entry
      for (var n = first; n;) {
        addNode(n, ul);
        var kids = n.children || [];
        if (kids.length === 1) { n = kids[0]; continue; }
        build(kids, ul);
        n = null;
      }
    }
    function addNode(n, ul) {
      (function () {
        var e = n.entry;
        var li = el('li');
        var row = el('div', 'node' + (active[e.id] ? ' active' : '') + (e.id === t.leafId ? ' leaf' : ''));
        row.setAttribute('data-entry', e.id);
        var text = str(e.preview) || e.type;
        var show = !filter || (text + ' ' + str(e.label)).toLowerCase().indexOf(filter) >= 0;
        add(row, el('span', 'kind', e.type === 'message' ? '' : e.type), el('span', 'preview', text));
        if (e.label) add(row, el('span', 'label', e.label));
        var lb = el('button', 'lbl-btn', 'label');
        lb.type = 'button'; lb.title = 'Label this entry';
        lb.addEventListener('click', function (ev) { ev.stopPropagation(); editLabel(row, e); });
        add(row, lb);
        row.addEventListener('click', function () {
          if (e.id === t.leafId) return;
          quietly(call('navigate_tree', { targetId: e.id, summarize: $('tree-summarize').checked }).then(function (d) {
            if (d && d.editorText) $('prompt').value = d.editorText;
            loadTree();
          }));
        });
        if (show) add(li, row);
        add(ul, li);
      })();
    }
    build(t.nodes || [], root);
  }
  function editLabel(row, e) {
    var input = el('input');
    input.type = 'text'; input.value = str(e.label); input.placeholder = 'label (empty removes it)';
    row.parentNode.insertBefore(input, row.nextSibling);
    input.focus();
    var finished = false;
    function done(save) {
      if (finished) return;  // removing the field blurs it: once is enough
      finished = true;
      if (input.parentNode) input.parentNode.removeChild(input);
      if (save) quietly(call('set_entry_label', { targetId: e.id, label: input.value }).then(loadTree));
    }
    input.addEventListener('keydown', function (ev) { if (ev.key === 'Enter') done(true); if (ev.key === 'Escape') done(false); });
    input.addEventListener('blur', function () { done(true); });
  }
  $('tree-filter').addEventListener('input', loadTree);

  $('compact-btn').addEventListener('click', function () { quietly(call('compact').then(function () { toast('Context compacted'); })); });
  $('auto-compaction').addEventListener('change', function (ev) { quietly(call('set_auto_compaction', { enabled: ev.target.checked })); });
  $('auto-retry').addEventListener('change', function (ev) { quietly(call('set_auto_retry', { enabled: ev.target.checked })); });
  $('pair-btn').addEventListener('click', function () {
    quietly(call('web_pair').then(function (d) {
      var out = $('pair-out');
      out.textContent = '';
      add(out, document.createTextNode('Open this once on the other device (valid 10 minutes), or scan it: '), el('code', null, d.pairUrl));
      if (Array.isArray(d.qr) && d.qr.length) add(out, qrSvg(d.qr));
      loadDevices();
    }));
  });
  // the remembered browsers (web_devices), each with Revoke (web_revoke: refused at once, open pages included)
  function loadDevices() {
    call('web_devices').then(function (d) {
      var list = $('device-list');
      list.textContent = '';
      (d.devices || []).forEach(function (dev) {
        var li = el('li', dev.id === d.current ? 'current' : null);
        li.setAttribute('data-device', dev.id);
        var head = el('div', 'first', dev.name);
        head.title = dev.name;
        var revoke = el('button', 'danger small', 'Revoke');
        revoke.type = 'button';
        revoke.title = 'Forget this browser: it must be paired again';
        revoke.addEventListener('click', function (ev) {
          ev.stopPropagation();
          quietly(call('web_revoke', { device: dev.id }).then(function () { toast('Revoked: ' + dev.name); loadDevices(); }));
        });
        var meta = el('div', 'meta');
        if (dev.id === d.current) add(meta, el('span', 'tag', 'this browser'));
        add(li, add(el('div', 'device-row'), head, revoke), add(meta, document.createTextNode(dev.origin + ' · paired ' + dev.paired.slice(0, 16).replace('T', ' ') +
            ' · seen ' + dev.lastSeen.slice(0, 16).replace('T', ' ') + (dev.kind === 'secret' ? ' · secret' : ' · key'))));
        add(list, li);
      });
      if (!list.children.length) add(list, el('li', 'note unsaved', 'No remembered browser (this one connects with the access token).'));
    }).catch(function () {});
  }
  P.loadDevices = loadDevices;

  // the pairing link's QR code (web_pair's rows of "1" dark / "0" light) as an SVG, 4 modules of quiet zone
  function qrSvg(rows) {
    var NS = 'http://www.w3.org/2000/svg', n = rows.length + 8, d = '';
    rows.forEach(function (row, y) {
      for (var x = 0; x < row.length; x++) if (row.charAt(x) === '1') d += 'M' + (x + 4) + ' ' + (y + 4) + 'h1v1h-1z';
    });
    var svg = document.createElementNS(NS, 'svg');
    svg.setAttribute('viewBox', '0 0 ' + n + ' ' + n);
    svg.setAttribute('class', 'qr');
    svg.setAttribute('role', 'img');
    svg.setAttribute('aria-label', 'QR code of the pairing link');
    var bg = document.createElementNS(NS, 'rect');
    bg.setAttribute('width', n); bg.setAttribute('height', n); bg.setAttribute('fill', '#fff');
    var path = document.createElementNS(NS, 'path');
    path.setAttribute('d', d); path.setAttribute('fill', '#000');
    svg.appendChild(bg); svg.appendChild(path);
    return svg;
  }
  $('export-link').addEventListener('click', function (ev) {
    // a session only in memory has nothing to export: say so instead of downloading an error
    ev.preventDefault();
    P.authHeaders().then(function (h) { return fetch('/export', { credentials: 'omit', headers: h }); }).then(function (r) {
      if (!r.ok) return r.text().then(function (t) { toast(t.trim(), true); });
      return r.blob().then(function (blob) {
        var a = el('a'); a.href = URL.createObjectURL(blob);
        a.download = 'pisces-session-' + ((S.state && S.state.sessionId) || 'export') + '.html';
        document.body.appendChild(a); a.click(); a.remove();
        setTimeout(function () { URL.revokeObjectURL(a.href); }, 10000);
      });
    });
  });

  // -- images attached to the next message ----------------------------------------------------------------
  $('image-input').addEventListener('change', function (ev) {
    Array.prototype.forEach.call(ev.target.files || [], function (file) {
      if (!/^image\/(png|jpeg|gif|webp)$/.test(file.type)) { toast('Not an image pisces can send: ' + file.type, true); return; }
      if (file.size > 20 * 1024 * 1024) { toast('Image too large (20 MB at most)', true); return; }
      var reader = new FileReader();
      reader.onload = function () {
        var url = String(reader.result);
        S.attachments.push({ mimeType: file.type, data: url.slice(url.indexOf(',') + 1), url: url, name: file.name });
        renderAttachments();
      };
      reader.readAsDataURL(file);
    });
    ev.target.value = '';
  });
  function renderAttachments() {
    var box = $('attachments');
    box.textContent = '';
    S.attachments.forEach(function (a, i) {
      var img = el('img'); img.src = a.url; img.alt = a.name;
      var x = el('button', null, '×'); x.type = 'button'; x.setAttribute('aria-label', 'Remove ' + a.name);
      x.addEventListener('click', function () { S.attachments.splice(i, 1); renderAttachments(); });
      add(box, add(el('span', 'att'), img, x));
    });
  }

  P.renderAttachments = renderAttachments;

  P.loadModels = loadModels; P.renderSelectors = renderSelectors; P.loadSessions = loadSessions;
  P.loadTree = loadTree; P.renderStats = renderStats;
})();
