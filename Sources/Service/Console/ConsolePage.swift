/// The console's one page: a sign-in form, a look-up form, and the view the script
/// fills in (see `ConsoleScript`).
enum ConsolePage {
    static let html = #"""
    <!doctype html>
    <html lang="en">
    <head>
    <meta charset="utf-8">
    <meta name="viewport" content="width=device-width, initial-scale=1">
    <meta name="referrer" content="no-referrer">
    <title>apns-server console</title>
    <link rel="stylesheet" href="/console/console.css">
    <script src="/console/console.js" defer></script>
    </head>
    <body>
    <header>
      <h1><a href="#/notifications">apns-server</a></h1>
      <nav id="nav" hidden>
        <a href="#/notifications">Notifications</a>
        <a href="#/scheduled">Scheduled</a>
        <a href="#/deactivated">Deactivated tokens</a>
        <a href="#/stats" id="nav-stats">Deliveries chart</a>
        <span id="whoami" class="muted"></span>
        <button id="signout" type="button">Sign out</button>
      </nav>
    </header>
    <main>
      <section id="signin">
        <form id="signin-form" method="post" autocomplete="off">
          <h2>Sign in</h2>
          <p>Use one of the server's backend API keys. It is kept in this tab only, until you sign out or close it.</p>
          <label for="key">API key</label>
          <input id="key" name="key" type="password" required spellcheck="false">
          <button type="submit">Sign in</button>
          <p id="signin-error" class="error" role="alert"></p>
        </form>
      </section>
      <section id="app" hidden>
        <form id="lookup" method="post" autocomplete="off">
          <label for="lookup-kind">Look up</label>
          <select id="lookup-kind">
            <option value="user">User id</option>
            <option value="notification">Notification id</option>
            <option value="apns">apns-id</option>
          </select>
          <input id="lookup-value" required spellcheck="false" aria-label="id">
          <button type="submit">Look up</button>
        </form>
        <p id="error" class="error" role="alert"></p>
        <div id="view"></div>
      </section>
    </main>
    </body>
    </html>
    """#
}
