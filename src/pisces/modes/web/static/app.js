// pisces web UI: one WebSocket to the host, the same frames as stdio RPC (deltas-only stream profile).
// On (re)connect the host sends a snapshot, or, when we name the last frame we saw, the frames we missed.
(function () {
  'use strict';
  var R = window.PiscesRender;
  var P = window.Pisces = window.Pisces || {};
  var el = R.el, add = R.add, isObj = R.isObj, str = R.str;
  function $(id) { return document.getElementById(id); }
  var EMPTY = $('empty'), WORKING = $('working');  // kept across re-renders of #messages

  // -- connection ---------------------------------------------------------------------------------
  var S = {
    ws: null, streamId: null, lastSeq: null, nextId: 1, calls: {}, retryMs: 500, everOpen: false,
    state: null, busy: false, messages: [], cards: {}, streaming: null, requests: {}, forkIds: {},
    attachments: [], sessionsAll: false, statuses: {}, widgets: {}, pending: [], info: null
  };

  function wsUrl() {
    var q = 'profile=deltas&approvals=typed';  // the approval cards speak the typed frames
    if (S.streamId && S.lastSeq !== null) q += '&since=' + S.lastSeq + '&stream=' + encodeURIComponent(S.streamId);
    return (location.protocol === 'https:' ? 'wss://' : 'ws://') + location.host + '/ws?' + q;
  }

  // this browser's credential (device.js): made at pairing, kept in this origin's own storage, presented by
  // this code only (the browser sends no cookie): in the WebSocket handshake as a subprotocol, on fetches as
  // a bearer token; a key device signs a fresh one-time challenge for each
  var D = window.PiscesDevice;
  P.authHeaders = function () {
    return D.credential().then(function (c) { return c ? { Authorization: 'Bearer ' + c.bearer } : {}; });
  };
  function retryLater() {
    setTimeout(connect, S.retryMs);
    S.retryMs = Math.min(S.retryMs * 2, 5000);
  }
  function unpaired() { D.forget().then(function () { location.replace('/login'); }); }

  function connect() {
    setConn('connecting', '');
    D.credential().then(function (cred) {
      if (!cred) { location.replace('/login'); return; }
      openSocket(cred);
    }, function () { setConn('reconnecting', 'down'); retryLater(); });  // the server is not there (yet)
  }

  function openSocket(cred) {
    var ws = new WebSocket(wsUrl(), ['pisces.v1', cred.protocol]);
    S.ws = ws;
    ws.onopen = function () { S.retryMs = 500; S.everOpen = true; setConn('live', 'live'); };
    ws.onmessage = function (ev) {
      var frame;
      try { frame = JSON.parse(ev.data); } catch (e) { return; }
      if (isObj(frame)) handle(frame);
    };
    ws.onclose = function (ev) {
      if (S.ws !== ws) return;
      S.ws = null;
      setConn('reconnecting', 'down');
      Object.keys(S.calls).forEach(function (id) { S.calls[id].reject(new Error('disconnected')); });
      S.calls = {};
      if (ev.code === 4403) { unpaired(); return; }  // this browser was unpaired (web_revoke, pisces web revoke)
      // still paired? a browser the server does not know (revoked, or paired elsewhere) returns to the login page
      P.authHeaders().then(function (h) {
        return fetch('/auth', { cache: 'no-store', credentials: 'omit', headers: h });
      }).then(function (r) {
        if (r.status === 401) { unpaired(); return; }
        retryLater();
      }, retryLater);
    };
  }
  document.addEventListener('visibilitychange', function () {
    if (document.visibilityState === 'visible' && S.ws && S.ws.readyState > 1) connect();
  });

  function setConn(text, cls) { var c = $('conn'); c.textContent = text; c.className = 'conn ' + cls; }

  function call(type, fields) {
    return new Promise(function (resolve, reject) {
      if (!S.ws || S.ws.readyState !== 1) { reject(new Error('not connected')); return; }
      var id = 'w' + (S.nextId++);
      var cmd = { id: id, type: type };
      for (var k in fields || {}) cmd[k] = fields[k];
      S.calls[id] = { resolve: resolve, reject: reject, type: type };
      S.ws.send(JSON.stringify(cmd));
    });
  }
  function send(frame) { if (S.ws && S.ws.readyState === 1) S.ws.send(JSON.stringify(frame)); }
  function quietly(p) { return p.catch(function (e) { toast(e.message || String(e), true); }); }

  // -- frames -------------------------------------------------------------------------------------
  function handle(f) {
    if (f.type === 'response') { onResponse(f); return; }
    if (f.type === 'snapshot') { applySnapshot(f); return; }
    if (f.type === 'resumed') { S.streamId = f.streamId; return; }
    if (typeof f.seq === 'number') {
      if (S.lastSeq !== null && f.seq <= S.lastSeq) return;  // seen already
      S.lastSeq = f.seq;
    }
    var fn = HANDLERS[f.type];
    if (fn) fn(f);
  }

  function onResponse(f) {
    var pending = f.id !== undefined ? S.calls[f.id] : null;
    if (!pending) {  // a late failure of a prompt (its run failed after it was accepted)
      if (f.success === false) toast(f.command + ': ' + f.error, true);
      return;
    }
    if (f.command === 'prompt' && f.success && !pending.done) { pending.done = true; pending.resolve(f.data); return; }
    delete S.calls[f.id];
    if (f.success) pending.resolve(f.data); else pending.reject(new Error(f.error || 'failed'));
  }

  var HANDLERS = {
    agent_start: function () { setBusy(true); },
    agent_settled: function () {
      setBusy(false);
      if (S.askNotifications) { S.askNotifications = false; askNotificationsOnce(); }
      var last = lastAssistant();
      if (last && (last.stopReason === 'error' || last.stopReason === 'aborted')) {
        notify('pisces: the run ' + (last.stopReason === 'error' ? 'failed' : 'was stopped'), str(last.errorMessage));
      } else {
        notify('pisces: the reply is ready', replyPreview(last));
      }
      refreshState();
      loadSessions();
    },
    message_start: function (f) { onMessageStart(f.message); },
    message_update: function (f) { onUpdate(f.assistantMessageEvent); },
    message_end: function (f) { onMessageEnd(f.message); },
    tool_execution_start: function (f) { var c = card(f.toolCallId, f.toolName, f.args); c.setState('running'); },
    tool_execution_update: function (f) { var c = card(f.toolCallId, f.toolName, f.args); c.setResult(f.partialResult, false, true); },
    tool_execution_end: function (f) { var c = card(f.toolCallId, f.toolName); c.setResult(f.result, f.isError, false); },
    queue_update: function (f) { renderQueue(f.steering || [], f.followUp || []); },
    session_changed: function () { reloadSession(); },
    session_info_changed: function (f) { if (S.state) S.state.sessionName = f.name; renderTitle(); },
    thinking_level_changed: function (f) { if (S.state) S.state.thinkingLevel = f.level; renderSelectors(); },
    compaction_start: function () { setStatus('Compacting the context…'); },
    auto_compaction_start: function () { setStatus('Compacting the context…'); },
    compaction_end: function (f) { setStatus(''); if (f.errorMessage) toast(f.errorMessage, true); reloadSession(); },
    auto_compaction_end: function (f) { setStatus(''); if (f.errorMessage) toast(f.errorMessage, true); reloadSession(); },
    auto_retry_start: function (f) { setStatus('Retrying (' + f.attempt + '/' + f.maxAttempts + '): ' + str(f.errorMessage)); },
    auto_retry_end: function (f) { setStatus(f.success ? '' : 'Retry failed: ' + str(f.finalError)); },
    extension_error: function (f) { toast('Extension error: ' + str(f.error), true); },
    budget_warning: function (f) { toast(str(f.message) || 'Budget warning'); },
    budget_exceeded: function (f) { toast(str(f.message) || 'Budget exceeded', true); },
    extension_ui_request: function (f) { uiRequest(f); },
    tool_approval_request: function (f) { showApproval(f); },
    tool_approval_cancel: function (f) { closeRequest(f.targetId || f.id); },
    todo_update: function (f) { if (S.state) S.state.todoPhases = f.todoPhases; P.renderTodos(f.todoPhases); },
    mcp_server_status: function () { P.loadMcpSoon(); },
    mcp_tools_changed: function () { P.loadMcpSoon(); },
    project_trust: function (f) { if (f.ignoredProjectSettings) toast('This project is not trusted: some of its settings were ignored'); }
  };

  // -- snapshot and state ---------------------------------------------------------------------------
  function applySnapshot(f) {
    S.streamId = f.streamId;
    S.lastSeq = f.seq;
    S.state = f.state || null;
    Object.keys(S.requests).forEach(closeRequest);
    renderMessages(f.messages || []);
    if (isObj(f.streamingMessage)) onMessageStart(f.streamingMessage);
    (f.runningTools || []).forEach(function (t) {
      var c = card(t.toolCallId, t.toolName, t.args);
      c.setState('running');
      if (t.partialResult) c.setResult(t.partialResult, false, true);
    });
    var q = f.queue || {};
    renderQueue(q.steering || [], q.followUp || []);
    (f.requests || []).forEach(function (r) { if (r.type === 'tool_approval_request') showApproval(r); else uiRequest(r); });
    setBusy(!!(S.state && S.state.isStreaming) || S.pending.length > 0);
    renderTitle();
    if (!S.warmed) { S.warmed = true; setTimeout(warmUp, 0); }
    P.renderTodos(S.state && S.state.todoPhases);
    P.loadMcp();
    loadInfo();
    loadModels();
    refreshState();
    loadSessions();
    if (!$('tab-tree').hidden) loadTree();
  }

  // what the first reply runs for the first time (markdown, the sanitizer, highlighting, a message's layout),
  // run once while idle on a hidden copy, so the first token is drawn as fast as any later one
  function warmUp() {
    var box = $('messages');
    var wrap = el('div', 'msg assistant warm-up');
    wrap.setAttribute('aria-hidden', 'true');
    fillAssistant(wrap, { role: 'assistant', content: [{ type: 'text', text: '# A\n\n**b** `c` [d](https://e.example)\n\n- f\n\n```js\nvar g = 1;\n```\n' }] });
    var user = userEl({ role: 'user', content: [{ type: 'text', text: 'a' }], timestamp: Date.now() });
    user.classList.add('pending', 'warm-up');
    user.setAttribute('aria-hidden', 'true');
    box.appendChild(user);
    box.appendChild(wrap);
    void wrap.offsetHeight;  // style and layout once
    box.removeChild(wrap);
    box.removeChild(user);
  }

  function reloadSession() {
    Promise.all([call('get_state'), call('get_messages')]).then(function (r) {
      S.state = r[0];
      P.renderTodos(S.state.todoPhases);
      if (!S.streaming) renderMessages(r[1].messages || []);
      renderTitle();
      renderSelectors();
      refreshStats();
      loadSessions();
      if (!$('tab-tree').hidden) loadTree();
    }).catch(function () {});
  }

  function refreshState() {
    call('get_state').then(function (st) { S.state = st; P.renderTodos(st.todoPhases); renderTitle(); renderSelectors(); setBusy(st.isStreaming || (S.busy && S.pending.length > 0)); }).catch(function () {});
    refreshStats();
    loadForkIds();
  }

  function refreshStats() {
    call('get_session_stats').then(renderStats).catch(function () {});
  }

  function renderTitle() {
    var st = S.state || {};
    var name = st.sessionName || firstPrompt() || 'New session';
    $('session-name').textContent = name;
    $('session-name').title = name;
    document.title = (S.busy ? '… ' : '') + name + ' · pisces';
    $('auto-compaction').checked = !!st.autoCompactionEnabled;
    $('auto-retry').checked = st.autoRetryEnabled !== false;  // absent only from an older server: on by default
    renderEmpty();
  }

  // the title: the session's name, else its first prompt (as the session list shows it)
  function firstPrompt() {
    for (var i = 0; i < S.messages.length; i++) {
      var m = S.messages[i];
      if (m && m.role === 'user') return R.textOf(m.content).replace(/\s+/g, ' ').trim().slice(0, 80);
    }
    return S.pending.length ? S.pending[0].text.replace(/\s+/g, ' ').trim().slice(0, 80) : '';
  }

  // the working directory and git branch, in the header (web_info)
  function loadInfo() {
    call('web_info').then(function (d) {
      S.info = d;
      var where = $('where');
      where.textContent = '';
      add(where, el('span', 'cwd', d.cwdShort || d.cwd));
      if (d.gitBranch) add(where, el('span', 'branch', d.gitBranch));
      where.title = d.cwd + (d.gitBranch ? ' (git branch ' + d.gitBranch + ')' : '');
      if (d.keyProblem) toast(d.keyProblem, true);
      renderEmpty();
    }).catch(function () {});
  }

  // what to do when there is nothing yet
  function renderEmpty() {
    var box = $('messages');
    var empty = EMPTY;
    var none = !S.messages.length && !S.pending.length && !S.streaming && !box.querySelector('.msg');
    empty.hidden = !none;
    if (none) {
      var where = S.info ? (S.info.cwdShort || S.info.cwd) : 'this directory';
      $('empty-where').textContent = where + (S.info && S.info.gitBranch ? ' (' + S.info.gitBranch + ')' : '');
    }
  }

  // the working indicator: from Send until the first token of the reply
  function setWorking(on) {
    var w = WORKING;
    if (on) { w.hidden = false; $('messages').appendChild(w); scrollDown(true); } else { w.hidden = true; }
  }

  function setBusy(busy) {
    S.busy = !!busy;
    $('abort-btn').hidden = !S.busy;
    $('send-mode').hidden = !S.busy;
    $('send-btn').textContent = S.busy ? ($('send-mode').value === 'steer' ? 'Steer' : 'Follow up') : 'Send';
    if (!S.busy && S.streaming) finishStreaming();
    if (!S.busy) setWorking(false);
    renderTitle();
  }
  function setStatus(text) { $('status').textContent = text || ''; }

  // -- messages -------------------------------------------------------------------------------------
  function renderMessages(messages) {
    S.messages = messages.slice();
    S.cards = {};
    S.streaming = null;
    var box = $('messages');
    box.textContent = '';
    box.appendChild(EMPTY);
    messages.forEach(function (m) { appendMessage(m); });
    S.pending.forEach(function (p) { box.appendChild(p.el); });  // sent, not echoed yet
    box.appendChild(WORKING);
    renderEmpty();
    scrollDown(true);
  }

  function lastAssistant() {
    for (var i = S.messages.length - 1; i >= 0; i--) if (S.messages[i] && S.messages[i].role === 'assistant') return S.messages[i];
    return null;
  }
  function replyPreview(m) { return m ? R.textOf(m.content).slice(0, 140) : ''; }

  function card(id, name, args) {
    var c = S.cards[id];
    if (!c) {
      c = new R.ToolCard({ id: id, name: name, arguments: args });
      S.cards[id] = c;
      add($('messages'), wrapLoose(c.el));
    } else if (args !== undefined && c.args === undefined) {
      c.setArgs(args);
    }
    return c;
  }
  function wrapLoose(node) { return add(el('div', 'msg assistant'), node); }

  function appendMessage(m) {
    if (!isObj(m)) return;
    var box = $('messages');
    var role = m.role;
    if (role === 'user') {
      add(box, userEl(m));
    } else if (role === 'assistant') {
      var wrap = el('div', 'msg assistant' + (m.stopReason === 'error' ? ' error' : ''));
      fillAssistant(wrap, m);
      add(box, wrap);
    } else if (role === 'toolResult') {
      var c = S.cards[m.toolCallId] || card(m.toolCallId, m.toolName);
      c.setResult(m, !!m.isError, false);
    } else if (role === 'bashExecution') {
      var b = el('div', 'msg system');
      add(b, el('div', 'who', 'bash (run by the user' + (m.excludeFromContext ? ', not sent to the model' : '') + ')'),
        R.codeBlock('$ ' + str(m.command) + '\n' + str(m.output), null, 'output'));
      add(box, b);
    } else if (role === 'compactionSummary' || role === 'branchSummary') {
      var s = el('details', 'msg system');
      add(s, el('summary', null, role === 'compactionSummary' ? 'Earlier messages were compacted' : 'Summary of the branch left'),
        R.markdown(m.summary));
      add(box, s);
    } else if (role === 'custom') {
      if (m.display === false) return;
      var cm = el('div', 'msg system');
      add(cm, el('div', 'who', str(m.customType) || 'extension'), R.markdown(R.textOf(m.content)));
      add(box, cm);
    }
  }

  function userEl(m) {
    var d = el('div', 'msg user');
    var who = el('div', 'who', 'you');
    var fork = el('button', 'fork', 'Fork');
    fork.type = 'button';
    fork.title = 'Start a new session branch before this message, with its text in the editor';
    fork.addEventListener('click', function () { forkAt(m); });
    add(who, fork);
    add(d, who, el('div', 'text', R.textOf(m.content)));
    if (Array.isArray(m.content)) m.content.forEach(function (b) { if (isObj(b) && b.type === 'image') add(d, R.imageBlock(b)); });
    d._message = m;
    return d;
  }

  function fillAssistant(wrap, m) {
    wrap.textContent = '';
    wrap._blocks = [];
    (Array.isArray(m.content) ? m.content : []).forEach(function (b, i) { setBlock(wrap, m, i, b); });
    if (m.stopReason === 'error' && m.errorMessage) add(wrap, el('div', 'error', m.errorMessage));
    if (m.stopReason === 'aborted') add(wrap, el('div', 'note', 'Stopped.'));
  }

  // one content block of an assistant message, made or refreshed
  function setBlock(wrap, m, i, b) {
    if (!isObj(b)) return;
    var old = wrap._blocks[i];
    var node;
    if (b.type === 'text') {
      node = old && old.kind === 'text' ? old.node : el('div', 'md');
      R.markdownInto(node, b.text);
    } else if (b.type === 'thinking') {
      node = old && old.kind === 'thinking' ? old.node : add(el('details', 'thinking'), el('summary', null, 'Thinking'), el('div', 'body'));
      node.querySelector('.body').textContent = str(b.thinking) || (b.redacted ? '(redacted)' : '');
    } else if (b.type === 'toolCall') {
      var c = S.cards[b.id];
      if (!c) { c = new R.ToolCard(b); S.cards[b.id] = c; } else if (b.arguments && c.args !== b.arguments) c.setArgs(b.arguments);
      node = c.el;
    } else if (b.type === 'image') {
      node = R.imageBlock(b);
    } else {
      return;
    }
    if (!old) {
      wrap._blocks[i] = { kind: b.type, node: node };
      add(wrap, node);
    } else if (old.node !== node) {
      wrap.replaceChild(node, old.node);
      wrap._blocks[i] = { kind: b.type, node: node };
    }
  }

  // -- streaming ------------------------------------------------------------------------------------
  function onMessageStart(m) {
    if (!isObj(m)) return;
    if (m.role !== 'assistant') { if (m.role === 'user') { /* shown at message_end */ } return; }
    var msg = JSON.parse(JSON.stringify(m));
    if (!Array.isArray(msg.content)) msg.content = [];
    var wrap = el('div', 'msg assistant streaming');
    add($('messages'), wrap);
    S.streaming = { message: msg, wrap: wrap, dirty: {}, frame: 0 };
    fillAssistant(wrap, msg);
    wrap.classList.add('cursor');
    if (!WORKING.hidden) $('messages').appendChild(WORKING);  // stays below until the first token
    scrollDown(false);
  }

  function onUpdate(ev) {
    var st = S.streaming;
    if (!st || !isObj(ev)) return;
    var c = st.message.content;
    var i = ev.contentIndex;
    var t = ev.type;
    if (t === 'text_start') c[i] = { type: 'text', text: '' };
    else if (t === 'text_delta') { if (!c[i]) c[i] = { type: 'text', text: '' }; c[i].text += str(ev.delta); }
    else if (t === 'text_end') { if (!c[i]) c[i] = { type: 'text', text: '' }; if (typeof ev.content === 'string') c[i].text = ev.content; }
    else if (t === 'thinking_start') c[i] = { type: 'thinking', thinking: '' };
    else if (t === 'thinking_delta') { if (!c[i]) c[i] = { type: 'thinking', thinking: '' }; c[i].thinking += str(ev.delta); }
    else if (t === 'thinking_end') { if (!c[i]) c[i] = { type: 'thinking', thinking: '' }; if (typeof ev.content === 'string') c[i].thinking = ev.content; }
    else if (t === 'toolcall_start') c[i] = { type: 'toolCall', id: 'pending-' + i, name: '', arguments: {} , _json: '' };
    else if (t === 'toolcall_delta') { if (c[i]) c[i]._json = str(c[i]._json) + str(ev.delta); return; }
    else if (t === 'toolcall_end') { if (isObj(ev.toolCall)) c[i] = ev.toolCall; }
    else return;
    setWorking(false);  // the first token
    st.dirty[i] = true;
    if (!st.frame) st.frame = requestAnimationFrame(flush);
  }

  function flush() {
    var st = S.streaming;
    if (!st) return;
    st.frame = 0;
    Object.keys(st.dirty).forEach(function (k) {
      var i = Number(k);
      var b = st.message.content[i];
      if (b && !(b.type === 'toolCall' && !b.name)) setBlock(st.wrap, st.message, i, b);
    });
    st.dirty = {};
    scrollDown(false);
  }

  function onMessageEnd(m) {
    if (!isObj(m)) return;
    if (m.role === 'assistant') {
      var st = S.streaming;
      if (st) {
        if (st.frame) cancelAnimationFrame(st.frame);
        fillAssistant(st.wrap, m);
        st.wrap.classList.remove('streaming', 'cursor');
        if (m.stopReason === 'error') st.wrap.classList.add('error');
        S.streaming = null;
      } else {
        appendMessage(m);
      }
      S.messages.push(m);
    } else if (m.role === 'user' && reconcile(m)) {
      S.messages.push(m);
      loadForkIds();
    } else {
      S.messages.push(m);
      appendMessage(m);
      if (m.role === 'user') loadForkIds();
    }
    if (m.role === 'assistant' || m.role === 'toolResult') setWorking(false);
    else if (S.busy && !WORKING.hidden) $('messages').appendChild(WORKING);
    renderEmpty();
    scrollDown(false);
  }

  // the echo of a prompt this page drew at once: the real message takes the optimistic bubble's place
  function reconcile(m) {
    var text = R.textOf(m.content);
    for (var i = 0; i < S.pending.length; i++) {
      if (S.pending[i].text === text) {
        var p = S.pending.splice(i, 1)[0];
        var real = userEl(m);
        if (p.el.parentNode) p.el.parentNode.replaceChild(real, p.el); else $('messages').appendChild(real);
        return true;
      }
    }
    return false;
  }

  function finishStreaming() {
    var st = S.streaming;
    if (!st) return;
    st.wrap.classList.remove('streaming', 'cursor');
    S.streaming = null;
  }

  function scrollDown(force) {
    var box = $('messages');
    if (force || box.scrollHeight - box.scrollTop - box.clientHeight < 160) box.scrollTop = box.scrollHeight;
  }

  // -- fork -----------------------------------------------------------------------------------------
  function loadForkIds() {
    call('get_fork_messages').then(function (d) {
      S.forkIds = {};
      (d.messages || []).forEach(function (fm) { S.forkIds[fm.timestamp + '\u0000' + fm.text] = fm.entryId; });
    }).catch(function () {});
  }
  function forkAt(m) {
    var iso = typeof m.timestamp === 'number' ? new Date(m.timestamp).toISOString() : '';
    var entryId = S.forkIds[iso + '\u0000' + R.textOf(m.content)];
    if (!entryId) { toast('This message cannot be forked from (it is not in the session file yet)', true); return; }
    quietly(call('fork', { entryId: entryId }).then(function (d) {
      if (d && !d.cancelled) { $('prompt').value = str(d.text); $('prompt').focus(); toast('Forked into a new session'); }
    }));
  }

  // -- queue ----------------------------------------------------------------------------------------
  function renderQueue(steering, followUp) {
    var list = $('queue-list');
    list.textContent = '';
    steering.forEach(function (t) { add(list, add(el('li'), el('span', 'kind', 'steer'), document.createTextNode(t))); });
    followUp.forEach(function (t) { add(list, add(el('li'), el('span', 'kind', 'follow-up'), document.createTextNode(t))); });
    $('queue').hidden = !(steering.length + followUp.length);
  }
  $('clear-queue').addEventListener('click', function () {
    quietly(call('clear_queue').then(function (d) {
      var texts = (d.steering || []).concat(d.followUp || []);
      if (texts.length) $('prompt').value = texts.join('\n\n') + ($('prompt').value ? '\n\n' + $('prompt').value : '');
    }));
  });

  // -- composer ---------------------------------------------------------------------------------------
  $('composer').addEventListener('submit', function (ev) { ev.preventDefault(); submit(); });
  $('prompt').addEventListener('keydown', function (ev) {
    if (ev.key === 'Enter' && !ev.shiftKey && !ev.isComposing && window.matchMedia('(pointer: fine)').matches) {
      ev.preventDefault();
      submit();
    }
  });
  $('send-mode').addEventListener('change', function () { setBusy(S.busy); });
  $('abort-btn').addEventListener('click', function () { quietly(call('abort')); });

  function submit() {
    var text = $('prompt').value;
    if (!text.trim() && !S.attachments.length) return;
    var images = S.attachments.map(function (a) { return { type: 'image', data: a.data, mimeType: a.mimeType }; });
    var fields = { message: text };
    if (images.length) fields.images = images;
    var p, pending = null;
    if (S.busy) {
      p = call($('send-mode').value === 'steer' ? 'steer' : 'follow_up', fields);
    } else {
      p = call('prompt', fields);
      // drawn at once, reconciled with the echo (message_end of the user message); "working" until the first token
      var content = [{ type: 'text', text: text }].concat(images);
      pending = { text: text, el: userEl({ role: 'user', content: content, timestamp: Date.now() }) };
      pending.el.classList.add('pending');
      S.pending.push(pending);
      $('messages').appendChild(pending.el);
      setBusy(true);
      setWorking(true);
      window.PiscesApp.sentAt = performance.now();
    }
    $('prompt').value = '';
    S.attachments = [];
    renderAttachments();
    p.catch(function (e) {
      toast(e.message, true);
      if (!$('prompt').value) $('prompt').value = text;
      if (pending) {  // refused: the bubble goes, the text is back in the editor
        var at = S.pending.indexOf(pending);
        if (at >= 0) S.pending.splice(at, 1);
        if (pending.el.parentNode) pending.el.parentNode.removeChild(pending.el);
        setWorking(false);
        refreshState();
      }
    });
    S.askNotifications = true;  // once this run settles: a permission prompt is no work for the first reply to wait behind
  }

  function renderAttachments() { P.renderAttachments(); }

  // -- what the other files use, and what they provide ---------------------------------------------
  P.S = S; P.call = call; P.send = send; P.quietly = quietly; P.$ = $;
  P.refreshState = refreshState; P.refreshStats = refreshStats; P.scrollDown = scrollDown;
  function toast(text, error) { P.toast(text, error); }
  function notify(title, body) { P.notify(title, body); }
  function askNotificationsOnce() { P.askNotificationsOnce(); }
  function uiRequest(f) { P.uiRequest(f); }
  function showApproval(f) { P.showApproval(f); }
  function closeRequest(id) { P.closeRequest(id); }
  function loadModels() { P.loadModels(); }
  function renderSelectors() { P.renderSelectors(); }
  function loadSessions() { P.loadSessions(); }
  function loadTree() { P.loadTree(); }
  function renderStats(st) { P.renderStats(st); }

  window.PiscesApp = { state: S, call: call };  // for tests and the curious
  document.addEventListener('DOMContentLoaded', connect);  // once panels.js and dialogs.js are in
})();
