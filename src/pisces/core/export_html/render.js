/* pisces session export: renders the embedded session JSON in the browser.
 *
 * Safety rules, kept everywhere below:
 *  - text from the session reaches the page through textContent / createTextNode only;
 *  - the one exception is markdown: marked renders raw HTML as escaped text, then the HTML it produced is
 *    parsed in an inert <template> and copied through an allowlist of tags and attributes (no event
 *    handlers, no styles, links only http(s)/mailto/#, images only data: URLs of png/jpeg/gif/webp);
 *  - highlight.js output (escaped text in <span class>) is the only other HTML set directly.
 * The page's Content-Security-Policy allows only this file's scripts, so even a mistake here could not
 * run a script that came from the session.
 */
(function () {
  'use strict';

  var IMAGE_MIME = /^image\/(png|jpeg|gif|webp)$/;
  var BASE64 = /^[A-Za-z0-9+\/=\s]*$/;
  var COLLAPSE_LINES = 20;
  var HIGHLIGHT_LIMIT = 100000;

  // ------------------------------------------------------------------------------------------
  // Small DOM helpers
  // ------------------------------------------------------------------------------------------
  function el(tag, cls, text) {
    var node = document.createElement(tag);
    if (cls) node.className = cls;
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }

  function add(parent) {
    for (var i = 1; i < arguments.length; i++) {
      var child = arguments[i];
      if (child === null || child === undefined || child === false) continue;
      parent.appendChild(typeof child === 'string' ? document.createTextNode(child) : child);
    }
    return parent;
  }

  function isObj(x) { return x !== null && typeof x === 'object' && !Array.isArray(x); }
  function str(x) { return typeof x === 'string' ? x : ''; }

  function escapeHtml(s) {
    return String(s).replace(/[&<>"']/g, function (c) {
      return { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' }[c];
    });
  }

  function fmtTime(value) {
    var d = typeof value === 'number' ? new Date(value) : (typeof value === 'string' && value ? new Date(value) : null);
    if (!d || isNaN(d.getTime())) return '';
    return d.toLocaleString();
  }

  function fmtInt(n) { return typeof n === 'number' && isFinite(n) ? Math.round(n).toLocaleString() : '0'; }

  function oneLine(s, max) {
    s = String(s || '').replace(/\s+/g, ' ').trim();
    return s.length > max ? s.slice(0, max - 1) + '\u2026' : s;
  }

  // ------------------------------------------------------------------------------------------
  // URLs and images
  // ------------------------------------------------------------------------------------------
  function safeHref(href) {
    href = str(href).trim();
    if (/^(https?:|mailto:)/i.test(href) || href.charAt(0) === '#') return href;
    return null;
  }

  function safeImageUrl(src) {
    src = str(src).trim();
    var m = /^data:(image\/[a-z]+);base64,([A-Za-z0-9+\/=%\s]*)$/i.exec(src);
    if (m && IMAGE_MIME.test(m[1].toLowerCase())) return 'data:' + m[1].toLowerCase() + ';base64,' + m[2];
    return null;
  }

  function imageBlock(block) {
    var mime = str(block.mimeType).toLowerCase();
    var data = str(block.data);
    if (!IMAGE_MIME.test(mime) || !BASE64.test(data)) {
      return el('div', 'note', '[image omitted: unsupported type ' + (mime || 'unknown') + ']');
    }
    var img = el('img', 'msg-image');
    img.alt = 'image (' + mime + ')';
    img.src = 'data:' + mime + ';base64,' + data.replace(/\s+/g, '');
    return img;
  }

  // ------------------------------------------------------------------------------------------
  // Markdown: marked with raw HTML escaped, then an allowlist sanitiser over an inert template
  // ------------------------------------------------------------------------------------------
  var md = null;
  if (window.marked && window.marked.Marked) {
    md = new window.marked.Marked({ gfm: true, breaks: false, async: false });
    md.use({
      renderer: {
        html: function (token) {
          var text = escapeHtml(token.text);
          return token.block ? '<p>' + text + '</p>' : text;
        },
        link: function (token) {
          var inner = this.parser.parseInline(token.tokens);
          var href = safeHref(token.href);
          if (!href) return inner;
          var title = token.title ? ' title="' + escapeHtml(token.title) + '"' : '';
          return '<a href="' + escapeHtml(href) + '"' + title + '>' + inner + '</a>';
        },
        image: function (token) {
          var src = safeImageUrl(token.href);
          if (!src) return escapeHtml('[image: ' + (token.text || token.href || '') + ']');
          return '<img src="' + escapeHtml(src) + '" alt="' + escapeHtml(token.text || '') + '">';
        }
      }
    });
  }

  var ALLOWED = {
    P: [], BR: [], HR: [], H1: [], H2: [], H3: [], H4: [], H5: [], H6: [], BLOCKQUOTE: [], UL: [],
    OL: ['start'], LI: [], PRE: [], CODE: ['class'], EM: [], STRONG: [], DEL: [], S: [], A: ['href', 'title'],
    IMG: ['src', 'alt'], TABLE: [], THEAD: [], TBODY: [], TR: [], TH: ['align'], TD: ['align'],
    INPUT: ['type', 'checked', 'disabled'], SUP: [], SUB: [], SPAN: [], B: [], I: []
  };
  var DROP = { SCRIPT: 1, STYLE: 1, IFRAME: 1, OBJECT: 1, EMBED: 1, SVG: 1, MATH: 1, TEMPLATE: 1, LINK: 1,
    META: 1, BASE: 1, FORM: 1, NOSCRIPT: 1, TEXTAREA: 1, SELECT: 1, FRAME: 1, FRAMESET: 1 };

  function cleanAttr(tag, name, value) {
    if (tag === 'A' && name === 'href') return safeHref(value);
    if (tag === 'IMG' && name === 'src') return safeImageUrl(value);
    if (tag === 'CODE' && name === 'class') return /^language-[\w+#.-]{1,40}$/.test(value) ? value : null;
    if (name === 'align') return /^(left|right|center)$/.test(value) ? value : null;
    if (tag === 'INPUT' && name === 'type') return value === 'checkbox' ? value : null;
    if (name === 'start') return /^\d{1,9}$/.test(value) ? value : null;
    return value;
  }

  function sanitizeInto(source, target) {
    for (var node = source.firstChild; node; node = node.nextSibling) {
      if (node.nodeType === 3) {
        target.appendChild(document.createTextNode(node.nodeValue));
      } else if (node.nodeType === 1) {
        var tag = node.nodeName.toUpperCase();
        if (DROP[tag]) continue;
        var allowed = ALLOWED[tag];
        if (!allowed) { sanitizeInto(node, target); continue; }  // unknown tag: keep its text only
        if (tag === 'INPUT' && node.getAttribute('type') !== 'checkbox') continue;
        var copy = document.createElement(tag.toLowerCase());
        for (var i = 0; i < allowed.length; i++) {
          var name = allowed[i];
          if (!node.hasAttribute(name)) continue;
          var value = cleanAttr(tag, name, node.getAttribute(name));
          if (value !== null) copy.setAttribute(name, value);
        }
        if (tag === 'INPUT') copy.disabled = true;
        if (tag === 'A') { copy.setAttribute('rel', 'noopener noreferrer nofollow'); copy.setAttribute('target', '_blank'); }
        if (tag === 'IMG' && !copy.hasAttribute('src')) continue;
        sanitizeInto(node, copy);
        target.appendChild(copy);
      }
    }
  }

  function highlightCode(code, language) {
    var text = code.textContent;
    if (!window.hljs || !language || text.length > HIGHLIGHT_LIMIT || !window.hljs.getLanguage(language)) return;
    try {
      code.innerHTML = window.hljs.highlight(text, { language: language, ignoreIllegals: true }).value;
      code.classList.add('hljs');
    } catch (e) { /* leave the plain text */ }
  }

  function markdown(text, cls) {
    var box = el('div', 'md' + (cls ? ' ' + cls : ''));
    text = str(text);
    if (!md) { add(box, el('div', 'plain', text)); return box; }
    var html;
    try { html = md.parse(text); } catch (e) { add(box, el('div', 'plain', text)); return box; }
    var tpl = document.createElement('template');
    tpl.innerHTML = html;  // inert: nothing in a template runs or loads
    sanitizeInto(tpl.content, box);
    var codes = box.querySelectorAll('pre > code');
    for (var i = 0; i < codes.length; i++) {
      var m = /(?:^|\s)language-([\w+#.-]+)/.exec(codes[i].className);
      if (m) highlightCode(codes[i], m[1].toLowerCase());
    }
    return box;
  }

  // ------------------------------------------------------------------------------------------
  // Code and output blocks
  // ------------------------------------------------------------------------------------------
  var EXT_LANG = {
    py: 'python', js: 'javascript', mjs: 'javascript', cjs: 'javascript', jsx: 'javascript', ts: 'typescript',
    tsx: 'typescript', json: 'json', md: 'markdown', sh: 'bash', bash: 'bash', zsh: 'bash', rs: 'rust', go: 'go',
    java: 'java', c: 'c', h: 'c', cc: 'cpp', cpp: 'cpp', hpp: 'cpp', cs: 'csharp', css: 'css', scss: 'scss',
    html: 'xml', htm: 'xml', xml: 'xml', svg: 'xml', yml: 'yaml', yaml: 'yaml', toml: 'ini', ini: 'ini',
    rb: 'ruby', php: 'php', sql: 'sql', diff: 'diff', patch: 'diff', kt: 'kotlin', swift: 'swift', lua: 'lua',
    pl: 'perl', r: 'r', mk: 'makefile', makefile: 'makefile', graphql: 'graphql', vb: 'vbnet'
  };

  function langForPath(path) {
    var base = str(path).split(/[\\\/]/).pop().toLowerCase();
    if (base === 'makefile') return 'makefile';
    var dot = base.lastIndexOf('.');
    return dot >= 0 ? (EXT_LANG[base.slice(dot + 1)] || null) : null;
  }

  // A <pre> of text; long text shows its first lines and a button for the rest.
  function codeBlock(text, language, cls) {
    text = str(text);
    var wrap = el('div', 'code-wrap' + (cls ? ' ' + cls : ''));
    var lines = text.split('\n');
    var pre = el('pre');
    var code = el('code');
    pre.appendChild(code);
    wrap.appendChild(pre);
    function fill(full) {
      code.textContent = full ? text : lines.slice(0, COLLAPSE_LINES).join('\n');
      if (language) highlightCode(code, language);
    }
    if (lines.length > COLLAPSE_LINES + 5) {
      fill(false);
      var more = el('button', 'more', 'Show ' + (lines.length - COLLAPSE_LINES) + ' more lines');
      more.type = 'button';
      more.addEventListener('click', function () {
        var open = more.getAttribute('data-open') === '1';
        fill(!open);
        more.setAttribute('data-open', open ? '0' : '1');
        more.textContent = open ? 'Show ' + (lines.length - COLLAPSE_LINES) + ' more lines' : 'Show fewer lines';
      });
      wrap.appendChild(more);
    } else {
      fill(true);
    }
    return wrap;
  }

  function diffBlock(diff) {
    var pre = el('pre', 'diff');
    var lines = str(diff).split('\n');
    for (var i = 0; i < lines.length; i++) {
      var line = lines[i];
      var cls = /^\+/.test(line) ? 'add' : (/^-/.test(line) ? 'del' : 'ctx');
      add(pre, el('span', 'dl ' + cls, line + (i < lines.length - 1 ? '\n' : '')));
    }
    return pre;
  }

  function pretty(value) {
    try { return JSON.stringify(value, null, 2); } catch (e) { return String(value); }
  }

  // ------------------------------------------------------------------------------------------
  // The session data
  // ------------------------------------------------------------------------------------------
  var DATA;
  try {
    DATA = JSON.parse(document.getElementById('session-data').textContent);
  } catch (e) {
    add(document.getElementById('messages'), el('div', 'error', 'Cannot read the session data in this file: ' + e));
    return;
  }
  var header = isObj(DATA.header) ? DATA.header : {};
  var entries = Array.isArray(DATA.entries) ? DATA.entries.filter(function (e) { return isObj(e) && typeof e.id === 'string'; }) : [];
  var byId = Object.create(null);
  var children = Object.create(null);
  var roots = [];
  var labels = Object.create(null);
  var sessionName = '';
  entries.forEach(function (e) { byId[e.id] = e; });
  entries.forEach(function (e) {
    var p = typeof e.parentId === 'string' && byId[e.parentId] ? e.parentId : null;
    if (p) (children[p] = children[p] || []).push(e.id); else roots.push(e.id);
    if (e.type === 'label' && typeof e.targetId === 'string') {
      if (typeof e.label === 'string' && e.label) labels[e.targetId] = e.label; else delete labels[e.targetId];
    }
    if (e.type === 'session_info' && typeof e.name === 'string' && e.name) sessionName = e.name;
  });
  var leafId = typeof DATA.leafId === 'string' && byId[DATA.leafId] ? DATA.leafId
    : (entries.length ? entries[entries.length - 1].id : null);

  function pathTo(id) {
    var out = [];
    var seen = Object.create(null);
    while (id && byId[id] && !seen[id]) {
      seen[id] = 1;
      out.push(byId[id]);
      id = byId[id].parentId;
    }
    return out.reverse();
  }

  function latestLeaf(id) {
    var seen = Object.create(null);
    while (children[id] && children[id].length && !seen[id]) {
      seen[id] = 1;
      id = children[id][children[id].length - 1];
    }
    return id;
  }

  function messageOf(e) { return e.type === 'message' && isObj(e.message) ? e.message : null; }

  function textOf(content) {
    if (typeof content === 'string') return content;
    if (!Array.isArray(content)) return '';
    var parts = [];
    content.forEach(function (b) { if (isObj(b) && b.type === 'text') parts.push(str(b.text)); });
    return parts.join('\n');
  }

  // ------------------------------------------------------------------------------------------
  // The header: name, ids, totals, system prompt, tools
  // ------------------------------------------------------------------------------------------
  function renderHeader() {
    var box = document.getElementById('session-header');
    var title = sessionName || 'Session ' + str(header.id);  // <title> is written, escaped, by the exporter
    add(box, el('h1', null, title));
    var stats = { user: 0, assistant: 0, tools: 0, input: 0, output: 0, cacheRead: 0, cacheWrite: 0, cost: 0 };
    var models = [];
    entries.forEach(function (e) {
      var m = messageOf(e);
      if (e.type === 'model_change') {
        var name = str(e.provider) + '/' + str(e.modelId);
        if (models.indexOf(name) < 0) models.push(name);
      }
      if (!m) return;
      if (m.role === 'user') stats.user++;
      else if (m.role === 'toolResult') stats.tools++;
      else if (m.role === 'assistant') {
        stats.assistant++;
        var model = str(m.provider) + '/' + str(m.model);
        if (m.model && models.indexOf(model) < 0) models.push(model);
        var u = isObj(m.usage) ? m.usage : {};
        ['input', 'output', 'cacheRead', 'cacheWrite'].forEach(function (k) { if (typeof u[k] === 'number') stats[k] += u[k]; });
        if (isObj(u.cost) && typeof u.cost.total === 'number') stats.cost += u.cost.total;
      }
    });
    var dl = el('dl', 'meta');
    function row(k, v) { if (v) add(dl, el('dt', null, k), el('dd', null, v)); }
    row('Session', str(header.id));
    row('Directory', str(header.cwd));
    row('Started', fmtTime(header.timestamp));
    row('Models', models.join(', '));
    row('Messages', stats.user + ' user, ' + stats.assistant + ' assistant, ' + stats.tools + ' tool results');
    row('Tokens', fmtInt(stats.input) + ' in, ' + fmtInt(stats.output) + ' out, ' + fmtInt(stats.cacheRead) +
      ' cache read, ' + fmtInt(stats.cacheWrite) + ' cache write');
    if (stats.cost) row('Cost', '$' + stats.cost.toFixed(4));
    if (typeof header.parentSession === 'string') row('Forked from', header.parentSession);
    add(box, dl);
    if (typeof DATA.systemPrompt === 'string' && DATA.systemPrompt) {
      var sp = el('details', 'system-prompt');
      add(sp, el('summary', null, 'System prompt'), codeBlock(DATA.systemPrompt, null));
      add(box, sp);
    }
    if (Array.isArray(DATA.tools) && DATA.tools.length) {
      var td = el('details', 'tools');
      add(td, el('summary', null, 'Tools (' + DATA.tools.length + ')'));
      var ul = el('ul');
      DATA.tools.forEach(function (t) {
        if (!isObj(t)) return;
        var li = el('li');
        add(li, el('code', null, str(t.name)), t.description ? ' \u2014 ' + oneLine(t.description, 300) : '');
        add(ul, li);
      });
      add(td, ul);
      add(box, td);
    }
  }

  // ------------------------------------------------------------------------------------------
  // Messages
  // ------------------------------------------------------------------------------------------
  function card(kind, label, timestamp) {
    var box = el('section', 'msg ' + kind);
    var head = el('div', 'msg-head');
    add(head, el('span', 'role', label));
    var t = fmtTime(timestamp);
    if (t) add(head, el('span', 'time', t));
    add(box, head);
    return box;
  }

  function contentBlocks(content, box) {
    if (typeof content === 'string') { add(box, markdown(content)); return; }
    if (!Array.isArray(content)) return;
    content.forEach(function (b) {
      if (!isObj(b)) return;
      if (b.type === 'text') add(box, markdown(b.text));
      else if (b.type === 'image') add(box, imageBlock(b));
    });
  }

  function toolCallArgs(name, args) {
    var box = el('div', 'tool-args');
    var lname = str(name).toLowerCase();
    if (lname === 'bash' && typeof args.command === 'string') {
      add(box, codeBlock('$ ' + args.command, 'bash', 'command'));
      if (args.timeout !== undefined) add(box, el('div', 'note', 'timeout: ' + String(args.timeout) + ' s'));
      return box;
    }
    if ((lname === 'read' || lname === 'write' || lname === 'edit' || lname === 'ls' || lname === 'find' || lname === 'grep') &&
        typeof args.path === 'string') {
      var where = el('div', 'path');
      add(where, el('code', null, args.path));
      if (args.offset !== undefined || args.limit !== undefined) {
        add(where, el('span', 'note', ' lines ' + (args.offset !== undefined ? String(args.offset) : '1') +
          (args.limit !== undefined ? ' (+' + String(args.limit) + ')' : '')));
      }
      if (typeof args.pattern === 'string') add(where, el('span', 'note', ' pattern '), el('code', null, args.pattern));
      add(box, where);
      if (lname === 'write' && typeof args.content === 'string') add(box, codeBlock(args.content, langForPath(args.path)));
      if (lname === 'edit') {
        var edits = Array.isArray(args.edits) ? args.edits : (typeof args.oldText === 'string' ? [args] : []);
        edits.forEach(function (ed) {
          if (!isObj(ed)) return;
          var lines = [];
          str(ed.oldText).split('\n').forEach(function (l) { lines.push('-' + l); });
          str(ed.newText).split('\n').forEach(function (l) { lines.push('+' + l); });
          add(box, diffBlock(lines.join('\n')));
        });
      }
      return box;
    }
    add(box, codeBlock(pretty(args), 'json'));
    return box;
  }

  function toolResultBody(result, callArgs) {
    var box = el('div', 'tool-result' + (result.isError ? ' is-error' : ''));
    var details = isObj(result.details) ? result.details : {};
    var text = textOf(result.content);
    var lang = null;
    if (result.toolName === 'read' && isObj(callArgs) && !result.isError) lang = langForPath(callArgs.path);
    if (typeof details.diff === 'string' && details.diff) add(box, diffBlock(details.diff));
    if (text || !Array.isArray(result.content) || !result.content.length) add(box, codeBlock(text || '(no output)', lang, 'output'));
    if (Array.isArray(result.content)) {
      result.content.forEach(function (b) { if (isObj(b) && b.type === 'image') add(box, imageBlock(b)); });
    }
    if (typeof details.fullOutputPath === 'string') add(box, el('div', 'note', 'Full output: ' + details.fullOutputPath));
    return box;
  }

  function renderToolCall(call, results) {
    var box = el('div', 'tool-call');
    var head = el('div', 'tool-head');
    add(head, el('span', 'tool-name', str(call.name) || '(tool)'));
    box.appendChild(head);
    var args = isObj(call.arguments) ? call.arguments : {};
    add(box, toolCallArgs(call.name, args));
    var result = results[call.id];
    if (result) {
      result.paired = true;
      if (result.message.isError) add(head, el('span', 'badge error', 'error'));
      add(box, toolResultBody(result.message, args));
    } else {
      add(head, el('span', 'badge', 'no result'));
    }
    return box;
  }

  function renderAssistant(m, results) {
    var label = 'Assistant';
    if (m.model) label += ' \u00b7 ' + (m.provider ? str(m.provider) + '/' : '') + str(m.model);
    var box = card('assistant', label, m.timestamp);
    (Array.isArray(m.content) ? m.content : []).forEach(function (b) {
      if (!isObj(b)) return;
      if (b.type === 'text') add(box, markdown(b.text));
      else if (b.type === 'thinking') {
        var d = el('details', 'thinking');
        add(d, el('summary', null, b.redacted ? 'Thinking (redacted)' : 'Thinking'));
        if (!b.redacted) add(d, markdown(b.thinking));
        add(box, d);
      } else if (b.type === 'toolCall') add(box, renderToolCall(b, results));
    });
    if (m.stopReason === 'error' || m.stopReason === 'aborted') {
      add(box, el('div', 'error', (m.stopReason === 'aborted' ? 'Aborted' : 'Error') +
        (m.errorMessage ? ': ' + str(m.errorMessage) : '')));
    } else if (m.stopReason === 'length') {
      add(box, el('div', 'note', 'Stopped at the output token limit.'));
    }
    var u = isObj(m.usage) ? m.usage : null;
    if (u && (u.input || u.output)) {
      var parts = [fmtInt(u.input) + ' in', fmtInt(u.output) + ' out'];
      if (u.cacheRead) parts.push(fmtInt(u.cacheRead) + ' cache read');
      if (u.cacheWrite) parts.push(fmtInt(u.cacheWrite) + ' cache write');
      if (isObj(u.cost) && typeof u.cost.total === 'number' && u.cost.total) parts.push('$' + u.cost.total.toFixed(4));
      add(box, el('div', 'usage', parts.join(' \u00b7 ')));
    }
    return box;
  }

  function renderBash(m) {
    var box = card('bash', 'User bash' + (m.excludeFromContext ? ' (not sent to the model)' : ''), m.timestamp);
    add(box, codeBlock('$ ' + str(m.command), 'bash', 'command'));
    add(box, codeBlock(str(m.output) || '(no output)', null, 'output'));
    var status = m.cancelled ? 'cancelled' : (typeof m.exitCode === 'number' && m.exitCode !== 0 ? 'exit code ' + m.exitCode : '');
    if (status) add(box, el('div', 'note', status));
    if (m.truncated && typeof m.fullOutputPath === 'string') add(box, el('div', 'note', 'Output truncated. Full output: ' + m.fullOutputPath));
    return box;
  }

  // The todo list as written at this point of the session (a pisces.todos entry, docs/planning.md)
  var TODO_MARKS = {pending: '[ ]', in_progress: '[>]', completed: '[x]', abandoned: '[-]'};
  function renderTodos(e) {
    var phases = isObj(e.data) && Array.isArray(e.data.phases) ? e.data.phases : [];
    var box = card('custom', 'Todos', e.timestamp);
    if (!phases.length) { add(box, el('div', 'note', 'The todo list is empty.')); return box; }
    var lines = [];
    phases.forEach(function (p) {
      if (!isObj(p)) return;
      lines.push(str(p.id) + ' ' + str(p.name));
      (Array.isArray(p.tasks) ? p.tasks : []).forEach(function (t) {
        if (!isObj(t)) return;
        lines.push('  ' + (TODO_MARKS[t.status] || '[?]') + ' ' + str(t.id) + ' ' + str(t.content) +
                   (t.notes ? '  (' + str(t.notes) + ')' : ''));
      });
    });
    add(box, codeBlock(lines.join('\n'), null, 'todos'));
    return box;
  }

  // Plan mode turned on or off (a pisces.plan_mode entry, docs/planning.md); an approved plan is shown whole
  function renderPlanMode(e) {
    var d = isObj(e.data) ? e.data : {};
    if (typeof d.plan === 'string') {
      var box = card('custom', 'Plan approved \u00b7 ' + (str(d.title) || 'untitled'), e.timestamp);
      add(box, el('div', 'note', str(d.planFile)));
      add(box, markdown(d.plan));
      return box;
    }
    return el('div', 'event', d.enabled === true ? 'Plan mode on: ' + str(d.planFile) : 'Plan mode off');
  }

  function summaryCard(kind, label, summary, timestamp, open) {
    var box = card(kind, label, timestamp);
    var d = el('details', 'summary-text');
    if (open) d.open = true;
    add(d, el('summary', null, 'Summary'), markdown(summary));
    add(box, d);
    return box;
  }

  function renderMessage(e, m, results) {
    switch (m.role) {
      case 'user': { var u = card('user', 'User', m.timestamp); contentBlocks(m.content, u); return u; }
      case 'assistant': return renderAssistant(m, results);
      case 'toolResult': {
        var r = results[m.toolCallId];
        if (r && r.paired && r.message === m) return null;
        var box = card('tool', 'Tool result \u00b7 ' + (str(m.toolName) || '?'), m.timestamp);
        add(box, toolResultBody(m, null));
        return box;
      }
      case 'bashExecution': return renderBash(m);
      case 'custom': {
        if (m.display === false) return null;
        var c = card('custom', str(m.customType) || 'custom', m.timestamp);
        contentBlocks(m.content, c);
        return c;
      }
      case 'branchSummary': return summaryCard('summary', 'Branch summary', m.summary, m.timestamp, true);
      case 'compactionSummary': return summaryCard('summary', 'Compaction summary', m.summary, m.timestamp, false);
      default: {
        var x = card('unknown', 'Message (' + str(m.role) + ')', m.timestamp);
        add(x, codeBlock(pretty(m), 'json'));
        return x;
      }
    }
  }

  function renderEntry(e, results) {
    var m = messageOf(e);
    if (m) return renderMessage(e, m, results);
    switch (e.type) {
      case 'compaction':
        return summaryCard('summary', 'Compaction \u00b7 ' + fmtInt(e.tokensBefore) + ' tokens before', e.summary, e.timestamp, false);
      case 'branch_summary':
        return summaryCard('summary', 'Branch summary', e.summary, e.timestamp, true);
      case 'custom_message': {
        if (e.display === false) return null;
        var c = card('custom', str(e.customType) || 'custom', e.timestamp);
        contentBlocks(e.content, c);
        return c;
      }
      case 'model_change':
        return el('div', 'event', 'Model: ' + str(e.provider) + '/' + str(e.modelId));
      case 'thinking_level_change':
        return el('div', 'event', 'Thinking level: ' + str(e.thinkingLevel));
      case 'session_info':
        return e.name ? el('div', 'event', 'Session named: ' + str(e.name)) : null;
      case 'custom':
        if (e.customType === 'pisces.plan_mode') return renderPlanMode(e);
        return e.customType === 'pisces.todos' ? renderTodos(e) : null;
      case 'label':
        return null;
      default: {
        var d = el('details', 'event');
        add(d, el('summary', null, 'Entry: ' + (str(e.type) || 'unknown')), codeBlock(pretty(e), 'json'));
        return d;
      }
    }
  }

  // ------------------------------------------------------------------------------------------
  // The tree in the sidebar
  // ------------------------------------------------------------------------------------------
  function entrySummary(e) {
    var m = messageOf(e);
    if (m) {
      switch (m.role) {
        case 'user': return ['user', textOf(m.content) || '(image)'];
        case 'assistant': {
          var text = textOf(m.content);
          if (!text && Array.isArray(m.content)) {
            var calls = m.content.filter(function (b) { return isObj(b) && b.type === 'toolCall'; })
              .map(function (b) { return str(b.name); });
            text = calls.length ? '\u2192 ' + calls.join(', ') : '(thinking)';
          }
          if (m.stopReason === 'error' || m.stopReason === 'aborted') text = m.stopReason + ': ' + (str(m.errorMessage) || text);
          return ['assistant', text];
        }
        case 'toolResult': return ['tool', str(m.toolName) + ': ' + textOf(m.content)];
        case 'bashExecution': return ['bash', '$ ' + str(m.command)];
        case 'custom': return ['custom', '[' + str(m.customType) + '] ' + textOf(m.content)];
        default: return ['other', str(m.role)];
      }
    }
    switch (e.type) {
      case 'compaction': return ['summary', '[compaction]'];
      case 'branch_summary': return ['summary', '[branch summary] ' + str(e.summary)];
      case 'model_change': return ['event', '[model ' + str(e.provider) + '/' + str(e.modelId) + ']'];
      case 'thinking_level_change': return ['event', '[thinking ' + str(e.thinkingLevel) + ']'];
      case 'session_info': return ['event', '[name ' + str(e.name) + ']'];
      case 'label': return ['event', '[label ' + str(e.label) + ']'];
      case 'custom': return ['event', '[custom ' + str(e.customType) + ']'];
      case 'custom_message': return ['custom', '[' + str(e.customType) + '] ' + textOf(e.content)];
      default: return ['event', '[' + str(e.type) + ']'];
    }
  }

  var rows = Object.create(null);

  function renderTree() {
    var tree = document.getElementById('tree');
    var frag = document.createDocumentFragment();
    var stack = [];
    for (var r = roots.length - 1; r >= 0; r--) stack.push([roots[r], roots.length > 1 ? 1 : 0]);
    var seen = Object.create(null);
    while (stack.length) {
      var top = stack.pop();
      var id = top[0], depth = top[1];
      if (seen[id]) continue;
      seen[id] = 1;
      var e = byId[id];
      var s = entrySummary(e);
      var row = el('div', 'row kind-' + s[0]);
      row.setAttribute('data-id', id);
      row.style.paddingLeft = (6 + Math.min(depth, 30) * 12) + 'px';
      row.title = fmtTime(e.timestamp);
      if (labels[id]) add(row, el('span', 'label', labels[id]));
      add(row, oneLine(s[1], 90) || '\u00a0');
      rows[id] = row;
      frag.appendChild(row);
      var kids = children[id] || [];
      var childDepth = kids.length > 1 ? depth + 1 : depth;
      for (var k = kids.length - 1; k >= 0; k--) stack.push([kids[k], childDepth]);
    }
    tree.appendChild(frag);
    tree.addEventListener('click', function (ev) {
      var t = ev.target;
      while (t && t !== tree && !(t.getAttribute && t.getAttribute('data-id'))) t = t.parentNode;
      if (!t || t === tree) return;
      go(t.getAttribute('data-id'), true);
    });
    var filter = document.getElementById('filter');
    filter.addEventListener('input', function () {
      var q = filter.value.toLowerCase();
      for (var key in rows) rows[key].hidden = !!q && rows[key].textContent.toLowerCase().indexOf(q) < 0;
    });
    var count = document.getElementById('tree-count');
    if (count) count.textContent = entries.length + ' entries';
  }

  // ------------------------------------------------------------------------------------------
  // Showing a path
  // ------------------------------------------------------------------------------------------
  var activeIds = Object.create(null);
  pathTo(leafId).forEach(function (e) { activeIds[e.id] = 1; });

  function branchBar(e) {
    var siblings = e.parentId && children[e.parentId] ? children[e.parentId] : roots;
    if (siblings.length < 2) return null;
    var bar = el('div', 'branches');
    add(bar, 'Branch ' + (siblings.indexOf(e.id) + 1) + ' of ' + siblings.length + ': ');
    siblings.forEach(function (sid, i) {
      var b = el('button', sid === e.id ? 'current' : '', String(i + 1));
      b.type = 'button';
      b.title = oneLine(entrySummary(byId[sid])[1], 120);
      b.addEventListener('click', function () { go(latestLeaf(sid), false); });
      add(bar, b);
    });
    return bar;
  }

  function show(targetId) {
    var list = document.getElementById('messages');
    list.textContent = '';
    var path = pathTo(targetId);
    var results = Object.create(null);
    path.forEach(function (e) {
      var m = messageOf(e);
      if (m && m.role === 'toolResult' && typeof m.toolCallId === 'string') results[m.toolCallId] = { message: m, paired: false };
    });
    var inPath = Object.create(null);
    var frag = document.createDocumentFragment();
    path.forEach(function (e) {
      inPath[e.id] = 1;
      var bar = branchBar(e);
      if (bar) frag.appendChild(bar);
      var node;
      try { node = renderEntry(e, results); } catch (err) { node = el('div', 'error', 'Cannot show entry ' + e.id + ': ' + err); }
      if (node) { node.setAttribute('data-entry', e.id); frag.appendChild(node); }
    });
    if (!path.length) frag.appendChild(el('div', 'note', 'This session has no entries.'));
    list.appendChild(frag);
    var status = document.getElementById('view-status');
    status.textContent = activeIds[targetId] && targetId === leafId ? 'Showing the active branch'
      : 'Showing the path to the selected entry';
    for (var id in rows) {
      rows[id].classList.toggle('in-path', !!inPath[id]);
      rows[id].classList.toggle('active', !!activeIds[id]);
      rows[id].classList.toggle('selected', id === targetId);
    }
  }

  var current;  // undefined until the first show
  function go(id, scrollToIt) {
    if (!id || !byId[id]) id = leafId;
    if (id !== current) { current = id; show(id); }
    if (scrollToIt) {
      var nodes = document.querySelectorAll('[data-entry]');
      for (var i = nodes.length - 1; i >= 0; i--) {
        if (nodes[i].getAttribute('data-entry') === id) { nodes[i].scrollIntoView({ block: 'start' }); break; }
      }
    }
    if (rows[id]) rows[id].scrollIntoView({ block: 'nearest' });
    if (id && location.hash !== '#' + id) {
      try { history.replaceState(null, '', '#' + id); } catch (e) { /* file:// in some browsers */ }
    }
  }

  document.getElementById('show-active').addEventListener('click', function () { go(leafId, false); window.scrollTo(0, 0); });
  window.addEventListener('hashchange', function () { go(decodeURIComponent(location.hash.slice(1)), true); });

  renderHeader();
  renderTree();
  var initial = location.hash ? decodeURIComponent(location.hash.slice(1)) : '';
  go(byId[initial] ? initial : leafId, !!byId[initial]);
  document.body.setAttribute('data-rendered', '1');
})();
