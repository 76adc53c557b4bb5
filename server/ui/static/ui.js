// lakectl UI: small progressive enhancements. Every page works without this script.
"use strict";

document.addEventListener("DOMContentLoaded", function () {
  // Forms that destroy something ask first (data-confirm="question").
  document.querySelectorAll("form[data-confirm]").forEach(function (form) {
    form.addEventListener("submit", function (event) {
      if (!window.confirm(form.getAttribute("data-confirm"))) {
        event.preventDefault();
      }
    });
  });

  // The upload form: the path field suggests the prefix shown and the chosen file's name.
  var file = document.getElementById("upload-file");
  var path = document.getElementById("upload-path");
  if (file && path) {
    file.addEventListener("change", function () {
      if (file.files.length && !path.dataset.edited) {
        path.value = (path.dataset.prefix || "") + file.files[0].name;
      }
    });
    path.addEventListener("input", function () {
      path.dataset.edited = "1";
    });
  }
});

// -- The live feed (Activity, feed.html) --------------------------------------------------------
// Every few seconds, ask the feed's rows newer than the cursor (an HTML fragment rendered by the
// server, escaped there) and prepend those not shown yet. The server names its mode in
// X-Feed-Mode: another mode than the page's (the journal was switched on) reloads the page.
// Without this script the page shows the feed as it was, with a "Refresh" link.
document.addEventListener("DOMContentLoaded", function () {
  var table = document.getElementById("feed");
  var body = document.getElementById("feed-entries");
  if (!table || !body || !window.fetch) {
    return;
  }
  var status = document.getElementById("feed-status");
  var empty = document.getElementById("feed-empty");
  var interval = parseInt(table.dataset.interval, 10) || 3000;
  var busy = false;

  function say(text) {
    if (status) {
      status.textContent = text;
    }
  }

  function shown(key) {
    return Array.prototype.some.call(body.rows, function (row) {
      return row.dataset.key === key;
    });
  }

  function poll() {
    if (busy || document.hidden) {
      return;
    }
    busy = true;
    var src = table.dataset.src;
    var url = src + (src.indexOf("?") < 0 ? "?" : "&") +
      "after=" + encodeURIComponent(table.dataset.after) + "&mode=" + encodeURIComponent(table.dataset.mode);
    fetch(url, { credentials: "same-origin", headers: { "Accept": "text/html" } })
      .then(function (response) {
        var mode = response.headers.get("X-Feed-Mode");
        if (!response.ok || !mode) {
          // Signed out (the sign-in page answered) or an error: stop, and say so.
          throw new Error(response.ok ? "signed out" : "HTTP " + response.status);
        }
        if (mode !== table.dataset.mode) {
          window.location.reload();
          return null;
        }
        var cursor = response.headers.get("X-Feed-Cursor");
        return response.text().then(function (html) {
          var template = document.createElement("template");
          template.innerHTML = html;
          var rows = Array.prototype.filter.call(template.content.querySelectorAll("tr[data-key]"), function (row) {
            return !shown(row.dataset.key);
          });
          // The rows come newest first: insert them, in that order, above the first row shown.
          var first = body.firstElementChild;
          rows.forEach(function (row) {
            row.classList.add("new");
            body.insertBefore(row, first);
          });
          if (cursor) {
            table.dataset.after = cursor;
          }
          if (rows.length) {
            if (empty) {
              empty.hidden = true;
            }
            say(rows.length + (rows.length === 1 ? " new event" : " new events"));
          }
        });
      })
      .catch(function (error) {
        window.clearInterval(timer);
        say("Live updates stopped (" + error.message + "): refresh the page.");
      })
      .then(function () {
        busy = false;
      });
  }

  var timer = window.setInterval(poll, interval);
});
