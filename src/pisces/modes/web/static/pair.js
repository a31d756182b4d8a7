// The pairing page: keep the device secret in this origin's own storage (scheme, host and port: a page
// on another port of the same host cannot read it), then open the UI. The secret is sent only by the UI's
// own code, in the WebSocket handshake; the browser sends it nowhere by itself (there is no cookie).
(function () {
  'use strict';
  var meta = document.querySelector('meta[name="pisces-device"]');
  var secret = meta && meta.getAttribute('content');
  if (meta) meta.remove();
  try { localStorage.setItem('pisces.device', secret); } catch (e) { sessionStorage.setItem('pisces.device', secret); }
  location.replace('/');
})();
