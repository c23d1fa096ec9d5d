// Keyboard shortcuts: a key shown beside a choice selects it, a digit goes into a score's box; Enter saves, or opens
// the next item once saved.
// Nothing here writes HTML: the page's text is set by the server, escaped.
"use strict";

function typing(target) {
  return target.closest("textarea, select, input[type=text], input[type=password]") !== null;
}

function syncCategories() {
  const categories = document.getElementById("categories");
  if (!categories) return;
  const violation = document.querySelector("input[name=violation]:checked");
  const open = violation !== null && violation.value === "yes";
  categories.disabled = !open;
  for (const input of categories.querySelectorAll("input")) {
    input.required = open;
    if (!open) input.checked = false;
  }
}

document.addEventListener("keydown", (event) => {
  if (event.ctrlKey || event.metaKey || event.altKey || typing(event.target)) return;
  const digits = document.querySelector("input[data-digits]");
  if (digits !== null && /^[0-9.]$/.test(event.key)) {
    digits.focus(); // a score typed anywhere on the page goes into its box (the key then types there)
    return;
  }
  const control = document.querySelector(`[data-key="${CSS.escape(event.key)}"]`);
  if (control === null || control.disabled || control.closest("fieldset:disabled")) return;
  event.preventDefault();
  control.click();
  if (control.type === "radio") control.focus();
});

// A text over the desk's limit is not sent (the server would refuse it): the browser says so, the text stays.
function checkLength(event) {
  const box = event.target;
  if (!(box instanceof HTMLTextAreaElement) || !box.dataset.maxChars) return;
  const limit = Number(box.dataset.maxChars);
  const length = [...box.value].length;
  box.setCustomValidity(length > limit ? `${length} characters: the desk takes at most ${limit}.` : "");
}

document.addEventListener("input", checkLength);
document.addEventListener("change", syncCategories);
document.addEventListener("DOMContentLoaded", syncCategories);
