// pisces web UI: extension dialogs, approval cards, status lines, notifications and toasts.
(function () {
  'use strict';
  var R = window.PiscesRender, P = window.Pisces;
  var el = R.el, add = R.add, isObj = R.isObj, str = R.str;
  var S = P.S, call = P.call, quietly = P.quietly, $ = P.$;
  var send = P.send;
  function scrollDown(force) { P.scrollDown(force); }

  // -- dialogs and approvals ---------------------------------------------------------------------------------
  var FIRE = { notify: 1, setStatus: 1, setWidget: 1, setTitle: 1, set_editor_text: 1 };
  function uiRequest(f) {
    var m = f.method;
    if (m === 'cancel') { closeRequest(f.targetId); return; }
    if (m === 'notify') { toast(str(f.message), f.notifyType === 'error'); return; }
    if (m === 'setStatus') { if (f.statusText) S.statuses[f.statusKey] = f.statusText; else delete S.statuses[f.statusKey]; renderWidgets(); return; }
    if (m === 'setWidget') { if (f.widgetLines) S.widgets[f.widgetKey] = f.widgetLines; else delete S.widgets[f.widgetKey]; renderWidgets(); return; }
    if (m === 'setTitle') { document.title = str(f.title); return; }
    if (m === 'set_editor_text') { $('prompt').value = str(f.text); return; }
    if (FIRE[m] || S.requests[f.id]) return;
    if (m === 'select' && isApprovalSelect(f)) { showApproval(f); return; }
    var c = requestCard(f, 'card', str(f.title) || m);
    if (m === 'confirm') {
      if (f.message) add(c.body, el('p', null, f.message));
      c.button('Yes', 'primary', function () { return { confirmed: true }; });
      c.button('No', null, function () { return { confirmed: false }; });
    } else if (m === 'select') {
      (f.options || []).forEach(function (o) { c.button(String(o), null, function () { return { value: String(o) }; }); });
    } else if (m === 'input' || m === 'editor') {
      var field = el(m === 'editor' ? 'textarea' : 'input');
      if (m === 'editor') { field.rows = 6; field.value = str(f.prefill); } else { field.type = 'text'; field.placeholder = str(f.placeholder); }
      add(c.body, field);
      c.button('OK', 'primary', function () { return { value: field.value }; });
      field.focus();
    }
    c.button('Cancel', null, function () { return { cancelled: true }; });
    notify('pisces is asking: ' + (str(f.title) || m), str(f.message));
  }
  function isApprovalSelect(f) {
    var o = f.options || [];
    return o.length >= 2 && /^(approve|allow)/i.test(String(o[0])) && /^(deny|block|reject)/i.test(String(o[o.length - 1]));
  }

  function identityText(identity, input) {
    if (typeof identity === 'string') return identity;
    if (isObj(identity)) {
      if (typeof identity.command === 'string') return identity.command;
      if (typeof identity.path === 'string') return identity.path + (typeof identity.content === 'string' ? '\n\n' + identity.content : '');
      if (Object.keys(identity).length > (identity.kind ? 1 : 0)) return R.pretty(identity);
    }
    return R.pretty(input);
  }

  var SCOPE_LABEL = { once: 'Approve', session: 'For this session', always: 'Always' };

  function showApproval(f) {
    if (S.requests[f.id]) return;
    var typed = f.type === 'tool_approval_request';
    var title = typed ? 'Approve ' + str(f.toolName) + '?' : str(f.title).split('\n')[0];
    var c = requestCard(f, 'card approval', title);
    if (typed) {
      var waiting = S.cards[f.toolCallId];
      if (waiting) waiting.stateEl.textContent = 'needs approval';
      var detail = isObj(f.detail) ? f.detail : {};
      var why = [f.tier ? 'tier: ' + f.tier : '', str(detail.reason)].filter(Boolean).join(' · ');
      if (why) add(c.body, el('div', 'note', why));
      if (detail.dangerous) add(c.body, el('div', 'error', 'Known dangerous: ' + (typeof detail.dangerous === 'string' ? detail.dangerous : R.pretty(detail.dangerous))));
      add(c.body, el('pre', 'identity', identityText(f.identity, f.input)));
      if (f.input !== undefined) add(c.body, add(el('details'), el('summary', null, 'arguments'), el('pre', null, R.pretty(f.input))));
      var scopes = Array.isArray(f.scopes) && f.scopes.length ? f.scopes : ['once'];
      scopes.forEach(function (scope, i) {
        if (!SCOPE_LABEL[scope]) return;
        c.button(SCOPE_LABEL[scope], i === 0 ? 'primary' : null, function () {
          return { type: 'tool_approval_response', toolCallId: f.toolCallId, approved: true, scope: scope };
        });
      });
      var instead = el('textarea', 'instead');
      instead.rows = 1;
      instead.placeholder = 'Deny, and tell the model what to do instead (optional)';
      instead.setAttribute('aria-label', 'What to do instead');
      add(c.body, instead);
      c.button('Deny', 'danger', function () {
        // sent as a steer first, on the same socket: queued while the run waits here, so the model reads it
        // right after the denial (sent after, it could arrive once the run had ended)
        var text = instead.value.trim();
        if (text) P.quietly(P.call('steer', { message: text }));
        return { type: 'tool_approval_response', toolCallId: f.toolCallId, approved: false };
      });
    } else {
      var rest = str(f.title).split('\n').slice(1).join('\n');
      if (rest) add(c.body, el('pre', 'identity', rest));
      (f.options || []).forEach(function (o, i) {
        c.button(String(o), i === 0 ? 'primary' : (i === f.options.length - 1 ? 'danger' : null), function () { return { value: String(o) }; });
      });
    }
    notify('pisces needs your approval', title);
  }

  function requestCard(f, cls, title) {
    var box = el('div', cls);
    box.setAttribute('data-request', f.id);
    var head = el('h3', null, title);
    var timer = null;
    if (typeof f.timeout === 'number' && f.timeout > 0) {
      timer = el('span', 'timer');
      var ends = Date.now() + f.timeout;
      var tick = function () {
        if (!box.parentNode) return;
        var left = Math.max(0, Math.round((ends - Date.now()) / 1000));
        timer.textContent = left + ' s';
        if (left > 0) setTimeout(tick, 1000);
      };
      tick();
      add(box, timer);
    }
    var body = el('div', 'body');
    var buttons = el('div', 'buttons');
    add(box, head, body, buttons);
    add($('requests'), box);
    S.requests[f.id] = box;
    scrollDown(true);
    return {
      body: body,
      button: function (label, bcls, answer) {
        var b = el('button', bcls, label);
        b.type = 'button';
        b.addEventListener('click', function () {
          var a = answer();
          var frame = { type: a.type || 'extension_ui_response', id: f.id };
          for (var k in a) if (k !== 'type') frame[k] = a[k];
          send(frame);
          closeRequest(f.id);
        });
        add(buttons, b);
        return b;
      }
    };
  }
  function closeRequest(id) {
    var box = S.requests[id];
    if (box && box.parentNode) box.parentNode.removeChild(box);
    delete S.requests[id];
  }
  function renderWidgets() {
    var box = $('widgets');
    box.textContent = '';
    Object.keys(S.widgets).forEach(function (k) { add(box, el('pre', null, S.widgets[k].join('\n'))); });
    var st = Object.keys(S.statuses).map(function (k) { return S.statuses[k]; }).join(' · ');
    if (st) add(box, el('pre', null, st));
  }

  // -- notifications and toasts ---------------------------------------------------------------------------------
  var asked = false;
  function askNotificationsOnce() {
    if (asked || !('Notification' in window) || Notification.permission !== 'default') return;
    asked = true;
    Notification.requestPermission().catch(function () {});
  }
  $('notify-btn').addEventListener('click', function () {
    if (!('Notification' in window)) { toast('This browser has no notifications here (they need https or localhost)', true); return; }
    Notification.requestPermission().then(function (p) { toast('Notifications: ' + p); });
  });
  function notify(title, body) {
    if (document.visibilityState === 'visible' && document.hasFocus()) return;
    if ('Notification' in window && Notification.permission === 'granted') {
      try { new Notification(title, { body: str(body).slice(0, 200), tag: 'pisces' }); } catch (e) { /* some phones need a service worker */ }
    }
    if (navigator.vibrate) { try { navigator.vibrate(120); } catch (e) { /* ignore */ } }
  }
  function toast(text, error) {
    var t = el('div', 'toast' + (error ? ' error' : ''), text);
    add($('toasts'), t);
    setTimeout(function () { if (t.parentNode) t.parentNode.removeChild(t); }, error ? 7000 : 3500);
  }

  P.uiRequest = uiRequest; P.showApproval = showApproval; P.closeRequest = closeRequest;
  P.notify = notify; P.toast = toast; P.askNotificationsOnce = askNotificationsOnce;
})();
