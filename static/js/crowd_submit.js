// Sends the finished assignment back to MTurk without a click; the page's button does the same by hand. A static
// file because the content security policy allows no inline script.
document.addEventListener("DOMContentLoaded", () => {
  const form = document.querySelector("form[data-autosubmit-form]");
  if (form) form.submit();
});
