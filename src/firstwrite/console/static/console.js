// firstwrite console: the little JavaScript the pages need. No framework, no build step.
// - live countdowns on the engine's clock (resynchronised from /api/clock);
// - forms marked .api-form send their fields as a same-origin JSON POST and swap in the
//   result's HTML (the pages work without this; only running things needs it);
// - a 401 opens the sign-in dialog, which posts the key pair to /_firstwrite/session and
//   then retries the request;
// - the raw request editor keeps a draft per operation and sends on Ctrl+Enter.
"use strict";

(function () {
  document.documentElement.classList.add("js");
  const body = document.body;
  const base = body.dataset.base || "";

  // --- the engine's clock -------------------------------------------------------------------
  let engineNow = Number(body.dataset.engineNow);
  let frozen = body.dataset.engineFrozen === "true";
  let offset = engineNow - Date.now();

  function engineTime() {
    return frozen ? engineNow : Date.now() + offset;
  }

  function span(ms) {
    let total = Math.floor(Math.abs(ms) / 1000);
    const units = [];
    for (const [size, name] of [[86400, "d"], [3600, "h"], [60, "min"], [1, "s"]]) {
      const n = Math.floor(total / size);
      total -= n * size;
      units.push([n, name]);
    }
    while (units.length > 1 && units[0][0] === 0) units.shift();
    let lead = units.slice(0, 2);
    if (lead.length === 2 && lead[1][0] === 0) lead = lead.slice(0, 1);
    return lead.map(([n, name]) => `${n} ${name}`).join(" ");
  }

  function until(at, now) {
    const delta = at - now;
    if (Math.abs(delta) < 1000) return "now";
    return delta > 0 ? `in ${span(delta)}` : `${span(delta)} ago`;
  }

  function tick() {
    const now = engineTime();
    for (const el of document.querySelectorAll("time.countdown")) {
      el.textContent = until(Number(el.dataset.at), now);
    }
    const clock = document.getElementById("engine-clock");
    if (clock) {
      const iso = new Date(now).toISOString().replace(/\.\d+Z$/, "Z");
      clock.textContent = iso;
      clock.setAttribute("datetime", iso);
    }
  }

  async function resync() {
    try {
      const response = await fetch(base + "/api/clock", {
        headers: { Accept: "application/json" },
        credentials: "same-origin",
      });
      if (!response.ok) return;
      const clock = await response.json();
      engineNow = clock.now;
      frozen = clock.frozen;
      offset = clock.now - Date.now();
      tick();
    } catch (_) {
      // the server is away: keep counting on the last known offset
    }
  }

  tick();
  setInterval(tick, 1000);
  setInterval(resync, 10000);

  // --- signing in ---------------------------------------------------------------------------
  async function createSession(form) {
    const fields = Object.fromEntries(new FormData(form));
    const response = await fetch(form.dataset.session, {
      method: "POST",
      headers: { "Content-Type": "application/json", Accept: "application/json" },
      body: JSON.stringify({
        access_key_id: fields.access_key_id,
        secret_access_key: fields.secret_access_key,
      }),
      credentials: "same-origin",
    });
    if (!response.ok) {
      let detail = `the server answered ${response.status}`;
      try {
        const problem = await response.json();
        detail = problem.detail || problem.title || detail;
      } catch (_) {
        // not JSON: keep the status
      }
      throw new Error(detail);
    }
    await response.text(); // read to the end: navigating away must not abort it
  }

  function signIn() {
    const dialog = document.getElementById("login-dialog");
    if (!dialog) return Promise.reject(new Error("sign in first: " + base + "/login"));
    const form = dialog.querySelector("form");
    const error = form.querySelector(".form-error");
    return new Promise((resolve, reject) => {
      async function submit(event) {
        event.preventDefault();
        error.textContent = "";
        try {
          await createSession(form);
        } catch (e) {
          error.textContent = `Sign-in failed: ${e.message}`;
          return;
        }
        cleanup();
        dialog.close();
        resolve();
      }
      function cancel() {
        cleanup();
        reject(new Error("Not signed in: this server needs the engine's access key pair."));
      }
      function cleanup() {
        form.removeEventListener("submit", submit);
        dialog.removeEventListener("cancel", cancel);
      }
      form.addEventListener("submit", submit);
      dialog.addEventListener("cancel", cancel);
      dialog.showModal();
      form.querySelector("input").focus();
    });
  }

  const signOut = document.getElementById("sign-out");
  if (signOut) {
    signOut.addEventListener("click", async () => {
      const response = await fetch(signOut.dataset.session, {
        method: "DELETE",
        credentials: "same-origin",
      });
      await response.text();
      window.location.reload();
    });
  }

  const loginPage = document.querySelector(".login-page");
  if (loginPage) {
    const form = loginPage.querySelector("form");
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      const error = form.querySelector(".form-error");
      error.textContent = "";
      try {
        await createSession(form);
        window.location.assign(loginPage.dataset.next);
      } catch (e) {
        error.textContent = `Sign-in failed: ${e.message}`;
      }
    });
  }

  // --- same-origin JSON requests ------------------------------------------------------------
  async function post(path, payload, signedIn) {
    const response = await fetch(base + path, {
      method: "POST",
      headers: { "Content-Type": "application/json", Accept: "application/json" },
      body: JSON.stringify(payload),
      credentials: "same-origin",
    });
    if (response.status === 401 && !signedIn) {
      await signIn();
      return post(path, payload, true);
    }
    let data = null;
    try {
      data = await response.json();
    } catch (_) {
      // an empty or non-JSON body: reported below by status
    }
    if (!response.ok) {
      throw new Error((data && (data.detail || data.title)) || `the server answered ${response.status}`);
    }
    return data;
  }

  function fields(form) {
    const data = {};
    for (const el of form.elements) {
      if (!el.name || el.disabled || el.type === "submit") continue;
      let value = el.value;
      if (el.dataset.json === "int" && /^\s*-?\d+\s*$/.test(value)) value = Number(value);
      data[el.name] = value;
    }
    return data;
  }

  for (const form of document.querySelectorAll("form.api-form")) {
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      const button = form.querySelector("button[type=submit]");
      const status = form.querySelector(".form-status");
      const error = form.querySelector(".form-error");
      error.textContent = "";
      status.textContent = "Running…";
      button.disabled = true;
      form.setAttribute("aria-busy", "true");
      try {
        const data = await post(form.dataset.api, fields(form));
        if (form.dataset.reload) {
          window.location.reload();
          return;
        }
        const target = document.getElementById(form.dataset.target);
        target.innerHTML = data.html;
        if ("held" in data) status.textContent = data.held ? "Done: held." : "Done: did not hold.";
        else status.textContent = "Done.";
        tick();
        const heading = target.querySelector("h2");
        (heading || target).focus();
      } catch (e) {
        status.textContent = "";
        error.textContent = e.message;
      } finally {
        button.disabled = false;
        form.removeAttribute("aria-busy");
      }
    });
  }

  // --- the raw request editor ---------------------------------------------------------------
  const picker = document.getElementById("operation");
  const editor = document.getElementById("request");
  const examplesData = document.getElementById("examples");
  if (picker && editor && examplesData) {
    const examples = JSON.parse(examplesData.textContent);
    const drafts = {};
    const hidden = document.querySelector("[data-mirror=operation]");
    const target = document.getElementById("target");
    let current = picker.value;
    picker.addEventListener("change", () => {
      drafts[current] = editor.value;
      current = picker.value;
      editor.value = current in drafts ? drafts[current] : examples[current] || "{}";
      hidden.value = current;
      const option = picker.options[picker.selectedIndex];
      target.textContent = `${option.dataset.target}`;
      history.replaceState(null, "", `?operation=${encodeURIComponent(current)}`);
    });
    editor.addEventListener("keydown", (event) => {
      if ((event.ctrlKey || event.metaKey) && event.key === "Enter") {
        event.preventDefault();
        editor.form.requestSubmit();
      }
    });
  }
})();
