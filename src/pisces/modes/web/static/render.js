// pisces web UI: turning messages into DOM. Nothing from a session ever runs: text goes in with
// textContent; markdown goes through marked (raw HTML shown as text), then DOMPurify with an allowlist,
// then links are checked again; the page's Content-Security-Policy allows only its own script files.
(function () {
  'use strict';

  var IMAGE_MIME = /^image\/(png|jpeg|gif|webp)$/;
  var HIGHLIGHT_LIMIT = 100000;
  var COLLAPSE_LINES = 40;

  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }
  function add(parent) {
    for (var i = 1; i < arguments.length; i++) if (arguments[i]) parent.appendChild(arguments[i]);
    return parent;
  }
  function isObj(x) { return x !== null && typeof x === 'object' && !Array.isArray(x); }
  function str(x) { return typeof x === 'string' ? x : ''; }
  function escapeHtml(s) {
    return String(s).replace(/[&<>"']/g, function (c) {
      return { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' }[c];
    });
  }
  function safeHref(href) {
    href = str(href).trim();
    return /^(https?:|mailto:)/i.test(href) || href.charAt(0) === '#' ? href : null;
  }
  function safeImageSrc(src) {
    src = str(src).trim();
    var m = /^data:(image\/[a-z]+);base64,[A-Za-z0-9+\/=\s]*$/i.exec(src);
    return m && IMAGE_MIME.test(m[1].toLowerCase()) ? src : null;
  }

  // -- markdown ---------------------------------------------------------------------------------
  var md = null;
  if (window.marked && window.marked.Marked) {
    md = new window.marked.Marked({ gfm: true, breaks: false, async: false });
    md.use({ renderer: {
      html: function (token) {  // raw HTML in a message is shown, never parsed
        var text = escapeHtml(token.text);
        return token.block ? '<p>' + text + '</p>' : text;
      },
      link: function (token) {
        var inner = this.parser.parseInline(token.tokens);
        var href = safeHref(token.href);
        if (!href) return inner;
        return '<a href="' + escapeHtml(href) + '">' + inner + '</a>';
      },
      image: function (token) {
        var src = safeImageSrc(token.href);
        if (!src) return escapeHtml('[image: ' + (token.text || token.href || '') + ']');
        return '<img src="' + escapeHtml(src) + '" alt="' + escapeHtml(token.text || '') + '">';
      }
    } });
  }
  var PURIFY = {
    ALLOWED_TAGS: ['p', 'br', 'hr', 'h1', 'h2', 'h3', 'h4', 'h5', 'h6', 'blockquote', 'ul', 'ol', 'li', 'pre', 'code',
      'em', 'strong', 'del', 's', 'a', 'img', 'table', 'thead', 'tbody', 'tr', 'th', 'td', 'input', 'sup', 'sub',
      'span', 'b', 'i'],
    ALLOWED_ATTR: ['href', 'src', 'alt', 'class', 'align', 'start', 'type', 'checked', 'disabled'],
    ALLOW_DATA_ATTR: false, ALLOW_ARIA_ATTR: false, ALLOWED_URI_REGEXP: /^(?:https?:|mailto:|#|data:image\/(?:png|jpeg|gif|webp);base64,)/i,
    RETURN_DOM_FRAGMENT: true
  };

  function sanitize(html) {
    if (!window.DOMPurify || !window.DOMPurify.sanitize) return null;  // no sanitizer: the caller shows plain text
    var frag = window.DOMPurify.sanitize(html, PURIFY);
    var all = frag.querySelectorAll('*');
    for (var i = 0; i < all.length; i++) {
      var node = all[i];
      if (node.tagName === 'A') {
        var href = safeHref(node.getAttribute('href'));
        if (href) node.setAttribute('href', href); else node.removeAttribute('href');
        node.setAttribute('rel', 'noopener noreferrer nofollow');
        node.setAttribute('target', '_blank');
      } else if (node.tagName === 'IMG' && !safeImageSrc(node.getAttribute('src'))) {
        node.remove();
      } else if (node.tagName === 'INPUT') {
        if (node.getAttribute('type') !== 'checkbox') node.remove(); else node.disabled = true;
      }
      if (node.hasAttribute('class') && node.tagName !== 'CODE' && node.tagName !== 'SPAN') node.removeAttribute('class');
    }
    return frag;
  }

  function highlight(code, language) {
    var text = code.textContent;
    if (!window.hljs || !language || text.length > HIGHLIGHT_LIMIT || !window.hljs.getLanguage(language)) return;
    try {
      var html = window.hljs.highlight(text, { language: language, ignoreIllegals: true }).value;
      var frag = window.DOMPurify ? window.DOMPurify.sanitize(html, { ALLOWED_TAGS: ['span'], ALLOWED_ATTR: ['class'], RETURN_DOM_FRAGMENT: true }) : null;
      if (!frag) return;
      code.textContent = '';
      code.appendChild(frag);
      code.classList.add('hljs');
    } catch (e) { /* the plain text stays */ }
  }

  function markdownInto(box, text) {
    box.textContent = '';
    text = str(text);
    var frag = null;
    if (md) {
      try { frag = sanitize(md.parse(text)); } catch (e) { frag = null; }
    }
    if (!frag) { add(box, el('div', 'plain', text)); box.firstChild.style.whiteSpace = 'pre-wrap'; return box; }
    box.appendChild(frag);
    var codes = box.querySelectorAll('pre > code');
    for (var i = 0; i < codes.length; i++) {
      var m = /(?:^|\s)language-([\w+#.-]+)/.exec(codes[i].className);
      if (m) highlight(codes[i], m[1].toLowerCase());
    }
    return box;
  }
  function markdown(text, cls) { return markdownInto(el('div', 'md' + (cls ? ' ' + cls : '')), text); }

  // -- blocks -----------------------------------------------------------------------------------
  var EXT_LANG = { py: 'python', js: 'javascript', mjs: 'javascript', ts: 'typescript', tsx: 'typescript', jsx: 'javascript',
    json: 'json', md: 'markdown', sh: 'bash', bash: 'bash', rs: 'rust', go: 'go', java: 'java', c: 'c', h: 'c',
    cc: 'cpp', cpp: 'cpp', cs: 'csharp', css: 'css', html: 'xml', xml: 'xml', yml: 'yaml', yaml: 'yaml', toml: 'ini',
    rb: 'ruby', php: 'php', sql: 'sql', diff: 'diff', kt: 'kotlin', swift: 'swift', lua: 'lua' };
  function langForPath(path) {
    var base = str(path).split(/[\\\/]/).pop().toLowerCase();
    var dot = base.lastIndexOf('.');
    return dot >= 0 ? (EXT_LANG[base.slice(dot + 1)] || null) : null;
  }

  function codeBlock(text, language, cls) {
    text = str(text);
    var wrap = el('div', 'code-wrap');
    var pre = el('pre', cls || null);
    var code = el('code');
    pre.appendChild(code);
    wrap.appendChild(pre);
    var lines = text.split('\n');
    function fill(full) {
      code.textContent = full ? text : lines.slice(0, COLLAPSE_LINES).join('\n');
      if (language) highlight(code, language);
    }
    if (lines.length > COLLAPSE_LINES + 5) {
      fill(false);
      var more = el('button', 'more', 'Show ' + (lines.length - COLLAPSE_LINES) + ' more lines');
      more.type = 'button';
      var open = false;
      more.addEventListener('click', function () {
        open = !open;
        fill(open);
        more.textContent = open ? 'Show fewer lines' : 'Show ' + (lines.length - COLLAPSE_LINES) + ' more lines';
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
      var cls = /^\s*\+/.test(line) && !/^\+\+\+/.test(line) ? 'add' : /^\s*-/.test(line) && !/^---/.test(line) ? 'del'
        : /^@@/.test(line) ? 'hunk' : 'ctx';
      // the edit tool's numbered diff: "+ 12 text" / "- 12 text" / "  12 text"
      var m = /^([+\- ])\s*\d+\s/.exec(line);
      if (m) cls = m[1] === '+' ? 'add' : m[1] === '-' ? 'del' : 'ctx';
      add(pre, el('span', 'dl ' + cls, line));
    }
    return pre;
  }

  function imageBlock(block) {
    var mime = str(block.mimeType).toLowerCase();
    var data = str(block.data).replace(/\s+/g, '');
    if (!IMAGE_MIME.test(mime) || !/^[A-Za-z0-9+\/=]*$/.test(data)) return el('div', 'note', '[image: ' + (mime || 'unknown type') + ']');
    var img = el('img', 'msg-image');
    img.alt = 'image (' + mime + ')';
    img.src = 'data:' + mime + ';base64,' + data;
    return img;
  }

  function textOf(content) {
    if (typeof content === 'string') return content;
    if (!Array.isArray(content)) return '';
    return content.filter(function (b) { return isObj(b) && b.type === 'text'; }).map(function (b) { return str(b.text); }).join('\n');
  }
  function pretty(v) { try { return JSON.stringify(v, null, 2); } catch (e) { return String(v); } }

  // -- tool cards ---------------------------------------------------------------------------------
  function toolSummary(name, args) {
    if (!isObj(args)) return '';
    if (name === 'bash') return str(args.command).split('\n')[0];
    if (typeof args.path === 'string') return args.path + (typeof args.pattern === 'string' ? '  ' + args.pattern : '');
    if (typeof args.pattern === 'string') return args.pattern;
    var s = ''; try { s = JSON.stringify(args); } catch (e) { s = ''; }
    return s.slice(0, 160);
  }

  function toolArgs(name, args) {
    var box = el('div', 'tool-args');
    if (!isObj(args)) return box;
    if (name === 'bash' && typeof args.command === 'string') { add(box, codeBlock('$ ' + args.command, 'bash')); return box; }
    if (typeof args.path === 'string') {
      var where = add(el('div', 'path'), el('code', null, args.path));
      if (args.offset !== undefined || args.limit !== undefined) {
        add(where, el('span', 'note', ' from line ' + String(args.offset || 1) + (args.limit !== undefined ? ', ' + String(args.limit) + ' lines' : '')));
      }
      add(box, where);
      if (name === 'write' && typeof args.content === 'string') add(box, codeBlock(args.content, langForPath(args.path)));
      if (name === 'edit') {
        var edits = Array.isArray(args.edits) ? args.edits : (typeof args.oldText === 'string' ? [args] : []);
        edits.forEach(function (ed) {
          if (!isObj(ed)) return;
          var lines = [];
          str(ed.oldText).split('\n').forEach(function (l) { lines.push('-' + l); });
          str(ed.newText).split('\n').forEach(function (l) { lines.push('+' + l); });
          add(box, diffBlock(lines.join('\n')));
        });
      }
      if (name === 'read' || name === 'write' || name === 'edit') return box;
    }
    add(box, codeBlock(pretty(args), 'json'));
    return box;
  }

  function toolResult(name, args, result, isError) {
    var box = el('div', 'tool-result' + (isError ? ' is-error' : ''));
    if (!isObj(result)) return box;
    var details = isObj(result.details) ? result.details : {};
    var text = textOf(result.content);
    if (typeof details.diff === 'string' && details.diff && !isError) {
      box.classList.add('has-diff');
      add(box, diffBlock(details.diff));
      if (text) add(box, el('div', 'note', text));
    } else if (text || !Array.isArray(result.content) || !result.content.length) {
      var lang = name === 'read' && isObj(args) && !isError ? langForPath(args.path) : null;
      add(box, codeBlock(text || '(no output)', lang, 'output'));
    }
    if (Array.isArray(result.content)) result.content.forEach(function (b) { if (isObj(b) && b.type === 'image') add(box, imageBlock(b)); });
    if (typeof details.fullOutputPath === 'string') add(box, el('div', 'note', 'Full output: ' + details.fullOutputPath));
    return box;
  }

  // A card for one tool call: head (name, summary, state), body (arguments, then the result).
  function ToolCard(call) {
    this.id = str(call.id);
    this.name = str(call.name);
    this.args = call.arguments;
    this.el = el('div', 'tool collapsed');
    this.el.setAttribute('data-tool-call', this.id);
    var head = el('div', 'head');
    this.stateEl = el('span', 'state', 'pending');
    add(head, el('span', 'name', this.name), el('span', 'summary', toolSummary(this.name, this.args)), this.stateEl);
    this.body = el('div', 'body');
    this.argsEl = toolArgs(this.name, this.args);
    this.resultEl = el('div', 'result');
    add(this.body, this.argsEl, this.resultEl);
    add(this.el, head, this.body);
    var self = this;
    head.addEventListener('click', function () { self.el.classList.toggle('collapsed'); });
    // short bash, edits and writes are worth seeing at once
    if (this.name === 'edit' || this.name === 'write' || this.name === 'bash') this.el.classList.remove('collapsed');
  }
  ToolCard.prototype.setArgs = function (args) {
    this.args = args;
    var fresh = toolArgs(this.name, args);
    this.body.replaceChild(fresh, this.argsEl);
    this.argsEl = fresh;
    this.el.querySelector('.summary').textContent = toolSummary(this.name, args);
  };
  ToolCard.prototype.setState = function (state) {
    this.el.classList.remove('running', 'done', 'failed');
    this.el.classList.add(state);
    this.stateEl.textContent = state;
  };
  ToolCard.prototype.setResult = function (result, isError, partial) {
    var fresh = toolResult(this.name, this.args, result, isError);
    fresh.classList.add('result');
    this.body.replaceChild(fresh, this.resultEl);
    this.resultEl = fresh;
    if (!partial) this.setState(isError ? 'failed' : 'done');
    if (!partial && fresh.classList.contains('has-diff')) this.el.classList.remove('collapsed');
    // the result's diff (with line numbers) says what the arguments' old/new text said: show the change once
    this.el.classList.toggle('result-diff', !partial && fresh.classList.contains('has-diff'));
  };

  window.PiscesRender = {
    el: el, add: add, isObj: isObj, str: str, markdown: markdown, markdownInto: markdownInto, codeBlock: codeBlock,
    diffBlock: diffBlock, imageBlock: imageBlock, textOf: textOf, pretty: pretty, ToolCard: ToolCard
  };
})();
