// This browser's credential for this origin (scheme, host and port), made at pairing and kept in the
// origin's own storage; only pisces' own pages read it, and the browser sends it nowhere by itself.
// - With WebCrypto (http://127.0.0.1, http://localhost, https:): a non-extractable ECDSA P-256 key pair in
//   IndexedDB. The server keeps the public key; each connection signs a fresh one-time challenge, so what
//   travels can be used once and the private key cannot be read out, not even by script on this origin.
// - Without it (a phone on http://<LAN address> is not a secure context): a random secret in localStorage;
//   the server keeps its hash.
(function () {
  'use strict';
  var DB = 'pisces', STORE = 'device', KEY = 'current', LS = 'pisces.device';

  function idb() {
    return new Promise(function (resolve, reject) {
      var r = indexedDB.open(DB, 1);
      r.onupgradeneeded = function () { r.result.createObjectStore(STORE); };
      r.onsuccess = function () { resolve(r.result); };
      r.onerror = function () { reject(r.error); };
    });
  }
  function tx(mode, fn) {
    return idb().then(function (db) {
      return new Promise(function (resolve, reject) {
        var t = db.transaction(STORE, mode);
        var req = fn(t.objectStore(STORE));
        t.oncomplete = function () { db.close(); resolve(req ? req.result : undefined); };
        t.onerror = t.onabort = function () { db.close(); reject(t.error); };
      });
    });
  }
  function b64url(buf) {
    var s = '', b = new Uint8Array(buf);
    for (var i = 0; i < b.length; i++) s += String.fromCharCode(b[i]);
    return btoa(s).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
  }
  function canKey() { return !!(window.isSecureContext && window.crypto && crypto.subtle && window.indexedDB); }
  function getJson(url) {
    return fetch(url, { cache: 'no-store', credentials: 'omit' }).then(function (r) {
      if (!r.ok) return r.text().then(function (t) { throw new Error(t.trim() || ('HTTP ' + r.status)); });
      return r.json();
    });
  }

  // pairing: make the credential, register it with the pairing page's one-time ticket, keep it
  function pair(ticket) {
    var q = '/pair/register?ticket=' + encodeURIComponent(ticket) + '&origin=' + encodeURIComponent(location.origin);
    if (canKey()) {
      var keys;
      return crypto.subtle.generateKey({ name: 'ECDSA', namedCurve: 'P-256' }, false, ['sign', 'verify']).then(function (k) {
        keys = k;
        return crypto.subtle.exportKey('raw', k.publicKey);  // the public half only: the private one is not extractable
      }).then(function (raw) { return getJson(q + '&pub=' + b64url(raw)); }).then(function (d) {
        return tx('readwrite', function (s) { return s.put({ id: d.id, kind: 'key', privateKey: keys.privateKey }, KEY); })
          .then(function () { try { localStorage.removeItem(LS); } catch (e) { /* none */ } return d; });
      });
    }
    var bytes = new Uint8Array(32);
    crypto.getRandomValues(bytes);
    var secret = b64url(bytes);
    return getJson(q + '&secret=' + secret).then(function (d) {
      localStorage.setItem(LS, secret);
      // a key this origin held before is replaced by this pairing
      return (window.indexedDB ? tx('readwrite', function (s) { return s.delete(KEY); }).catch(function () {}) : Promise.resolve())
        .then(function () { return d; });
    });
  }

  function load() {
    var rec = window.indexedDB ? tx('readonly', function (s) { return s.get(KEY); }).catch(function () { return null; })
      : Promise.resolve(null);
    return rec.then(function (d) {
      if (d && d.privateKey) return d;
      var secret = null;
      try { secret = localStorage.getItem(LS); } catch (e) { /* no storage */ }
      return secret ? { kind: 'secret', secret: secret } : null;
    });
  }

  // a credential for one WebSocket or one fetch ({protocol, bearer}), or null when this browser is not paired
  function credential() {
    return load().then(function (d) {
      if (!d) return null;
      if (d.kind === 'secret') return { protocol: 'pisces.device.' + d.secret, bearer: d.secret };
      return getJson('/challenge').then(function (c) {
        var data = new TextEncoder().encode('pisces-web-device\n' + c.challenge);
        return crypto.subtle.sign({ name: 'ECDSA', hash: 'SHA-256' }, d.privateKey, data).then(function (sig) {
          var proof = d.id + '.' + c.challenge + '.' + b64url(sig);
          return { protocol: 'pisces.key.' + proof, bearer: 'key.' + proof };
        });
      });
    });
  }

  function forget() {
    try { localStorage.removeItem(LS); } catch (e) { /* none */ }
    return window.indexedDB ? tx('readwrite', function (s) { return s.delete(KEY); }).catch(function () {}) : Promise.resolve();
  }

  window.PiscesDevice = { pair: pair, credential: credential, forget: forget, load: load };
})();
