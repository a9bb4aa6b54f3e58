// The portal works without this file. With it, a revealed secret gets a copy button.
"use strict";
document.addEventListener("DOMContentLoaded", function () {
  if (!navigator.clipboard) {
    return;
  }
  document.querySelectorAll("input[data-copy]").forEach(function (input) {
    var button = document.createElement("button");
    button.type = "button";
    button.className = "copy";
    button.textContent = "Copy secret";
    button.addEventListener("click", function () {
      navigator.clipboard.writeText(input.value).then(function () {
        button.textContent = "Copied";
      });
    });
    input.insertAdjacentElement("afterend", button);
  });
});
