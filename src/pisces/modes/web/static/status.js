// pisces web UI: the session's todo list (issue 28: get_state.todoPhases, todo_update) as a card above the
// composer, and the MCP servers (issue 27: mcp_status, mcp_server_status, mcp_tools_changed) as a header
// badge and a list under More, with Reconnect and Disable/Enable.
(function () {
  'use strict';
  var R = window.PiscesRender, P = window.Pisces;
  var el = R.el, add = R.add, isObj = R.isObj, str = R.str;
  var call = P.call, quietly = P.quietly, $ = P.$;
  var MARK = { pending: '○', in_progress: '◐', completed: '✓', abandoned: '✗' };
  var folded = false;

  // -- todos ----------------------------------------------------------------------------------------
  function renderTodos(phases) {
    var box = $('todos');
    phases = Array.isArray(phases) ? phases.filter(isObj) : [];
    var tasks = [];
    phases.forEach(function (ph) { (Array.isArray(ph.tasks) ? ph.tasks : []).forEach(function (t) { if (isObj(t)) tasks.push(t); }); });
    box.hidden = !tasks.length;
    if (!tasks.length) return;
    var done = tasks.filter(function (t) { return t.status === 'completed'; }).length;
    var current = tasks.filter(function (t) { return t.status === 'in_progress'; })[0];
    $('todos-count').textContent = done + '/' + tasks.length + ' done';
    $('todos-current').textContent = current ? str(current.content) : '';
    var list = $('todos-list');
    list.textContent = '';
    phases.forEach(function (ph) {
      var items = (Array.isArray(ph.tasks) ? ph.tasks : []).filter(isObj);
      if (!items.length) return;
      var sec = add(el('li', 'phase'), el('div', 'phase-name', str(ph.name) || 'Tasks'));
      var ul = el('ul');
      items.forEach(function (t) {
        var status = MARK[t.status] ? t.status : 'pending';
        var li = el('li', 'task ' + status);
        li.setAttribute('data-status', status);
        add(li, el('span', 'mark', MARK[status]), el('span', 'content', str(t.content)));
        if (t.notes) add(li, el('div', 'notes', str(t.notes)));
        add(ul, li);
      });
      add(list, add(sec, ul));
    });
    box.classList.toggle('folded', folded);
  }
  $('todos-head').addEventListener('click', function () {
    folded = !folded;
    $('todos').classList.toggle('folded', folded);
    $('todos-head').setAttribute('aria-expanded', folded ? 'false' : 'true');
  });

  // -- MCP servers ----------------------------------------------------------------------------------
  var mcp = { servers: [], timer: 0 };
  function loadMcp() {
    call('mcp_status').then(function (d) { mcp.data = d; renderMcp(d); }).catch(function () {});
  }
  function loadMcpSoon() {  // events come in bursts (tools, then status): one reload for them
    if (!mcp.timer) mcp.timer = setTimeout(function () { mcp.timer = 0; loadMcp(); }, 100);
  }
  function renderMcp(d) {
    var servers = (d && Array.isArray(d.servers) ? d.servers : []).filter(isObj);
    var badge = $('mcp-badge');
    var connected = servers.filter(function (s) { return s.status === 'connected'; }).length;
    var failed = servers.filter(function (s) { return s.status === 'failed'; }).length;
    badge.hidden = !servers.length && !(d && d.notStarted);
    badge.textContent = 'MCP ' + connected + '/' + servers.length;
    badge.className = 'mcp-badge ' + (failed ? 'bad' : connected === servers.length ? 'good' : 'wait');
    badge.title = servers.map(function (s) { return s.name + ': ' + s.status; }).join('\n') || 'MCP servers';
    var list = $('mcp-list');
    list.textContent = '';
    $('mcp-section').hidden = badge.hidden;
    if (d && d.message) add(list, el('li', 'note unsaved', str(d.message)));
    servers.forEach(function (s) {
      var li = el('li', 'mcp ' + str(s.status));
      li.setAttribute('data-server', str(s.name));
      var head = add(el('div', 'device-row'), add(el('div', 'first'), el('span', 'dot ' + str(s.status)),
        document.createTextNode(str(s.name))));
      var buttons = el('span', 'buttons');
      var toggle = el('button', 'small', s.enabled === false ? 'Enable' : 'Disable');
      toggle.type = 'button';
      toggle.addEventListener('click', function () {
        quietly(call('mcp_toggle', { server: s.name, enabled: s.enabled === false }).then(loadMcp));
      });
      add(buttons, toggle);
      if (s.enabled !== false) {
        var again = el('button', 'small', 'Reconnect');
        again.type = 'button';
        again.addEventListener('click', function () { again.disabled = true; quietly(call('mcp_reconnect', { server: s.name }).then(loadMcp)); });
        add(buttons, again);
      }
      add(head, buttons);
      var tools = Array.isArray(s.tools) ? s.tools : [];
      var meta = str(s.status) + ' · ' + str(s.type || 'stdio') + ' · ' + str(s.scope || '') + ' · ' + tools.length + ' tool' + (tools.length === 1 ? '' : 's');
      add(li, head, el('div', 'meta', meta));
      if (s.error) add(li, el('div', 'error', str(s.error)));
      add(list, li);
    });
    (d && Array.isArray(d.configErrors) ? d.configErrors : []).forEach(function (e) {
      add(list, el('li', 'error', typeof e === 'string' ? e : JSON.stringify(e)));
    });
  }
  $('mcp-badge').addEventListener('click', function () {
    document.body.classList.add('drawer-open');
    var more = document.querySelector('.tabs button[data-tab=more]');
    if (more) more.click();
  });

  P.renderTodos = renderTodos;
  P.loadMcp = loadMcp;
  P.loadMcpSoon = loadMcpSoon;
})();
