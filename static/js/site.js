// followfeed: progressive enhancement. Every page works without JavaScript
// (forms post, "Load more" and "Older" are links); with it:
// - the follow button toggles in place (fetch, no navigation) and updates
//   aria-pressed, the followers count and the "Mutual" badge;
// - "Load more" on the home feed appends the next page to the list;
// - an import's progress bar moves by itself until the import is done;
// - relative times ("3 min ago") stay current;
// - the home page listens to the streaming API (EventSource): "N new notes"
//   appears as followed accounts publish (clicking shows them) and the
//   notifications badge counts up.
// The two formats mirror users/templatetags/formatting.py; the browser tests
// check that both give the same text.
(function () {
  "use strict";

  const UNITS = [[1e9, "B"], [1e6, "M"], [1e3, "k"]];
  const MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];

  // 12345 -> "12.3k": at most three significant digits, rounded toward zero.
  function compactCount(value) {
    const n = Math.trunc(Number(value));
    if (!Number.isFinite(n) || n < 0) return String(value);
    if (n < 1000) return String(n);
    for (const [unit, suffix] of UNITS) {
      if (n >= unit) {
        const tenths = Math.floor((n * 10) / unit);
        const whole = Math.floor(tenths / 10);
        const tenth = tenths % 10;
        return whole >= 100 || tenth === 0 ? `${whole}${suffix}` : `${whole}.${tenth}${suffix}`;
      }
    }
    return String(n);
  }

  // "3 min ago"; dates in UTC after a week.
  function relativeTime(whenMs, nowMs) {
    const seconds = Math.floor((nowMs - whenMs) / 1000);
    if (seconds < 10) return "just now";
    if (seconds < 60) return `${seconds} s ago`;
    if (seconds < 3600) return `${Math.floor(seconds / 60)} min ago`;
    if (seconds < 86400) return `${Math.floor(seconds / 3600)} h ago`;
    if (seconds < 7 * 86400) return `${Math.floor(seconds / 86400)} d ago`;
    const when = new Date(whenMs);
    const now = new Date(nowMs);
    const day = `${MONTHS[when.getUTCMonth()]} ${when.getUTCDate()}`;
    return when.getUTCFullYear() === now.getUTCFullYear() ? day : `${day}, ${when.getUTCFullYear()}`;
  }

  function announce(text) {
    const region = document.getElementById("live-status");
    if (!region) return;
    region.textContent = "";
    // A new text node after a tick makes screen readers announce repeats too.
    window.setTimeout(() => { region.textContent = text; }, 50);
  }

  // --- follow toggle -------------------------------------------------------
  async function toggleFollow(form) {
    const button = form.querySelector("button");
    button.disabled = true;
    button.setAttribute("aria-busy", "true");
    try {
      const response = await fetch(form.action, {
        method: "POST",
        headers: { "Accept": "application/json" },
        body: new FormData(form),
        credentials: "same-origin",
      });
      const data = await response.json();
      if (!response.ok || !data.success) { form.submit(); return; }
      const following = data.following;
      form.action = form.action.replace(following ? /\/follow\/$/ : /\/unfollow\/$/, following ? "/unfollow/" : "/follow/");
      button.textContent = following ? "Following" : "Follow";
      button.classList.toggle("following", following);
      button.setAttribute("aria-pressed", following ? "true" : "false");
      const count = document.getElementById("followers-count");
      if (count) {
        const n = Number(data.followers);
        count.dataset.count = String(n);
        count.title = n.toLocaleString("en-US");
        count.textContent = compactCount(n);
        const label = count.parentElement && count.parentElement.querySelector(".count-label");
        if (label) label.textContent = n === 1 ? label.dataset.one : label.dataset.many;
      }
      const profile = form.closest(".profile");
      const mutual = profile && profile.querySelector(".badge-mutual");
      if (mutual && profile.dataset.followsYou === "true") mutual.hidden = !following;
      announce(following ? "You follow this account now." : "You no longer follow this account.");
    } catch (error) {
      form.submit();
    } finally {
      button.disabled = false;
      button.removeAttribute("aria-busy");
    }
  }

  document.addEventListener("submit", (event) => {
    const form = event.target;
    if (!(form instanceof HTMLFormElement) || !form.classList.contains("follow-form")) return;
    event.preventDefault();
    toggleFollow(form);
  });

  // --- "Who to follow" box on the home page ----------------------------------
  // Filled from the API after the page shows, so the feed's own request stays
  // as cheap as it is; without JavaScript the box is a link to the page.
  async function fillSuggestions(box) {
    const list = box.querySelector("ul");
    try {
      const response = await fetch(box.dataset.src, { headers: { "Accept": "application/json" }, credentials: "same-origin" });
      if (!response.ok) return;
      const body = await response.json();
      for (const item of body.data.list) {
        const row = document.createElement("li");
        const link = document.createElement("a");
        link.href = `/u/${encodeURIComponent(item.username)}/`;
        link.textContent = item.displayName;
        const reason = document.createElement("span");
        reason.className = "muted";
        reason.textContent = ` ${item.reason}`;
        row.append(link, reason);
        list.appendChild(row);
      }
      list.hidden = !body.data.list.length;
    } catch (error) {
      // The link below the list still leads to the page.
    }
  }

  document.querySelectorAll(".suggestions-box[data-src]").forEach((box) => { fillSuggestions(box); });

  // --- import progress on the "Move your follows" page ------------------------
  // Polls the import's status every two seconds and moves the bar until the
  // import is finished; without JavaScript the page says to reload.
  async function followImport(status) {
    const bar = status.querySelector("progress");
    const label = status.querySelector(".import-summary");
    try {
      const response = await fetch(status.dataset.src, { headers: { "Accept": "application/json" }, credentials: "same-origin" });
      if (!response.ok) return;
      const job = (await response.json()).data;
      bar.max = job.total;
      bar.value = job.done;
      bar.textContent = `${Math.floor((100 * job.done) / Math.max(job.total, 1))}%`;
      const followed = job.followed.toLocaleString("en-US");
      label.textContent = `Latest import: ${job.done.toLocaleString("en-US")} of ${job.total.toLocaleString("en-US")} accounts handled, ${followed} followed${job.finished ? ", finished" : ""}.`;
      if (job.finished) {
        status.dataset.finished = "true";
        const hint = status.querySelector(".reload-hint");
        if (hint) hint.remove();
        announce(`Import finished: ${followed} followed.`);
        return;
      }
    } catch (error) {
      // A failed poll tries again.
    }
    window.setTimeout(() => { followImport(status); }, 2000);
  }

  document.querySelectorAll(".import-status[data-src][data-finished='false']").forEach((status) => { followImport(status); });

  // --- "Load more" on the home feed ------------------------------------------
  // Fetches the next page (the link's own URL, same HTML as without
  // JavaScript), appends its notes and takes over its pager. Notes are not
  // de-duplicated here on purpose: the server's cursor must never repeat one.
  async function loadMore(link) {
    const list = document.querySelector("ol.notes");
    const pager = link.closest(".pager");
    if (!list || !pager) { window.location.assign(link.href); return; }
    link.setAttribute("aria-busy", "true");
    link.textContent = "Loading…";
    try {
      const response = await fetch(link.href, { headers: { "Accept": "text/html" }, credentials: "same-origin" });
      if (!response.ok) throw new Error(`HTTP ${response.status}`);
      const page = new DOMParser().parseFromString(await response.text(), "text/html");
      const incoming = Array.from(page.querySelectorAll("ol.notes > li"));
      incoming.forEach((item) => list.appendChild(document.adoptNode(item)));
      const nextPager = page.querySelector(".pager");
      if (nextPager) {
        // Keep "Newest" off: this page still starts at the newest note.
        nextPager.querySelectorAll("a:not(.load-more)").forEach((a) => a.remove());
        if (!nextPager.querySelector(".load-more, .end-of-feed")) {
          nextPager.insertAdjacentHTML("beforeend", '<span class="muted end-of-feed">End of your feed.</span>');
        }
        pager.replaceWith(document.adoptNode(nextPager));
      } else {
        pager.remove();
      }
      refreshTimes();
      if (incoming.length) {
        incoming[0].tabIndex = -1;
        incoming[0].focus({ preventScroll: true });
      }
      announce(incoming.length ? `${incoming.length} more notes loaded.` : "No more notes.");
    } catch (error) {
      window.location.assign(link.href);
    }
  }

  document.addEventListener("click", (event) => {
    const link = event.target instanceof Element ? event.target.closest("a.load-more") : null;
    if (!link || event.button !== 0 || event.metaKey || event.ctrlKey || event.shiftKey || event.altKey) return;
    event.preventDefault();
    loadMore(link);
  });

  // --- relative times ----------------------------------------------------------
  function refreshTimes() {
    const now = Date.now();
    document.querySelectorAll("time.relative[datetime]").forEach((node) => {
      const when = Date.parse(node.getAttribute("datetime"));
      if (!Number.isNaN(when)) node.textContent = relativeTime(when, now);
    });
  }
  window.setInterval(refreshTimes, 30000);

  // --- live updates ------------------------------------------------------------
  function listen(feed) {
    if (!("EventSource" in window) || !feed.dataset.stream) return;
    const shown = new Set(Array.from(feed.querySelectorAll("li.note[data-note-id]"), (node) => node.dataset.noteId));
    const waiting = new Set();
    const banner = feed.querySelector(".live-notes");
    const button = feed.querySelector(".live-notes-show");
    // The newest note shown: the stream replays what came after it before going live.
    const since = feed.dataset.lastId ? `?last_event_id=${encodeURIComponent(feed.dataset.lastId)}` : "";
    const source = new EventSource(feed.dataset.stream + since, { withCredentials: true });
    source.addEventListener("update", (event) => {
      const status = JSON.parse(event.data);
      if (shown.has(String(status.id)) || waiting.has(String(status.id))) return;
      waiting.add(String(status.id));
      button.textContent = waiting.size === 1 ? "1 new note" : `${waiting.size} new notes`;
      banner.hidden = false;
    });
    source.addEventListener("delete", (event) => waiting.delete(String(event.data)));
    source.addEventListener("notification", () => {
      let badge = document.getElementById("unread-count");
      if (!badge) {
        const link = document.querySelector("a.nav-notifications");
        if (!link) return;
        badge = document.createElement("span");
        badge.className = "badge badge-unread";
        badge.id = "unread-count";
        badge.textContent = "0";
        link.append(" ", badge);
      }
      badge.textContent = String(Number(badge.textContent || "0") + 1);
    });
    // The first page, loaded again, shows them with the "new since you last read" divider.
    button.addEventListener("click", () => window.location.assign(window.location.pathname));
  }
  const homeFeed = document.getElementById("home-feed");
  if (homeFeed) listen(homeFeed);

  window.followfeed = { compactCount, relativeTime, refreshTimes };
})();
