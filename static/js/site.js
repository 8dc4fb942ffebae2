// Progressive enhancement: the follow button toggles without a reload when
// JavaScript is on; without it the form posts and the page reloads.
document.addEventListener("submit", async (event) => {
  const form = event.target;
  if (!form.classList.contains("follow-form")) return;
  event.preventDefault();
  const button = form.querySelector("button");
  button.disabled = true;
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
      count.dataset.count = data.followers;
      count.title = data.followers;
      count.textContent = Number(data.followers).toLocaleString("en-US");
    }
  } catch (error) {
    form.submit();
  } finally {
    button.disabled = false;
  }
});
