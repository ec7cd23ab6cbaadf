"use strict";
document.getElementById("signin-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  const status = document.getElementById("signin-status");
  const value = document.getElementById("token").value.trim();
  kb.signIn(value);
  try {
    const response = await fetch("/v1/jobs?limit=1", { headers: { Authorization: "Bearer " + value } });
    if (!response.ok) throw new Error((await response.json()).message || response.statusText);
    location.href = "/ui/jobs";
  } catch (err) {
    sessionStorage.removeItem("kb_token");
    status.textContent = "Sign-in failed: " + err.message + " Check the token or mint a new one.";
  }
});
