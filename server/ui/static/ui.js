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
