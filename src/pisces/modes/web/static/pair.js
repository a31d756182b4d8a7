// The pairing page: register this browser with the one-time ticket in this page (device.js makes and keeps
// the credential in this origin's own storage), then open the UI.
(function () {
  'use strict';
  var meta = document.querySelector('meta[name="pisces-ticket"]');
  var ticket = meta && meta.getAttribute('content');
  if (meta) meta.remove();
  window.PiscesDevice.pair(ticket || '').then(function () { location.replace('/'); }, function (e) {
    var p = document.getElementById('pair-state');
    p.textContent = 'Pairing failed: ' + (e && e.message ? e.message : e) + ' ';
    var a = document.createElement('a');
    a.href = '/login';
    a.textContent = 'Try again';
    p.appendChild(a);
  });
})();
